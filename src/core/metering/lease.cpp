// Reservation leases (see lease.h).
#include "core/metering/lease.h"

#include <algorithm>
#include <climits>

namespace llmgw {

namespace {

std::int64_t clamp64(__int128 v) {
    if (v > INT64_MAX) return INT64_MAX;
    if (v < INT64_MIN) return INT64_MIN;
    return static_cast<std::int64_t>(v);
}

std::int64_t times(std::int64_t w, std::int64_t n) { return w > INT64_MAX / n ? INT64_MAX : w * n; }

// A request's own reservation given back; a lease (or part of it) given back.
Release release_of(const Reservation& r, std::int64_t amount) {
    return Release{r.record, r.measure, r.slot, amount};
}
Release release_of(const Lease& l, std::int64_t amount) { return Release{l.record, l.measure, l.slot, amount}; }

// An Own part no longer in flight.
void own_done(LeaseEntry* e) {
    if (e != nullptr && e->own > 0) --e->own;
}

// What a lease of reservation r grants at most, in sizes (kLeaseGrantRequests
// of them): a request; the worst case in reserve mode; in check mode the
// worker's average usage per request.
std::int64_t grant_size(const Reservation& r, const ReserveAmounts& amounts, const LeaseEntry& e) {
    if (r.measure == Measure::Requests) return 1;
    return std::max<std::int64_t>({reserve_amount(amounts, r.measure), e.average, 1});
}

// Gives back what a lease consumed, once that reaches half its last grant.
// Returns whether something went back.
bool give_back_consumed(Lease& l, std::vector<Release>& out) {
    if (l.forgotten || l.consumed <= 0 || l.consumed < std::max<std::int64_t>(l.batch / 2, 1)) return false;
    const std::int64_t back = std::min(l.consumed, l.granted);
    if (back > 0) out.push_back(release_of(l, back));
    l.granted -= back;
    l.consumed -= back;
    if (l.consumed > l.granted) l.consumed = l.granted;   // check mode may spend past its lease
    return back > 0;
}

// A lease no request will take from again (its slot has passed), with
// nothing in flight: all of it goes back.
void retire(const std::shared_ptr<Lease>& lp, LeaseReturns out) {
    Lease& l = *lp;
    if (l.forgotten || l.in_flight > 0 || l.granted <= 0) return;
    out.released.push_back(release_of(l, l.granted));
    out.keep.push_back(lp);
    l.granted = l.consumed = 0;
}

}  // namespace

std::int64_t lease_need(const Reservation& r, const ReserveAmounts& amounts) {
    if (r.measure == Measure::Requests) return 1;
    return std::max<std::int64_t>(reserve_amount(amounts, r.measure), 1);
}

bool grant_fits(const Check& c, std::int64_t used, std::int64_t amount, std::int64_t extra) {
    const __int128 total = static_cast<__int128>(used < 0 ? 0 : used) + amount + extra;
    return total <= c.limit;
}

LeaseEntry& LeaseBook::entry(const Reservation& r) {
    auto it = entries_.find(r.record);
    if (it == entries_.end()) it = entries_.emplace(r.record, Pair{}).first;
    return it->second.e[static_cast<int>(r.measure)];
}

std::shared_ptr<LeaseTicket> LeaseBook::take(const AdmissionPlan& plan, const ReserveAmounts& amounts,
                                             std::int64_t now_ms, LeaseReturns out) {
    if (plan.reserve.empty()) return nullptr;
    auto t = std::make_shared<LeaseTicket>();
    t->parts.resize(plan.reserve.size());
    // Local when every reservation's current lease has room (a plan built
    // for leases: every check belongs to one of them).
    bool local = plan.leased;
    // A lease is current in its slot and under the limits it was granted
    // under (the users may have been reloaded); another goes back once
    // nothing is in flight in it.
    auto is_current = [&plan](const Lease* l, std::size_t j) {
        return l != nullptr && !l->forgotten && l->slot == plan.reserve[j].slot && l->limits == plan.reserve[j].limits;
    };
    for (std::size_t j = 0; j < plan.reserve.size(); ++j) {
        const Reservation& r = plan.reserve[j];
        LeaseEntry& e = entry(r);
        t->parts[j].entry = &e;
        const Lease* l = e.lease.get();
        const bool current = is_current(l, j);
        if (!current || l->free() < lease_need(r, amounts)) local = false;
        if (l != nullptr && !current) retire(e.lease, out);
    }
    t->local = local;
    for (std::size_t j = 0; j < plan.reserve.size(); ++j) {
        const Reservation& r = plan.reserve[j];
        LeasePart& p = t->parts[j];
        LeaseEntry& e = *p.entry;
        Lease* l = e.lease.get();
        const bool current = is_current(l, j);
        const std::int64_t need = lease_need(r, amounts);
        // A grant is asked only while the worker is busy with this
        // reservation: alone, a request's lease would only go back.
        const bool busy = e.own > 0 || (current && (l->in_flight > 0 || l->granted > 0)) ||
                          now_ms - e.last_ms < kLeaseIdleMs;
        e.last_ms = now_ms;
        if (local || (r.measure != Measure::Requests && current && l->free() >= need)) {
            p.use = LeaseUse::Hit;
            p.lease = e.lease;
            if (r.measure == Measure::Requests) {
                // One request, consumed now (local only: its counts go with
                // the accounting).
                p.head = e.since;
                ++e.since;
                ++l->consumed;
                if (give_back_consumed(*l, out.released)) out.keep.push_back(e.lease);
            } else {
                p.need = need;
                l->in_flight += need;
            }
            continue;
        }
        const std::int64_t size = grant_size(r, amounts, e);
        const std::int64_t extra = std::min(e.headroom / kLeaseHeadroomShare, times(size, kLeaseGrantRequests));
        if (busy && !(current && l->asking) && e.headroom >= 0 && e.headroom / kLeaseMinRequests >= size &&
            extra >= size) {
            if (!current) {
                e.lease = std::make_shared<Lease>(Lease{r.record, r.measure, r.slot});
                e.lease->limits = r.limits;
            }
            e.lease->asking = true;
            p.use = LeaseUse::Grant;
            p.extra = extra;
            p.lease = e.lease;
        } else {
            ++e.own;
        }
    }
    return t;
}

void LeaseBook::answered(LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts, bool admitted,
                         std::vector<std::int64_t>& used, const std::vector<std::int64_t>& held) {
    if (t == nullptr) return;
    const std::size_t n = std::min(plan.reserve.size(), t->parts.size());
    // Hits: given back when refused. The others learn from the sums, which
    // include every reservation: start their headroom and grant test.
    bool learn = false;
    for (std::size_t j = 0; j < n; ++j) {
        LeasePart& p = t->parts[j];
        if (p.entry == nullptr) continue;
        if (p.use == LeaseUse::Hit) {
            if (!admitted) p.lease->in_flight -= p.need;
            continue;
        }
        if (!admitted && p.use == LeaseUse::Own) own_done(p.entry);
        p.head = INT64_MAX;
        p.granted = true;
        learn = true;
    }
    if (!learn) return;
    const bool sums = used.size() == plan.checks.size();
    // What the worker's own current leases held when the store summed them
    // (taken off the sums the answer shows, once the grant test is done).
    std::vector<std::int64_t> owns(sums ? plan.checks.size() : 0, 0);
    for (std::size_t i = 0; sums && i < plan.checks.size(); ++i) {
        const Check& c = plan.checks[i];
        if (!c.reserves || c.reserve_index < 0 || static_cast<std::size_t>(c.reserve_index) >= n) continue;
        LeasePart& p = t->parts[static_cast<std::size_t>(c.reserve_index)];
        if (p.entry == nullptr || p.use == LeaseUse::Hit) continue;
        const std::int64_t add = check_add(c, amounts);
        const std::int64_t u = used[i] < 0 ? 0 : used[i];
        p.head = std::min(p.head, clamp64(static_cast<__int128>(c.limit) - u - add));
        if (p.use == LeaseUse::Grant && !grant_fits(c, used[i], add, p.extra)) p.granted = false;
        // The sum less what the worker's lease holds there (its consumed
        // part is counted in both: its counts went ahead of it), with this
        // request when it counts in the store at once.
        const Lease* l = p.entry->lease.get();
        std::int64_t own =
            l != nullptr && !l->forgotten && l->slot == plan.reserve[c.reserve_index].slot ? l->granted : 0;
        // Where the reserved counters hold only leases, none of them is spent.
        const bool leases_only = c.measure == Measure::Requests || !plan.reserves_worst_cases;
        if (leases_only && held.size() == plan.checks.size()) own = held[i];
        owns[i] = own;
        if (admitted && plan.leased) {
            const std::int64_t self = c.measure == Measure::Requests ? 1 : 0;
            p.entry->seen[static_cast<int>(c.window)] =
                std::max<std::int64_t>(clamp64(static_cast<__int128>(u) + self - own), 0);
            p.entry->since = 0;
        }
    }
    for (std::size_t j = 0; j < n; ++j) {
        LeasePart& p = t->parts[j];
        if (p.entry == nullptr || p.use == LeaseUse::Hit) continue;
        const std::int64_t w = reserve_amount(amounts, plan.reserve[j].measure);
        p.granted = p.granted && sums && p.use == LeaseUse::Grant;
        if (p.use == LeaseUse::Grant) p.lease->asking = false;
        if (admitted && p.use == LeaseUse::Grant) {
            Lease& l = *p.lease;
            l.granted += w + (p.granted ? p.extra : 0);
            l.in_flight += w;
            if (p.granted) {
                l.batch = p.extra;
                p.head = clamp64(static_cast<__int128>(p.head) - p.extra);
            }
        }
        if (sums) p.entry->headroom = std::max<std::int64_t>(p.head, -1);
    }
    for (std::size_t i = 0; i < owns.size(); ++i) used[i] = std::max<std::int64_t>(used[i] - owns[i], 0);
}

void LeaseBook::failed(LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts) {
    if (t == nullptr) return;
    for (std::size_t j = 0; j < plan.reserve.size() && j < t->parts.size(); ++j) {
        LeasePart& p = t->parts[j];
        if (p.entry == nullptr) continue;
        if (p.use == LeaseUse::Own) {
            own_done(p.entry);
        } else if (p.use == LeaseUse::Hit) {
            p.lease->in_flight -= p.need;
        } else {
            p.lease->asking = false;
            p.lease->forgotten = true;   // a grant may have been added
        }
    }
    (void)amounts;
}

std::vector<std::int64_t> LeaseBook::local_used(const LeaseTicket& t, const AdmissionPlan& plan) const {
    std::vector<std::int64_t> used(plan.checks.size(), 0);
    for (std::size_t i = 0; i < plan.checks.size(); ++i) {
        const Check& c = plan.checks[i];
        const LeasePart* p = c.reserve_index >= 0 ? t.part(static_cast<std::size_t>(c.reserve_index)) : nullptr;
        if (p == nullptr || p->entry == nullptr) continue;
        const std::int64_t seen = p->entry->seen[static_cast<int>(c.window)];
        const std::int64_t since = c.measure == Measure::Requests ? p->head : p->entry->since;
        used[i] = clamp64(static_cast<__int128>(seen < 0 ? 0 : seen) + (since < 0 ? 0 : since));
    }
    return used;
}

void LeaseBook::refills(const LeaseTicket& t, const AdmissionPlan& plan, std::vector<Refill>& out) {
    for (std::size_t j = 0; j < plan.reserve.size() && j < t.parts.size(); ++j) {
        const LeasePart& p = t.parts[j];
        if (p.use != LeaseUse::Hit || !p.lease || p.entry == nullptr || p.entry->lease != p.lease) continue;
        Lease& l = *p.lease;
        if (l.forgotten || l.asking || l.free() >= l.batch / 2) continue;
        const LeaseEntry& e = *p.entry;
        const std::int64_t size = grant_size(plan.reserve[j], ReserveAmounts{}, e);
        const std::int64_t need = std::max(size, p.need);
        const std::int64_t extra = std::min(e.headroom / kLeaseHeadroomShare, times(need, kLeaseGrantRequests));
        if (e.headroom < 0 || e.headroom / kLeaseMinRequests < need || extra < need) continue;
        l.asking = true;
        out.push_back(Refill{j, extra, p.lease});
    }
}

void LeaseBook::refilled(const Refill& f, const AdmissionPlan& plan, bool ok, const std::vector<std::int64_t>& used,
                         LeaseReturns out) {
    Lease& l = *f.lease;
    l.asking = false;
    if (!ok) {
        l.forgotten = true;   // the grant may have been added
        return;
    }
    if (l.forgotten) return;   // what it held lapses
    bool fits = true;
    std::int64_t head = INT64_MAX;
    std::size_t k = 0;
    for (const Check& c : plan.checks) {
        if (c.reserve_index != static_cast<int>(f.index)) continue;
        if (k >= used.size()) return;
        const std::int64_t u = used[k++];
        fits = fits && grant_fits(c, u, 0, f.extra);
        head = std::min(head, clamp64(static_cast<__int128>(c.limit) - (u < 0 ? 0 : u)));
    }
    if (fits) {
        l.granted += f.extra;
        l.batch = f.extra;
        head = clamp64(static_cast<__int128>(head) - f.extra);
    }
    const Reservation& r = plan.reserve[f.index];
    LeaseEntry& e = entry(r);
    if (e.lease == f.lease) {
        e.headroom = std::max<std::int64_t>(head, -1);
    } else if (fits) {
        retire(f.lease, out);   // replaced meanwhile: nothing takes from it
    }
}

void LeaseBook::settle(const LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts,
                       const ReserveAmounts& real, std::vector<Release>& out) {
    for (std::size_t j = 0; j < plan.reserve.size(); ++j) {
        const Reservation& r = plan.reserve[j];
        const std::int64_t w = reserve_amount(amounts, r.measure);
        const std::int64_t spent = reserve_amount(real, r.measure);
        const LeasePart* p = t != nullptr ? t->part(j) : nullptr;
        if (p != nullptr && p->entry != nullptr && r.measure != Measure::Requests) {
            LeaseEntry& e = *p->entry;
            e.since = clamp64(static_cast<__int128>(e.since) + spent);
            e.average = e.average == 0 ? spent : clamp64((static_cast<__int128>(e.average) * 7 + spent) / 8);
        }
        if (p == nullptr || p->use == LeaseUse::Own) {
            if (w > 0) out.push_back(release_of(r, w));
            if (p != nullptr) own_done(p->entry);
            continue;
        }
        Lease& l = *p->lease;
        l.in_flight -= p->use == LeaseUse::Hit ? p->need : w;
        l.consumed = clamp64(static_cast<__int128>(l.consumed) + spent);
        if (l.forgotten) continue;
        if (l.in_flight <= 0) {
            l.in_flight = 0;
            if (p->entry != nullptr && p->entry->lease.get() == &l && l.granted > 0) {
                // The current lease's last request: it goes back when the
                // worker has stayed idle (give_back_idle), unless a request
                // takes from it first.
                idle_ = true;
                give_back_consumed(l, out);
            } else {
                // A lease of an earlier slot takes no new request: all of it
                // goes back now.
                if (l.granted > 0) out.push_back(release_of(l, l.granted));
                l.granted = l.consumed = 0;
            }
        } else {
            give_back_consumed(l, out);
        }
    }
}

bool LeaseBook::give_back_idle(std::int64_t now_ms, std::vector<Release>& out,
                               std::vector<std::shared_ptr<Lease>>& keep) {
    idle_ = false;
    bool waiting = false;
    for (auto& kv : entries_) {
        for (LeaseEntry& e : kv.second.e) {
            Lease* l = e.lease.get();
            if (l == nullptr || l->forgotten || l->in_flight > 0 || l->granted <= 0) continue;
            if (now_ms - e.last_ms < kLeaseIdleMs) {
                waiting = true;   // taken from lately: its turn comes later
                continue;
            }
            out.push_back(release_of(*l, l->granted));
            keep.push_back(e.lease);
            l->granted = l->consumed = 0;
        }
    }
    idle_ = waiting;
    return waiting;
}

void LeaseBook::forget() {
    idle_ = false;
    for (auto& kv : entries_) {
        for (LeaseEntry& e : kv.second.e) {
            if (e.lease) e.lease->forgotten = true;
            e = LeaseEntry();
        }
    }
}

std::size_t LeaseBook::held() const {
    std::size_t n = 0;
    for (const auto& kv : entries_) {
        for (const LeaseEntry& e : kv.second.e) n += e.lease && !e.lease->forgotten && e.lease->granted > 0 ? 1 : 0;
    }
    return n;
}

std::vector<Release> admission_releases(const AdmissionPlan& plan, const ReserveAmounts& amounts,
                                        const LeaseTicket* t) {
    std::vector<Release> out;
    for_each_admission_write(plan, amounts, t, [&out](const Reservation& r, std::size_t, std::int64_t w) {
        out.push_back(release_of(r, w));
    });
    return out;
}

}  // namespace llmgw
