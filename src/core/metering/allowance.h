// What a caller may still send: the tightest request, token and cost limit
// of its admission, and the response headers that say so (no nginx).
//
// OpenAI's names, as its clients read them (x-ratelimit-limit-requests,
// -remaining-requests, -reset-requests, and the same for tokens), the IETF
// fields of draft-ietf-httpapi-ratelimit-headers (RateLimit-Policy and
// RateLimit: one item per policy, q/w and r/t), and the cost limit in USD
// (x-ratelimit-limit-cost-usd, x-ratelimit-remaining-cost-usd, six decimals).
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "core/metering/limits.h"

namespace llmgw {

struct Allowance {
    bool set = false;               // no limit of this measure applies
    std::int64_t limit = 0;
    std::int64_t remaining = 0;     // >= 0
    std::int64_t reset_seconds = 0; // until the limit's window ends
    std::int64_t window_seconds = 0;
};

struct Allowances {
    Allowance requests, tokens, cost;
};

// What the headers need of one check of a plan (kept by the request while
// the store answers: the plan itself is shared and may change).
struct LimitShape {
    Measure measure = Measure::Requests;
    std::int64_t limit = 0;
    std::int64_t retry_after = 0;
    Window window = Window::Min;
};
std::vector<LimitShape> limit_shapes(const AdmissionPlan& plan);

// The tightest limit of each measure (least remaining; on a tie, the one
// first in precedence order). An admitted request has used one request of
// each request limit; tokens and cost are what was spent before it.
// result.used must hold one sum per check, else nothing is set.
Allowances tightest_allowances(const std::vector<LimitShape>& checks, const AdmissionResult& result, std::time_t now);

// The headers of the allowances that are set, in a fixed order.
std::vector<std::pair<std::string, std::string>> allowance_headers(const Allowances& a);

// A duration as OpenAI writes its resets: "0s", "12s", "6m0s", "1h2m3s".
std::string reset_text(std::int64_t seconds);

// Seconds in the window that holds now (a month: its days).
std::int64_t window_length(Window w, std::time_t now);

}  // namespace llmgw
