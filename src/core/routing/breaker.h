// The provider health breaker's state machine (no nginx). One slot per
// provider; the shell keeps the slots in shared memory (shared by the
// workers of a replica) and calls these under the zone's lock.
//
//   closed --(failures consecutive failed calls)--> open
//   open --(open_ms elapsed; the next call is the probe)--> half-open
//   half-open --probe succeeds--> closed;  --probe fails--> open again
//
// While open, and while a probe is in flight, the provider is skipped. A
// probe lost without a result (the client went away, a worker died) stops
// blocking after kProbeTimeoutMs.
#pragma once
#include <cstdint>

namespace llmgw {

struct BreakerConfig {
    bool enabled = true;
    std::int64_t failures = 5;      // consecutive failed calls that open it
    std::int64_t open_ms = 30'000;  // how long it stays open before a probe
};

enum class BreakerState : std::uint32_t { Closed = 0, Open = 1, HalfOpen = 2 };

// Plain data: lives in shared memory.
struct BreakerSlot {
    BreakerState state;
    std::int64_t consecutive_failures;
    std::int64_t open_until_ms;      // Open: when the next call may probe
    std::int64_t probe_deadline_ms;  // HalfOpen: when a lost probe stops blocking
};

inline constexpr std::int64_t kProbeTimeoutMs = 120'000;

enum class BreakerAdmit {
    Pass,    // call it
    Probe,   // call it: this call is the half-open probe
    Skip,    // do not call it; retry_at_ms says when a call may be tried again
};

BreakerAdmit breaker_admit(BreakerSlot& s, const BreakerConfig& c, std::int64_t now_ms, std::int64_t& retry_at_ms);

// The end of a call let through: success (the provider answered, even with a
// 4xx other than 429) or failure (no answer, 429, 5xx, an invalid answer).
void breaker_result(BreakerSlot& s, const BreakerConfig& c, bool success, bool was_probe, std::int64_t now_ms);

// A call let through ended with no verdict (the client went away): a probe
// is given back so the next call probes at once.
void breaker_abandon(BreakerSlot& s, bool was_probe, std::int64_t now_ms);

const char* breaker_state_name(BreakerState s);

}  // namespace llmgw
