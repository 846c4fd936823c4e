// The accounting deltas of many requests merged into one write (the Redis
// store's write-behind, docs/store.md#accounting-batches), no nginx.
//
// Deltas of the same scope (kind, id, overflow id) stamped in the same
// minute are summed, so a batch of N requests of one user writes that
// user's counters once rather than N times. Every window's bucket is the
// same throughout a minute (UTC), so a minute's deltas are stamped at its
// first second; deltas of different minutes stay apart. Sums saturate at
// INT64_MAX and INT64_MIN, as a counter does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/metering/accounting.h"

namespace llmgw {

class MergedDeltas {
public:
    // Adds one request's deltas, stamped at now (a delta with nothing to
    // count is skipped).
    void add(const std::vector<ScopeDelta>& deltas, std::time_t now);
    bool empty() const { return minutes_.empty(); }
    // Distinct (minute, scope) pairs held.
    std::size_t size() const { return index_.size(); }
    // The merged deltas of each minute, in the order the minutes were first
    // added: f(minute's first second, deltas). The deltas view strings this
    // object owns.
    template <typename F>
    void for_each_minute(F f) const {
        for (const Minute& s : minutes_) f(s.now, s.deltas);
    }
    void clear();

private:
    struct Minute {
        std::time_t now;
        std::vector<ScopeDelta> deltas;
    };
    std::vector<Minute> minutes_;
    std::deque<std::string> strings_;   // what the deltas view (stable: a deque only grows at its end)
    std::unordered_map<std::string, std::pair<std::size_t, std::size_t>> index_;   // key -> (minute, delta)
    std::string key_;                   // scratch
};

}  // namespace llmgw
