// The rejection counter table.
#include "core/metrics/rejections.h"

#include <cstring>
#include <string>

namespace llmgw {
namespace {

std::string key_of(std::string_view kind, std::string_view id) {
    std::string k(kind);
    k.push_back('\0');
    k.append(id.substr(0, RejectionTable::kKeyBytes - k.size() < id.size() ? RejectionTable::kKeyBytes - k.size() : id.size()));
    return k;
}

}  // namespace

void RejectionTable::clear() {
    generation = 0;
    used = 0;
}

void RejectionTable::add(std::string_view kind, std::string_view id) {
    if (kind.size() + 1 >= kKeyBytes) return;
    const std::string k = key_of(kind, id);
    for (std::uint32_t i = 0; i < used; ++i) {
        if (slots[i].len == k.size() && std::memcmp(slots[i].key, k.data(), k.size()) == 0) {
            ++slots[i].count;
            return;
        }
    }
    if (used == kCapacity) {   // one scope too many: a new generation
        used = 0;
        ++generation;
    }
    Slot& s = slots[used++];
    s.count = 1;
    s.len = static_cast<std::uint16_t>(k.size());
    std::memcpy(s.key, k.data(), k.size());
}

void RejectionTable::forget(std::string_view kind, std::string_view id) {
    const std::string k = key_of(kind, id);
    for (std::uint32_t i = 0; i < used; ++i) {
        if (slots[i].len == k.size() && std::memcmp(slots[i].key, k.data(), k.size()) == 0) {
            slots[i] = slots[--used];
            return;
        }
    }
}

std::vector<RejectionCount> RejectionTable::list() const {
    std::vector<RejectionCount> out;
    out.reserve(used);
    for (std::uint32_t i = 0; i < used; ++i) {
        std::string_view k(slots[i].key, slots[i].len);
        const std::size_t nul = k.find('\0');
        out.push_back(RejectionCount{std::string(k.substr(0, nul)), std::string(k.substr(nul + 1)),
                                     static_cast<std::int64_t>(slots[i].count)});
    }
    return out;
}

}  // namespace llmgw
