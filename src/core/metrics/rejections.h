// The in-process rejection counter of the metrics endpoint (no nginx): per
// scope, for the life of this nginx, over a fixed table the workers share
// (nginx holds the zone's lock around every call). At most 2000 distinct
// scopes per generation: one more resets them all and starts a new
// generation (spec "Limits"); a user removed by a users-file reload is
// forgotten.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/metrics/gateway_metrics.h"

namespace llmgw {

struct RejectionTable {
    static constexpr std::size_t kCapacity = 2000;
    static constexpr std::size_t kKeyBytes = 200;   // kind '\0' id; a longer id is cut

    std::uint64_t generation;
    std::uint32_t used;
    struct Slot {
        std::uint64_t count;
        std::uint16_t len;
        char key[kKeyBytes];
    } slots[kCapacity];

    void clear();
    void add(std::string_view kind, std::string_view id);
    void forget(std::string_view kind, std::string_view id);
    std::vector<RejectionCount> list() const;
};

}  // namespace llmgw
