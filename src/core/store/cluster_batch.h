// An accounting batch on a Redis Cluster (docs/store.md#redis-cluster): the
// batch's deltas and releases split by the slot of their scope, one call of
// the accounting script per slot (each on its master). No nginx, no I/O.
#pragma once
#include <cstdint>
#include <ctime>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/metering/accounting.h"
#include "core/metering/lease.h"
#include "core/store/account_script.h"

namespace llmgw {

struct SlotBatch {
    std::uint16_t slot = 0;
    std::string near;                                   // a key of the slot (its op key goes beside it)
    std::deque<std::vector<ScopeDelta>> deltas;         // per stamp of the batch, this slot's
    std::vector<std::time_t> minutes;                   // the stamp of each (its first second)
    std::vector<StampedDeltas> parts;                   // deltas as the accounting command takes them
    std::vector<Release> released;
};

// Splits parts (each stamped at the matching minutes[i]) and released by
// slot. The deltas view what parts' deltas view; the batches' parts point
// into themselves (never copied: kept by unique_ptr).
void split_batch_by_slot(const std::vector<StampedDeltas>& parts, const std::vector<std::time_t>& minutes,
                         const std::vector<Release>& released, std::vector<std::unique_ptr<SlotBatch>>& out);

// The slot of a scope's keys in the current key layout.
std::uint16_t scope_slot(std::string_view kind, std::string_view id);

}  // namespace llmgw
