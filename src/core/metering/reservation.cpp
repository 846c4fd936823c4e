// Reservations: slots, keys, amounts and releases (see reservation.h).
#include "core/metering/reservation.h"

#include <algorithm>
#include <cstdint>

#include "core/metering/keys.h"

namespace llmgw {

std::int64_t reserve_slot_seconds(std::int64_t ttl) {
    const std::int64_t s = (ttl + kReserveSlots - 2) / (kReserveSlots - 1);
    return s < 1 ? 1 : s;
}

std::int64_t reserve_slot(std::time_t now, std::int64_t ttl) {
    return static_cast<std::int64_t>(now) / reserve_slot_seconds(ttl);
}

// The slot's counter lives until ttl after the slot's end.
std::int64_t reserve_key_ttl(std::time_t now, std::int64_t ttl) {
    const std::int64_t len = reserve_slot_seconds(ttl);
    const std::int64_t end = (reserve_slot(now, ttl) + 1) * len;
    return end + ttl - static_cast<std::int64_t>(now);
}

std::string reserved_key(std::string_view kind, std::string_view id, Measure m, std::int64_t slot) {
    return reserved_key(kind, id, m == Measure::Tokens, slot);
}

// Slot k lives while now < (k + 1) * len + ttl, and ttl <= (kReserveSlots - 1) * len:
// the current slot and the kReserveSlots - 1 before it.
std::int64_t oldest_live_slot(std::time_t now, std::int64_t ttl) {
    return reserve_slot(now, ttl) - (kReserveSlots - 1);
}

void append_reserved_keys(std::string_view kind, std::string_view id, Measure m, std::time_t now, std::int64_t ttl,
                          std::vector<std::string>& out) {
    const std::int64_t oldest = oldest_live_slot(now, ttl);
    for (std::int64_t k = oldest; k < oldest + kReserveSlots; ++k) out.push_back(reserved_key(kind, id, m, k));
}

std::int64_t estimate_input_tokens(std::size_t body_bytes) {
    return static_cast<std::int64_t>((body_bytes + 3) / 4);
}

ReserveAmounts worst_case_reservation(std::size_t body_bytes, std::int64_t max_output, bool embeddings,
                                      std::int64_t reserve_output, const std::vector<const Price*>& prices) {
    ReserveAmounts a;
    const std::int64_t in = estimate_input_tokens(body_bytes);
    std::int64_t out = max_output;
    if (embeddings) {
        out = 0;
    } else if (out <= 0) {
        out = reserve_output;
    }
    a.tokens = in > INT64_MAX - out ? INT64_MAX : in + out;
    for (const Price* p : prices) {
        if (p != nullptr) a.cost_micros = std::max(a.cost_micros, cost_micros(*p, in, out));
    }
    return a;
}

bool HeldReservation::any() const {
    if (plan == nullptr) return false;
    if (lease != nullptr) return true;   // parts in the worker's leases (in flight there)
    bool held = false;
    for_each_reserved(plan->reserve, amounts, [&held](const Reservation&, std::int64_t) { held = true; });
    return held;
}

}  // namespace llmgw
