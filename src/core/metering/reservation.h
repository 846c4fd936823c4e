// Reservations (llm_gateway_budget_mode reserve; docs/metering.md#reservations),
// no nginx.
//
// At admission a request reserves its worst case against every token and
// cost limit of its scopes; the check counts what was spent plus what other
// requests hold reserved, so concurrent requests cannot all pass a check
// only one of them fits. After the answer the reservation is released and
// the real usage counted, in the one accounting operation (settle).
//
// A reservation lives in a reserved counter per scope, measure and slot:
// slots are ceil(ttl / 4) seconds long; the counter of a slot expires
// ttl seconds after its slot ends, so a reservation disappears by itself
// between ttl and 1.25 * ttl after it was made (a worker that died, a
// store outage). A check sums the kReserveSlots slots that can still be
// alive. Releasing touches a counter only while it exists: a request that
// settles after its reservation lapsed adds its usage and nothing else.
#pragma once
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/metering/limits.h"
#include "core/metering/pricing.h"

namespace llmgw {

constexpr std::int64_t kDefaultReserveTtl = 600;          // seconds
constexpr std::int64_t kDefaultReserveOutputTokens = 4096;  // a request that names no max_tokens
constexpr int kReserveSlots = 5;

std::int64_t reserve_slot_seconds(std::int64_t ttl);
std::int64_t reserve_slot(std::time_t now, std::int64_t ttl);
// The TTL a reserved counter of the current slot gets when created.
std::int64_t reserve_key_ttl(std::time_t now, std::int64_t ttl);
// The oldest slot that may hold live reservations: it and the
// kReserveSlots - 1 after it (the current slot the last).
std::int64_t oldest_live_slot(std::time_t now, std::int64_t ttl);
// The keys of the slots that may hold live reservations, oldest first.
void append_reserved_keys(std::string_view kind, std::string_view id, Measure m, std::time_t now, std::int64_t ttl,
                          std::vector<std::string>& out);
std::string reserved_key(std::string_view kind, std::string_view id, Measure m, std::int64_t slot);

// The estimate of a request's input tokens: body bytes / 4, rounded up.
std::int64_t estimate_input_tokens(std::size_t body_bytes);

// A request's worst case: its input estimate plus the output it allows
// (max_output; when it names none, reserve_output: llm_gateway_budget_mode
// reserve output=; none for embeddings), in tokens, and that usage priced at
// the dearest of prices (its failover targets'; a null one is unpriced).
ReserveAmounts worst_case_reservation(std::size_t body_bytes, std::int64_t max_output, bool embeddings,
                                      std::int64_t reserve_output, const std::vector<const Price*>& prices);

// Calls f(reservation, amount) for each reservation with an amount above 0,
// in order: what a request reserved, and what releasing it takes back.
template <typename F>
void for_each_reserved(const std::vector<Reservation>& reserve, const ReserveAmounts& amounts, F f) {
    for (const Reservation& r : reserve) {
        const std::int64_t amount = reserve_amount(amounts, r.measure);
        if (amount > 0) f(r, amount);
    }
}

// A request's reservation while it is held: the plan that admitted it
// (shared and never changed, so holding it costs a reference, not a copy)
// and the request's amounts. Releasing takes each reservation's amount back
// from its counter, only while that exists, never below 0.
struct LeaseTicket;   // core/metering/lease.h

struct HeldReservation {
    HeldReservation() = default;
    HeldReservation(std::shared_ptr<const AdmissionPlan> p, const ReserveAmounts& a,
                    std::shared_ptr<LeaseTicket> l = nullptr)
        : plan(std::move(p)), amounts(a), lease(std::move(l)) {}
    std::shared_ptr<const AdmissionPlan> plan;
    ReserveAmounts amounts;
    // The parts held in the worker's leases (a shared store's; null: none).
    std::shared_ptr<LeaseTicket> lease;
    // Whether anything is held: a reservation with an amount above 0.
    bool any() const;
    void clear() { *this = HeldReservation(); }
};

}  // namespace llmgw
