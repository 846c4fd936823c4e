// The admin documents read from the configuration alone: the price
// catalog, the consumers and the effective configuration (no secret in any).
#include "core/admin/config_views.h"
#include "ngx/admin/admin_http.h"
#include "ngx/admin/handlers.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/request/ctx.h"

namespace llmgw {
namespace {

// The http block's settings the configuration document shows.
ConfigSettings config_settings(const MainConf& mcf) {
    const GatewayState& st = *mcf.state;
    ConfigSettings s;
    s.replica = st.replica;
    s.instance = st.instance;
    if (st.store) {
        s.store_url = st.store->redacted_url;
        s.fail_open = st.store->fail_open;
    }
    s.users_file = st.users_file;
    s.retries = mcf.retries;
    s.backoff_base_ms = static_cast<std::int64_t>(mcf.backoff_base);
    s.backoff_max_ms = static_cast<std::int64_t>(mcf.backoff_max);
    s.breaker_failures = mcf.breaker_failures;
    s.breaker_open_ms = static_cast<std::int64_t>(mcf.breaker_open);
    s.allow_unpriced = mcf.allow_unpriced != 0;
    s.max_tokens_per_request = mcf.max_tokens_per_request;
    return s;
}

ngx_int_t answer(ngx_http_request_t* r, const std::string& doc) {
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    return send_json(r, NGX_HTTP_OK, doc);
}

}  // namespace

ngx_int_t admin_catalog(ngx_http_request_t* r, RequestCtx*) {
    const MainConf& mcf = *main_conf(r);
    return answer(r, render_catalog(mcf.state->config, mcf.state->prices, mcf.allow_unpriced != 0,
                                    PriceTable::builtin_date()));
}

ngx_int_t admin_consumers(ngx_http_request_t* r, RequestCtx* ctx) {
    return answer(r, render_consumers(main_conf(r)->state->config, *ctx->auth.directory));
}

ngx_int_t admin_config(ngx_http_request_t* r, RequestCtx* ctx) {
    const MainConf& mcf = *main_conf(r);
    return answer(r, render_config(mcf.state->config, *ctx->auth.directory, config_settings(mcf)));
}

}  // namespace llmgw
