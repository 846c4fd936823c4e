#include "core/routing/breaker.h"

namespace llmgw {

BreakerAdmit breaker_admit(BreakerSlot& s, const BreakerConfig& c, std::int64_t now_ms, std::int64_t& retry_at_ms) {
    retry_at_ms = 0;
    if (!c.enabled) return BreakerAdmit::Pass;
    switch (s.state) {
    case BreakerState::Closed:
        return BreakerAdmit::Pass;
    case BreakerState::Open:
        if (now_ms < s.open_until_ms) {
            retry_at_ms = s.open_until_ms;
            return BreakerAdmit::Skip;
        }
        s.state = BreakerState::HalfOpen;
        s.probe_deadline_ms = now_ms + kProbeTimeoutMs;
        return BreakerAdmit::Probe;
    case BreakerState::HalfOpen:
        if (now_ms < s.probe_deadline_ms) {
            retry_at_ms = now_ms + 1000;   // the probe's verdict is pending
            return BreakerAdmit::Skip;
        }
        s.probe_deadline_ms = now_ms + kProbeTimeoutMs;   // the last probe was lost
        return BreakerAdmit::Probe;
    }
    return BreakerAdmit::Pass;
}

void breaker_result(BreakerSlot& s, const BreakerConfig& c, bool success, bool was_probe, std::int64_t now_ms) {
    if (success) {
        s.state = BreakerState::Closed;
        s.consecutive_failures = 0;
        return;
    }
    if (s.consecutive_failures < INT64_MAX) ++s.consecutive_failures;
    if (!c.enabled) return;
    if (was_probe || (s.state == BreakerState::Closed && s.consecutive_failures >= c.failures)) {
        s.state = BreakerState::Open;
        s.open_until_ms = now_ms + c.open_ms;
    }
}

void breaker_abandon(BreakerSlot& s, bool was_probe, std::int64_t now_ms) {
    if (!was_probe || s.state != BreakerState::HalfOpen) return;
    s.state = BreakerState::Open;
    s.open_until_ms = now_ms;
}

const char* breaker_state_name(BreakerState s) {
    switch (s) {
    case BreakerState::Closed: return "closed";
    case BreakerState::Open: return "open";
    case BreakerState::HalfOpen: return "half_open";
    }
    return "closed";
}

}  // namespace llmgw
