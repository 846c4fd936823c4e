// The admin usage reads: one scope's metric over time (history), its four
// metrics per bucket or summed (series, totals), and the models ranked. Each
// computes every key up front and reads them in one batch; a read that
// failed is 503, never zeros.
#include <unordered_set>

#include "core/admin/history.h"
#include "core/admin/model_ranking.h"
#include "core/metering/keys.h"
#include "core/stats/latency.h"
#include "ngx/admin/admin_http.h"
#include "ngx/admin/handlers.h"
#include "ngx/discovery/model_cache.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/request/ctx.h"
#include "ngx/store/store.h"
#include "core/log/log_escape.h"

namespace llmgw {
namespace {

using SeriesRender = std::string (*)(const HistoryQuery&, const std::vector<std::string>&,
                                      const std::vector<std::int64_t>&);

// Reads a scope's buckets and renders them; 404 for an unknown user or group.
ngx_int_t read_series(ngx_http_request_t* r, RequestCtx* ctx, std::shared_ptr<HistoryQuery> q,
                      std::shared_ptr<std::vector<std::string>> buckets, std::shared_ptr<std::vector<std::string>> keys,
                      SeriesRender render) {
    const Directory& dir = *ctx->auth.directory;
    if ((q->kind == "user" && dir.find_user(q->id) == nullptr) || (q->kind == "group" && dir.find_group(q->id) == nullptr)) {
        return send_error(r, NGX_HTTP_NOT_FOUND, "unknown " + q->kind + " \"" + log_value(q->id) + "\"",
                          "invalid_request_error", "unknown_scope");
    }
    const std::size_t n = keys->size();
    return read_then(r, ctx, counter_store(main_conf(r)), keys,
                     [r, q, buckets, n, render](const StoreReply& reply, const std::vector<std::int64_t>& values) {
                         if (reply.status != StoreStatus::Ok || values.size() != n) return store_unreadable(r);
                         return send_json(r, NGX_HTTP_OK, render(*q, *buckets, values));
                     });
}

ngx_int_t history(ngx_http_request_t* r, RequestCtx* ctx) {
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    auto q = std::make_shared<HistoryQuery>();
    std::string err;
    if (!parse_history_query(decoded_arg(r, "scope"), query_arg(r, "metric"), query_arg(r, "window"),
                             query_arg(r, "span"), *q, err)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, err, "invalid_request_error", "invalid_history_query");
    }
    auto buckets = std::make_shared<std::vector<std::string>>();
    auto keys = std::make_shared<std::vector<std::string>>();
    history_keys(*q, ngx_time(), *buckets, *keys);
    return read_series(r, ctx, q, buckets, keys, render_history);
}

// The four metrics of one scope (default total): per bucket, or summed.
ngx_int_t series(ngx_http_request_t* r, RequestCtx* ctx, bool totals) {
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    auto q = std::make_shared<HistoryQuery>();
    std::string err;
    std::string_view span = query_arg(r, "span");
    if (!parse_series_query(decoded_arg(r, "scope"), query_arg(r, "window"), totals && span.empty() ? "1" : span, *q,
                            err)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, err, "invalid_request_error", "invalid_history_query");
    }
    auto buckets = std::make_shared<std::vector<std::string>>();
    auto keys = std::make_shared<std::vector<std::string>>();
    series_keys(*q, ngx_time(), *buckets, *keys);
    return read_series(r, ctx, q, buckets, keys, totals ? render_totals : render_series);
}

// The catalog the ranking reads: every provider's configured models, the
// alias targets, and the discovered lists, each once.
std::vector<CatalogModel> ranking_catalog(MainConf* mcf) {
    const GatewayState& st = *mcf->state;
    std::vector<CatalogModel> out;
    std::unordered_set<std::string> seen;
    auto add = [&](const ProviderConf& p, const std::string& model) {
        std::string id = p.name + "/" + model;
        if (!seen.insert(id).second) return;
        const Price* price = st.prices.find(p.name, provider_type_name(p.type), model);
        const bool free = price != nullptr && (price->free || (price->input_micros_per_mtok == 0 &&
                                                               price->output_micros_per_mtok == 0));
        out.push_back(CatalogModel{std::move(id), free});
    };
    const auto& providers = st.config.providers();
    for (const auto& p : providers) {
        for (const auto& m : p.models) add(p, m);
    }
    for (const auto& a : st.config.aliases()) {
        std::vector<std::string> targets{a.target};
        targets.insert(targets.end(), a.fallbacks.begin(), a.fallbacks.end());
        for (const auto& t : targets) {
            const std::size_t slash = t.find('/');
            const ProviderConf* p = slash == std::string::npos ? nullptr : st.config.find_provider(t.substr(0, slash));
            if (p != nullptr) add(*p, t.substr(slash + 1));
        }
    }
    for (std::size_t i = 0; i < providers.size(); ++i) {
        if (providers[i].discover_ms <= 0) continue;
        for (const auto& m : model_cache_read(mcf, i)) add(providers[i], m);
    }
    return out;
}

// Models ranked by one metric over one window, from one batch read over the
// catalog.
ngx_int_t ranking(ngx_http_request_t* r, RequestCtx* ctx) {
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    auto q = std::make_shared<RankingQuery>();
    std::string err;
    if (!parse_ranking_query(query_arg(r, "metric"), query_arg(r, "window"), query_arg(r, "span"), query_arg(r, "limit"),
                             query_arg(r, "offset"), decoded_arg(r, "prefix"), query_arg(r, "detail"), *q, err)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, err, "invalid_request_error", "invalid_ranking_query");
    }
    MainConf* mcf = main_conf(r);
    q->user = decoded_arg(r, "user");
    if (!q->user.empty()) {
        if (!mcf->stat_user_model) {
            return send_error(r, NGX_HTTP_BAD_REQUEST,
                              "usage per user and model is not recorded: enable it with llm_gateway_stats user_model=on",
                              "invalid_request_error", "statistic_off");
        }
        if (ctx->auth.directory->find_user(q->user) == nullptr) {
            return send_error(r, NGX_HTTP_NOT_FOUND, "unknown user \"" + log_value(q->user) + "\"",
                              "invalid_request_error", "unknown_scope");
        }
    }
    auto catalog = std::make_shared<std::vector<CatalogModel>>(ranking_catalog(mcf));
    auto models = std::make_shared<std::vector<const CatalogModel*>>();
    auto keys = std::make_shared<std::vector<std::string>>();
    if (!ranking_keys(*q, *catalog, ngx_time(), *models, *keys, err)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, err, "invalid_request_error", "read_too_large");
    }
    const std::size_t n = keys->size();
    return read_then(r, ctx, counter_store(mcf), keys,
                     [r, q, catalog, models, n](const StoreReply& reply, const std::vector<std::int64_t>& values) {
                         if (reply.status != StoreStatus::Ok || values.size() != n) return store_unreadable(r);
                         return send_json(r, NGX_HTTP_OK, render_ranking(*q, *models, values));
                     });
}

// Latency percentiles per model from the latency statistic's histograms,
// one batch read over the catalog (window: hour, day (default) or month).
ngx_int_t performance(ngx_http_request_t* r, RequestCtx* ctx) {
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    MainConf* mcf = main_conf(r);
    if (!mcf->stat_latency) {
        return send_error(r, NGX_HTTP_BAD_REQUEST,
                          "latency is not recorded: enable it with llm_gateway_stats latency=on", "invalid_request_error",
                          "statistic_off");
    }
    Window w = Window::Day;
    std::string_view wa = query_arg(r, "window");
    if (!wa.empty() && (!parse_window(wa, w) || w == Window::Min)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, "window must be hour, day or month", "invalid_request_error",
                          "invalid_performance_query");
    }
    auto models = std::make_shared<std::vector<std::string>>();
    for (const CatalogModel& m : ranking_catalog(mcf)) models->push_back(m.id);
    auto keys = std::make_shared<std::vector<std::string>>();
    const std::string b = bucket(w, ngx_time());
    for (const std::string& m : *models) {
        for (const std::string& id : latency_ids(m)) keys->push_back(counter_key("lat", id, "req", w, b));
    }
    const std::size_t n = keys->size();
    return read_then(r, ctx, counter_store(mcf), keys,
                     [r, models, n, w](const StoreReply& reply, const std::vector<std::int64_t>& values) {
                         if (reply.status != StoreStatus::Ok || values.size() != n) return store_unreadable(r);
                         return send_json(r, NGX_HTTP_OK, render_performance(*models, values, window_name(w)));
                     });
}

}  // namespace

ngx_int_t admin_performance(ngx_http_request_t* r, RequestCtx* ctx) { return performance(r, ctx); }
ngx_int_t admin_history(ngx_http_request_t* r, RequestCtx* ctx) { return history(r, ctx); }
ngx_int_t admin_series(ngx_http_request_t* r, RequestCtx* ctx) { return series(r, ctx, false); }
ngx_int_t admin_totals(ngx_http_request_t* r, RequestCtx* ctx) { return series(r, ctx, true); }
ngx_int_t admin_ranking(ngx_http_request_t* r, RequestCtx* ctx) { return ranking(r, ctx); }

}  // namespace llmgw
