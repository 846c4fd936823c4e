// The admin location: the usage and overview documents and the targets
// view, and what every admin handler shares (admin_http.h). The access phase already answered 401/403 where needed.
#include <ctime>
#include <algorithm>

#include "core/admin/targets_view.h"
#include "core/admin/views.h"
#include "core/metering/keys.h"
#include "core/metering/reservation.h"
#include "ngx/admin/admin_http.h"
#include "ngx/admin/handlers.h"
#include "ngx/call/health.h"
#include "ngx/discovery/model_cache.h"
#include "ngx/http/respond.h"
#include "ngx/http/store_wait.h"
#include "ngx/main_conf.h"
#include "ngx/request/ctx.h"
#include "ngx/store/store.h"
#include "ngx/worker.h"

namespace llmgw {

ngx_int_t admin_content_headers(ngx_http_request_t* r) {
    if (add_header(r, "X-Content-Type-Options", "nosniff") != NGX_OK ||
        add_header(r, "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'") != NGX_OK) {
        return NGX_ERROR;
    }
    return NGX_OK;
}

ngx_int_t admin_secure_headers(ngx_http_request_t* r) {
    if (admin_content_headers(r) != NGX_OK || add_header(r, "Cache-Control", "no-store") != NGX_OK) return NGX_ERROR;
    return NGX_OK;
}

std::string_view query_arg(ngx_http_request_t* r, const char* name) {
    ngx_str_t v{};
    if (ngx_http_arg(r, reinterpret_cast<u_char*>(const_cast<char*>(name)), ngx_strlen(name), &v) != NGX_OK) return {};
    return sv(v);
}

std::string decoded_arg(ngx_http_request_t* r, const char* name) {
    std::string s(query_arg(r, name));
    if (!s.empty()) {
        u_char* dst = reinterpret_cast<u_char*>(&s[0]);
        u_char* src = dst;
        ngx_unescape_uri(&dst, &src, s.size(), NGX_UNESCAPE_URI);
        s.resize(static_cast<std::size_t>(dst - reinterpret_cast<u_char*>(&s[0])));
    }
    return s;
}

ngx_int_t read_then(ngx_http_request_t* r, RequestCtx* ctx, CounterStore* store,
                    std::shared_ptr<const std::vector<std::string>> keys, ReadFinish finish) {
    if (store == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (keys->size() > kMaxAdminReadKeys) {   // refused, never truncated
        return send_error(r, NGX_HTTP_BAD_REQUEST,
                          "the read would take " + std::to_string(keys->size()) + " keys, over the " +
                              std::to_string(kMaxAdminReadKeys) + " an admin read may take",
                          "invalid_request_error", "read_too_large");
    }
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
        [answer, finish = std::move(finish)]() { return finish(answer->reply, answer->values); });
}

ngx_int_t store_unreadable(ngx_http_request_t* r) {
    return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the limit store could not be read", "server_error",
                      "limit_store_unavailable");
}

namespace {

ngx_int_t usage(ngx_http_request_t* r, RequestCtx* ctx) {
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    const Directory& dir = *ctx->auth.directory;
    std::time_t now = ngx_time();
    auto keys = std::make_shared<std::vector<std::string>>();
    for (const auto& u : dir.users()) append_usage_keys("user", u.name, now, *keys);
    for (const auto& g : dir.groups()) append_usage_keys("group", g.name, now, *keys);
    append_usage_keys("total", "all", now, *keys);
    const std::size_t n = keys->size();
    // The response cache's counters, after the usage, where the cache is on
    // somewhere (else the view has no cache object and the read its 10 keys
    // per scope).
    if (!main_conf(r)->state->caches.empty()) {
        for (const auto& u : dir.users()) append_usage_cache_keys("user", u.name, now, *keys);
        for (const auto& g : dir.groups()) append_usage_cache_keys("group", g.name, now, *keys);
        append_usage_cache_keys("total", "all", now, *keys);
    }
    const std::size_t nc = keys->size();
    // Reservations: each scope's live reserved counters, after the cache's.
    const std::int64_t ttl = main_conf(r)->reserve_ttl;
    if (ttl > 0) {
        auto reserved = [&](std::string_view kind, std::string_view id) {
            for (Measure m : {Measure::Tokens, Measure::Cost}) append_reserved_keys(kind, id, m, now, ttl, *keys);
        };
        for (const auto& u : dir.users()) reserved("user", u.name);
        for (const auto& g : dir.groups()) reserved("group", g.name);
        reserved("total", "all");
    }
    const std::size_t all = keys->size();
    return read_then(r, ctx, counter_store(main_conf(r)), keys,
                     [r, ctx, now, n, nc, all](const StoreReply& reply, const std::vector<std::int64_t>& values) {
                         if (reply.status != StoreStatus::Ok || values.size() != all) return store_unreadable(r);
                         std::vector<std::int64_t> reserved;
                         for (std::size_t i = nc; i + kReserveSlots <= all; i += kReserveSlots) {
                             std::int64_t sum = 0;
                             for (int k = 0; k < kReserveSlots; ++k) sum += std::max<std::int64_t>(values[i + k], 0);
                             reserved.push_back(sum);
                         }
                         std::vector<std::int64_t> usage(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));
                         std::vector<std::int64_t> cache(values.begin() + static_cast<std::ptrdiff_t>(n),
                                                         values.begin() + static_cast<std::ptrdiff_t>(nc));
                         return send_json(r, NGX_HTTP_OK,
                                          render_usage(*ctx->auth.directory, now, usage, main_conf(r)->state->replica,
                                                       reserved, cache));
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
    in.directory = ctx->auth.directory.get();
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
    in.passthrough = st.has_passthrough;
    in.metrics = st.has_metrics;
    in.breaker = mcf->breaker_failures > 0;
    in.retries = mcf->retries;
    in.resilience = http_resilience(*mcf);
    in.warnings = st.warnings;
    for (std::size_t i = 0; i < st.config.providers().size(); ++i) {
        in.discovered.push_back(st.config.providers()[i].discover_ms > 0
                                    ? static_cast<std::int64_t>(model_cache_read(mcf, i).size())
                                    : -1);
    }
    std::string out = render_overview(in);
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    return send_json(r, NGX_HTTP_OK, out);
}

// Tool servers and agents with their request counters: one batch read; a
// read that failed is 503 (an outage, never zeros).
ngx_int_t targets(ngx_http_request_t* r, RequestCtx* ctx) {
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    auto order = std::make_shared<std::vector<const TargetConf*>>(targets_in_view_order(main_conf(r)->state->targets.all()));
    auto keys = std::make_shared<std::vector<std::string>>();
    append_target_keys(*order, ngx_time(), *keys);
    const std::size_t n = keys->size();
    return read_then(r, ctx, counter_store(main_conf(r)), keys,
                     [r, order, n](const StoreReply& reply, const std::vector<std::int64_t>& values) {
                         if (reply.status != StoreStatus::Ok || values.size() != n) return store_unreadable(r);
                         return send_json(r, NGX_HTTP_OK, render_targets(*order, values));
                     });
}

}  // namespace

ngx_int_t admin_usage(ngx_http_request_t* r, RequestCtx* ctx) { return usage(r, ctx); }
ngx_int_t admin_overview(ngx_http_request_t* r, RequestCtx* ctx) { return overview(r, ctx); }
ngx_int_t admin_targets(ngx_http_request_t* r, RequestCtx* ctx) { return targets(r, ctx); }

}  // namespace llmgw
