// Limits: value validation, micro-USD conversion, the admission plan and its
// execution against an in-memory store.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/metering/limits.h"

using namespace llmgw;

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::time_t kNow = 1795268730;  // 2026-11-21T13:45:30Z

// An in-memory store; incr fails once `incr_budget` increments are spent.
class FakeKv : public KvTxn {
public:
    std::unordered_map<std::string, std::int64_t> values;
    std::unordered_map<std::string, std::int64_t> ttls;
    int incr_budget = -1;  // < 0: unlimited
    int incr_calls = 0;

    std::int64_t get(const std::string& key) override {
        const auto it = values.find(key);
        return it == values.end() ? 0 : it->second;
    }
    bool incr(const std::string& key, std::int64_t delta, std::int64_t ttl) override {
        ++incr_calls;
        if (incr_budget == 0) return false;
        if (incr_budget > 0) --incr_budget;
        values[key] += delta;
        ttls[key] = ttl;
        return true;
    }
};

std::string key(const char* kind, const char* id, const char* metric, Window w) {
    return counter_key(kind, id, metric, w, bucket(w, kNow));
}

Limits parse_all(std::initializer_list<std::pair<const char*, const char*>> kv) {
    Limits l;
    for (const auto& [name, value] : kv) EXPECT_EQ(set_limit(l, name, value), "") << name << "=" << value;
    return l;
}

}  // namespace

// ---- Limits and set_limit ----

TEST(Limits, AnyAndCostBudget) {
    Limits l;
    EXPECT_FALSE(l.any());
    EXPECT_FALSE(l.has_cost_budget());
    l.tokens_per_month = 1;
    EXPECT_TRUE(l.any());
    EXPECT_FALSE(l.has_cost_budget());
    l = Limits{};
    l.cost_per_month_micros = 1;
    EXPECT_TRUE(l.any());
    EXPECT_TRUE(l.has_cost_budget());
}

TEST(Limits, SetLimitAcceptsSpecAndDirectiveNames) {
    Limits l;
    EXPECT_EQ(set_limit(l, "requestsPerMinute", "50"), "");
    EXPECT_EQ(set_limit(l, "requests_per_day", "1000"), "");
    EXPECT_EQ(set_limit(l, "tokensPerDay", "200000"), "");
    EXPECT_EQ(set_limit(l, "tokens_per_month", "9223372036854775807"), "");
    EXPECT_EQ(set_limit(l, "costPerDayUSD", "1.5"), "");
    EXPECT_EQ(set_limit(l, "cost_per_month", "20"), "");
    EXPECT_EQ(l.requests_per_minute, 50);
    EXPECT_EQ(l.requests_per_day, 1000);
    EXPECT_EQ(l.tokens_per_day, 200000);
    EXPECT_EQ(l.tokens_per_month, kMax);
    EXPECT_EQ(l.cost_per_day_micros, 1500000);
    EXPECT_EQ(l.cost_per_month_micros, 20000000);

    EXPECT_EQ(set_limit(l, "requests_per_minute", "0"), "");
    EXPECT_EQ(set_limit(l, "tokensPerMonth", "007"), "");
    EXPECT_EQ(set_limit(l, "costPerMonthUSD", "0"), "");
    EXPECT_EQ(l.requests_per_minute, 0);
    EXPECT_EQ(l.tokens_per_month, 7);
    EXPECT_EQ(l.cost_per_month_micros, 0);
}

TEST(Limits, SetLimitCostValues) {
    const std::pair<const char*, std::int64_t> table[] = {
        {"1.5", 1500000},       {"0", 0},           {"0.0", 0},
        {".5", 500000},         {"5.", 5000000},    {"2e-3", 2000},
        {"1E2", 100000000},     {"1e+2", 100000000}, {"0.0000005", 1},   // half up
        {"0.00000049999", 0},   {"0.0000015", 2},   {"0.1234565", 123457},
        {"1e-400", 0},          {"1e300", kMax},    {"9223372036854.775807", kMax},
        {"9223372036854.7758065", kMax},              {"9223372036854.7758064", 9223372036854775806},
    };
    for (const auto& [text, micros] : table) {
        Limits l;
        EXPECT_EQ(set_limit(l, "cost_per_day", text), "") << text;
        EXPECT_EQ(l.cost_per_day_micros, micros) << text;
    }
}

TEST(Limits, SetLimitRejectsBadCounts) {
    for (const char* bad : {"-1", "1.5", "", "abc", " 5", "5 ", "+5", "0x10", "1e3", "5k", "-0", "9223372036854775808",
                            "99999999999999999999"}) {
        Limits l;
        l.requests_per_minute = 42;
        const std::string err = set_limit(l, "requests_per_minute", bad);
        EXPECT_NE(err, "") << bad;
        EXPECT_NE(err.find("for requests_per_minute: must be an integer"), std::string::npos) << err;
        EXPECT_EQ(l.requests_per_minute, 42) << "unchanged on error: " << bad;
    }
    Limits l;
    EXPECT_EQ(set_limit(l, "requests_per_minute", "-1"),
              "invalid value \"-1\" for requests_per_minute: must be an integer >= 0");
    EXPECT_EQ(set_limit(l, "tokensPerDay", "1.5"), "invalid value \"1.5\" for tokensPerDay: must be an integer >= 0");
    EXPECT_EQ(set_limit(l, "requestsPerDay", "99999999999999999999"),
              "invalid value \"99999999999999999999\" for requestsPerDay: must be an integer from 0 to "
              "9223372036854775807");
}

TEST(Limits, SetLimitRejectsBadCosts) {
    for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "-0.5", "-0", "1e400", "", ".", "1e", "e5",
                            "1.2.3", "0x1p3", " 1", "1 ", "+1", "1,5", "$1"}) {
        Limits l;
        l.cost_per_day_micros = 42;
        const std::string err = set_limit(l, "cost_per_day", bad);
        EXPECT_NE(err, "") << bad;
        EXPECT_NE(err.find("for cost_per_day: must be a finite number >= 0"), std::string::npos) << err;
        EXPECT_EQ(l.cost_per_day_micros, 42) << "unchanged on error: " << bad;
    }
    Limits l;
    EXPECT_EQ(set_limit(l, "costPerMonthUSD", "nan"),
              "invalid value \"nan\" for costPerMonthUSD: must be a finite number >= 0");
}

TEST(Limits, SetLimitUnknownName) {
    Limits l;
    EXPECT_EQ(set_limit(l, "foo", "1"), "unknown limit \"foo\"");
    EXPECT_EQ(set_limit(l, "RequestsPerMinute", "1"), "unknown limit \"RequestsPerMinute\"");
    EXPECT_EQ(set_limit(l, "costPerDay", "1"), "unknown limit \"costPerDay\"");
    EXPECT_EQ(set_limit(l, "cost_per_day_usd", "1"), "unknown limit \"cost_per_day_usd\"");
    EXPECT_EQ(set_limit_number(l, "foo", 1, true), "unknown limit \"foo\"");
    EXPECT_FALSE(l.any());
}

TEST(Limits, SetLimitNumber) {
    Limits l;
    EXPECT_EQ(set_limit_number(l, "requestsPerMinute", 50, true), "");
    EXPECT_EQ(set_limit_number(l, "tokensPerMonth", 0, true), "");
    EXPECT_EQ(set_limit_number(l, "costPerDayUSD", 1.5, false), "");
    EXPECT_EQ(set_limit_number(l, "costPerMonthUSD", 30, true), "");
    EXPECT_EQ(l.requests_per_minute, 50);
    EXPECT_EQ(l.tokens_per_month, 0);
    EXPECT_EQ(l.cost_per_day_micros, 1500000);
    EXPECT_EQ(l.cost_per_month_micros, 30000000);

    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    for (double bad : {-1.0, 1.5, nan, inf, -inf, 1e19, 9223372036854775808.0}) {
        Limits m;
        EXPECT_NE(set_limit_number(m, "requests_per_day", bad, true), "") << bad;
        EXPECT_EQ(m.requests_per_day, 0);
    }
    EXPECT_NE(set_limit_number(l, "requests_per_day", 5, false), "") << "a JSON 5.0 is not an integer";
    EXPECT_EQ(set_limit_number(l, "requests_per_day", -1, true),
              "invalid value -1 for requests_per_day: must be an integer >= 0");
    for (double bad : {-0.5, nan, inf, -inf}) {
        Limits m;
        EXPECT_NE(set_limit_number(m, "cost_per_month", bad, false), "") << bad;
        EXPECT_EQ(m.cost_per_month_micros, 0);
    }
    EXPECT_EQ(set_limit_number(l, "costPerDayUSD", 1e300, false), "");
    EXPECT_EQ(l.cost_per_day_micros, kMax);
}

TEST(Limits, UsdToMicrosRoundsHalfUpAndSaturates) {
    EXPECT_EQ(usd_to_micros(0), 0);
    EXPECT_EQ(usd_to_micros(1.5), 1500000);
    EXPECT_EQ(usd_to_micros(0.000001), 1);
    EXPECT_EQ(usd_to_micros(0.0000005), 1);  // exactly half a micro-USD as written: up
    EXPECT_EQ(usd_to_micros(0.0000004999), 0);
    EXPECT_EQ(usd_to_micros(0.0000015), 2);
    EXPECT_EQ(usd_to_micros(0.0000025), 3);
    EXPECT_EQ(usd_to_micros(2.675), 2675000);
    EXPECT_EQ(usd_to_micros(0.1 + 0.2), 300000);
    EXPECT_EQ(usd_to_micros(0.15), 150000);
    EXPECT_EQ(usd_to_micros(1e-300), 0);
    EXPECT_EQ(usd_to_micros(9.2e12), 9200000000000000000);
    EXPECT_EQ(usd_to_micros(1e13), kMax);
    EXPECT_EQ(usd_to_micros(DBL_MAX), kMax);
    EXPECT_EQ(usd_to_micros(std::numeric_limits<double>::infinity()), kMax);
    EXPECT_EQ(usd_to_micros(std::numeric_limits<double>::quiet_NaN()), 0);
    EXPECT_EQ(usd_to_micros(-1), 0);
}

// ---- the admission plan ----

TEST(Admission, PlanOrderUserBeforeGroupSixPerScope) {
    const Limits all = parse_all({{"requestsPerMinute", "1"},
                                  {"requestsPerDay", "2"},
                                  {"tokensPerDay", "3"},
                                  {"tokensPerMonth", "4"},
                                  {"costPerDayUSD", "5"},
                                  {"costPerMonthUSD", "6"}});
    const std::vector<Scope> scopes = {{"user", "alice", &all}, {"group", "eng", &all}, {"total", "all", nullptr}};
    const AdmissionPlan p = build_admission_plan(scopes, kNow, false);
    ASSERT_EQ(p.checks.size(), 12u);
    const char* names[] = {"requestsPerMinute", "requestsPerDay", "tokensPerDay",
                           "tokensPerMonth",    "costPerDayUSD",  "costPerMonthUSD"};
    for (std::size_t i = 0; i < 12; ++i) {
        const Check& c = p.checks[i];
        const std::string scope = i < 6 ? "user \"alice\" " : "group \"eng\" ";
        EXPECT_NE(c.message.find(scope + names[i % 6]), std::string::npos) << c.message;
        EXPECT_EQ(c.add, i % 6 < 2 ? 1 : 0);
        EXPECT_EQ(c.kind, i % 6 < 2 ? ViolationKind::RateLimit : ViolationKind::Budget);
    }
    EXPECT_EQ(p.checks[0].keys, std::vector<std::string>{key("user", "alice", "req", Window::Min)});
    EXPECT_EQ(p.checks[1].keys, std::vector<std::string>{key("user", "alice", "req", Window::Day)});
    EXPECT_EQ(p.checks[2].keys, (std::vector<std::string>{key("user", "alice", "tokin", Window::Day),
                                                          key("user", "alice", "tokout", Window::Day)}));
    EXPECT_EQ(p.checks[3].keys, (std::vector<std::string>{key("user", "alice", "tokin", Window::Month),
                                                          key("user", "alice", "tokout", Window::Month)}));
    EXPECT_EQ(p.checks[4].keys, std::vector<std::string>{key("user", "alice", "cost", Window::Day)});
    EXPECT_EQ(p.checks[11].keys, std::vector<std::string>{key("group", "eng", "cost", Window::Month)});
    EXPECT_EQ(p.checks[0].limit, 1);
    EXPECT_EQ(p.checks[4].limit, 5000000);
    EXPECT_EQ(p.checks[0].message, "rate limit exceeded: user \"alice\" requestsPerMinute 1");
    EXPECT_EQ(p.checks[9].message, "budget exceeded: group \"eng\" tokensPerMonth 4");
    EXPECT_EQ(p.checks[10].message, "budget exceeded: group \"eng\" costPerDayUSD 5");
}

TEST(Admission, PlanSkipsZeroAndAbsentLimits) {
    Limits some;
    some.tokens_per_month = 10;
    const Limits none;
    const std::vector<Scope> scopes = {{"user", "u", &none}, {"group", "g", &some}, {"total", "all", nullptr}};
    const AdmissionPlan p = build_admission_plan(scopes, kNow, false);
    ASSERT_EQ(p.checks.size(), 1u);
    EXPECT_EQ(p.checks[0].message, "budget exceeded: group \"g\" tokensPerMonth 10");
}

TEST(Admission, CostMessageInUsd) {
    const Limits l = parse_all({{"cost_per_day", "1.5"}, {"cost_per_month", "0.000123"}});
    const AdmissionPlan p = build_admission_plan({{"group", "eng", &l}}, kNow, false);
    ASSERT_EQ(p.checks.size(), 2u);
    EXPECT_EQ(p.checks[0].message, "budget exceeded: group \"eng\" costPerDayUSD 1.5");
    EXPECT_EQ(p.checks[1].message, "budget exceeded: group \"eng\" costPerMonthUSD 0.000123");
}

TEST(Admission, AdmitAndRejectIncrementsWithTtls) {
    const std::vector<Scope> scopes = {
        {"user", "alice", nullptr}, {"group", "eng", nullptr}, {"total", "all", nullptr}, {"agent", "a1", nullptr}};
    for (bool in_process : {false, true}) {
        const AdmissionPlan p = build_admission_plan(scopes, kNow, in_process);
        ASSERT_EQ(p.admit.size(), 16u);
        std::size_t n = 0;
        for (const Scope& s : scopes) {
            for (int i = 0; i < kWindowCount; ++i, ++n) {
                const Window w = static_cast<Window>(i);
                EXPECT_EQ(p.admit[n].key, key(s.kind.c_str(), s.id.c_str(), "req", w));
                EXPECT_EQ(p.admit[n].delta, 1);
                EXPECT_EQ(p.admit[n].ttl, in_process ? ttl_seconds_in_process(w) : ttl_seconds(w));
            }
        }
        ASSERT_EQ(p.reject.size(), 3u) << "user, group, total; not agent";
        EXPECT_EQ(p.reject[0].key, key("user", "alice", "rej", Window::Day));
        EXPECT_EQ(p.reject[1].key, key("group", "eng", "rej", Window::Day));
        EXPECT_EQ(p.reject[2].key, key("total", "all", "rej", Window::Day));
        for (const Incr& in : p.reject) {
            EXPECT_EQ(in.delta, 1);
            EXPECT_EQ(in.ttl, in_process ? ttl_seconds_in_process(Window::Day) : ttl_seconds(Window::Day));
        }
        EXPECT_TRUE(p.checks.empty());
    }
}

// A shared store (defer_unchecked): a scope no request limit checks gets
// no admit increments; it is listed in deferred, in scope order, and its
// count goes with the accounting (admitted_request_deltas).
TEST(Admission, DeferUncheckedScopesOfASharedStore) {
    Limits rpm;
    rpm.requests_per_minute = 5;
    Limits tok;
    tok.tokens_per_day = 100;   // reads tokens, not requests
    const std::vector<Scope> scopes = {{"user", "alice", &tok}, {"group", "eng", &rpm}, {"total", "all", nullptr}};
    const AdmissionPlan p = build_admission_plan(scopes, kNow, false, 0, true);
    ASSERT_EQ(p.admit.size(), 4u) << "the group's req in four windows only";
    for (int i = 0; i < kWindowCount; ++i) {
        EXPECT_EQ(p.admit[i].key, key("group", "eng", "req", static_cast<Window>(i)));
    }
    ASSERT_EQ(p.deferred.size(), 2u);
    EXPECT_EQ(p.deferred[0], std::make_pair(std::string("user"), std::string("alice")));
    EXPECT_EQ(p.deferred[1], std::make_pair(std::string("total"), std::string("all")));
    EXPECT_EQ(p.reject.size(), 3u) << "rejections are still counted at once in every scope";
    EXPECT_EQ(p.checks.size(), 2u);
    // Without defer_unchecked (the default, and shared memory) nothing moves.
    const AdmissionPlan q = build_admission_plan(scopes, kNow, false);
    EXPECT_EQ(q.admit.size(), 12u);
    EXPECT_TRUE(q.deferred.empty());
    // No limit at all: nothing to check and nothing to write at admission.
    const AdmissionPlan free = build_admission_plan({{"user", "bob", nullptr}, {"total", "all", nullptr}}, kNow, false,
                                                    0, true);
    EXPECT_TRUE(free.checks.empty());
    EXPECT_TRUE(free.admit.empty());
    EXPECT_EQ(free.deferred.size(), 2u);
}

// ---- execution against the fake store ----

TEST(Admission, FiftyOfTwoHundredAdmittedAtRpm50) {
    const Limits user = parse_all({{"requestsPerMinute", "50"}});
    const std::vector<Scope> scopes = {{"user", "alice", &user}, {"group", "eng", nullptr}, {"total", "all", nullptr}};
    FakeKv kv;
    int admitted = 0;
    for (int i = 0; i < 200; ++i) {
        const AdmissionPlan p = build_admission_plan(scopes, kNow, false);
        AdmissionResult r;
        ASSERT_TRUE(execute_admission(kv, p, r));
        if (r.admitted) {
            ++admitted;
            EXPECT_EQ(r.kind, ViolationKind::None);
            EXPECT_EQ(r.check_index, -1);
        } else {
            EXPECT_EQ(r.kind, ViolationKind::RateLimit);
            EXPECT_EQ(r.retry_after, 30);
            EXPECT_EQ(r.check_index, 0);
            EXPECT_EQ(r.message, "rate limit exceeded: user \"alice\" requestsPerMinute 50");
        }
    }
    EXPECT_EQ(admitted, 50);
    for (const char* kind : {"user", "group", "total"}) {
        const char* id = std::string(kind) == "user" ? "alice" : std::string(kind) == "group" ? "eng" : "all";
        for (int i = 0; i < kWindowCount; ++i) EXPECT_EQ(kv.get(key(kind, id, "req", static_cast<Window>(i))), 50);
        EXPECT_EQ(kv.get(key(kind, id, "rej", Window::Day)), 150) << kind;
    }
    // The next minute is a new bucket: admitted again.
    const AdmissionPlan next = build_admission_plan(scopes, kNow + 30, false);
    AdmissionResult r;
    ASSERT_TRUE(execute_admission(kv, next, r));
    EXPECT_TRUE(r.admitted);
}

TEST(Admission, UserBreachBeforeGroupBreach) {
    const Limits user = parse_all({{"tokensPerMonth", "100"}});
    const Limits group = parse_all({{"requestsPerMinute", "1"}});
    const std::vector<Scope> scopes = {{"user", "alice", &user}, {"group", "eng", &group}, {"total", "all", nullptr}};
    FakeKv kv;
    kv.values[key("user", "alice", "tokin", Window::Month)] = 100;
    kv.values[key("group", "eng", "req", Window::Min)] = 5;
    AdmissionResult r;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_FALSE(r.admitted);
    EXPECT_EQ(r.kind, ViolationKind::Budget);
    EXPECT_EQ(r.message, "budget exceeded: user \"alice\" tokensPerMonth 100");
    EXPECT_EQ(r.retry_after, seconds_until_window_end(Window::Month, kNow));
    EXPECT_EQ(r.check_index, 0);

    kv.values[key("user", "alice", "tokin", Window::Month)] = 99;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_FALSE(r.admitted);
    EXPECT_EQ(r.kind, ViolationKind::RateLimit);
    EXPECT_EQ(r.message, "rate limit exceeded: group \"eng\" requestsPerMinute 1");
    EXPECT_EQ(r.retry_after, 30);
    EXPECT_EQ(r.check_index, 1);
}

TEST(Admission, WithinScopeFirstOfSixWins) {
    const Limits l = parse_all({{"requestsPerDay", "10"}, {"tokensPerDay", "10"}, {"costPerMonthUSD", "1"}});
    const std::vector<Scope> scopes = {{"user", "u", &l}};
    FakeKv kv;
    kv.values[key("user", "u", "req", Window::Day)] = 10;
    kv.values[key("user", "u", "tokout", Window::Day)] = 10;
    kv.values[key("user", "u", "cost", Window::Month)] = 1000000;
    AdmissionResult r;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_EQ(r.message, "rate limit exceeded: user \"u\" requestsPerDay 10");
    EXPECT_EQ(r.retry_after, seconds_until_window_end(Window::Day, kNow));
    EXPECT_EQ(r.retry_after, 10 * 3600 + 14 * 60 + 30);

    kv.values[key("user", "u", "req", Window::Day)] = 9;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_EQ(r.message, "budget exceeded: user \"u\" tokensPerDay 10");

    kv.values[key("user", "u", "tokout", Window::Day)] = 0;
    kv.values[key("user", "u", "req", Window::Day)] = 0;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_EQ(r.message, "budget exceeded: user \"u\" costPerMonthUSD 1");
    EXPECT_EQ(r.retry_after, 9 * 86400 + 10 * 3600 + 14 * 60 + 30);
}

TEST(Admission, RequestsPerDayCountsThisRequest) {
    const Limits l = parse_all({{"requests_per_day", "3"}});
    FakeKv kv;
    kv.values[key("user", "u", "req", Window::Day)] = 2;
    AdmissionResult r;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan({{"user", "u", &l}}, kNow, false), r));
    EXPECT_TRUE(r.admitted);  // 2 + 1 <= 3
    EXPECT_EQ(kv.get(key("user", "u", "req", Window::Day)), 3);
    ASSERT_TRUE(execute_admission(kv, build_admission_plan({{"user", "u", &l}}, kNow, false), r));
    EXPECT_FALSE(r.admitted);  // 3 + 1 > 3
}

TEST(Admission, TokensAndCostBreachAtLimitNotBefore) {
    const Limits l = parse_all({{"tokensPerDay", "100"}, {"costPerDayUSD", "1.5"}});
    const std::vector<Scope> scopes = {{"user", "u", &l}, {"total", "all", nullptr}};
    FakeKv kv;
    kv.values[key("user", "u", "tokin", Window::Day)] = 60;
    kv.values[key("user", "u", "tokout", Window::Day)] = 39;
    kv.values[key("user", "u", "cost", Window::Day)] = 1499999;
    AdmissionResult r;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_TRUE(r.admitted) << r.message;  // 99 < 100, 1.499999 < 1.5: add = 0

    kv.values[key("user", "u", "tokout", Window::Day)] = 40;  // 60 + 40 = 100
    ASSERT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_FALSE(r.admitted);
    EXPECT_EQ(r.kind, ViolationKind::Budget);
    EXPECT_EQ(r.message, "budget exceeded: user \"u\" tokensPerDay 100");

    kv.values[key("user", "u", "tokout", Window::Day)] = 0;
    kv.values[key("user", "u", "cost", Window::Day)] = 1500000;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_FALSE(r.admitted);
    EXPECT_EQ(r.message, "budget exceeded: user \"u\" costPerDayUSD 1.5");
}

TEST(Admission, NothingAdmittedOnBreachButRejectionsCounted) {
    const Limits l = parse_all({{"requestsPerMinute", "1"}});
    const std::vector<Scope> scopes = {
        {"user", "alice", nullptr}, {"group", "eng", &l}, {"total", "all", nullptr}, {"mcp", "tools", nullptr}};
    FakeKv kv;
    kv.values[key("group", "eng", "req", Window::Min)] = 1;
    const auto before = kv.values;
    AdmissionResult r;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_FALSE(r.admitted);
    auto expected = before;
    expected[key("user", "alice", "rej", Window::Day)] = 1;
    expected[key("group", "eng", "rej", Window::Day)] = 1;
    expected[key("total", "all", "rej", Window::Day)] = 1;
    EXPECT_EQ(kv.values, expected);
    EXPECT_EQ(kv.ttls[key("total", "all", "rej", Window::Day)], ttl_seconds(Window::Day));
}

TEST(Admission, AdmittedRequestWritesTtls) {
    FakeKv kv;
    AdmissionResult r;
    ASSERT_TRUE(execute_admission(kv, build_admission_plan({{"user", "u", nullptr}}, kNow, true), r));
    EXPECT_TRUE(r.admitted);
    EXPECT_EQ(kv.ttls[key("user", "u", "req", Window::Min)], 120);
    EXPECT_EQ(kv.ttls[key("user", "u", "req", Window::Month)], 32 * 86400);
    EXPECT_EQ(kv.values.size(), 4u);
}

TEST(Admission, FailingIncrFailsAndLeavesResultUntouched) {
    const Limits l = parse_all({{"requestsPerMinute", "1"}});
    const std::vector<Scope> scopes = {{"user", "u", &l}, {"group", "g", nullptr}, {"total", "all", nullptr}};
    for (int budget : {0, 1, 5, 11}) {  // admit path: 12 increments
        FakeKv kv;
        kv.incr_budget = budget;
        AdmissionResult r;
        r.message = "sentinel";
        r.check_index = 42;
        EXPECT_FALSE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r)) << budget;
        EXPECT_EQ(r.message, "sentinel");
        EXPECT_EQ(r.check_index, 42);
        EXPECT_TRUE(r.admitted);
    }
    for (int budget : {0, 2}) {  // reject path: 3 increments
        FakeKv kv;
        kv.values[key("user", "u", "req", Window::Min)] = 1;
        kv.incr_budget = budget;
        AdmissionResult r;
        r.message = "sentinel";
        EXPECT_FALSE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r)) << budget;
        EXPECT_EQ(r.message, "sentinel");
        EXPECT_TRUE(r.admitted);
    }
    FakeKv kv;
    kv.incr_budget = 12;
    AdmissionResult r;
    EXPECT_TRUE(execute_admission(kv, build_admission_plan(scopes, kNow, false), r));
    EXPECT_EQ(kv.incr_calls, 12);
}

TEST(Admission, EmptyPlanAdmits) {
    FakeKv kv;
    AdmissionResult r;
    EXPECT_TRUE(execute_admission(kv, AdmissionPlan{}, r));
    EXPECT_TRUE(r.admitted);
    EXPECT_EQ(kv.incr_calls, 0);
}
