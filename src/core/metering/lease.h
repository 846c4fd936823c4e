// Leases (a shared store; docs/metering.md#leases-redis), no nginx.
//
// A worker holds a share of a limited scope's headroom, per measure
// (requests; tokens and cost), in that scope's reserved counter of the
// measure: others see the share as reserved, so what the worker admits from
// it fits the limit whatever they do. Two uses:
//
// Admission from leases. When every check of a request's plan is covered by
// a current lease of the worker with room for it (LeaseTicket::local), the
// request is admitted without a store call: a request limit's lease gives
// up one request (consumed at once; the request's counts go with the
// accounting, behind), a token or cost limit's holds the request's need
// while it is in flight (its worst case in reserve mode; 1 in check mode,
// whose rule is "spent below the limit") and takes its real usage at
// settle. The remaining-allowance sums of such an admission are the sums
// the store last answered, less the worker's own lease, plus what the
// worker counted since (LeaseBook::local_used). A lease that runs below half
// its last grant asks the store for the next one in the background
// (refills); a refusal is never made from a lease: a request that does not
// fit goes to the store, whose answer is exact.
//
// Reservations in the store call (reserve mode, or a request that is not
// admitted from leases). Without leases every reserving request writes its
// worst case into its scopes' reserved counters at admission and takes it
// back at settle. When a worker is busy with a reservation (below) and the
// reservation's last known headroom (limit minus spent minus reserved, from
// the sums of an admission that read them) is at least kLeaseMinRequests of
// the request's size, the request asks the store for an extra grant beside
// its own reservation, at most an eighth of that headroom and
// kLeaseGrantRequests sizes (a size: 1 request; the worst case in reserve
// mode; the worker's average usage per request in check mode). The store
// adds the grant only when the request's checks pass with it too (the same
// check, exact); the worker then holds it as a lease on that reserved
// counter (scope, measure, slot). A token or cost part whose need fits in
// the lease's free part takes it from there (Hit): its check is made like
// the default mode (spent below the limit) and it reserves nothing.
//
// (Busy: other requests of it in flight, a lease still held, or a request
// taken less than kLeaseIdleMs before: a client sending one request after
// another is served from a lease too. One grant per lease is asked at a
// time.)
//
// Consumed usage (real tokens and cost at settle; a request at admission)
// stays in the lease, and the store's reserved counter over-states by it (a
// conservative error: others see less headroom, never more) until the
// worker gives it back in an accounting call (after the counts it
// stands for), once it reaches half the last grant. When a lease has
// nothing in flight and no request takes from it for kLeaseIdleMs, it is
// given back whole: an idle worker holds nothing (a worker between two
// bursts keeps it). A lease of an earlier slot is given back once nothing
// is in flight in it.
//
// So spent plus every need in flight never exceeds what checks admitted,
// as without leases; near the limit (headroom below kLeaseMinRequests sizes)
// no grant is asked and every request goes to the store, exactly as
// without leases. A lease lives in its slot's counter and lapses with it;
// it takes no new requests once its slot is no longer the current one. A
// worker forgets its leases after any store failure (what they hold then
// lapses, at most 1.25 slot TTLs; a worker that crashed, the same).
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

// Headroom, in sizes, before a grant is asked: below it every request asks
// the store, exact to the request (a limit of 256 requests or less never
// sees a lease; nor a budget of fewer than 256 requests' usage).
constexpr std::int64_t kLeaseMinRequests = 256;
constexpr std::int64_t kLeaseGrantRequests = 128;  // a grant's cap, in worst cases
constexpr std::int64_t kLeaseHeadroomShare = 8;    // a grant is at most headroom / 8
constexpr std::int64_t kLeaseIdleMs = 100;         // an idle lease goes back after this
// The slot TTL of leases in llm_gateway_budget_mode check (reserve mode
// uses its ttl=): what a worker that died leaves held lapses within 1.25 of it.
constexpr std::int64_t kCheckLeaseTtl = 60;        // seconds

// One worker's lease on one reserved counter.
struct Lease {
    std::string record;
    Measure measure = Measure::Tokens;
    std::int64_t slot = 0;
    std::int64_t granted = 0;    // added to the counter by this worker, not given back
    std::int64_t in_flight = 0;  // the worst cases of its requests not settled
    std::int64_t consumed = 0;   // settled real usage still inside granted
    std::int64_t batch = 0;      // the last grant (consumed is given back at half of it)
    bool forgotten = false;      // after a store failure: writes nothing more
    bool asking = false;         // a grant asked and not answered (one at a time)
    std::uint64_t limits = 0;    // the limits it was granted under (Reservation::limits)
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
    std::int64_t average = 0;     // tokens, cost: the real usage per request (moving average; 0 unknown)
    // The remaining-allowance sums of an admission from leases: per window,
    // the last sum the store answered less the worker's lease (-1 unknown),
    // and what the worker counted since (requests admitted; usage settled).
    std::int64_t seen[kWindowCount] = {-1, -1, -1, -1};
    std::int64_t since = 0;
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
    std::int64_t need = 0;           // Hit: what it holds in flight in the lease (a request: 0, consumed at once)
    std::int64_t head = 0;           // scratch of LeaseBook::answered; a local Hit: the entry's since before it
    std::shared_ptr<Lease> lease;    // Hit, Grant
    LeaseEntry* entry = nullptr;     // an amount above 0: its reserved counter's state
};

// A request's parts, one per reservation of its plan (AdmissionPlan::reserve
// order); an amount of 0 is Own (nothing reserved).
struct LeaseTicket {
    std::vector<LeasePart> parts;
    bool local = false;              // every part a Hit: admitted without a store call
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
    Measure measure = Measure::Tokens;
    std::int64_t slot = 0;
    std::int64_t amount = 0;
};

// A grant asked in the background for a lease running low (LeaseBook::refills).
struct Refill {
    std::size_t index = 0;           // its reservation in plan.reserve
    std::int64_t extra = 0;
    std::shared_ptr<Lease> lease;
};

// Where a book puts what goes back to the store: the reserved counters
// given back, and the leases whose records they view (kept until written).
struct LeaseReturns {
    std::vector<Release>& released;
    std::vector<std::shared_ptr<Lease>>& keep;
};

// A worker's leases (one book per worker and store).
class LeaseBook {
public:
    // The request's parts. Local (every part a Hit) when the plan is leased
    // and every reservation has a current lease with room for the request's
    // need: a request part's lease gives one up at once (and, past half its
    // last grant, what it consumed goes back into out), a token or cost
    // part's holds its need in flight. Otherwise a token or cost part is a
    // Hit when a current lease has room; any part is a Grant when the
    // headroom allows one, the worker is busy with that reservation (other
    // requests in flight, a lease held, or a request taken less than
    // kLeaseIdleMs before now_ms) and no grant of the lease is unanswered;
    // else Own. A lease of an earlier slot with nothing in flight goes back
    // into out. nullptr when the plan reserves nothing.
    std::shared_ptr<LeaseTicket> take(const AdmissionPlan& plan, const ReserveAmounts& amounts, std::int64_t now_ms,
                                      LeaseReturns out);
    // The admission's answer with its sums (used, one per check): admitted
    // joins Grant parts to their lease; rejected gives Hits back. Either way
    // the headroom of Own and Grant parts is learnt, and their sums less the
    // worker's lease (what a later local admission reports). used then
    // becomes what the remaining-allowance headers show: each sum less what
    // the worker's own lease held in it (the caller may still use that).
    // held: the part of each sum that reserved counters hold (the store's
    // reply; empty when not known): where they hold only leases (a request
    // limit; a token or cost limit in check mode) the headers leave all of
    // it out, since what others hold unused is not spent.
    void answered(LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts, bool admitted,
                  std::vector<std::int64_t>& used, const std::vector<std::int64_t>& held = {});
    // The admission failed (no answer): Hits go back, Grant parts' leases
    // are forgotten (a grant may have been added).
    void failed(LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts);
    // A local admission's sums, one per check of plan (AdmissionResult::used).
    std::vector<std::int64_t> local_used(const LeaseTicket& t, const AdmissionPlan& plan) const;
    // After a local admission: the leases of t below half their last grant
    // that may ask the next one now (each marked asking), appended to out.
    void refills(const LeaseTicket& t, const AdmissionPlan& plan, std::vector<Refill>& out);
    // A refill's answer: ok with the sums of the reservation's checks (in
    // plan order; the grant was added when each has sum + extra <= limit),
    // or not ok (no answer: the lease is forgotten). A grant to a lease that
    // is no longer its entry's goes back into out.
    void refilled(const Refill& f, const AdmissionPlan& plan, bool ok, const std::vector<std::int64_t>& used,
                  LeaseReturns out);
    // What the settle of a request gives back (appended to out): an Own
    // part's amount; a leased part's consumed usage once that reaches half
    // a grant; a lease of an earlier slot when it was its last request (a
    // current lease then waits idle, idle_waiting). real: the
    // request's real usage (tokens, cost), counted by the same call.
    void settle(const LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts,
                const ReserveAmounts& real, std::vector<Release>& out);
    // Whether a current lease may have gone idle since the last
    // give_back_idle: the worker then calls give_back_idle after
    // kLeaseIdleMs.
    bool idle_waiting() const { return idle_; }
    // The leases with nothing in flight that no request took from for
    // kLeaseIdleMs before now_ms, given back whole (appended to out; keep
    // holds them while the call that gives them back is written). Returns
    // whether other leases may still go idle (call again kLeaseIdleMs later).
    bool give_back_idle(std::int64_t now_ms, std::vector<Release>& out, std::vector<std::shared_ptr<Lease>>& keep);
    // A store failure: every lease is forgotten, every headroom unknown.
    void forget();
    // The leases held now (not forgotten, something granted).
    std::size_t held() const;

private:
    struct Pair {
        LeaseEntry e[3];   // by Measure: requests, tokens, cost
    };
    LeaseEntry& entry(const Reservation& r);
    std::unordered_map<std::string, Pair> entries_;   // by record; never erased
    bool idle_ = false;
};

// A request's need in a lease of reservation r (the lease must have that
// much free for a Hit): a request 1; tokens and cost their amount, at
// least 1 (check mode: spent below the limit).
std::int64_t lease_need(const Reservation& r, const ReserveAmounts& amounts);

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
