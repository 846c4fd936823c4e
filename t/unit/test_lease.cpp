// Reservation leases (core/metering/lease.h): when grants are asked, what
// a Hit writes, what settles give back, slots, failures, and a model store
// with two workers that never admits past the limit and ends with nothing
// reserved and spent equal to the real usage.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/metering/lease.h"
#include "core/metering/reservation.h"

using namespace llmgw;

namespace {

constexpr std::time_t kNow = 1795268730;  // 2026-11-21T13:45:30Z

AdmissionPlan plan_with(std::int64_t tokens_per_day, std::time_t now = kNow) {
    static Limits user;   // the plan keeps no pointer to it
    user = Limits();
    user.tokens_per_day = tokens_per_day;
    return build_admission_plan({{"user", "alice", &user}}, now, false, 600);
}

// A model of the store's admission and accounting scripts for plans of one
// token check: spent, and reserved counters by slot.
struct ModelStore {
    std::int64_t spent = 0;
    std::map<std::int64_t, std::int64_t> reserved;   // by slot
    std::int64_t reserved_total() const {
        std::int64_t t = 0;
        for (const auto& kv : reserved) t += kv.second;
        return t;
    }

    // The admission of one request as the script runs it; fills used.
    bool admit(const AdmissionPlan& p, const ReserveAmounts& a, const LeaseTicket* t, std::vector<std::int64_t>& used) {
        const Check& c = p.checks.at(0);
        const bool hit = t != nullptr && t->use(0) == LeaseUse::Hit;
        const std::int64_t sum = spent + (hit ? 0 : reserved_total());
        used = {sum};
        const std::int64_t w = a.tokens;
        const bool ok = hit ? sum < c.limit : sum + w <= c.limit;
        if (!ok) return false;
        if (!hit) {
            std::int64_t delta = w;
            const std::int64_t extra = t != nullptr ? t->extra(0) : 0;
            if (extra > 0 && sum + w + extra <= c.limit) delta += extra;
            reserved[p.reserve[0].slot] += delta;
        }
        return true;
    }
    void account(std::int64_t real, const std::vector<Release>& rel) {
        spent += real;
        for (const Release& r : rel) {
            auto it = reserved.find(r.slot);
            if (it == reserved.end()) continue;
            it->second -= r.amount;
            EXPECT_GE(it->second, 0) << "a release below 0";
        }
    }
};

struct Req {
    std::shared_ptr<LeaseTicket> t;
    ReserveAmounts a;
    bool admitted = false;
};

// The worker's clock: a second between requests unless a test says when.
std::int64_t clock_ms = 0;
std::int64_t later() { return clock_ms += 1000; }

Req admit(LeaseBook& book, ModelStore& s, const AdmissionPlan& p, std::int64_t w, std::int64_t now = -1) {
    Req r;
    r.a = ReserveAmounts{w, 0};
    std::vector<Release> rel;
    std::vector<std::shared_ptr<Lease>> keep;
    r.t = book.take(p, r.a, now >= 0 ? now : later(), LeaseReturns{rel, keep});
    s.account(0, rel);
    std::vector<std::int64_t> used;
    r.admitted = s.admit(p, r.a, r.t.get(), used);
    book.answered(r.t.get(), p, r.a, r.admitted, used);
    return r;
}

std::vector<Release> settle(LeaseBook& book, ModelStore& s, const AdmissionPlan& p, const Req& r, std::int64_t real) {
    std::vector<Release> rel;
    book.settle(r.t.get(), p, r.a, ReserveAmounts{real, 0}, rel);
    s.account(real, rel);
    return rel;
}

// The worker's idle timer: what it gives back, applied to the store.
// now: the timer's time (default: a second after the last request).
std::vector<Release> idle(LeaseBook& book, ModelStore& s, std::int64_t now = -1) {
    std::vector<Release> rel;
    std::vector<std::shared_ptr<Lease>> keep;
    book.give_back_idle(now >= 0 ? now : later(), rel, keep);
    s.account(0, rel);
    return rel;
}

// A take whose returns are dropped (tests that do not look at them).
std::shared_ptr<LeaseTicket> take(LeaseBook& book, const AdmissionPlan& p, const ReserveAmounts& w) {
    std::vector<Release> rel;
    std::vector<std::shared_ptr<Lease>> keep;
    return book.take(p, w, later(), LeaseReturns{rel, keep});
}

}  // namespace

TEST(Lease, GrantFitsExactlyAsTheScriptDecides) {
    Check c;
    c.limit = 1000;
    EXPECT_TRUE(grant_fits(c, 600, 100, 300));
    EXPECT_FALSE(grant_fits(c, 601, 100, 300));
    EXPECT_TRUE(grant_fits(c, -50, 700, 300));   // a negative sum counts as 0, as replied
    c.limit = INT64_MAX;
    EXPECT_FALSE(grant_fits(c, INT64_MAX, INT64_MAX, INT64_MAX));   // no overflow
}

TEST(Lease, AloneARequestReservesForItself) {
    const AdmissionPlan p = plan_with(1000000);
    LeaseBook book;
    ModelStore s;
    for (int i = 0; i < 5; ++i) {
        const Req r = admit(book, s, p, 1000);
        ASSERT_TRUE(r.admitted);
        EXPECT_EQ(r.t->use(0), LeaseUse::Own) << "no lease without another request in flight";
        EXPECT_EQ(s.reserved_total(), 1000);
        const std::vector<Release> rel = settle(book, s, p, r, 40);
        ASSERT_EQ(rel.size(), 1u);
        EXPECT_EQ(rel[0].amount, 1000);
        EXPECT_EQ(s.reserved_total(), 0);
    }
    EXPECT_EQ(s.spent, 200);
}

TEST(Lease, ConcurrentRequestsShareAGrantAndGiveItBackWhenIdle) {
    const AdmissionPlan p = plan_with(100000000);
    LeaseBook book;
    ModelStore s;
    const Req first = admit(book, s, p, 1000);   // Own: the headroom is not known yet
    ASSERT_EQ(first.t->use(0), LeaseUse::Own);
    const Req second = admit(book, s, p, 1000);  // another in flight: asks a grant
    ASSERT_NE(second.t, nullptr);
    ASSERT_EQ(second.t->use(0), LeaseUse::Grant);
    EXPECT_EQ(second.t->parts[0].extra, 1000 * kLeaseGrantRequests);
    EXPECT_TRUE(second.t->parts[0].granted);
    EXPECT_EQ(s.reserved_total(), 2000 + 1000 * kLeaseGrantRequests);
    // The next ones are taken from the lease: nothing written in the store.
    std::vector<Req> hits;
    for (int i = 0; i < 20; ++i) {
        hits.push_back(admit(book, s, p, 1000));
        ASSERT_EQ(hits.back().t->use(0), LeaseUse::Hit);
        EXPECT_TRUE(admission_releases(p, hits.back().a, hits.back().t.get()).empty());
    }
    EXPECT_EQ(s.reserved_total(), 2000 + 1000 * kLeaseGrantRequests);
    // Settles of a lease's requests write nothing while others are in flight.
    for (const Req& h : hits) EXPECT_TRUE(settle(book, s, p, h, 10).empty());
    EXPECT_EQ(settle(book, s, p, first, 10).size(), 1u);   // its own reservation
    // After the lease's last request it waits idle; a request that comes
    // meanwhile takes from it.
    EXPECT_TRUE(settle(book, s, p, second, 10).empty());
    EXPECT_TRUE(book.idle_waiting());
    const Req again = admit(book, s, p, 1000);
    EXPECT_EQ(again.t->use(0), LeaseUse::Hit);
    EXPECT_TRUE(idle(book, s).empty()) << "not idle: a request holds it";
    EXPECT_TRUE(settle(book, s, p, again, 10).empty());
    // Idle when the timer fires: all of it goes back.
    const std::vector<Release> last = idle(book, s);
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(last[0].amount, 1000 + 1000 * kLeaseGrantRequests);
    EXPECT_FALSE(book.idle_waiting());
    EXPECT_EQ(s.reserved_total(), 0);
    EXPECT_EQ(s.spent, 230);
}

TEST(Lease, OneGrantAtATime) {
    const AdmissionPlan p = plan_with(100000000);
    LeaseBook book;
    ModelStore s;
    const Req first = admit(book, s, p, 1000);
    const ReserveAmounts w{1000, 0};
    // Two requests taken before the store answers the first grant: the
    // second reserves for itself.
    std::shared_ptr<LeaseTicket> g = take(book, p, w);
    std::shared_ptr<LeaseTicket> o = take(book, p, w);
    ASSERT_EQ(g->use(0), LeaseUse::Grant);
    EXPECT_EQ(o->use(0), LeaseUse::Own);
    std::vector<std::int64_t> used;
    ASSERT_TRUE(s.admit(p, w, g.get(), used));
    book.answered(g.get(), p, w, true, used);
    ASSERT_TRUE(s.admit(p, w, o.get(), used));
    book.answered(o.get(), p, w, true, used);
    // Answered: the next is taken from the lease.
    const Req h = admit(book, s, p, 1000);
    EXPECT_EQ(h.t->use(0), LeaseUse::Hit);
    settle(book, s, p, h, 1);
    settle(book, s, p, Req{o, w, true}, 1);
    settle(book, s, p, Req{g, w, true}, 1);
    settle(book, s, p, first, 1);
    idle(book, s);
    EXPECT_EQ(s.reserved_total(), 0);
    EXPECT_EQ(s.spent, 4);
}

TEST(Lease, RequestsOneAfterAnotherWithin100msShareALease) {
    const AdmissionPlan p = plan_with(100000000);
    LeaseBook book;
    ModelStore s;
    std::int64_t t = 5000000;
    const Req first = admit(book, s, p, 1000, t);
    EXPECT_EQ(first.t->use(0), LeaseUse::Own);
    settle(book, s, p, first, 10);
    const Req second = admit(book, s, p, 1000, t += 40);   // a request 40 ms ago: busy
    EXPECT_EQ(second.t->use(0), LeaseUse::Grant);
    EXPECT_TRUE(settle(book, s, p, second, 10).empty());    // it waits idle
    for (int i = 0; i < 10; ++i) {
        const Req r = admit(book, s, p, 1000, t += 40);
        EXPECT_EQ(r.t->use(0), LeaseUse::Hit) << i;
        EXPECT_TRUE(settle(book, s, p, r, 10).empty());
    }
    EXPECT_EQ(idle(book, s, t + 100).size(), 1u);   // the timer: all of it back
    EXPECT_EQ(s.reserved_total(), 0);
    // 100 ms after the last one, a request is alone again.
    EXPECT_EQ(admit(book, s, p, 1000, t += 100).t->use(0), LeaseUse::Own);
}

TEST(Lease, NearTheLimitEveryRequestReservesForItself) {
    // 63 worst cases of headroom: below kLeaseMinRequests.
    const AdmissionPlan p = plan_with(64 * 1000);
    LeaseBook book;
    ModelStore s;
    std::vector<Req> rs;
    for (int i = 0; i < 64; ++i) {
        rs.push_back(admit(book, s, p, 1000));
        EXPECT_TRUE(rs.back().admitted);
        EXPECT_EQ(rs.back().t->use(0), LeaseUse::Own);
    }
    EXPECT_FALSE(admit(book, s, p, 1000).admitted);   // the 65th does not fit
    for (const Req& r : rs) settle(book, s, p, r, 1000);
    EXPECT_EQ(s.spent, 64000);
    EXPECT_EQ(s.reserved_total(), 0);
}

TEST(Lease, ConsumedUsageGoesBackAtHalfAGrant) {
    const AdmissionPlan p = plan_with(1000000000);
    LeaseBook book;
    ModelStore s;
    const Req a = admit(book, s, p, 100);
    const Req b = admit(book, s, p, 100);   // Grant of 128 worst cases
    ASSERT_EQ(b.t->use(0), LeaseUse::Grant);
    const std::int64_t grant = b.t->parts[0].extra;
    ASSERT_EQ(grant, 12800);
    // Hits of 100 each using 90: consumed reaches half the grant (6400)
    // after 72 of them; the reserved counter then shrinks by what was used.
    std::vector<Req> hits;
    std::int64_t given = 0;
    for (int i = 0; i < 100 && given == 0; ++i) {
        Req h = admit(book, s, p, 100);
        ASSERT_EQ(h.t->use(0), LeaseUse::Hit) << i;
        for (const Release& r : settle(book, s, p, h, 90)) given += r.amount;
        if (given == 0) {
            EXPECT_EQ(s.reserved_total(), 200 + grant);
        }
    }
    EXPECT_EQ(given, 72 * 90);
    EXPECT_EQ(s.reserved_total(), 200 + grant - given);
    settle(book, s, p, a, 0);
    settle(book, s, p, b, 0);
    idle(book, s);
    EXPECT_EQ(s.reserved_total(), 0);
    EXPECT_EQ(s.spent, 72 * 90);
}

TEST(Lease, ALeaseOfAnEarlierSlotTakesNoNewRequestsAndGoesBackWithItsLast) {
    const AdmissionPlan p1 = plan_with(100000000);
    LeaseBook book;
    ModelStore s;
    const Req a = admit(book, s, p1, 1000);
    const Req b = admit(book, s, p1, 1000);
    ASSERT_EQ(b.t->use(0), LeaseUse::Grant);
    const AdmissionPlan p2 = plan_with(100000000, kNow + 150);   // the next slot
    ASSERT_NE(p2.reserve[0].slot, p1.reserve[0].slot);
    const Req c = admit(book, s, p2, 1000);
    ASSERT_NE(c.t, nullptr);
    EXPECT_EQ(c.t->use(0), LeaseUse::Grant) << "a new lease in the new slot";
    EXPECT_NE(c.t->parts[0].lease, b.t->parts[0].lease);
    EXPECT_EQ(settle(book, s, p1, a, 5).size(), 1u);
    const std::vector<Release> old = settle(book, s, p1, b, 5);
    ASSERT_EQ(old.size(), 1u);
    EXPECT_EQ(old[0].slot, p1.reserve[0].slot);
    EXPECT_EQ(s.reserved[p1.reserve[0].slot], 0);
    EXPECT_TRUE(settle(book, s, p2, c, 5).empty());   // the current lease waits idle
    const std::vector<Release> now = idle(book, s);
    ASSERT_EQ(now.size(), 1u);
    EXPECT_EQ(now[0].slot, p2.reserve[0].slot);
    EXPECT_EQ(s.reserved_total(), 0);
}

TEST(Lease, AfterAStoreFailureLeasesAreForgotten) {
    const AdmissionPlan p = plan_with(100000000);
    LeaseBook book;
    ModelStore s;
    const Req a = admit(book, s, p, 1000);
    const Req b = admit(book, s, p, 1000);
    const Req h = admit(book, s, p, 1000);
    ASSERT_EQ(h.t->use(0), LeaseUse::Hit);
    EXPECT_EQ(book.held(), 1u);
    book.forget();
    EXPECT_EQ(book.held(), 0u);
    // Settles of the forgotten lease write nothing (it lapses in the store);
    // an Own reservation is still given back.
    EXPECT_TRUE(settle(book, s, p, h, 1).empty());
    EXPECT_TRUE(settle(book, s, p, b, 1).empty());
    EXPECT_EQ(settle(book, s, p, a, 1).size(), 1u);
    // The next request starts afresh: the headroom is not known.
    EXPECT_EQ(admit(book, s, p, 1000).t->use(0), LeaseUse::Own);
}

TEST(Lease, AFailedAdmissionGivesItsHitBackAndForgetsItsGrant) {
    const AdmissionPlan p = plan_with(100000000);
    LeaseBook book;
    ModelStore s;
    const Req a = admit(book, s, p, 1000);
    const Req b = admit(book, s, p, 1000);
    const ReserveAmounts w{1000, 0};
    std::shared_ptr<LeaseTicket> h = take(book, p, w);
    ASSERT_EQ(h->use(0), LeaseUse::Hit);
    const std::int64_t free_before = h->parts[0].lease->free();
    book.failed(h.get(), p, w);
    EXPECT_EQ(h->parts[0].lease->free(), free_before + 1000);
    // A rejected Hit gives its worst case back too.
    std::shared_ptr<LeaseTicket> r = take(book, p, w);
    std::vector<std::int64_t> sums{s.spent};
    book.answered(r.get(), p, w, false, sums);
    EXPECT_EQ(r->parts[0].lease->free(), free_before + 1000);
    // A Grant whose answer was lost: its lease is forgotten.
    settle(book, s, p, b, 0);
    idle(book, s);              // the lease goes back: the next one asks a grant
    std::shared_ptr<LeaseTicket> g = take(book, p, w);
    ASSERT_EQ(g->use(0), LeaseUse::Grant);
    book.failed(g.get(), p, w);
    EXPECT_TRUE(g->parts[0].lease->forgotten);
    settle(book, s, p, a, 0);
}

TEST(Lease, TwoWorkersNeverAdmitPastTheLimitAndEndWithNothingReserved) {
    std::mt19937 rng(7);
    for (std::int64_t limit : {5000000LL, 700000LL, 400000LL}) {
        const AdmissionPlan p = plan_with(limit);
        ModelStore s;
        LeaseBook books[2];
        std::vector<std::pair<int, Req>> flight;
        std::int64_t real_sum = 0, worst_in_flight = 0;
        int hits = 0, refused = 0;
        std::int64_t t = 1000000;   // the workers' clock, ms
        for (int step = 0; step < 4000; ++step) {
            const bool start = flight.size() < 40 && (flight.empty() || rng() % 2 == 0);
            if (start) {
                const int wk = static_cast<int>(rng() % 2);
                const std::int64_t w = 500 + static_cast<std::int64_t>(rng() % 1000);
                Req r = admit(books[wk], s, p, w, t += static_cast<std::int64_t>(rng() % 60));
                hits += r.t != nullptr && r.t->use(0) == LeaseUse::Hit ? 1 : 0;
                refused += r.admitted ? 0 : 1;
                if (r.admitted) {
                    worst_in_flight += w;
                    flight.emplace_back(wk, std::move(r));
                }
            } else {
                const std::size_t i = rng() % flight.size();
                const auto [wk, r] = flight[i];
                flight.erase(flight.begin() + static_cast<std::ptrdiff_t>(i));
                const std::int64_t real = static_cast<std::int64_t>(rng() % static_cast<unsigned>(r.a.tokens + 1));
                settle(books[wk], s, p, r, real);
                real_sum += real;
                worst_in_flight -= r.a.tokens;
            }
            if (rng() % 50 == 0) idle(books[rng() % 2], s, t);   // a worker's idle timer
            // What was spent and what may still be spent stay within the limit.
            ASSERT_LE(s.spent + worst_in_flight, limit) << "limit " << limit << " step " << step;
        }
        for (const auto& [wk, r] : flight) {
            settle(books[wk], s, p, r, r.a.tokens);
            real_sum += r.a.tokens;
        }
        for (LeaseBook& b : books) idle(b, s, t + 1000);
        EXPECT_EQ(s.spent, real_sum) << limit;
        EXPECT_EQ(s.reserved_total(), 0) << limit;
        // Leases were used, and the small limits were reached.
        EXPECT_GT(hits, limit > 1000000 ? 1000 : 0) << limit;
        if (limit < 1000000) {
            EXPECT_GT(refused, 0) << limit;
        }
    }
}

// ---- Request leases and admission from leases (a plan built for leases) ----

namespace {

AdmissionPlan request_plan(std::int64_t rpm, std::time_t now = kNow) {
    static Limits user;
    user = Limits();
    user.requests_per_minute = rpm;
    return build_admission_plan({{"user", "rita", &user}}, now, false, 0, false, kCheckLeaseTtl);
}

// A model of the store for a plan of one request check: the request
// counter and the requests reserved (by slot).
struct RequestStore {
    std::int64_t counted = 0;
    std::map<std::int64_t, std::int64_t> reserved;
    std::int64_t held() const {
        std::int64_t t = 0;
        for (const auto& kv : reserved) t += kv.second;
        return t;
    }
    // A store call (Own or Grant) as the script runs it.
    bool admit(const AdmissionPlan& p, const LeaseTicket* t, std::vector<std::int64_t>& used) {
        const std::int64_t sum = counted + held();
        used = {sum};
        if (sum + 1 > p.checks.at(0).limit) return false;
        ++counted;
        const std::int64_t extra = t != nullptr ? t->extra(0) : 0;
        if (extra > 0 && sum + 1 + extra <= p.checks[0].limit) reserved[p.reserve[0].slot] += extra;
        return true;
    }
    // A background grant.
    void grant(const AdmissionPlan& p, const Refill& f, std::vector<std::int64_t>& used) {
        const std::int64_t sum = counted + held();
        used = {sum};
        if (sum < p.checks[0].limit && sum + f.extra <= p.checks[0].limit) reserved[p.reserve[0].slot] += f.extra;
    }
    void release(const std::vector<Release>& rel) {
        for (const Release& r : rel) {
            EXPECT_EQ(r.measure, Measure::Requests);
            auto it = reserved.find(r.slot);
            ASSERT_NE(it, reserved.end());
            it->second -= r.amount;
            EXPECT_GE(it->second, 0) << "a release below 0";
        }
    }
};

// One request through a worker: local or a store call; local counts and
// every release reach the store at once (one flush). Returns whether it
// was admitted; local tells how.
bool request(LeaseBook& book, RequestStore& s, const AdmissionPlan& p, std::int64_t now, bool* local = nullptr,
             std::vector<std::int64_t>* shown = nullptr) {
    std::vector<Release> rel;
    std::vector<std::shared_ptr<Lease>> keep;
    std::shared_ptr<LeaseTicket> t = book.take(p, ReserveAmounts{}, now, LeaseReturns{rel, keep});
    EXPECT_NE(t, nullptr);
    if (local) *local = t->local;
    // What the take gave back is written ahead of the request's own call.
    s.release(rel);
    rel.clear();
    bool ok = true;
    std::vector<std::int64_t> used;
    if (t->local) {
        used = book.local_used(*t, p);
        ++s.counted;                       // its count, with the accounting
        std::vector<Refill> refills;
        book.refills(*t, p, refills);
        for (const Refill& f : refills) {
            std::vector<std::int64_t> u;
            s.grant(p, f, u);
            book.refilled(f, p, true, u, LeaseReturns{rel, keep});
        }
    } else {
        ok = s.admit(p, t.get(), used);
        book.answered(t.get(), p, ReserveAmounts{}, ok, used);
    }
    if (shown) *shown = used;
    if (ok) book.settle(t.get(), p, ReserveAmounts{}, ReserveAmounts{}, rel);
    s.release(rel);
    return ok;
}

// Two requests one after another at t and t + 10 ms: the first asks the
// store, the second a grant beside its own admission; the worker then
// holds a lease of 128 requests (kLeaseGrantRequests). t ends at the second.
void hold_a_lease(LeaseBook& book, RequestStore& s, const AdmissionPlan& p, std::int64_t& t) {
    ASSERT_TRUE(request(book, s, p, t));
    ASSERT_TRUE(request(book, s, p, t += 10));
    ASSERT_EQ(s.held(), 128);
}

std::vector<Release> idle_at(LeaseBook& book, RequestStore& s, std::int64_t now) {
    std::vector<Release> rel;
    std::vector<std::shared_ptr<Lease>> keep;
    book.give_back_idle(now, rel, keep);
    s.release(rel);
    return rel;
}

}  // namespace

// A client sending one request after another: the first asks the store,
// the second asks a grant with its own admission, the rest are admitted
// from the lease without a store call, the remaining-allowance sums exact;
// idle, the lease goes back whole.
TEST(RequestLease, OneAfterAnotherAdmittedLocallyWithExactSums) {
    const AdmissionPlan p = request_plan(100000);
    LeaseBook book;
    RequestStore s;
    std::int64_t t = 7000000;
    bool local = true;
    std::vector<std::int64_t> shown;
    ASSERT_TRUE(request(book, s, p, t, &local, &shown));
    EXPECT_FALSE(local);
    EXPECT_EQ(shown, (std::vector<std::int64_t>{0}));
    ASSERT_TRUE(request(book, s, p, t += 10, &local, &shown));
    EXPECT_FALSE(local);                       // the grant's own call
    EXPECT_EQ(shown, (std::vector<std::int64_t>{1}));
    EXPECT_EQ(s.held(), 128);                  // kLeaseGrantRequests
    for (int i = 2; i < 300; ++i) {
        ASSERT_TRUE(request(book, s, p, t += 10, &local, &shown)) << i;
        EXPECT_TRUE(local) << i;               // refilled in the background before it runs dry
        EXPECT_EQ(shown, (std::vector<std::int64_t>{i})) << i;
    }
    EXPECT_EQ(s.counted, 300);
    EXPECT_GT(s.held(), 0);
    EXPECT_TRUE(idle_at(book, s, t + 50).empty());   // taken from 50 ms ago: kept
    EXPECT_EQ(idle_at(book, s, t + 100).size(), 1u);
    EXPECT_EQ(s.held(), 0);
    EXPECT_EQ(book.held(), 0u);
}

// Near the limit no grant is asked (below kLeaseMinRequests of headroom):
// every request asks the store, and the limit is exact.
TEST(RequestLease, SmallLimitsAreExactWithoutLeases) {
    const AdmissionPlan p = request_plan(50);
    LeaseBook book;
    RequestStore s;
    std::int64_t t = 7000000;
    int admitted = 0;
    for (int i = 0; i < 80; ++i) {
        bool local = true;
        admitted += request(book, s, p, t += 5, &local) ? 1 : 0;
        EXPECT_FALSE(local) << i;
    }
    EXPECT_EQ(admitted, 50);
    EXPECT_EQ(s.held(), 0);
}

// A plan whose every check is not covered by a lease with room is not
// admitted locally: a token limit without a lease sends the request to
// the store, its request part then Own or Grant (never a Hit in a call).
TEST(RequestLease, LocalOnlyWhenEveryCheckIsCovered) {
    static Limits user;
    user = Limits();
    user.requests_per_minute = 1000000;
    user.tokens_per_day = 50;   // too small for a lease
    const AdmissionPlan p = build_admission_plan({{"user", "tia", &user}}, kNow, false, 0, false, kCheckLeaseTtl);
    ASSERT_EQ(p.reserve.size(), 2u);
    LeaseBook book;
    std::vector<Release> rel;
    std::vector<std::shared_ptr<Lease>> keep;
    std::int64_t t = 9000000;
    for (int i = 0; i < 5; ++i) {
        std::shared_ptr<LeaseTicket> k = book.take(p, ReserveAmounts{}, t += 10, LeaseReturns{rel, keep});
        EXPECT_FALSE(k->local) << i;
        EXPECT_NE(k->use(0), LeaseUse::Hit) << i;
        std::vector<std::int64_t> used{i, 0};
        book.answered(k.get(), p, ReserveAmounts{}, true, used);
        book.settle(k.get(), p, ReserveAmounts{}, ReserveAmounts{1, 0}, rel);
    }
}

// A lease of an earlier slot goes back whole at the next request (nothing
// in flight in it: a request lease never has); the request then goes to
// the store.
TEST(RequestLease, ALeaseOfAnEarlierSlotGoesBackAtTheNextRequest) {
    const AdmissionPlan p = request_plan(100000);
    LeaseBook book;
    RequestStore s;
    std::int64_t t = 7000000;
    hold_a_lease(book, s, p, t);
    const AdmissionPlan next = request_plan(100000, kNow + reserve_slot_seconds(kCheckLeaseTtl));
    ASSERT_NE(next.reserve[0].slot, p.reserve[0].slot);
    bool local = true;
    ASSERT_TRUE(request(book, s, next, t += 10, &local));
    EXPECT_FALSE(local);
    EXPECT_EQ(s.reserved[p.reserve[0].slot], 0);   // the old slot's lease went back
}

// Two workers, random arrivals, idle timers: no more than the limit is ever
// admitted; once both go idle nothing stays reserved, and a later request
// finds exactly what is left.
TEST(RequestLease, TwoWorkersNeverAdmitPastTheLimit) {
    std::mt19937 rng(11);
    for (std::int64_t limit : {100000LL, 3000LL, 700LL}) {
        const AdmissionPlan p = request_plan(limit);
        RequestStore s;
        LeaseBook books[2];
        std::int64_t t = 1000000;
        int admitted = 0, local = 0;
        for (int step = 0; step < 6000; ++step) {
            const int wk = static_cast<int>(rng() % 2);
            bool l = false;
            if (request(books[wk], s, p, t += static_cast<std::int64_t>(rng() % 3), &l)) ++admitted;
            local += l ? 1 : 0;
            if (rng() % 200 == 0) idle_at(books[rng() % 2], s, t);
            ASSERT_LE(s.counted + s.held(), limit) << "limit " << limit << " step " << step;
            ASSERT_EQ(s.counted, admitted);
        }
        for (LeaseBook& b : books) idle_at(b, s, t + 1000);
        EXPECT_EQ(s.held(), 0) << limit;
        EXPECT_GT(local, limit > 6000 ? 5000 : 100) << limit;
        // What is left is admitted to the last request, and no more.
        while (request(books[0], s, p, t += 200)) ++admitted;
        EXPECT_LE(admitted, limit) << limit;
        if (limit <= 6000) {
            EXPECT_EQ(admitted, limit) << limit;
        }
    }
}

// Users reloaded with other limits: a lease granted under the old ones takes
// no request (a lower limit must refuse at once) and goes back.
TEST(RequestLease, ALeaseGrantedUnderOtherLimitsGoesBack) {
    const AdmissionPlan p = request_plan(100000);
    LeaseBook book;
    RequestStore s;
    std::int64_t t = 7000000;
    hold_a_lease(book, s, p, t);
    bool local = false;
    ASSERT_TRUE(request(book, s, p, t += 10, &local));
    ASSERT_TRUE(local);
    ASSERT_EQ(s.held(), 128);
    const AdmissionPlan lower = request_plan(4);   // the same scope and slot, a limit of 4
    ASSERT_EQ(lower.reserve[0].record, p.reserve[0].record);
    ASSERT_EQ(lower.reserve[0].slot, p.reserve[0].slot);
    EXPECT_NE(lower.reserve[0].limits, p.reserve[0].limits);
    EXPECT_TRUE(request(book, s, lower, t += 10, &local));    // the old lease back first: 3 + 1 <= 4
    EXPECT_FALSE(local);
    EXPECT_EQ(s.held(), 0);
    EXPECT_FALSE(request(book, s, lower, t += 10, &local));   // 4 + 1 > 4: refused by the store
    EXPECT_FALSE(local);
}
