#include "core/admin/views.h"

#include "core/admin/config_views.h"

#include <algorithm>
#include <unordered_set>

#include "core/admin/limits_json.h"
#include "core/json/writer.h"
#include "core/metering/accounting.h"
#include "core/metering/keys.h"

namespace llmgw {

namespace {

void model_entry(JsonWriter& w, std::string_view id, std::string_view owner) {
    w.begin_object().field("id", id).field("object", "model").field("created", std::int64_t{0});
    w.field("owned_by", owner).end_object();
}

// One window of a scope's cache counters: hits, misses, the tokens served
// from the cache, the hit rate (null without a lookup).
void cache_window(JsonWriter& w, std::string_view name, std::int64_t hits, std::int64_t misses, std::int64_t in,
                  std::int64_t out) {
    w.key(name).begin_object().field("hits", hits).field("misses", misses);
    w.field("hitTokensIn", in).field("hitTokensOut", out).key("hitRate");
    const std::int64_t h = std::max<std::int64_t>(hits, 0), lookups = h + std::max<std::int64_t>(misses, 0);
    if (lookups > 0) {
        w.real(static_cast<double>(h) / static_cast<double>(lookups));
    } else {
        w.null();
    }
    w.end_object();
}

void usage_entry(JsonWriter& w, const char* kind, const std::string& id, const std::string* group,
                 const Limits* limits, const std::int64_t* v, const std::int64_t* reserved,
                 const std::int64_t* cache) {
    w.begin_object().field("kind", kind).field("name", id);
    if (group != nullptr) w.field("group", *group);
    w.field("requestsPerMinute", v[kUsageReqMin]);
    w.field("requestsPerDay", v[kUsageReqDay]);
    w.field("tokensInPerDay", v[kUsageInDay]);
    w.field("tokensOutPerDay", v[kUsageOutDay]);
    w.field("tokensInPerMonth", v[kUsageInMonth]);
    w.field("tokensOutPerMonth", v[kUsageOutMonth]);
    w.field("costPerDayMicroUsd", v[kUsageCostDay]);
    w.field("costPerMonthMicroUsd", v[kUsageCostMonth]);
    w.field("rejectionsPerDay", v[kUsageRejDay]);
    if (reserved != nullptr) {
        w.field("reservedTokens", reserved[0]);
        w.field("reservedCostMicroUsd", reserved[1]);
    }
    w.key("lastSeen").time(v[kUsageSeen]);
    write_limits(w, limits);
    if (cache != nullptr) {
        w.key("cache").begin_object();
        cache_window(w, "day", cache[kCacheHitsDay], cache[kCacheMissesDay], cache[kCacheInDay], cache[kCacheOutDay]);
        cache_window(w, "month", cache[kCacheHitsMonth], cache[kCacheMissesMonth], cache[kCacheInMonth],
                     cache[kCacheOutMonth]);
        w.end_object();
    }
    w.end_object();
}

}  // namespace

std::string render_models(const GatewayConfig& cfg, const std::vector<std::vector<std::string>>& discovered,
                          std::string_view group) {
    JsonWriter w;
    std::unordered_set<std::string> listed;
    auto entry = [&](const std::string& id, std::string_view owner) {
        if (listed.insert(id).second) model_entry(w, id, owner);
    };
    auto open = [&](const ProviderConf* p) { return p != nullptr && (group.empty() || p->open_to(group)); };
    w.begin_object().field("object", "list").key("data").begin_array();
    for (const auto& p : cfg.providers()) {
        if (!open(&p)) continue;
        for (const auto& m : p.models) entry(p.name + "/" + m, p.name);
    }
    for (const auto& a : cfg.aliases()) {
        std::string_view owner = std::string_view(a.target).substr(0, a.target.find('/'));
        const ProviderConf* p = cfg.find_provider(owner);
        if (p != nullptr && !open(p)) continue;
        entry(a.name, owner);
    }
    const auto& providers = cfg.providers();
    for (std::size_t i = 0; i < discovered.size() && i < providers.size(); ++i) {
        if (!open(&providers[i])) continue;
        for (const std::string& id : discovered[i]) {
            const std::size_t slash = id.find('/');
            if (slash != std::string::npos && slash > 0) {
                entry(id, std::string_view(id).substr(0, slash));   // already <owner>/<id>
            } else {
                entry(providers[i].name + "/" + id, providers[i].name);
            }
        }
    }
    w.end_array().end_object();
    return w.take();
}

void append_usage_cache_keys(std::string_view kind, std::string_view id, std::time_t now,
                             std::vector<std::string>& out) {
    static constexpr Metric kCounters[] = {kMetricHit, kMetricMiss, kMetricHitIn, kMetricHitOut};
    for (Window win : {Window::Day, Window::Month}) {
        const std::string b = bucket(win, now);
        for (Metric m : kCounters) out.push_back(counter_key(kind, id, metric_name(m), win, b));
    }
}

std::string render_usage(const Directory& dir, std::time_t now, const std::vector<std::int64_t>& values,
                         const std::string& replica, const std::vector<std::int64_t>& reserved,
                         const std::vector<std::int64_t>& cache) {
    const std::size_t scopes = dir.users().size() + dir.groups().size() + 1;
    const std::size_t need = scopes * kUsageSlots;
    const std::int64_t* rv = reserved.size() == 2 * scopes ? reserved.data() : nullptr;
    const std::int64_t* cv = cache.size() == kUsageCacheSlots * scopes ? cache.data() : nullptr;
    auto next_reserved = [&rv]() {
        const std::int64_t* at = rv;
        if (rv != nullptr) rv += 2;
        return at;
    };
    auto next_cache = [&cv]() {
        const std::int64_t* at = cv;
        if (cv != nullptr) cv += kUsageCacheSlots;
        return at;
    };
    std::vector<std::int64_t> padded;
    const std::int64_t* v = values.data();
    if (values.size() < need) {   // a caller's bug; never read past the end
        padded = values;
        padded.resize(need, 0);
        v = padded.data();
    }
    JsonWriter w;
    w.begin_object().key("time").time(now).field("replica", replica).key("users").begin_array();
    for (const auto& u : dir.users()) {
        usage_entry(w, "user", u.name, &u.group, &u.limits, v, next_reserved(), next_cache());
        v += kUsageSlots;
    }
    w.end_array().key("groups").begin_array();
    for (const auto& g : dir.groups()) {
        usage_entry(w, "group", g.name, nullptr, &g.limits, v, next_reserved(), next_cache());
        v += kUsageSlots;
    }
    w.end_array().key("total");
    usage_entry(w, "total", "all", nullptr, nullptr, v, next_reserved(), next_cache());
    w.end_object();
    return w.take();
}

std::string render_overview(const OverviewInput& in) {
    JsonWriter w;
    w.begin_object().field("replica", in.replica);
    if (!in.instance.empty()) w.field("instance", in.instance);
    w.key("providers").begin_array();
    if (in.config != nullptr) {
        std::size_t i = 0;
        for (const auto& p : in.config->providers()) {
            w.begin_object().field("name", p.name).field("type", provider_type_name(p.type));
            w.field("location", p.location).field("key", p.key.empty() ? std::string("none") : p.key_ref);
            w.key("models").begin_array();
            for (const auto& m : p.models) w.str(m);
            w.end_array().field("default", p.is_default);
            write_resilience(w, p.resilience.over(in.resilience));
            if (i < in.health.size() && in.health[i].known) {
                const ProviderHealth& h = in.health[i];
                w.key("health").begin_object().field("state", h.state);
                w.field("consecutiveFailures", h.consecutive_failures).key("retryAt");
                if (h.retry_at_ms > 0) {
                    w.time(h.retry_at_ms / 1000);
                } else {
                    w.null();
                }
                w.end_object();
            }
            w.end_object();
            ++i;
        }
    }
    w.end_array().key("groups").begin_array();
    std::int64_t users = 0;
    if (in.directory != nullptr) {
        for (const auto& g : in.directory->groups()) w.str(g.name);
        users = static_cast<std::int64_t>(in.directory->users().size());
    }
    w.end_array().field("users", users).key("store").begin_object();
    const OverviewStore& s = in.store;
    if (s.shared) {
        w.field("type", "redis").field("url", s.url).field("up", s.up).field("failOpen", s.fail_open);
        if (s.has_error) {
            w.field("lastError", s.last_error).key("lastErrorTime").time(s.last_error_time);
        } else {
            w.key("lastError").null().key("lastErrorTime").null();
        }
        w.key("telemetryDropped").num(static_cast<std::int64_t>(s.telemetry_dropped));
    } else {
        w.field("type", "shm").field("up", true);
    }
    w.end_object().key("pricing").begin_object().field("builtinDate", in.builtin_price_date);
    w.field("models", static_cast<std::int64_t>(in.priced_models)).field("allowUnpriced", in.allow_unpriced);
    w.end_object().key("cache").begin_object().key("discoveredModels").begin_array();
    if (in.config != nullptr) {
        for (std::size_t i = 0; i < in.discovered.size() && i < in.config->providers().size(); ++i) {
            if (in.discovered[i] < 0) continue;
            w.begin_object().field("provider", in.config->providers()[i].name).field("models", in.discovered[i]).end_object();
        }
    }
    w.end_array().end_object();
    w.key("features").begin_object().field("usersFile", in.users_file).field("sharedStore", s.shared);
    w.field("passthrough", in.passthrough).field("metrics", in.metrics).field("breaker", in.breaker);
    w.field("retries", in.retries).field("discovery", std::find_if(in.discovered.begin(), in.discovered.end(),
                                                                   [](std::int64_t n) { return n >= 0; }) != in.discovered.end());
    w.end_object().key("warnings").begin_array();
    for (const auto& m : in.warnings) w.str(m);
    w.end_array().end_object();
    return w.take();
}

}  // namespace llmgw
