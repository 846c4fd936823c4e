// The metrics families of the gateway.
#include "core/metrics/gateway_metrics.h"

#include "core/metering/accounting.h"
#include "core/metering/keys.h"
#include "core/metrics/exposition.h"

namespace llmgw {
namespace {

constexpr const char* kModelMetrics[] = {"req", "tokin", "tokout", "cost"};
// The response cache's counters, read per scope and per model this month
// (core/metering/accounting.h): hits, misses, the prompt and completion
// tokens served from the cache.
constexpr Metric kCacheMetrics[] = {kMetricHit, kMetricMiss, kMetricHitIn, kMetricHitOut};
constexpr std::size_t kCacheSlots = sizeof kCacheMetrics / sizeof kCacheMetrics[0];

struct ScopeRef {
    const char* kind;
    const std::string* id;
    const Limits* limits;
};

std::vector<ScopeRef> scopes_of(const Directory& dir) {
    static const std::string all = "all";
    std::vector<ScopeRef> out;
    for (const auto& u : dir.users()) out.push_back({"user", &u.name, &u.limits});
    for (const auto& g : dir.groups()) out.push_back({"group", &g.name, &g.limits});
    out.push_back({"total", &all, nullptr});
    return out;
}

double ratio(std::int64_t used, std::int64_t limit) { return static_cast<double>(used) / static_cast<double>(limit); }

}  // namespace

std::vector<std::string> metrics_keys(const Directory& dir, const GatewayConfig& cfg,
                                      const std::vector<std::string>& models, std::time_t now, bool cache) {
    std::vector<std::string> keys;
    for (const ScopeRef& s : scopes_of(dir)) append_usage_keys(s.kind, *s.id, now, keys);
    const std::string month = bucket(Window::Month, now);
    for (const auto& p : cfg.providers()) {
        keys.push_back(counter_key("prov", p.name, "att", Window::Month, month));
        keys.push_back(counter_key("prov", p.name, "fail", Window::Month, month));
    }
    for (const auto& m : models) {
        for (const char* metric : kModelMetrics) keys.push_back(counter_key("model", m, metric, Window::Month, month));
    }
    if (!cache) return keys;
    for (const ScopeRef& s : scopes_of(dir)) {
        for (Metric metric : kCacheMetrics) keys.push_back(counter_key(s.kind, *s.id, metric_name(metric), Window::Month, month));
    }
    for (const auto& m : models) {
        for (Metric metric : kCacheMetrics) keys.push_back(counter_key("model", m, metric_name(metric), Window::Month, month));
    }
    return keys;
}

std::string render_metrics(const MetricsInput& in) {
    Exposition x;
    x.family("llmgateway_requests_total", "counter",
             "Requests admitted per scope in the current UTC day (resets at midnight).");
    x.family("llmgateway_tokens_total", "counter",
             "Tokens counted per scope and direction in the current UTC month (resets at the month's start).");
    x.family("llmgateway_cost_micro_usd_total", "counter",
             "Cost counted per scope in micro-USD in the current UTC month (resets at the month's start).");
    if (in.cache) {
        x.family("llmgateway_cache_requests_total", "counter",
                 "Requests answered from the response cache (hit) or that it missed (miss) per scope in the current UTC "
                 "month (resets at the month's start).");
        x.family("llmgateway_cache_tokens_total", "counter",
                 "Tokens of the answers served from the response cache per scope and direction in the current UTC month "
                 "(resets at the month's start).");
    }
    x.family("llmgateway_budget_consumed_ratio", "gauge",
             "Used share of each limit of each limited scope in its current window.");
    x.family("llmgateway_provider_attempts_total", "counter",
             "Provider calls in the current UTC month (resets at the month's start).");
    x.family("llmgateway_provider_failures_total", "counter",
             "Provider calls that failed (no answer, 429, 5xx, invalid) in the current UTC month.");
    if (!in.models.empty()) {
        x.family("llmgateway_model_requests_total", "counter", "Requests served per provider and model this month.");
        x.family("llmgateway_model_tokens_total", "counter", "Tokens per provider, model and direction this month.");
        x.family("llmgateway_model_cost_micro_usd_total", "counter", "Cost per provider and model this month.");
        if (in.cache) {
            x.family("llmgateway_model_cache_requests_total", "counter",
                     "Requests answered from the response cache (hit) or that it missed (miss) per provider and model "
                     "this month.");
            x.family("llmgateway_model_cache_tokens_total", "counter",
                     "Tokens served from the response cache per provider, model and direction this month.");
        }
    }
    x.family("llmgateway_provider_health", "gauge",
             "Provider health from its circuit breaker: 1 closed, 0.5 half-open, 0 open.");
    x.family("llmgateway_rate_limit_rejections_total", "counter",
             "Requests refused by a limit per scope since this nginx started (in process).");
    x.family("llmgateway_limit_store_up", "gauge", "1 when this replica's connection to the shared store is healthy.");

    const std::vector<ScopeRef> scopes = in.directory ? scopes_of(*in.directory) : std::vector<ScopeRef>{};
    const std::size_t usage_count = scopes.size() * kUsageSlots;
    const std::size_t providers = in.config ? in.config->providers().size() : 0;
    const std::size_t cache_at = usage_count + providers * 2 + in.models.size() * 4;
    const std::size_t cache_n = in.cache ? (scopes.size() + in.models.size()) * kCacheSlots : 0;
    const bool have = in.store_read && in.values.size() == cache_at + cache_n;
    if (have) {
        for (std::size_t i = 0; i < scopes.size(); ++i) {
            const std::int64_t* v = &in.values[i * kUsageSlots];
            const ScopeRef& s = scopes[i];
            const Labels base{{"scope_kind", s.kind}, {"scope", *s.id}};
            x.sample("llmgateway_requests_total", base, v[kUsageReqDay]);
            x.sample("llmgateway_tokens_total", {{"scope_kind", s.kind}, {"scope", *s.id}, {"direction", "in"}}, v[kUsageInMonth]);
            x.sample("llmgateway_tokens_total", {{"scope_kind", s.kind}, {"scope", *s.id}, {"direction", "out"}}, v[kUsageOutMonth]);
            x.sample("llmgateway_cost_micro_usd_total", base, v[kUsageCostMonth]);
            if (in.cache) {
                const std::int64_t* c = &in.values[cache_at + i * kCacheSlots];
                x.sample("llmgateway_cache_requests_total", {{"scope_kind", s.kind}, {"scope", *s.id}, {"result", "hit"}}, c[0]);
                x.sample("llmgateway_cache_requests_total", {{"scope_kind", s.kind}, {"scope", *s.id}, {"result", "miss"}}, c[1]);
                x.sample("llmgateway_cache_tokens_total", {{"scope_kind", s.kind}, {"scope", *s.id}, {"direction", "in"}}, c[2]);
                x.sample("llmgateway_cache_tokens_total", {{"scope_kind", s.kind}, {"scope", *s.id}, {"direction", "out"}}, c[3]);
            }
            if (s.limits == nullptr) continue;
            const Limits& l = *s.limits;
            auto gauge = [&](const char* limit, std::int64_t used, std::int64_t max) {
                if (max > 0) x.sample("llmgateway_budget_consumed_ratio", {{"scope_kind", s.kind}, {"scope", *s.id}, {"limit", limit}}, ratio(used, max));
            };
            gauge("requestsPerMinute", v[kUsageReqMin], l.requests_per_minute);
            gauge("requestsPerDay", v[kUsageReqDay], l.requests_per_day);
            gauge("tokensPerDay", v[kUsageInDay] + v[kUsageOutDay], l.tokens_per_day);
            gauge("tokensPerMonth", v[kUsageInMonth] + v[kUsageOutMonth], l.tokens_per_month);
            gauge("costPerDayUSD", v[kUsageCostDay], l.cost_per_day_micros);
            gauge("costPerMonthUSD", v[kUsageCostMonth], l.cost_per_month_micros);
        }
        for (std::size_t i = 0; i < providers; ++i) {
            const std::string& name = in.config->providers()[i].name;
            x.sample("llmgateway_provider_attempts_total", {{"provider", name}}, in.values[usage_count + i * 2]);
            x.sample("llmgateway_provider_failures_total", {{"provider", name}}, in.values[usage_count + i * 2 + 1]);
        }
        const std::size_t base_at = usage_count + providers * 2;
        for (std::size_t i = 0; i < in.models.size(); ++i) {
            const std::string& id = in.models[i];
            const std::size_t slash = id.find('/');
            const std::string provider = id.substr(0, slash);
            const std::string model = slash == std::string::npos ? std::string() : id.substr(slash + 1);
            const std::int64_t* v = &in.values[base_at + i * 4];
            const Labels pm{{"provider", provider}, {"model", model}};
            x.sample("llmgateway_model_requests_total", pm, v[0]);
            x.sample("llmgateway_model_tokens_total", {{"provider", provider}, {"model", model}, {"direction", "in"}}, v[1]);
            x.sample("llmgateway_model_tokens_total", {{"provider", provider}, {"model", model}, {"direction", "out"}}, v[2]);
            x.sample("llmgateway_model_cost_micro_usd_total", pm, v[3]);
            if (!in.cache) continue;
            const std::int64_t* c = &in.values[cache_at + (scopes.size() + i) * kCacheSlots];
            x.sample("llmgateway_model_cache_requests_total", {{"provider", provider}, {"model", model}, {"result", "hit"}}, c[0]);
            x.sample("llmgateway_model_cache_requests_total", {{"provider", provider}, {"model", model}, {"result", "miss"}}, c[1]);
            x.sample("llmgateway_model_cache_tokens_total", {{"provider", provider}, {"model", model}, {"direction", "in"}}, c[2]);
            x.sample("llmgateway_model_cache_tokens_total", {{"provider", provider}, {"model", model}, {"direction", "out"}}, c[3]);
        }
    }
    for (const ProviderGauge& h : in.health) {
        if (!h.known) continue;
        const double v = std::string_view(h.state) == "open" ? 0.0 : std::string_view(h.state) == "half_open" ? 0.5 : 1.0;
        x.sample("llmgateway_provider_health", {{"provider", h.name}}, v);
    }
    for (const RejectionCount& r : in.rejections) {
        x.sample("llmgateway_rate_limit_rejections_total", {{"scope_kind", r.kind}, {"scope", r.id}}, r.count);
    }
    x.sample("llmgateway_limit_store_up", {{"replica", in.replica}}, static_cast<std::int64_t>(!in.store_shared || in.store_up ? 1 : 0));
    return x.text();
}

}  // namespace llmgw
