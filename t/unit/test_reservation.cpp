// Reservations: slots and their lives, the plan's reserving checks and
// increments, concurrent admissions against one budget, releases, and the
// request's worst output (RequestInfo::max_output) and worst case.
#include <gtest/gtest.h>

#include "core/codec/openai.h"
#include "core/metering/keys.h"
#include "core/metering/reservation.h"
#include "metering_fixture.h"

using namespace llmgw;

namespace {

constexpr std::time_t kNow = 1795268730;  // 2026-11-21T13:45:30Z

// The store's release of a reservation: from a counter that exists, never below 0.
// (MapKv keeps a reservation in its slot's key, the default KvTxn::reserve.)
std::string slot_key(const Reservation& r) {
    return reserved_key_in(reserved_record_scope(r.record), r.measure == Measure::Tokens, r.slot);
}

struct Kv : test::MapKv {
    void release(const HeldReservation& held) {
        for_each_reserved(held.plan->reserve, held.amounts, [this](const Reservation& r, std::int64_t amount) {
            const auto it = m.find(slot_key(r));
            if (it != m.end()) it->second = it->second > amount ? it->second - amount : 0;
        });
    }
};

// What releasing takes back, per reservation.
std::vector<std::int64_t> released(const AdmissionPlan& plan, const ReserveAmounts& amounts) {
    std::vector<std::int64_t> out;
    for_each_reserved(plan.reserve, amounts, [&out](const Reservation&, std::int64_t a) { out.push_back(a); });
    return out;
}

const auto scopes = test::caller_scopes;

}  // namespace

TEST(Reservation, SlotsAreAQuarterOfTheLifeAndFiveCanLive) {
    EXPECT_EQ(reserve_slot_seconds(600), 150);
    EXPECT_EQ(reserve_slot_seconds(601), 151);
    EXPECT_EQ(reserve_slot_seconds(4), 1);
    EXPECT_EQ(reserve_slot_seconds(1), 1);
    // A reservation lives at least ttl and at most ttl + one slot.
    for (std::time_t t = kNow; t < kNow + 300; ++t) {
        const std::int64_t life = reserve_key_ttl(t, 600);
        EXPECT_GE(life, 600);
        EXPECT_LE(life, 750);
    }
    std::vector<std::string> keys;
    append_reserved_keys("user", "alice", Measure::Tokens, kNow, 600, keys);
    ASSERT_EQ(keys.size(), 5u);
    const std::int64_t cur = reserve_slot(kNow, 600);
    EXPECT_EQ(keys.back(), "llmgw:user:alice:rtok:rsv:" + std::to_string(cur));
    EXPECT_EQ(keys.front(), "llmgw:user:alice:rtok:rsv:" + std::to_string(cur - 4));
    // The oldest slot summed is still alive now; the one before it is not.
    const std::int64_t len = reserve_slot_seconds(600);
    EXPECT_GT((cur - 4 + 1) * len + 600, kNow);
    EXPECT_LE((cur - 5 + 1) * len + 600, kNow);
    EXPECT_EQ(reserved_key("group", "eng", Measure::Cost, 7), "llmgw:group:eng:rcost:rsv:7");
}

TEST(Reservation, ThePlanSumsReservedCountersAndReservesPerScope) {
    Limits u, g;
    u.requests_per_minute = 10;
    u.tokens_per_day = 1000;
    u.tokens_per_month = 5000;
    g.cost_per_day_micros = 2000000;
    AdmissionPlan plan = build_admission_plan(scopes(u, g), kNow, true, 600);
    ASSERT_EQ(plan.checks.size(), 4u);
    EXPECT_FALSE(plan.checks[0].reserves);                 // requests: never
    EXPECT_EQ(plan.checks[0].keys.size(), 1u);
    EXPECT_TRUE(plan.checks[1].reserves);
    EXPECT_EQ(plan.checks[1].keys.size(), 2u);              // tokin, tokout
    EXPECT_EQ(plan.checks[1].reserved_record, "llmgw:user:alice:rsv");   // and five slots from the oldest live one
    EXPECT_EQ(plan.checks[1].reserved_oldest, reserve_slot(kNow, 600) - 4);
    EXPECT_EQ(plan.checks[3].keys.size(), 1u);              // cost
    EXPECT_EQ(plan.checks[3].reserved_record, "llmgw:group:eng:rsv");
    ASSERT_EQ(plan.reserve.size(), 2u);                     // user tokens, group cost
    EXPECT_EQ(slot_key(plan.reserve[0]), reserved_key("user", "alice", Measure::Tokens, reserve_slot(kNow, 600)));
    EXPECT_EQ(slot_key(plan.reserve[1]), reserved_key("group", "eng", Measure::Cost, reserve_slot(kNow, 600)));
    EXPECT_EQ(plan.reserve[0].ttl, reserve_key_ttl(kNow, 600));
    EXPECT_TRUE(released(plan, {}).empty());                // a request that reserves nothing
    EXPECT_FALSE((HeldReservation{std::make_shared<const AdmissionPlan>(plan), {}}).any());
    const ReserveAmounts amounts{250, 1500};
    EXPECT_EQ(check_add(plan.checks[0], amounts), 1);
    EXPECT_EQ(check_add(plan.checks[1], amounts), 250);
    EXPECT_EQ(check_add(plan.checks[2], amounts), 250);
    EXPECT_EQ(check_add(plan.checks[3], amounts), 1500);
    EXPECT_EQ(plan.checks[1].add, 0);                       // the plan itself does not change
    EXPECT_EQ(released(plan, amounts), (std::vector<std::int64_t>{250, 1500}));
    EXPECT_TRUE((HeldReservation{std::make_shared<const AdmissionPlan>(plan), amounts}).any());
    EXPECT_FALSE(HeldReservation().any());
    // Check mode: no reserved counters anywhere.
    const AdmissionPlan off = build_admission_plan(scopes(u, g), kNow, true);
    EXPECT_TRUE(off.reserve.empty());
    EXPECT_EQ(off.checks[1].keys.size(), 2u);
    EXPECT_FALSE(off.checks[1].reserves);
    EXPECT_TRUE(off.checks[1].reserved_record.empty());
    EXPECT_EQ(off.admit.size(), plan.admit.size());
}

// Forty at once against a budget that fits ten worst cases: ten pass, and
// every settle frees room for the next.
TEST(Reservation, ConcurrentAdmissionsNeverOvercommit) {
    Limits u, none;
    u.cost_per_day_micros = 10000;
    AdmissionPlan plan = build_admission_plan(scopes(u, none), kNow, true, 600);
    const ReserveAmounts amounts{100, 1000};
    Kv kv;
    int admitted = 0;
    for (int i = 0; i < 40; ++i) {
        AdmissionResult r;
        ASSERT_TRUE(execute_admission(kv, plan, r, amounts));
        if (r.admitted) ++admitted;
    }
    EXPECT_EQ(admitted, 10);
    const HeldReservation rel{std::make_shared<const AdmissionPlan>(plan), amounts};
    ASSERT_EQ(released(plan, amounts).size(), 1u);
    EXPECT_EQ(kv.m[slot_key(plan.reserve[0])], 10000);
    // One settles at 400 of its 1000.
    kv.release(rel);
    kv.m[counter_key("user", "alice", "cost", Window::Day, bucket(Window::Day, kNow))] += 400;
    AdmissionResult r;
    ASSERT_TRUE(execute_admission(kv, plan, r, amounts));
    EXPECT_FALSE(r.admitted);                               // 400 spent + 9000 held + 1000 > 10000
    EXPECT_EQ(r.used[0], 9400);
    kv.release(rel);                                        // another ends with no usage
    ASSERT_TRUE(execute_admission(kv, plan, r, amounts));
    EXPECT_TRUE(r.admitted);                                // 400 + 8000 + 1000 <= 10000
}

TEST(Reservation, AReservationOutOfItsSlotsIsNoLongerCounted) {
    Limits u, none;
    u.tokens_per_day = 1000;
    AdmissionPlan plan = build_admission_plan(scopes(u, none), kNow, true, 8);
    const ReserveAmounts amounts{1000, 0};
    Kv kv;
    AdmissionResult r;
    ASSERT_TRUE(execute_admission(kv, plan, r, amounts));
    EXPECT_TRUE(r.admitted);
    ASSERT_TRUE(execute_admission(kv, plan, r, amounts));
    EXPECT_FALSE(r.admitted);                               // held
    // Past the reservation's life (ttl + one slot), its slot is not summed.
    AdmissionPlan later = build_admission_plan(scopes(u, none), kNow + 8 + 2, true, 8);
    ASSERT_TRUE(execute_admission(kv, later, r, amounts));
    EXPECT_TRUE(r.admitted);
}

TEST(Reservation, EstimatesAndAmounts) {
    EXPECT_EQ(estimate_input_tokens(0), 0);
    EXPECT_EQ(estimate_input_tokens(1), 1);
    EXPECT_EQ(estimate_input_tokens(8), 2);
    EXPECT_EQ(estimate_input_tokens(9), 3);
    Limits u, none;
    u.tokens_per_day = 10;
    AdmissionPlan plan = build_admission_plan(scopes(u, none), kNow, true, 600);
    const ReserveAmounts negative{-5, -1};                  // never below 0
    EXPECT_EQ(check_add(plan.checks[0], negative), 0);
    EXPECT_EQ(reserve_amount(negative, Measure::Cost), 0);
    EXPECT_TRUE(released(plan, negative).empty());
}

TEST(Reservation, MaxOutputOfARequest) {
    auto max_output = [](std::string_view body) {
        std::string err;
        auto doc = RequestDoc::parse(body, err);
        EXPECT_NE(doc, nullptr) << err;
        return doc ? doc->info().max_output : -1;
    };
    EXPECT_EQ(max_output(R"({"model":"m"})"), 0);
    EXPECT_EQ(max_output(R"({"model":"m","max_tokens":100})"), 100);
    EXPECT_EQ(max_output(R"({"model":"m","max_tokens":100,"max_completion_tokens":300})"), 300);
    EXPECT_EQ(max_output(R"({"model":"m","max_output_tokens":50})"), 50);
    EXPECT_EQ(max_output(R"({"model":"m","max_tokens":100,"n":3})"), 300);
    EXPECT_EQ(max_output(R"({"model":"m","max_tokens":100,"n":1000})"), 100);     // n out of range: ignored
    EXPECT_EQ(max_output(R"({"model":"m","max_tokens":"100"})"), 0);             // wrong type: the default applies
    EXPECT_EQ(max_output(R"({"model":"m","max_tokens":-4})"), 0);
    EXPECT_EQ(max_output(R"({"model":"m","max_tokens":1.5})"), 0);
    EXPECT_EQ(max_output(R"({"model":"m","max_tokens":9223372036854775807,"n":2})"), INT64_MAX);
}

// A request's worst case (llm_gateway_budget_mode reserve): its input
// estimate plus its output, priced at the dearest of its targets.
TEST(Reservation, WorstCaseTokensAndDearestTarget) {
    const Price dear = test::price_2_10();
    Price cheap;
    cheap.input_micros_per_mtok = 1'000'000;
    cheap.output_micros_per_mtok = 1'000'000;
    // 401 bytes: 101 tokens in (rounded up), 50 out.
    ReserveAmounts a = worst_case_reservation(401, 50, false, 4096, {&cheap, nullptr, &dear});
    EXPECT_EQ(a.tokens, 151);
    EXPECT_EQ(a.cost_micros, 101 * 2 + 50 * 10);
    // No max_tokens: the output= default.
    a = worst_case_reservation(400, 0, false, 4096, {&cheap});
    EXPECT_EQ(a.tokens, 100 + 4096);
    EXPECT_EQ(a.cost_micros, 100 + 4096);
    // Embeddings have no output.
    a = worst_case_reservation(400, 50, true, 4096, {&dear});
    EXPECT_EQ(a.tokens, 100);
    EXPECT_EQ(a.cost_micros, 200);
}

TEST(Reservation, WorstCaseUnpricedFreeAndSaturating) {
    const Price dear = test::price_2_10();
    Price free = dear;
    free.free = true;
    ReserveAmounts a = worst_case_reservation(400, 50, false, 4096, {nullptr, &free});
    EXPECT_EQ(a.tokens, 150);
    EXPECT_EQ(a.cost_micros, 0);
    a = worst_case_reservation(400, 50, false, 4096, {});
    EXPECT_EQ(a.cost_micros, 0);
    a = worst_case_reservation(400, INT64_MAX, false, 4096, {&dear});
    EXPECT_EQ(a.tokens, INT64_MAX);
    EXPECT_EQ(a.cost_micros, INT64_MAX);
}
