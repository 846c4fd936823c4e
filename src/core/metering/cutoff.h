// The mid-stream budget cutoff (llm_gateway_stream_cutoff): what remains of
// a caller's token and cost budgets as admission measured them, the running
// usage of a streamed answer, and whether it crosses what remains (no nginx).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/codec/openai.h"
#include "core/metering/limits.h"
#include "core/metering/pricing.h"

namespace llmgw {

// A token or cost check of an admission plan, copied while the store
// answers (the plan itself is shared and may change). index: its position
// among the plan's checks (and in AdmissionResult::used).
struct BudgetLimit {
    std::size_t index = 0;
    Measure measure = Measure::Tokens;
    std::int64_t limit = 0;
    std::string message;   // e.g. budget exceeded: user "alice" tokensPerDay 1000
};
std::vector<BudgetLimit> budget_limits(const AdmissionPlan& plan);

// The least that remains of each budget measure, with the message of the
// check that leaves it.
struct RemainingBudget {
    bool has_tokens = false;
    std::int64_t tokens = 0;
    std::string tokens_message;
    bool has_cost = false;
    std::int64_t cost_micros = 0;
    std::string cost_message;
    bool any() const { return has_tokens || has_cost; }
};
// used: per check of the plan, the sum of its counters before this request
// (AdmissionResult::used); when it does not hold one per check of the plan
// (checks), nothing is set.
RemainingBudget remaining_budget(const std::vector<BudgetLimit>& limits, const std::vector<std::int64_t>& used,
                                 std::size_t checks);

// The usage of a streamed answer so far.
struct StreamUsage {
    std::int64_t prompt_tokens = 0;
    std::int64_t completion_tokens = 0;
    std::int64_t cost_micros = 0;
    std::int64_t tokens() const;   // saturating
};
// Prompt: the provider's reported input tokens when it reported them (and
// no count was malformed), else the request body's bytes / 4. Completion:
// the larger of the reported completion tokens and text_bytes / 4. Cost at
// price (null: 0).
StreamUsage stream_usage(const Usage& reported, std::int64_t text_bytes, std::size_t body_bytes, const Price* price);

// Whether the usage is past what remains of a budget (only budgets that
// exist); why, when given, gets the message of the budget crossed (tokens first).
bool crosses(const RemainingBudget& remaining, const StreamUsage& usage, std::string_view* why = nullptr);

}  // namespace llmgw
