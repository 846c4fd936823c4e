// The post-response accounting batch (no nginx).
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "core/metering/limits.h"
#include "core/metering/windows.h"
#include "core/codec/codec.h"
#include "core/codec/openai.h"

namespace llmgw {

// What the response cache did for a request (llm_gateway_cache): nothing
// (off, bypassed), a miss (the provider answered; stored when it could be),
// a hit (answered from the cache: its tokens go to their own counters and
// cost nothing, docs/cache.md).
enum class CacheUse { None, Miss, Hit };

struct AccountingInput {
    std::vector<Scope> scopes;     // user, group, total
    std::string model;             // canonical <provider>/<model> that answered
    std::string model_overflow;    // "<provider>/other": where model goes past the statistics bound
    Usage usage;                   // possibly estimated
    bool estimated = false;        // usage = body size / 4, all to tokin
    std::int64_t cost_micros = 0;
    CacheUse cache = CacheUse::None;
};

// Usage above this many tokens in either direction is implausible for one
// request (llm_gateway_max_tokens_per_request): it is treated like a missing
// usage and estimated, so one provider response cannot max out a counter.
constexpr std::int64_t kDefaultMaxTokensPerRequest = 10000000;
// True when both directions are within 0..max_tokens and no count the
// provider reported was malformed (out of range, not an integer).
bool usage_plausible(const Usage& u, std::int64_t max_tokens);

// Whether a provider call's answer is billed (its usage, else the
// estimate): a 2xx answer that began, whatever its end (complete, cut, ended
// by the provider's error event or by the gateway's cutoff, or a stream that
// turned invalid after its head went out: the client had part of it), and
// a call its client left while it ran (open: with a 2xx head). Not billed:
// no answer, an error status, a whole answer found invalid (the client got
// a 502 instead).
struct BilledAnswer {
    bool answered = false;   // the provider sent a response head
    EndState end = EndState::Open;
    bool streamed = false;   // its body was relayed as it came (BodyMode::Stream)
    bool success = false;    // a 2xx status
    bool cancelled = false;  // the client left while the call ran
};
bool answer_billed(const BilledAnswer& a);

// The metrics a scope counts, in the order their increments are listed.
// chit, cmiss: requests answered from the response cache, and requests the
// cache missed; chitin, chitout: the prompt and completion tokens of the
// answers served from it (never in tokin/tokout, the provider's tokens).
enum Metric {
    kMetricReq, kMetricTokIn, kMetricTokOut, kMetricCost, kMetricRej, kMetricAtt, kMetricFail,
    kMetricHit, kMetricMiss, kMetricHitIn, kMetricHitOut, kMetricCount
};
std::string_view metric_name(Metric m);   // "req", "tokin", ...
// -1 when the name is not one of the metrics above.
int metric_from_name(std::string_view name);

// What one scope gains from a request, in every window. kind and id view
// strings that outlive the deltas (the AccountingInput's, or literals).
//
// Statistics scopes named by callers (model, provmodel) carry an overflow
// id: when the store's bound on distinct statistics ids is reached, a new
// id is counted under overflow_id instead. Empty: the scope is never
// redirected (user, group, total, prov: their ids come from the
// configuration).
struct ScopeDelta {
    std::string_view kind, id;
    std::string_view overflow_id;
    std::int64_t delta[kMetricCount] = {};
    bool any() const;
    // Its metrics with a delta (each one counter in every window).
    std::size_t metrics() const;
};

// For every scope and for the model scope: tokin (prompt) and tokout
// (completion), a zero direction skipped; cost when > 0; cmiss 1 for a
// cache miss. A cache hit instead: chit 1, chitin and chitout (no tokin,
// tokout or cost). The model scope also gets req (the served model's
// request counter).
std::vector<ScopeDelta> accounting_deltas(const AccountingInput& in);

// An admitted request's counts in the scopes its plan deferred
// (AdmissionPlan::deferred): req 1 in each; the deltas view the plan.
std::vector<ScopeDelta> admitted_request_deltas(const AdmissionPlan& plan);
// A request admitted from leases (core/metering/lease.h): the same, for
// the scopes its plan counts at admission too (AdmissionPlan::counted),
// which the store never saw.
std::vector<ScopeDelta> local_request_deltas(const AdmissionPlan& plan);

// The four windows' buckets and TTLs at one moment, stamped once for a
// batch of deltas.
struct WindowStamps {
    WindowStamps(std::time_t now, bool in_process);
    std::string buckets[kWindowCount];
    std::int64_t ttls[kWindowCount];
};
// A delta as counter increments: per metric in enum order, per window (min,
// hour, day, month); zero deltas skipped.
void append_incrs(const ScopeDelta& d, const WindowStamps& at, std::vector<Incr>& out);

// append_incrs of each of accounting_deltas(in), stamped at now.
std::vector<Incr> build_accounting(const AccountingInput& in, std::time_t now, bool in_process);

}  // namespace llmgw
