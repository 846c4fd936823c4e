// When to try a provider call again (no nginx): the upstream's Retry-After
// and the gateway's own jittered backoff.
#pragma once
#include <cstdint>
#include <string_view>

namespace llmgw {

// The longest upstream Retry-After the gateway waits for (spec: 30 s).
inline constexpr std::int64_t kMaxRetryAfterMs = 30'000;

// Retry-After as milliseconds from now: delta-seconds ("120") or an HTTP-date
// (IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850 "Sunday, 06-Nov-94
// 08:49:37 GMT", asctime "Sun Nov  6 08:49:37 1994"); a date in the past is 0.
// -1 when the value is neither (empty, negative, garbage, out of range).
std::int64_t parse_retry_after_ms(std::string_view value, std::int64_t now_unix);

struct Backoff {
    std::int64_t base_ms = 250;
    std::int64_t max_ms = 2000;
};

// The wait before the k-th retry (k >= 1) of a call: d = min(max, base *
// 2^(k-1)), then uniformly jittered into [d/2, d]; u is a uniform draw in
// [0, 1).
std::int64_t backoff_ms(const Backoff& b, unsigned k, double u);

}  // namespace llmgw
