// The post-response accounting batch: tokens, cost and the served model's
// request counter, in one list of increments.
#include "core/accounting.h"

namespace llmgw {

namespace {

void add_all_windows(std::vector<Incr>& out, const std::string& kind, const std::string& id, const char* metric,
                     std::int64_t delta, std::time_t now, bool in_process) {
    for (int i = 0; i < kWindowCount; ++i) {
        const Window w = static_cast<Window>(i);
        const std::int64_t ttl = in_process ? ttl_seconds_in_process(w) : ttl_seconds(w);
        out.push_back(Incr{counter_key(kind, id, metric, w, bucket(w, now)), delta, ttl});
    }
}

void add_usage(std::vector<Incr>& out, const std::string& kind, const std::string& id, const AccountingInput& in,
               std::time_t now, bool in_process) {
    if (in.usage.prompt_tokens > 0) add_all_windows(out, kind, id, "tokin", in.usage.prompt_tokens, now, in_process);
    if (in.usage.completion_tokens > 0) {
        add_all_windows(out, kind, id, "tokout", in.usage.completion_tokens, now, in_process);
    }
    if (in.cost_micros > 0) add_all_windows(out, kind, id, "cost", in.cost_micros, now, in_process);
}

}  // namespace

// An estimated usage needs nothing special here: the caller has already put
// the whole estimate in usage.prompt_tokens. With an empty in.model there is
// no model scope.
std::vector<Incr> build_accounting(const AccountingInput& in, std::time_t now, bool in_process) {
    std::vector<Incr> out;
    // up to 3 metrics per scope (+ the model's req), 4 windows each, and room
    // for the caller's provider counters
    out.reserve((in.scopes.size() + 1) * 4 * kWindowCount + 16);
    for (const Scope& s : in.scopes) add_usage(out, s.kind, s.id, in, now, in_process);
    if (!in.model.empty()) {
        const std::string kind = "model";
        add_all_windows(out, kind, in.model, "req", 1, now, in_process);
        add_usage(out, kind, in.model, in, now, in_process);
    }
    return out;
}

}  // namespace llmgw
