// The post-response accounting batch: tokens, cost and the served model's
// request counter, in one list of increments.
#include "core/metering/accounting.h"

#include <initializer_list>

namespace llmgw {

std::string_view metric_name(Metric m) {
    static const std::string_view names[kMetricCount] = {"req",  "tokin", "tokout", "cost",   "rej",
                                                                 "att",  "fail",  "chit",   "cmiss", "chitin",
                                                                 "chitout"};
    return names[m];
}

int metric_from_name(std::string_view name) {
    for (int m = 0; m < kMetricCount; ++m) {
        if (metric_name(static_cast<Metric>(m)) == name) return m;
    }
    return -1;
}

bool usage_plausible(const Usage& u, std::int64_t max_tokens) {
    return !u.malformed && u.prompt_tokens >= 0 && u.completion_tokens >= 0 && u.prompt_tokens <= max_tokens &&
           u.completion_tokens <= max_tokens;
}

bool answer_billed(const BilledAnswer& a) {
    if (!a.answered) return a.cancelled;
    switch (a.end) {
    case EndState::Complete:
    case EndState::StreamError:
    case EndState::Cut:
    case EndState::Stopped:
        return true;
    case EndState::Invalid:
        return a.streamed;
    case EndState::Open:
        return a.cancelled && a.success;
    case EndState::UpstreamError:
        return false;
    }
    return false;
}

std::size_t ScopeDelta::metrics() const {
    std::size_t n = 0;
    for (std::int64_t d : delta) n += d != 0 ? 1 : 0;
    return n;
}

bool ScopeDelta::any() const {
    for (std::int64_t d : delta) {
        if (d != 0) return true;
    }
    return false;
}

// An estimated usage needs nothing special here: the caller has already put
// the whole estimate in usage.prompt_tokens. With an empty in.model there is
// no model scope.
std::vector<ScopeDelta> accounting_deltas(const AccountingInput& in) {
    std::vector<ScopeDelta> out;
    out.reserve(in.scopes.size() + 3);   // room for the caller's provider scopes
    auto usage = [&in](ScopeDelta& d) {
        const bool hit = in.cache == CacheUse::Hit;
        if (in.usage.prompt_tokens > 0) d.delta[hit ? kMetricHitIn : kMetricTokIn] = in.usage.prompt_tokens;
        if (in.usage.completion_tokens > 0) d.delta[hit ? kMetricHitOut : kMetricTokOut] = in.usage.completion_tokens;
        if (in.cost_micros > 0 && !hit) d.delta[kMetricCost] = in.cost_micros;
        if (hit) d.delta[kMetricHit] = 1;
        if (in.cache == CacheUse::Miss) d.delta[kMetricMiss] = 1;
    };
    for (const Scope& s : in.scopes) {
        ScopeDelta d;
        d.kind = s.kind;
        d.id = s.id;
        usage(d);
        out.push_back(d);
    }
    if (!in.model.empty()) {
        ScopeDelta d;
        d.kind = "model";
        d.id = in.model;
        d.overflow_id = in.model_overflow;
        d.delta[kMetricReq] = 1;
        usage(d);
        out.push_back(d);
    }
    return out;
}

namespace {

// req 1 in each scope of the lists.
std::vector<ScopeDelta> request_deltas(std::initializer_list<const std::vector<std::pair<std::string, std::string>>*> lists) {
    std::size_t n = 0;
    for (const auto* l : lists) n += l->size();
    std::vector<ScopeDelta> out(n);
    std::size_t i = 0;
    for (const auto* l : lists) {
        for (const auto& s : *l) {
            out[i].kind = s.first;
            out[i].id = s.second;
            out[i].delta[kMetricReq] = 1;
            ++i;
        }
    }
    return out;
}

}  // namespace

std::vector<ScopeDelta> admitted_request_deltas(const AdmissionPlan& plan) { return request_deltas({&plan.deferred}); }

std::vector<ScopeDelta> local_request_deltas(const AdmissionPlan& plan) {
    return request_deltas({&plan.counted, &plan.deferred});
}

WindowStamps::WindowStamps(std::time_t now, bool in_process) {
    for (int i = 0; i < kWindowCount; ++i) {
        const Window w = static_cast<Window>(i);
        buckets[i] = bucket(w, now);
        ttls[i] = in_process ? ttl_seconds_in_process(w) : ttl_seconds(w);
    }
}

void append_incrs(const ScopeDelta& d, const WindowStamps& at, std::vector<Incr>& out) {
    for (int m = 0; m < kMetricCount; ++m) {
        if (d.delta[m] == 0) continue;
        for (int i = 0; i < kWindowCount; ++i) {
            out.push_back(Incr{counter_key(d.kind, d.id, metric_name(static_cast<Metric>(m)), static_cast<Window>(i),
                                           at.buckets[i]),
                               d.delta[m], at.ttls[i]});
        }
    }
}

std::vector<Incr> build_accounting(const AccountingInput& in, std::time_t now, bool in_process) {
    std::vector<Incr> out;
    out.reserve((in.scopes.size() + 1) * 4 * kWindowCount + 16);
    const WindowStamps at(now, in_process);
    for (const ScopeDelta& d : accounting_deltas(in)) append_incrs(d, at, out);
    return out;
}

}  // namespace llmgw
