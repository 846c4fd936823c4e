#include "core/store/cluster_batch.h"

#include "core/metering/keys.h"
#include "core/store/cluster.h"

namespace llmgw {

std::uint16_t scope_slot(std::string_view kind, std::string_view id) { return key_slot(scope_prefix(kind, id)); }

namespace {

SlotBatch& batch_of(std::vector<std::unique_ptr<SlotBatch>>& out, std::uint16_t slot, std::string_view near) {
    for (auto& b : out) {
        if (b->slot == slot) return *b;
    }
    out.push_back(std::make_unique<SlotBatch>());
    out.back()->slot = slot;
    out.back()->near.assign(near);
    return *out.back();
}

}  // namespace

void split_batch_by_slot(const std::vector<StampedDeltas>& parts, const std::vector<std::time_t>& minutes,
                         const std::vector<Release>& released, std::vector<std::unique_ptr<SlotBatch>>& out) {
    out.clear();
    for (std::size_t i = 0; i < parts.size(); ++i) {
        for (const ScopeDelta& d : *parts[i].deltas) {
            const std::string prefix = scope_prefix(d.kind, d.id);
            SlotBatch& b = batch_of(out, key_slot(prefix), prefix);
            // A new stamp for this slot when the last one it has is another.
            if (b.minutes.empty() || b.parts.size() != b.minutes.size() || b.parts.back().at != parts[i].at) {
                b.deltas.emplace_back();
                b.minutes.push_back(i < minutes.size() ? minutes[i] : 0);
                b.parts.push_back(StampedDeltas{parts[i].at, &b.deltas.back()});
            }
            b.deltas.back().push_back(d);
        }
    }
    for (const Release& r : released) batch_of(out, key_slot(r.record), r.record).released.push_back(r);
}

}  // namespace llmgw
