// Limits of a user or group, their validation, and the admission plan: which
// counters to check and bump for one metered request, in precedence order
// (no nginx).
#pragma once
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/metering/keys.h"
#include "core/metering/windows.h"

namespace llmgw {

struct LeaseTicket;   // core/metering/lease.h

struct Limits {
    std::int64_t requests_per_minute = 0;  // 0 = none
    std::int64_t requests_per_day = 0;
    std::int64_t tokens_per_day = 0;       // input + output
    std::int64_t tokens_per_month = 0;
    std::int64_t cost_per_day_micros = 0;  // micro-USD
    std::int64_t cost_per_month_micros = 0;
    bool any() const;
    bool has_cost_budget() const { return cost_per_day_micros > 0 || cost_per_month_micros > 0; }
};

// Sets one limit from its spec name (requestsPerMinute, requestsPerDay,
// tokensPerDay, tokensPerMonth, costPerDayUSD, costPerMonthUSD) or its
// directive name (requests_per_minute, ..., cost_per_day, cost_per_month).
// Counts must be integers >= 0; costs finite numbers >= 0, converted to
// micro-USD rounded to nearest. Returns "" or a sentence saying what is wrong.
std::string set_limit(Limits& l, std::string_view name, std::string_view value);
// The same for a JSON number already parsed (users file).
std::string set_limit_number(Limits& l, std::string_view name, double value, bool is_integer);

// USD (finite, >= 0) to micro-USD, rounded to nearest, saturating at INT64_MAX.
std::int64_t usd_to_micros(double usd);

struct Scope {
    std::string kind;              // user, group, total, model, prov, provmodel, mcp, agent
    std::string id;
    const Limits* limits = nullptr;  // null: counted, never violates
};

enum class ViolationKind { None, RateLimit, Budget, StoreDown };

// What a limit counts.
enum class Measure { Requests, Tokens, Cost };
// The tag of a measure's reserved fields (core/metering/keys.h).
constexpr char reserved_tag(Measure m) {
    return m == Measure::Tokens ? kReservedTokensTag : m == Measure::Cost ? kReservedCostTag : kReservedRequestsTag;
}

struct Check {
    std::vector<std::string> keys;  // summed (tokens: tokin + tokout); never a reserved counter
    std::int64_t limit = 0;
    std::int64_t add = 0;           // 1 for request limits (breach when sum + 1 > limit), 0 for tokens/cost (breach when sum >= limit)
    ViolationKind kind = ViolationKind::RateLimit;
    std::int64_t retry_after = 0;   // seconds until this window ends
    std::string message;            // e.g. "rate limit exceeded: user \"alice\" requestsPerMinute 50", "budget exceeded: group \"eng\" costPerDayUSD 1.5"
    Measure measure = Measure::Requests;
    Window window = Window::Min;
    // Reservations (core/metering/reservation.h): the check also sums the
    // scope's reserved counters of its measure in the slots that can still
    // be alive (kReserveSlots of them, from reserved_oldest on), and adds
    // the request's reservation instead of add (check_add; breach when
    // sum + reservation > limit).
    bool reserves = false;
    std::string reserved_record;    // the scope's reserved_record_key when reserves
    std::int64_t reserved_oldest = 0;
    int reserve_index = -1;         // its reservation in AdmissionPlan::reserve when reserves
};

struct Incr {
    std::string key;
    std::int64_t delta = 0;
    std::int64_t ttl = 0;           // seconds
};

// One reserved counter a request writes (core/metering/reservation.h): its
// scope's record of reserved counters (reserved_record_key), the measure
// and slot, and the TTL the slot's counter gets when created. Built once
// per second with the plan, so a request never builds or parses a reserved
// counter's key; each request reserves its own ReserveAmounts in it.
struct Reservation {
    std::string record;
    Measure measure = Measure::Tokens;
    std::int64_t slot = 0;
    std::int64_t ttl = 0;           // seconds
    // The limits of its checks as one value (FNV-1a over them, in check
    // order), made with the plan: a worker's lease granted under other
    // limits (the users were reloaded) takes no request (core/metering/lease.h).
    std::uint64_t limits = 0;
};

// A request's worst case (llm_gateway_budget_mode reserve), reserved
// against each token and cost limit of its scopes. It travels beside the
// plan, which a worker shares between the requests of one second.
struct ReserveAmounts {
    std::int64_t tokens = 0;
    std::int64_t cost_micros = 0;
};
// The amount reserved against a limit of measure m (never below 0).
std::int64_t reserve_amount(const ReserveAmounts& a, Measure m);
// What a check adds to its sum for this request: its add, or for a
// reserving token or cost check the request's reservation.
std::int64_t check_add(const Check& c, const ReserveAmounts& a);

// One metered request's admission, atomic in the store: run checks in order;
// the first breach wins. No breach: apply `admit` increments. Breach: apply
// `reject` increments instead (rejection counters), nothing else.
struct AdmissionPlan {
    std::vector<Check> checks;
    std::vector<Incr> admit;
    std::vector<Incr> reject;
    // Reservations, written only when admitted, after the admit increments,
    // each of the request's amount of its measure (an amount of 0 writes
    // nothing).
    std::vector<Reservation> reserve;
    // With defer_unchecked (a shared store): the scopes (kind, id) whose
    // request counters no check reads. Their admission increments are not
    // in `admit`: the store counts them behind, with the accounting
    // (admitted_request_deltas, core/metering/accounting.h;
    // docs/store.md#accounting-batches).
    std::vector<std::pair<std::string, std::string>> deferred;
    // Built for leases (core/metering/lease.h, a shared store): every check
    // reserves (reads its scope's reserved counters of its measure), and
    // every limited scope and measure has a reservation, which only a
    // worker's lease writes when nothing else is reserved (requests; the
    // token and cost limits of llm_gateway_budget_mode check).
    bool leased = false;
    // Built with reserve_ttl > 0 (llm_gateway_budget_mode reserve): the token
    // and cost reserved counters hold requests' own worst cases too, not
    // only leases.
    bool reserves_worst_cases = false;
    // The scopes (kind, id) whose request counters `admit` bumps, one per
    // window quad, in its order: what an admission from leases counts with
    // the accounting instead (local_request_deltas, accounting.h).
    std::vector<std::pair<std::string, std::string>> counted;
    // A store's own reading of the plan's keys, made the first time that
    // store runs the plan and kept as long as the plan (the shared-memory
    // store: each key's entry and slot, found once per plan rather than
    // once per request). Not part of what the plan says; null until then.
    mutable std::shared_ptr<const void> store_view;
    // The same for a Redis Cluster: the plan split by slot
    // (core/store/cluster_admission.h SplitPlan), made once per plan.
    mutable std::shared_ptr<const void> slot_view;
};

// scopes: the request's user, group and total scopes (more may follow).
// Admission bumps req in every window (min, hour, day, month) of every
// scope; rejection bumps "rej" (day window) of every user/group scope and of
// total. in_process selects ttl_seconds_in_process.
// reserve_ttl > 0 (llm_gateway_budget_mode reserve): the token and cost
// checks also sum the scope's live reserved counters, and the admission
// reserves in the current slot of every scope with a limit of that measure
// (each request's ReserveAmounts; see core/metering/reservation.h).
// defer_unchecked: a scope without a request limit gets no admit
// increments; it is listed in deferred instead.
// lease_ttl > 0 (a shared store; leased): every check reserves, in slots of
// reserve_ttl (reserve mode) or of lease_ttl, and every limited scope and
// measure gets a reservation (the request measure's amount is always 0).
AdmissionPlan build_admission_plan(const std::vector<Scope>& scopes, std::time_t now, bool in_process,
                                   std::int64_t reserve_ttl = 0, bool defer_unchecked = false,
                                   std::int64_t lease_ttl = 0);

struct AdmissionResult {
    bool admitted = true;
    ViolationKind kind = ViolationKind::None;
    std::int64_t retry_after = 0;
    std::string message;
    int check_index = -1;
    // Per check of the plan, in order: the sum of its counters before this
    // request (negative read as 0, saturating); empty when not known.
    std::vector<std::int64_t> used;
    // Per check, the part of used that its reserved counters hold (a shared
    // store's reply; empty when not known).
    std::vector<std::int64_t> held;
    // Admitted with reservations held in the worker's leases (a shared
    // store's, core/metering/lease.h); null otherwise.
    std::shared_ptr<LeaseTicket> lease;
};

// The store seen by the plan executor: reads and increments under one lock.
class KvTxn {
public:
    virtual ~KvTxn() = default;
    virtual std::int64_t get(const std::string& key) = 0;        // 0 when absent or expired
    // The sum of a reserving check's live reserved counters (Check::reserves):
    // by default get() of each slot's key; a store that keeps a scope's
    // reserved counters together reads them at once.
    virtual std::int64_t reserved(const Check& c);
    // false when the store is out of memory (the whole operation fails)
    virtual bool incr(const std::string& key, std::int64_t delta, std::int64_t ttl) = 0;
    // Adds amount to a reservation's slot counter: by default incr() of the
    // slot's key (reserved_key_in).
    virtual bool reserve(const Reservation& r, std::int64_t amount);
};

// Runs a plan against a store already locked by the caller, reserving
// amounts (check mode: none). Returns false (and leaves result untouched)
// when an increment failed.
bool execute_admission(KvTxn& kv, const AdmissionPlan& plan, AdmissionResult& result,
                       const ReserveAmounts& amounts = {});

}  // namespace llmgw
