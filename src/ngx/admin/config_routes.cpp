// The admin documents read from the configuration alone: the price
// catalog, the consumers and the effective configuration (no secret in any).
#include "core/admin/config_views.h"
#include "ngx/admin/admin_http.h"

namespace llmgw {
namespace {

// The documents read from the configuration alone.
ngx_int_t config_view(ngx_http_request_t* r, RequestCtx* ctx, int which) {
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    MainConf* mcf = main_conf(r);
    const GatewayState& st = *mcf->state;
    switch (which) {
    case 0:
        return send_json(r, NGX_HTTP_OK, render_catalog(st.config, st.prices, mcf->allow_unpriced != 0,
                                                         PriceTable::builtin_date()));
    case 1: return send_json(r, NGX_HTTP_OK, render_consumers(st.config, *ctx->directory));
    default: break;
    }
    ConfigSettings s;
    s.replica = st.replica;
    s.instance = st.instance;
    if (st.store) {
        s.store_url = st.store->redacted_url;
        s.fail_open = st.store->fail_open;
    }
    s.users_file = st.users_file;
    s.retries = mcf->retries;
    s.backoff_base_ms = static_cast<std::int64_t>(mcf->backoff_base);
    s.backoff_max_ms = static_cast<std::int64_t>(mcf->backoff_max);
    s.breaker_failures = mcf->breaker_failures;
    s.breaker_open_ms = static_cast<std::int64_t>(mcf->breaker_open);
    s.allow_unpriced = mcf->allow_unpriced != 0;
    s.max_tokens_per_request = mcf->max_tokens_per_request;
    return send_json(r, NGX_HTTP_OK, render_config(st.config, *ctx->directory, s));
}

}  // namespace

ngx_int_t admin_catalog(ngx_http_request_t* r, RequestCtx* ctx) { return config_view(r, ctx, 0); }
ngx_int_t admin_consumers(ngx_http_request_t* r, RequestCtx* ctx) { return config_view(r, ctx, 1); }
ngx_int_t admin_config(ngx_http_request_t* r, RequestCtx* ctx) { return config_view(r, ctx, 2); }

}  // namespace llmgw
