// The event ring (no nginx): kEventCapacity fixed slots over one block of
// memory (nginx puts it in shared memory and holds the zone's lock around
// every call), the oldest overwritten, never throttled; and the mirror
// throttle shared by the same workers (50 pushes per second per replica).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/events/event.h"

namespace llmgw {

struct EventRing {
    static constexpr std::size_t kSlotBytes = kEventMaxBytes + 48;
    static constexpr std::int64_t kMirrorPerSecond = 50;

    std::uint64_t pushed;           // events ever pushed (the next slot is pushed % capacity)
    std::int64_t mirror_second;     // the throttle's current second
    std::int64_t mirror_count;      // pushes taken in it
    struct Slot {
        std::uint32_t len;
        char json[kSlotBytes];
    } slots[kEventCapacity];

    void clear();
    // Stores json (an event_json text; a longer one is not stored: false).
    bool push(std::string_view json);
    // Up to limit events, newest first.
    std::vector<std::string> newest(std::size_t limit) const;
    // One mirror push allowed at this second? (at most kMirrorPerSecond)
    bool take_mirror(std::int64_t now_sec);
};

}  // namespace llmgw
