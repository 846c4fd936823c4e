// Reservation leases (llm_gateway_budget_mode reserve on a shared store;
// docs/metering.md#leases-redis), no nginx.
//
// Without leases every reserving request writes its worst case into its
// scopes' reserved counters at admission and takes it back at settle: two
// store writes per scope and measure. With a lot of headroom left that is
// work the limit does not need, so a worker reserves in batches: when it
// is busy with a reservation (below) and the reservation's last known
// headroom (limit minus spent minus reserved, from the sums of an
// admission that read them) is at least kLeaseMinRequests of the request's
// worst case, the request asks the store for an extra grant beside its own
// reservation, at most an eighth of that headroom and
// kLeaseGrantRequests worst cases. The store adds the grant only when the
// request's checks pass with it too (the same check, exact); the worker
// then holds it as a lease on that reserved counter (scope, measure, slot).
//
// (Busy: other requests of it in flight, a lease still held, or a request
// taken less than kLeaseIdleMs before: a client sending one request after
// another is served from a lease too. One grant per lease is asked at a
// time.)
//
// A later request of the worker whose worst case fits in the lease's free
// part takes it from there: its admission checks that scope and measure
// like the default mode (spent below the limit) and reserves nothing in the
// store. At settle the request's real usage is counted as always; its
// worst case goes back to the lease, and its real usage stays in the lease
// as consumed: the store's reserved counter then over-states by it (a
// conservative error: others see less headroom, never more) until the
// worker gives consumed back in an accounting call, once it reaches half
// the last grant. When a lease's last request settles and no other takes
// from it for kLeaseIdleMs, the whole lease is given back in a call of its
// own: an idle worker holds nothing (a worker between two bursts keeps it).
//
// So spent plus every worst case in flight never exceeds what checks
// admitted, as without leases; near the limit (headroom below
// kLeaseMinRequests worst cases) no grant is asked and every request
// reserves for itself, exactly as without leases. A lease lives in its
// slot's counter and lapses with it; it takes no new requests once its slot
// is no longer the current one. A worker forgets its leases after any store
// failure (what they hold then lapses, at most 1.25 reservation TTLs).
#pragma once
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/metering/limits.h"

namespace llmgw {

constexpr std::int64_t kLeaseMinRequests = 64;     // headroom, in worst cases, before a grant is asked
constexpr std::int64_t kLeaseGrantRequests = 128;  // a grant's cap, in worst cases
constexpr std::int64_t kLeaseHeadroomShare = 8;    // a grant is at most headroom / 8
constexpr std::int64_t kLeaseIdleMs = 100;         // an idle lease goes back after this

// One worker's lease on one reserved counter.
struct Lease {
    std::string record;
    bool tokens = true;
    std::int64_t slot = 0;
    std::int64_t granted = 0;    // added to the counter by this worker, not given back
    std::int64_t in_flight = 0;  // the worst cases of its requests not settled
    std::int64_t consumed = 0;   // settled real usage still inside granted
    std::int64_t batch = 0;      // the last grant (consumed is given back at half of it)
    bool forgotten = false;      // after a store failure: writes nothing more
    bool asking = false;         // a grant asked and not answered (one at a time)
    std::int64_t free() const { return granted - in_flight - consumed; }
};

// A worker's state of one reserved counter (a scope and measure): its
// current lease, the last headroom learnt, the requests in flight that
// reserve for themselves. Kept for the worker's life (one per scope and
// measure seen), so a ticket may point at it.
struct LeaseEntry {
    std::shared_ptr<Lease> lease;
    std::int64_t headroom = -1;   // unknown
    std::int64_t own = 0;         // requests in flight with an Own part
    std::int64_t last_ms = INT64_MIN / 2;   // the last request taken
};

// How a request holds one of its reservations.
enum class LeaseUse : unsigned char {
    Own,    // its own reservation in the store (as without leases)
    Hit,    // taken from the worker's lease: nothing reserved in the store
    Grant,  // its own reservation plus an extra grant asked for the lease
};

struct LeasePart {
    LeaseUse use = LeaseUse::Own;
    std::int64_t extra = 0;          // Grant: the grant asked
    bool granted = false;            // Grant: the store added it
    std::int64_t head = 0;           // scratch of LeaseBook::answered
    std::shared_ptr<Lease> lease;    // Hit, Grant
    LeaseEntry* entry = nullptr;     // an amount above 0: its reserved counter's state
};

// A request's parts, one per reservation of its plan (AdmissionPlan::reserve
// order); an amount of 0 is Own (nothing reserved).
struct LeaseTicket {
    std::vector<LeasePart> parts;
    const LeasePart* part(std::size_t i) const { return i < parts.size() ? &parts[i] : nullptr; }
    LeaseUse use(std::size_t i) const { return i < parts.size() ? parts[i].use : LeaseUse::Own; }
    std::int64_t extra(std::size_t i) const { return use(i) == LeaseUse::Grant ? parts[i].extra : 0; }
};

// Whether check c (a reserving one) admits the request with its grant too:
// used + amount + extra <= limit, exactly as the admission script decides.
bool grant_fits(const Check& c, std::int64_t used, std::int64_t amount, std::int64_t extra);

// A reserved counter given back (an amount above 0), in the accounting call.
struct Release {
    std::string_view record;   // the plan's or the lease's, which outlive it
    bool tokens = true;
    std::int64_t slot = 0;
    std::int64_t amount = 0;
};

// A worker's leases (one book per worker and store).
class LeaseBook {
public:
    // The request's parts: Hit when a current lease has room (taken now),
    // Grant when the headroom allows one, the worker is busy with that
    // reservation (other requests in flight, a lease held, or a request
    // taken less than kLeaseIdleMs before now_ms) and no grant of the lease
    // is unanswered, else Own. nullptr when nothing is reserved.
    std::shared_ptr<LeaseTicket> take(const AdmissionPlan& plan, const ReserveAmounts& amounts, std::int64_t now_ms);
    // The admission's answer with its sums (used, one per check): admitted
    // joins Grant parts to their lease; rejected gives Hits back. Either way
    // the headroom of Own and Grant parts is learnt.
    void answered(LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts, bool admitted,
                  const std::vector<std::int64_t>& used);
    // The admission failed (no answer): Hits go back, Grant parts' leases
    // are forgotten (a grant may have been added).
    void failed(LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts);
    // What the settle of a request gives back (appended to out): an Own
    // part's amount; a leased part's consumed usage once that reaches half
    // a grant; a lease of an earlier slot when it was its last request (a
    // current lease then waits idle, idle_waiting). real: the
    // request's real usage (tokens, cost), counted by the same call.
    void settle(const LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts,
                const ReserveAmounts& real, std::vector<Release>& out);
    // Whether a current lease went idle (its last request settled) since
    // the last give_back_idle: the worker then calls give_back_idle after
    // kLeaseIdleMs.
    bool idle_waiting() const { return idle_; }
    // The current leases still idle, given back whole (appended to out;
    // keep holds them while the call that gives them back is written).
    void give_back_idle(std::vector<Release>& out, std::vector<std::shared_ptr<Lease>>& keep);
    // A store failure: every lease is forgotten, every headroom unknown.
    void forget();
    // The leases held now (not forgotten, something granted).
    std::size_t held() const;

private:
    struct Pair {
        LeaseEntry e[2];   // tokens, cost
    };
    LeaseEntry& entry(const Reservation& r);
    std::unordered_map<std::string, Pair> entries_;   // by record; never erased
    bool idle_ = false;
};

// What an admission itself writes into the store's reserved counters (so
// what its cancel takes back): every reservation with an amount, but Hits.
// Calls f(reservation, its index in plan.reserve, amount) for each.
template <typename F>
void for_each_admission_write(const AdmissionPlan& plan, const ReserveAmounts& amounts, const LeaseTicket* t, F f) {
    for (std::size_t j = 0; j < plan.reserve.size(); ++j) {
        const std::int64_t w = reserve_amount(amounts, plan.reserve[j].measure);
        if (w > 0 && (t == nullptr || t->use(j) != LeaseUse::Hit)) f(plan.reserve[j], j, w);
    }
}
// The same as releases.
std::vector<Release> admission_releases(const AdmissionPlan& plan, const ReserveAmounts& amounts,
                                        const LeaseTicket* t = nullptr);

}  // namespace llmgw
