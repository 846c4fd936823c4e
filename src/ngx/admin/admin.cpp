// The admin location: the HTML shell (no key) and the JSON API behind the
// admin gate (the access phase already answered 401/403 where needed).
#include <ctime>
#include <unordered_set>

#include "core/admin/config_views.h"
#include "core/admin/history.h"
#include "core/admin/model_ranking.h"
#include "core/admin/views.h"
#include "core/events/event.h"
#include "core/metering/keys.h"
#include "ngx/call/health.h"
#include "ngx/discovery/model_cache.h"
#include "ngx/events/feed.h"
#include "ngx/module.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

// Every admin response: no sniffing, nothing loaded or framed.
ngx_int_t content_headers(ngx_http_request_t* r) {
    if (add_header(r, "X-Content-Type-Options", "nosniff") != NGX_OK ||
        add_header(r, "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'") != NGX_OK) {
        return NGX_ERROR;
    }
    return NGX_OK;
}

// The JSON routes are never cached either.
ngx_int_t secure_headers(ngx_http_request_t* r) {
    if (content_headers(r) != NGX_OK || add_header(r, "Cache-Control", "no-store") != NGX_OK) return NGX_ERROR;
    return NGX_OK;
}

ngx_int_t answer_usage(ngx_http_request_t* r, RequestCtx* ctx, std::time_t now, std::size_t nkeys,
                       const StoreReply& reply, const std::vector<std::int64_t>& values) {
    if (secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (reply.status != StoreStatus::Ok || values.size() != nkeys) {
        // An outage, never zeros.
        return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the limit store could not be read", "server_error",
                          "limit_store_unavailable");
    }
    return send_json(r, NGX_HTTP_OK, render_usage(*ctx->directory, now, values, main_conf(r)->state->replica));
}

ngx_int_t usage(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    const Directory& dir = *ctx->directory;
    std::time_t now = ngx_time();
    auto keys = std::make_shared<std::vector<std::string>>();
    for (const auto& u : dir.users()) append_usage_keys("user", u.name, now, *keys);
    for (const auto& g : dir.groups()) append_usage_keys("group", g.name, now, *keys);
    append_usage_keys("total", "all", now, *keys);

    CounterStore* store = counter_store(mcf);
    if (store == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    // What the store answered, kept until the answer is written.
    struct Answer {
        StoreReply reply;
        std::vector<std::int64_t> values;
    };
    auto answer = std::make_shared<Answer>();
    return await_store(
        r, ctx, Resume::Finalize,
        [store, keys, answer, ctx](std::function<void()> answered) {
            std::weak_ptr<bool> alive = ctx->alive;
            store->read(*keys, [answer, alive, answered](const StoreReply& rep, const std::vector<std::int64_t>& v) {
                auto token = alive.lock();
                if (!token || !*token) return;
                answer->reply = rep;
                answer->values = v;
                answered();
            });
        },
        [r, ctx, now, keys, answer]() {
            return answer_usage(r, ctx, now, keys->size(), answer->reply, answer->values);
        });
}

// Configuration and health of this replica. Secrets are never included:
// providers show how their key was given (env:NAME, file:/path, literal),
// the store its redacted URL.
ngx_int_t overview(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    const GatewayState& st = *mcf->state;
    OverviewInput in;
    in.replica = st.replica;
    in.instance = st.instance;
    in.config = &st.config;
    for (std::size_t i = 0; i < st.config.providers().size(); ++i) {
        BreakerSlot slot{};
        ProviderHealth h;
        if (health_read(mcf, i, slot)) {
            h.known = true;
            h.state = breaker_state_name(slot.state);
            h.consecutive_failures = slot.consecutive_failures;
            if (slot.state == BreakerState::Open) h.retry_at_ms = slot.open_until_ms;
        }
        in.health.push_back(h);
    }
    in.directory = ctx->directory.get();
    if (st.store) {
        OverviewStore& s = in.store;
        s.shared = true;
        s.url = st.store->redacted_url;
        s.fail_open = st.store->fail_open;
        if (Worker* w = worker()) {
            const StoreLatch& l = w->health.latch;
            s.up = !l.open();
            s.has_error = l.has_error();
            if (s.has_error) {
                s.last_error = l.last_error();
                s.last_error_time = l.last_error_time_ms() / 1000;
            }
            s.telemetry_dropped = w->health.telemetry_dropped;
        }
    }
    in.builtin_price_date = std::string(PriceTable::builtin_date());
    in.priced_models = st.prices.size();
    in.allow_unpriced = mcf->allow_unpriced != 0;
    in.users_file = !st.users_file.empty();
    std::string out = render_overview(in);
    if (secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    return send_json(r, NGX_HTTP_OK, out);
}

std::string_view query_arg(ngx_http_request_t* r, const char* name) {
    ngx_str_t v{};
    if (ngx_http_arg(r, reinterpret_cast<u_char*>(const_cast<char*>(name)), ngx_strlen(name), &v) != NGX_OK) return {};
    return sv(v);
}

// One series of one scope's metric: every bucket key computed up front and
// read in one batch, oldest first; a failed read is 503, never zeros.
ngx_int_t history(ngx_http_request_t* r, RequestCtx* ctx) {
    if (secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    // The scope's id may be percent-encoded (model ids hold '/').
    std::string scope(query_arg(r, "scope"));
    if (!scope.empty()) {
        u_char* dst = reinterpret_cast<u_char*>(&scope[0]);
        u_char* src = dst;
        ngx_unescape_uri(&dst, &src, scope.size(), NGX_UNESCAPE_URI);
        scope.resize(static_cast<std::size_t>(dst - reinterpret_cast<u_char*>(&scope[0])));
    }
    auto q = std::make_shared<HistoryQuery>();
    std::string err;
    if (!parse_history_query(scope, query_arg(r, "metric"), query_arg(r, "window"), query_arg(r, "span"), *q, err)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, err, "invalid_request_error", "invalid_history_query");
    }
    const Directory& dir = *ctx->directory;
    if ((q->kind == "user" && dir.find_user(q->id) == nullptr) || (q->kind == "group" && dir.find_group(q->id) == nullptr)) {
        return send_error(r, NGX_HTTP_NOT_FOUND, "unknown " + q->kind + " \"" + log_value(q->id) + "\"",
                          "invalid_request_error", "unknown_scope");
    }
    auto buckets = std::make_shared<std::vector<std::string>>();
    auto keys = std::make_shared<std::vector<std::string>>();
    history_keys(*q, ngx_time(), *buckets, *keys);
    CounterStore* store = counter_store(main_conf(r));
    if (store == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    struct Answer {
        StoreReply reply;
        std::vector<std::int64_t> values;
    };
    auto answer = std::make_shared<Answer>();
    return await_store(
        r, ctx, Resume::Finalize,
        [store, keys, answer, ctx](std::function<void()> answered) {
            std::weak_ptr<bool> alive = ctx->alive;
            store->read(*keys, [answer, alive, answered](const StoreReply& rep, const std::vector<std::int64_t>& v) {
                auto token = alive.lock();
                if (!token || !*token) return;
                answer->reply = rep;
                answer->values = v;
                answered();
            });
        },
        [r, q, buckets, answer]() {
            if (answer->reply.status != StoreStatus::Ok || answer->values.size() != buckets->size()) {
                return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the limit store could not be read", "server_error",
                                  "limit_store_unavailable");
            }
            return send_json(r, NGX_HTTP_OK, render_history(*q, *buckets, answer->values));
        });
}

// The documents read from the configuration alone.
ngx_int_t config_view(ngx_http_request_t* r, RequestCtx* ctx, int which) {
    if (secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
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
    if (secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    auto q = std::make_shared<RankingQuery>();
    std::string prefix(query_arg(r, "prefix"));
    if (!prefix.empty()) {
        u_char* dst = reinterpret_cast<u_char*>(&prefix[0]);
        u_char* src = dst;
        ngx_unescape_uri(&dst, &src, prefix.size(), NGX_UNESCAPE_URI);
        prefix.resize(static_cast<std::size_t>(dst - reinterpret_cast<u_char*>(&prefix[0])));
    }
    std::string err;
    if (!parse_ranking_query(query_arg(r, "metric"), query_arg(r, "window"), query_arg(r, "span"), query_arg(r, "limit"),
                             query_arg(r, "offset"), prefix, query_arg(r, "detail"), *q, err)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, err, "invalid_request_error", "invalid_ranking_query");
    }
    MainConf* mcf = main_conf(r);
    auto catalog = std::make_shared<std::vector<CatalogModel>>(ranking_catalog(mcf));
    auto models = std::make_shared<std::vector<const CatalogModel*>>();
    auto keys = std::make_shared<std::vector<std::string>>();
    if (!ranking_keys(*q, *catalog, ngx_time(), *models, *keys, err)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, err, "invalid_request_error", "read_too_large");
    }
    CounterStore* store = counter_store(mcf);
    if (store == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    struct Answer {
        StoreReply reply;
        std::vector<std::int64_t> values;
    };
    auto answer = std::make_shared<Answer>();
    return await_store(
        r, ctx, Resume::Finalize,
        [store, keys, answer, ctx](std::function<void()> answered) {
            std::weak_ptr<bool> alive = ctx->alive;
            store->read(*keys, [answer, alive, answered](const StoreReply& rep, const std::vector<std::int64_t>& v) {
                auto token = alive.lock();
                if (!token || !*token) return;
                answer->reply = rep;
                answer->values = v;
                answered();
            });
        },
        [r, q, catalog, models, keys, answer]() {
            if (answer->reply.status != StoreStatus::Ok || answer->values.size() != keys->size()) {
                return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the limit store could not be read", "server_error",
                                  "limit_store_unavailable");
            }
            return send_json(r, NGX_HTTP_OK, render_ranking(*q, *models, answer->values));
        });
}

// Tool servers and agents: none can be configured yet (MCP and A2A targets
// come with their own issue), so the list is empty.
ngx_int_t targets(ngx_http_request_t* r) {
    if (secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    return send_json(r, NGX_HTTP_OK, "{\"targets\":[]}");
}

// The failure feed: the shared list when a store is configured and
// readable (source "redis"), else this replica's ring (source "replica",
// degraded when the store could not be used). Elements that are not event
// objects are skipped.
ngx_int_t events(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    if (secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ngx_str_t arg{};
    std::string_view limit_arg;
    if (ngx_http_arg(r, reinterpret_cast<u_char*>(const_cast<char*>("limit")), 5, &arg) == NGX_OK) limit_arg = sv(arg);
    const int limit = events_limit(limit_arg);
    if (limit < 0) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, "limit must be an integer from 1 to 200", "invalid_request_error",
                          "invalid_limit");
    }
    const std::string& replica = mcf->state->replica;
    CounterStore* store = counter_store(mcf);
    if (store == nullptr || !store->shares_events()) {
        return send_json(r, NGX_HTTP_OK, render_events("replica", replica, ring_events(mcf, limit), false));
    }
    struct Answer {
        StoreReply reply;
        std::vector<std::string> items;
    };
    auto answer = std::make_shared<Answer>();
    return await_store(
        r, ctx, Resume::Finalize,
        [store, limit, answer, ctx](std::function<void()> answered) {
            std::weak_ptr<bool> alive = ctx->alive;
            store->read_events(static_cast<std::size_t>(limit),
                               [answer, alive, answered](const StoreReply& rep, const std::vector<std::string>& items) {
                                   auto token = alive.lock();
                                   if (!token || !*token) return;
                                   answer->reply = rep;
                                   answer->items = items;
                                   answered();
                               });
        },
        [r, mcf, limit, answer]() {
            const std::string& replica = mcf->state->replica;
            if (answer->reply.status != StoreStatus::Ok) {
                return send_json(r, NGX_HTTP_OK, render_events("replica", replica, ring_events(mcf, limit), true));
            }
            std::vector<std::string> events;
            for (std::string& e : answer->items) {
                if (is_event_object(e)) events.push_back(std::move(e));
            }
            return send_json(r, NGX_HTTP_OK, render_events("redis", replica, events, false));
        });
}

const char kShell[] =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>LLM gateway</title></head><body>"
    "<h1>LLM gateway</h1><p>The admin API is under <code>admin/api/</code>; send an admin key in "
    "<code>x-api-key</code>.</p><ul><li><a href=\"admin/api/usage\">usage</a></li></ul></body></html>";

ngx_int_t shell(ngx_http_request_t* r) {
    if (content_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    return send_body(r, NGX_HTTP_OK, "text/html; charset=utf-8", std::string_view(kShell, sizeof(kShell) - 1));
}

}  // namespace

ngx_int_t admin_shell(ngx_http_request_t* r, RequestCtx*) { return shell(r); }
ngx_int_t admin_usage(ngx_http_request_t* r, RequestCtx* ctx) { return usage(r, ctx); }
ngx_int_t admin_overview(ngx_http_request_t* r, RequestCtx* ctx) { return overview(r, ctx); }
ngx_int_t admin_events(ngx_http_request_t* r, RequestCtx* ctx) { return events(r, ctx); }
ngx_int_t admin_history(ngx_http_request_t* r, RequestCtx* ctx) { return history(r, ctx); }
ngx_int_t admin_targets(ngx_http_request_t* r, RequestCtx*) { return targets(r); }
ngx_int_t admin_catalog(ngx_http_request_t* r, RequestCtx* ctx) { return config_view(r, ctx, 0); }
ngx_int_t admin_consumers(ngx_http_request_t* r, RequestCtx* ctx) { return config_view(r, ctx, 1); }
ngx_int_t admin_config(ngx_http_request_t* r, RequestCtx* ctx) { return config_view(r, ctx, 2); }
ngx_int_t admin_ranking(ngx_http_request_t* r, RequestCtx* ctx) { return ranking(r, ctx); }

}  // namespace llmgw
