#include "core/metering/delta_merge.h"

#include <climits>

namespace llmgw {
namespace {

std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

}  // namespace

void MergedDeltas::add(const std::vector<ScopeDelta>& deltas, std::time_t at) {
    const std::time_t now = at - ((at % 60) + 60) % 60;   // the minute's first second
    for (const ScopeDelta& d : deltas) {
        if (!d.any()) continue;
        // The key: the minute, then kind, id and overflow id, each after its
        // length (ids may hold any byte), as raw bytes.
        key_.clear();
        key_.append(reinterpret_cast<const char*>(&now), sizeof now);
        for (std::string_view part : {d.kind, d.id, d.overflow_id}) {
            const std::size_t n = part.size();
            key_.append(reinterpret_cast<const char*>(&n), sizeof n);
            key_.append(part);
        }
        auto found = index_.find(key_);
        if (found != index_.end()) {
            ScopeDelta& m = minutes_[found->second.first].deltas[found->second.second];
            for (int i = 0; i < kMetricCount; ++i) m.delta[i] = saturating_add(m.delta[i], d.delta[i]);
            continue;
        }
        std::size_t si = 0;
        while (si < minutes_.size() && minutes_[si].now != now) ++si;
        if (si == minutes_.size()) minutes_.push_back(Minute{now, {}});
        ScopeDelta m = d;
        strings_.emplace_back(d.kind);
        m.kind = strings_.back();
        strings_.emplace_back(d.id);
        m.id = strings_.back();
        strings_.emplace_back(d.overflow_id);
        m.overflow_id = strings_.back();
        minutes_[si].deltas.push_back(m);
        index_.emplace(key_, std::make_pair(si, minutes_[si].deltas.size() - 1));
    }
}

void MergedDeltas::clear() {
    minutes_.clear();
    strings_.clear();
    index_.clear();
}

}  // namespace llmgw
