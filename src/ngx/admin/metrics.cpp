// The Prometheus metrics location (llm_gateway_metrics): one batched store
// read (the admin usage keys plus the provider and model counters), the
// breakers, the latch and the in-process rejection counts, rendered by
// core/metrics. Store-backed series are left out when the read failed.
#include "core/metrics/gateway_metrics.h"
#include "ngx/admin/admin_http.h"
#include "ngx/admin/handlers.h"
#include "ngx/call/health.h"
#include "ngx/events/feed.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"
#include "ngx/store/store.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

MetricsInput local_input(MainConf* mcf, const Directory& dir) {
    const GatewayState& st = *mcf->state;
    MetricsInput in;
    in.replica = st.replica;
    in.directory = &dir;
    in.config = &st.config;
    in.store_shared = st.store != nullptr;
    if (Worker* w = worker()) in.store_up = !w->health.latch.open();
    for (std::size_t i = 0; i < st.config.providers().size(); ++i) {
        BreakerSlot slot{};
        ProviderGauge g;
        g.name = st.config.providers()[i].name;
        if (health_read(mcf, i, slot)) {
            g.known = true;
            g.state = breaker_state_name(slot.state);
        }
        in.health.push_back(g);
    }
    in.rejections = rejection_counts(mcf);
    in.cache = !st.caches.empty();
    return in;
}

ngx_int_t send_text(ngx_http_request_t* r, const std::string& body) {
    if (add_header(r, "Cache-Control", "no-store") != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    return send_body(r, NGX_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body);
}

}  // namespace

ngx_int_t metrics_handler(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module));
    // A scrape allowed by address has no user: the current directory.
    std::shared_ptr<const Directory> dir = ctx->auth.directory ? ctx->auth.directory : mcf->state->directory;
    auto in = std::make_shared<MetricsInput>(local_input(mcf, *dir));
    if (lcf->metrics_model_label) {
        for (const auto& p : mcf->state->config.providers()) {
            for (const auto& m : p.models) in->models.push_back(p.name + "/" + m);
        }
    }
    auto keys = std::make_shared<std::vector<std::string>>(metrics_keys(*dir, mcf->state->config, in->models, ngx_time(), in->cache));
    const std::size_t n = keys->size();
    return read_then(r, ctx, counter_store(mcf), keys,
                     [r, in, dir, n](const StoreReply& reply, const std::vector<std::int64_t>& values) {
                         in->store_read = reply.status == StoreStatus::Ok && values.size() == n;
                         if (in->store_read) in->values = values;
                         return send_text(r, render_metrics(*in));
                     });
}

}  // namespace llmgw
