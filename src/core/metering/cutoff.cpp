#include "core/metering/cutoff.h"

#include <algorithm>
#include <limits>

namespace llmgw {

std::vector<BudgetLimit> budget_limits(const AdmissionPlan& plan) {
    std::vector<BudgetLimit> out;
    for (std::size_t i = 0; i < plan.checks.size(); ++i) {
        const Check& c = plan.checks[i];
        if (c.measure == Measure::Requests) continue;
        out.push_back(BudgetLimit{i, c.measure, c.limit, c.message});
    }
    return out;
}

RemainingBudget remaining_budget(const std::vector<BudgetLimit>& limits, const std::vector<std::int64_t>& used,
                                 std::size_t checks) {
    RemainingBudget out;
    if (used.size() != checks) return out;
    for (const BudgetLimit& b : limits) {
        if (b.index >= used.size()) continue;
        const std::int64_t u = used[b.index];
        const std::int64_t left = u >= b.limit ? 0 : b.limit - std::max<std::int64_t>(u, 0);
        const bool tokens = b.measure == Measure::Tokens;
        bool& has = tokens ? out.has_tokens : out.has_cost;
        std::int64_t& value = tokens ? out.tokens : out.cost_micros;
        if (has && value <= left) continue;   // on a tie, the first in precedence order
        has = true;
        value = left;
        (tokens ? out.tokens_message : out.cost_message) = b.message;
    }
    return out;
}

std::int64_t StreamUsage::tokens() const {
    const std::int64_t p = std::max<std::int64_t>(prompt_tokens, 0);
    const std::int64_t c = std::max<std::int64_t>(completion_tokens, 0);
    return p > std::numeric_limits<std::int64_t>::max() - c ? std::numeric_limits<std::int64_t>::max() : p + c;
}

StreamUsage stream_usage(const Usage& reported, std::int64_t text_bytes, std::size_t body_bytes, const Price* price) {
    StreamUsage u;
    const bool read = reported.present && !reported.malformed;   // a malformed usage is unread usage
    u.prompt_tokens = read && reported.prompt_tokens > 0 ? reported.prompt_tokens : static_cast<std::int64_t>(body_bytes / 4);
    const std::int64_t reported_out = read ? reported.completion_tokens : 0;
    u.completion_tokens = std::max<std::int64_t>(reported_out, std::max<std::int64_t>(text_bytes, 0) / 4);
    u.cost_micros = price != nullptr ? cost_micros(*price, u.prompt_tokens, u.completion_tokens) : 0;
    return u;
}

bool crosses(const RemainingBudget& remaining, const StreamUsage& usage, std::string_view* why) {
    if (remaining.has_tokens && usage.tokens() > remaining.tokens) {
        if (why != nullptr) *why = remaining.tokens_message;
        return true;
    }
    if (remaining.has_cost && usage.cost_micros > remaining.cost_micros) {
        if (why != nullptr) *why = remaining.cost_message;
        return true;
    }
    return false;
}

}  // namespace llmgw
