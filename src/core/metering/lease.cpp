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
    return Release{r.record, r.measure == Measure::Tokens, r.slot, amount};
}
Release release_of(const Lease& l, std::int64_t amount) { return Release{l.record, l.tokens, l.slot, amount}; }

// An Own part no longer in flight.
void own_done(LeaseEntry* e) {
    if (e != nullptr && e->own > 0) --e->own;
}

}  // namespace

bool grant_fits(const Check& c, std::int64_t used, std::int64_t amount, std::int64_t extra) {
    const __int128 total = static_cast<__int128>(used < 0 ? 0 : used) + amount + extra;
    return total <= c.limit;
}

LeaseEntry& LeaseBook::entry(const Reservation& r) {
    auto it = entries_.find(r.record);
    if (it == entries_.end()) it = entries_.emplace(r.record, Pair{}).first;
    return it->second.e[r.measure == Measure::Tokens ? 0 : 1];
}

std::shared_ptr<LeaseTicket> LeaseBook::take(const AdmissionPlan& plan, const ReserveAmounts& amounts,
                                             std::int64_t now_ms) {
    std::shared_ptr<LeaseTicket> t;
    for (std::size_t j = 0; j < plan.reserve.size(); ++j) {
        const Reservation& r = plan.reserve[j];
        const std::int64_t w = reserve_amount(amounts, r.measure);
        if (w <= 0) continue;
        if (!t) {
            t = std::make_shared<LeaseTicket>();
            t->parts.resize(plan.reserve.size());
        }
        LeaseEntry& e = entry(r);
        LeasePart& p = t->parts[j];
        p.entry = &e;
        Lease* l = e.lease.get();
        const bool current = l != nullptr && !l->forgotten && l->slot == r.slot;
        // A grant is asked only while the worker is busy with this
        // reservation: alone, a request's lease would only go back.
        const bool busy = e.own > 0 || (current && (l->in_flight > 0 || l->granted > 0)) ||
                          now_ms - e.last_ms < kLeaseIdleMs;
        e.last_ms = now_ms;
        const std::int64_t extra = std::min(e.headroom / kLeaseHeadroomShare, times(w, kLeaseGrantRequests));
        if (current && l->free() >= w) {
            l->in_flight += w;
            p.use = LeaseUse::Hit;
            p.lease = e.lease;
        } else if (busy && !(current && l->asking) && e.headroom >= 0 && e.headroom / kLeaseMinRequests >= w &&
                   extra >= w) {
            if (!current) e.lease = std::make_shared<Lease>(Lease{r.record, r.measure == Measure::Tokens, r.slot});
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
                         const std::vector<std::int64_t>& used) {
    if (t == nullptr) return;
    const std::size_t n = std::min(plan.reserve.size(), t->parts.size());
    // Hits: given back when refused. The others learn from the sums, which
    // include every reservation: start their headroom and grant test.
    bool learn = false;
    for (std::size_t j = 0; j < n; ++j) {
        LeasePart& p = t->parts[j];
        if (p.entry == nullptr) continue;
        const std::int64_t w = reserve_amount(amounts, plan.reserve[j].measure);
        if (p.use == LeaseUse::Hit) {
            if (!admitted) p.lease->in_flight -= w;
            continue;
        }
        if (!admitted && p.use == LeaseUse::Own) own_done(p.entry);
        p.head = INT64_MAX;
        p.granted = true;
        learn = true;
    }
    if (!learn) return;
    const bool sums = used.size() == plan.checks.size();
    for (std::size_t i = 0; sums && i < plan.checks.size(); ++i) {
        const Check& c = plan.checks[i];
        if (!c.reserves || c.reserve_index < 0 || static_cast<std::size_t>(c.reserve_index) >= n) continue;
        LeasePart& p = t->parts[static_cast<std::size_t>(c.reserve_index)];
        if (p.entry == nullptr || p.use == LeaseUse::Hit) continue;
        const std::int64_t w = reserve_amount(amounts, c.measure);
        p.head = std::min(p.head, clamp64(static_cast<__int128>(c.limit) - (used[i] < 0 ? 0 : used[i]) - w));
        if (p.use == LeaseUse::Grant && !grant_fits(c, used[i], w, p.extra)) p.granted = false;
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
}

void LeaseBook::failed(LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts) {
    if (t == nullptr) return;
    for (std::size_t j = 0; j < plan.reserve.size() && j < t->parts.size(); ++j) {
        const std::int64_t w = reserve_amount(amounts, plan.reserve[j].measure);
        LeasePart& p = t->parts[j];
        if (w <= 0 || p.entry == nullptr) continue;
        if (p.use == LeaseUse::Own) {
            own_done(p.entry);
        } else if (p.use == LeaseUse::Hit) {
            p.lease->in_flight -= w;
        } else {
            p.lease->asking = false;
            p.lease->forgotten = true;   // a grant may have been added
        }
    }
}

void LeaseBook::settle(const LeaseTicket* t, const AdmissionPlan& plan, const ReserveAmounts& amounts,
                       const ReserveAmounts& real, std::vector<Release>& out) {
    for (std::size_t j = 0; j < plan.reserve.size(); ++j) {
        const Reservation& r = plan.reserve[j];
        const std::int64_t w = reserve_amount(amounts, r.measure);
        if (w <= 0) continue;
        const LeasePart* p = t != nullptr ? t->part(j) : nullptr;
        if (p == nullptr || p->use == LeaseUse::Own) {
            out.push_back(release_of(r, w));
            if (p != nullptr) own_done(p->entry);
            continue;
        }
        Lease& l = *p->lease;
        l.in_flight -= w;
        l.consumed = clamp64(static_cast<__int128>(l.consumed) + reserve_amount(real, r.measure));
        if (l.forgotten) continue;
        if (l.in_flight <= 0) {
            l.in_flight = 0;
            if (p->entry != nullptr && p->entry->lease.get() == &l && l.granted > 0) {
                // The current lease's last request: it goes back when the
                // worker has stayed idle (give_back_idle), unless a request
                // takes from it first.
                idle_ = true;
            } else {
                // A lease of an earlier slot takes no new request: all of it
                // goes back now.
                if (l.granted > 0) out.push_back(release_of(l, l.granted));
                l.granted = l.consumed = 0;
            }
        } else if (l.consumed > 0 && l.consumed >= std::max<std::int64_t>(l.batch / 2, 1)) {
            const std::int64_t back = std::min(l.consumed, l.granted);
            if (back > 0) out.push_back(release_of(l, back));
            l.granted -= back;
            l.consumed -= back;
        }
    }
}

void LeaseBook::give_back_idle(std::vector<Release>& out, std::vector<std::shared_ptr<Lease>>& keep) {
    idle_ = false;
    for (auto& kv : entries_) {
        for (LeaseEntry& e : kv.second.e) {
            Lease* l = e.lease.get();
            if (l == nullptr || l->forgotten || l->in_flight > 0 || l->granted <= 0) continue;
            out.push_back(release_of(*l, l->granted));
            keep.push_back(e.lease);
            l->granted = l->consumed = 0;
        }
    }
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
