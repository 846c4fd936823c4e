// The mid-stream budget cutoff (core/metering/cutoff): what remains of the
// token and cost budgets after admission, a stream's running usage, and
// when it crosses.
#include <gtest/gtest.h>

#include "core/metering/cutoff.h"
#include "metering_fixture.h"

namespace llmgw {
namespace {

constexpr std::time_t kNow = 1795600000;

const auto scopes = test::caller_scopes;

TEST(Cutoff, TheLeastThatRemainsOfEachMeasure) {
    Limits u, g;
    u.requests_per_minute = 5;
    u.tokens_per_day = 1000;
    u.cost_per_day_micros = 1000000;
    g.tokens_per_day = 10000;
    g.tokens_per_month = 50000;
    const AdmissionPlan plan = build_admission_plan(scopes(u, g), kNow, true);
    ASSERT_EQ(plan.checks.size(), 5u);   // user rpm, tokens/day, cost/day; group tokens/day, tokens/month
    const std::vector<BudgetLimit> limits = budget_limits(plan);
    ASSERT_EQ(limits.size(), 4u);   // no request limit
    // user tokens: 1000 - 700 = 300; group day: 10000 - 9800 = 200; month 50000 - 49000 = 1000
    const RemainingBudget r = remaining_budget(limits, {2, 700, 250000, 9800, 49000}, plan.checks.size());
    ASSERT_TRUE(r.has_tokens && r.has_cost);
    EXPECT_EQ(r.tokens, 200);
    EXPECT_EQ(r.tokens_message, "budget exceeded: group \"eng\" tokensPerDay 10000");
    EXPECT_EQ(r.cost_micros, 750000);
    EXPECT_EQ(r.cost_message, "budget exceeded: user \"alice\" costPerDayUSD 1");
}

TEST(Cutoff, ATieGoesToTheFirstInPrecedenceOrder) {
    Limits u, g;
    u.tokens_per_day = 1000;
    g.tokens_per_day = 2000;
    const AdmissionPlan plan = build_admission_plan(scopes(u, g), kNow, true);
    const RemainingBudget r = remaining_budget(budget_limits(plan), {500, 1500}, plan.checks.size());
    ASSERT_TRUE(r.has_tokens);
    EXPECT_FALSE(r.has_cost);
    EXPECT_EQ(r.tokens, 500);
    EXPECT_EQ(r.tokens_message, "budget exceeded: user \"alice\" tokensPerDay 1000");
}

TEST(Cutoff, NothingWithoutBudgetsOrSums) {
    Limits u, g;
    u.requests_per_minute = 5;
    const AdmissionPlan plan = build_admission_plan(scopes(u, g), kNow, true);
    EXPECT_FALSE(remaining_budget(budget_limits(plan), {1}, plan.checks.size()).any());
    u.tokens_per_day = 100;
    const AdmissionPlan with = build_admission_plan(scopes(u, g), kNow, true);
    EXPECT_FALSE(remaining_budget(budget_limits(with), {}, with.checks.size()).any());   // sums unknown
    EXPECT_TRUE(remaining_budget(budget_limits(with), {1, 40}, with.checks.size()).any());
    // Spent past the limit already (another replica's answers): nothing remains.
    const RemainingBudget over = remaining_budget(budget_limits(with), {1, 140}, with.checks.size());
    EXPECT_EQ(over.tokens, 0);
}

TEST(Cutoff, RunningUsageFromTheEstimate) {
    Usage none;
    const StreamUsage u = stream_usage(none, 41, 400, nullptr);
    EXPECT_EQ(u.prompt_tokens, 100);      // 400 bytes of request / 4
    EXPECT_EQ(u.completion_tokens, 10);   // 41 bytes of text / 4
    EXPECT_EQ(u.tokens(), 110);
    EXPECT_EQ(u.cost_micros, 0);          // unpriced
}

TEST(Cutoff, RunningUsageFromTheProvidersReport) {
    Usage anthropic;   // message_start: the input, and a first output token
    anthropic.present = true;
    anthropic.prompt_tokens = 25;
    anthropic.completion_tokens = 1;
    StreamUsage u = stream_usage(anthropic, 80, 400, nullptr);
    EXPECT_EQ(u.prompt_tokens, 25);
    EXPECT_EQ(u.completion_tokens, 20);   // the text says more than the report so far
    Usage gemini;
    gemini.present = true;
    gemini.prompt_tokens = 12;
    gemini.completion_tokens = 50;
    u = stream_usage(gemini, 80, 400, nullptr);
    EXPECT_EQ(u.prompt_tokens, 12);
    EXPECT_EQ(u.completion_tokens, 50);
    Usage output_only;   // a report without the input: the estimate
    output_only.present = true;
    output_only.completion_tokens = 3;
    EXPECT_EQ(stream_usage(output_only, 0, 40, nullptr).prompt_tokens, 10);
    Usage malformed = anthropic;   // a count out of range: unread, the estimate
    malformed.malformed = true;
    malformed.completion_tokens = 1000;
    u = stream_usage(malformed, 80, 400, nullptr);
    EXPECT_EQ(u.prompt_tokens, 100);
    EXPECT_EQ(u.completion_tokens, 20);
}

TEST(Cutoff, RunningCostAtThePrice) {
    Price p;
    p.input_micros_per_mtok = 2500000;    // 2.50 USD / M
    p.output_micros_per_mtok = 10000000;  // 10 USD / M
    Usage none;
    const StreamUsage u = stream_usage(none, 4000, 4000, &p);   // 1000 in, 1000 out
    EXPECT_EQ(u.cost_micros, 2500 + 10000);
}

TEST(Cutoff, CrossesOnlyPastWhatRemains) {
    RemainingBudget r;
    r.has_tokens = true;
    r.tokens = 100;
    r.tokens_message = "budget exceeded: user \"alice\" tokensPerDay 1000";
    StreamUsage u;
    u.prompt_tokens = 60;
    u.completion_tokens = 40;
    EXPECT_FALSE(crosses(r, u));   // exactly what remains
    u.completion_tokens = 41;
    std::string_view why;
    EXPECT_TRUE(crosses(r, u, &why));
    EXPECT_EQ(why, r.tokens_message);

    RemainingBudget cost;
    cost.has_cost = true;
    cost.cost_micros = 500;
    cost.cost_message = "budget exceeded: user \"alice\" costPerDayUSD 0.01";
    u.cost_micros = 500;
    EXPECT_FALSE(crosses(cost, u));   // tokens have no budget here
    u.cost_micros = 501;
    EXPECT_TRUE(crosses(cost, u, &why));
    EXPECT_EQ(why, cost.cost_message);

    EXPECT_FALSE(crosses(RemainingBudget{}, u));   // no budget: never
}

}  // namespace
}  // namespace llmgw
