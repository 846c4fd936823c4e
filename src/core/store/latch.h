// The limiter's store-down latch (spec "States and transitions"), per
// limiter instance, with the clock injected (milliseconds, monotonic).
//
//   closed  --any store failure-------------------------> open   (logged at most once per 30 s)
//   open    --operation within 5 s of the last failure---> open   (store not contacted)
//   open    --first operation after 5 s: one probe-------> closed if it succeeds, open again if not
//
// Not thread-safe: one per nginx worker (a worker is single-threaded).
#pragma once
#include <cstdint>
#include <string>

namespace llmgw {

class StoreLatch {
public:
    static constexpr std::int64_t kOpenMs = 5000;          // store-down latch
    static constexpr std::int64_t kLogIntervalMs = 30000;  // store error log interval
    // A probe whose outcome never came (a caller that lost it) stops
    // blocking new probes after this long; store calls time out after 2 s.
    static constexpr std::int64_t kProbeStaleMs = 30000;

    // May the store be contacted now? closed: true. open, within kOpenMs of
    // the last failure: false. open, after kOpenMs: true for exactly one
    // caller (the probe), false for the others while that probe is in flight.
    bool should_try(std::int64_t now_ms);
    // Whether should_try would say yes now, without taking the probe: for
    // a caller that contacts the store later (a pending batch), whose own
    // should_try then takes it.
    bool may_try(std::int64_t now_ms) const;

    // A store operation succeeded: closes the latch, ends any probe.
    void on_success(std::int64_t now_ms);

    // A store operation failed: opens the latch (again), ends any probe,
    // records the time and message. Returns true when the caller should log
    // the error: the first failure, then at most once per kLogIntervalMs.
    bool on_failure(std::int64_t now_ms, const std::string& msg);

    bool open() const { return open_; }
    bool probing() const { return probing_; }
    // The last failure, kept after recovery (admin overview). "" and 0
    // before the first failure.
    const std::string& last_error() const { return last_error_; }
    std::int64_t last_error_time_ms() const { return last_error_ms_; }
    bool has_error() const { return has_error_; }

private:
    bool open_ = false;
    bool probing_ = false;
    std::int64_t probe_start_ms_ = 0;
    bool has_error_ = false;
    std::string last_error_;
    std::int64_t last_error_ms_ = 0;
    bool logged_ = false;
    std::int64_t last_log_ms_ = 0;
};

}  // namespace llmgw
