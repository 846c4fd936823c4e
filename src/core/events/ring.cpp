// The event ring and the mirror throttle.
#include "core/events/ring.h"

#include <cstring>

namespace llmgw {

void EventRing::clear() {
    pushed = 0;
    mirror_second = 0;
    mirror_count = 0;
    for (Slot& s : slots) s.len = 0;
}

bool EventRing::push(std::string_view json) {
    if (json.size() > kSlotBytes) return false;
    Slot& s = slots[pushed % kEventCapacity];
    std::memcpy(s.json, json.data(), json.size());
    s.len = static_cast<std::uint32_t>(json.size());
    ++pushed;
    return true;
}

std::vector<std::string> EventRing::newest(std::size_t limit) const {
    std::vector<std::string> out;
    const std::uint64_t have = pushed < kEventCapacity ? pushed : kEventCapacity;
    for (std::uint64_t i = 0; i < have && out.size() < limit; ++i) {
        const Slot& s = slots[(pushed - 1 - i) % kEventCapacity];
        if (s.len > kSlotBytes) continue;   // never written whole
        out.emplace_back(s.json, s.len);
    }
    return out;
}

bool EventRing::take_mirror(std::int64_t now_sec) {
    if (now_sec != mirror_second) {
        mirror_second = now_sec;
        mirror_count = 0;
    }
    if (mirror_count >= kMirrorPerSecond) return false;
    ++mirror_count;
    return true;
}

}  // namespace llmgw
