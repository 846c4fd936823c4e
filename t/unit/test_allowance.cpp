// The remaining-allowance headers (core/metering/allowance): the tightest
// limit of each measure from one admission's sums, and the two header forms.
#include <gtest/gtest.h>

#include <map>

#include "core/metering/allowance.h"
#include "metering_fixture.h"

namespace llmgw {
namespace {

constexpr std::time_t kNow = 1795600000;   // 2026-11-25, a November (30 days)

using test::MapKv;
const auto scopes = test::caller_scopes;

std::map<std::string, std::string> headers_of(const Allowances& a) {
    std::map<std::string, std::string> m;
    for (const auto& [k, v] : allowance_headers(a)) m[k] = v;
    return m;
}

TEST(Allowance, ResetsAsOpenAIWritesThem) {
    EXPECT_EQ(reset_text(0), "0s");
    EXPECT_EQ(reset_text(-3), "0s");
    EXPECT_EQ(reset_text(12), "12s");
    EXPECT_EQ(reset_text(60), "1m0s");
    EXPECT_EQ(reset_text(360), "6m0s");
    EXPECT_EQ(reset_text(3723), "1h2m3s");
    EXPECT_EQ(reset_text(86400), "24h0m0s");
}

TEST(Allowance, WindowLengths) {
    EXPECT_EQ(window_length(Window::Min, kNow), 60);
    EXPECT_EQ(window_length(Window::Hour, kNow), 3600);
    EXPECT_EQ(window_length(Window::Day, kNow), 86400);
    EXPECT_EQ(window_length(Window::Month, kNow), 30 * 86400);
    EXPECT_EQ(window_length(Window::Month, 1709251200), 31 * 86400);   // 2024-03-01
    EXPECT_EQ(window_length(Window::Month, 1706745600), 29 * 86400);   // 2024-02-01, a leap year
    EXPECT_EQ(window_length(Window::Month, 1675209600), 28 * 86400);   // 2023-02-01
}

TEST(Allowance, TheTightestOfEachMeasure) {
    Limits u, g;
    u.requests_per_minute = 5;
    u.cost_per_day_micros = 1000000;
    g.requests_per_day = 100;
    g.tokens_per_day = 10000;
    g.tokens_per_month = 50000;
    const AdmissionPlan plan = build_admission_plan(scopes(u, g), kNow, true);
    ASSERT_EQ(plan.checks.size(), 5u);   // user rpm, cost/day; group rpd, tokens/day, tokens/month
    AdmissionResult res;
    res.used = {2, 250000, 97, 9000, 49500};
    const Allowances a = tightest_allowances(limit_shapes(plan), res, kNow);
    ASSERT_TRUE(a.requests.set && a.tokens.set && a.cost.set);
    // requests: user rpm 5 - (2 + this one) = 2 beats group rpd 100 - 98 = 2? a tie: the first in order
    EXPECT_EQ(a.requests.limit, 5);
    EXPECT_EQ(a.requests.remaining, 2);
    EXPECT_EQ(a.requests.window_seconds, 60);
    EXPECT_EQ(a.requests.reset_seconds, plan.checks[0].retry_after);
    // tokens: month 50000 - 49500 = 500 beats day 10000 - 9000 = 1000
    EXPECT_EQ(a.tokens.limit, 50000);
    EXPECT_EQ(a.tokens.remaining, 500);
    EXPECT_EQ(a.tokens.window_seconds, 30 * 86400);
    EXPECT_EQ(a.cost.limit, 1000000);
    EXPECT_EQ(a.cost.remaining, 750000);

    const auto h = headers_of(a);
    EXPECT_EQ(h.at("x-ratelimit-limit-requests"), "5");
    EXPECT_EQ(h.at("x-ratelimit-remaining-requests"), "2");
    EXPECT_EQ(h.at("x-ratelimit-reset-requests"), reset_text(plan.checks[0].retry_after));
    EXPECT_EQ(h.at("x-ratelimit-limit-tokens"), "50000");
    EXPECT_EQ(h.at("x-ratelimit-remaining-tokens"), "500");
    EXPECT_EQ(h.at("x-ratelimit-limit-cost-usd"), "1.000000");
    EXPECT_EQ(h.at("x-ratelimit-remaining-cost-usd"), "0.750000");
    EXPECT_EQ(h.at("RateLimit-Policy"), "\"requests\";q=5;w=60, \"tokens\";q=50000;w=2592000");
    EXPECT_EQ(h.at("RateLimit"), "\"requests\";r=2;t=" + std::to_string(plan.checks[0].retry_after) +
                                     ", \"tokens\";r=500;t=" + std::to_string(plan.checks[4].retry_after));
}

TEST(Allowance, ARejectedRequestAndSpentBudgets) {
    Limits u, g;
    u.requests_per_minute = 5;
    u.tokens_per_day = 100;
    const AdmissionPlan plan = build_admission_plan(scopes(u, g), kNow, true);
    ASSERT_EQ(plan.checks.size(), 2u);
    AdmissionResult res;
    res.admitted = false;
    res.check_index = 0;
    res.used = {5, 140};   // the 6th request of the minute; tokens over the budget
    const auto h = headers_of(tightest_allowances(limit_shapes(plan), res, kNow));
    EXPECT_EQ(h.at("x-ratelimit-remaining-requests"), "0");   // not counted: refused
    EXPECT_EQ(h.at("x-ratelimit-remaining-tokens"), "0");     // never negative
    EXPECT_EQ(h.count("x-ratelimit-limit-cost-usd"), 0u);
    res.admitted = true;
    res.used = {4, 0};
    EXPECT_EQ(headers_of(tightest_allowances(limit_shapes(plan), res, kNow)).at("x-ratelimit-remaining-requests"), "0");
    res.used = {0, 0};
    EXPECT_EQ(headers_of(tightest_allowances(limit_shapes(plan), res, kNow)).at("x-ratelimit-remaining-requests"), "4");
}

TEST(Allowance, NothingWithoutLimitsOrSums) {
    Limits none;
    const AdmissionPlan plan = build_admission_plan(scopes(none, none), kNow, true);
    AdmissionResult res;
    EXPECT_TRUE(allowance_headers(tightest_allowances(limit_shapes(plan), res, kNow)).empty());
    Limits u;
    u.requests_per_day = 3;
    const AdmissionPlan p2 = build_admission_plan(scopes(u, none), kNow, true);
    res.used = {};   // a result without sums (a store that did not say)
    EXPECT_TRUE(allowance_headers(tightest_allowances(limit_shapes(p2), res, kNow)).empty());
    res.used = {INT64_MAX};
    EXPECT_EQ(headers_of(tightest_allowances(limit_shapes(p2), res, kNow)).at("x-ratelimit-remaining-requests"), "0");
}

TEST(Allowance, ExecuteAdmissionSumsEveryCheck) {
    MapKv kv;
    Limits u, g;
    u.requests_per_minute = 1;   // breached first
    g.tokens_per_day = 100;
    const AdmissionPlan plan = build_admission_plan(scopes(u, g), kNow, true);
    for (const auto& k : plan.checks[0].keys) kv.m[k] = 1;
    for (const auto& k : plan.checks[1].keys) kv.m[k] = 30;   // tokin + tokout
    AdmissionResult res;
    ASSERT_TRUE(execute_admission(kv, plan, res));
    EXPECT_FALSE(res.admitted);
    EXPECT_EQ(res.check_index, 0);
    EXPECT_EQ(res.used, (std::vector<std::int64_t>{1, 60}));   // the later check is summed too
}

}  // namespace
}  // namespace llmgw
