// Retry-After, backoff bounds, the breaker's state machine, failover targets.
#include <gtest/gtest.h>

#include "core/config/gwconfig.h"
#include "core/routing/breaker.h"
#include "core/routing/retry.h"

using namespace llmgw;

TEST(RetryAfter, Seconds) {
    EXPECT_EQ(parse_retry_after_ms("0", 0), 0);
    EXPECT_EQ(parse_retry_after_ms("7", 0), 7000);
    EXPECT_EQ(parse_retry_after_ms(" 30 ", 0), 30000);
    EXPECT_EQ(parse_retry_after_ms("120", 0), 120000);
}

TEST(RetryAfter, Garbage) {
    for (const char* v : {"", "  ", "-1", "1.5", "abc", "5s", "99999999999999999999", "1e3", "0x10",
                          "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 32 Nov 1994 08:49:37 GMT",
                          "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 06 Nov 1994"}) {
        EXPECT_EQ(parse_retry_after_ms(v, 0), -1) << v;
    }
}

TEST(RetryAfter, HttpDates) {
    const std::int64_t t = 784111777;   // Sun, 06 Nov 1994 08:49:37 GMT
    EXPECT_EQ(parse_retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT", t - 12), 12000);
    EXPECT_EQ(parse_retry_after_ms("Sunday, 06-Nov-94 08:49:37 GMT", t - 3), 3000);
    EXPECT_EQ(parse_retry_after_ms("Sun Nov  6 08:49:37 1994", t - 1), 1000);
    EXPECT_EQ(parse_retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT", t + 100), 0);   // in the past
    EXPECT_EQ(parse_retry_after_ms("Thu, 01 Jan 1970 00:00:00 GMT", 0), 0);
    EXPECT_EQ(parse_retry_after_ms("Wed, 29 Feb 2028 00:00:10 GMT", 1835395200), 10000);
}

TEST(Backoff, BoundsPerAttempt) {
    Backoff b{250, 2000};
    EXPECT_EQ(backoff_ms(b, 1, 0.0), 125);
    EXPECT_EQ(backoff_ms(b, 1, 0.999999), 249);
    EXPECT_EQ(backoff_ms(b, 2, 0.0), 250);
    EXPECT_EQ(backoff_ms(b, 3, 0.5), 750);
    EXPECT_EQ(backoff_ms(b, 4, 0.0), 1000);
    EXPECT_EQ(backoff_ms(b, 5, 0.0), 1000);   // capped at max
    EXPECT_EQ(backoff_ms(b, 60, 0.999999), 1999);
    EXPECT_EQ(backoff_ms(b, 0, 0.0), 125);
    for (unsigned k = 1; k < 10; ++k) {
        for (double u : {0.0, 0.1, 0.5, 0.9, 0.99999, -1.0, 2.0}) {
            std::int64_t v = backoff_ms(b, k, u);
            std::int64_t d = std::min<std::int64_t>(2000, 250LL << (k - 1));
            EXPECT_GE(v, d / 2);
            EXPECT_LE(v, d);
        }
    }
}

TEST(Breaker, OpensProbesAndCloses) {
    BreakerConfig c;
    c.failures = 3;
    c.open_ms = 1000;
    BreakerSlot s{};
    std::int64_t at = 0;
    EXPECT_EQ(breaker_admit(s, c, 0, at), BreakerAdmit::Pass);
    breaker_result(s, c, false, false, 0);
    breaker_result(s, c, false, false, 0);
    breaker_result(s, c, true, false, 0);   // a success resets the count
    breaker_result(s, c, false, false, 0);
    breaker_result(s, c, false, false, 0);
    EXPECT_EQ(s.state, BreakerState::Closed);
    breaker_result(s, c, false, false, 10);
    EXPECT_EQ(s.state, BreakerState::Open);
    EXPECT_EQ(breaker_admit(s, c, 500, at), BreakerAdmit::Skip);
    EXPECT_EQ(at, 1010);
    EXPECT_EQ(breaker_admit(s, c, 1010, at), BreakerAdmit::Probe);
    EXPECT_EQ(s.state, BreakerState::HalfOpen);
    EXPECT_EQ(breaker_admit(s, c, 1011, at), BreakerAdmit::Skip);   // one probe at a time
    breaker_result(s, c, false, true, 1500);                          // the probe failed
    EXPECT_EQ(s.state, BreakerState::Open);
    EXPECT_EQ(breaker_admit(s, c, 2000, at), BreakerAdmit::Skip);
    EXPECT_EQ(at, 2500);
    EXPECT_EQ(breaker_admit(s, c, 2500, at), BreakerAdmit::Probe);
    breaker_result(s, c, true, true, 2600);
    EXPECT_EQ(s.state, BreakerState::Closed);
    EXPECT_EQ(s.consecutive_failures, 0);
    EXPECT_EQ(breaker_admit(s, c, 2601, at), BreakerAdmit::Pass);
}

TEST(Breaker, LostAndAbandonedProbes) {
    BreakerConfig c;
    c.failures = 1;
    BreakerSlot s{};
    std::int64_t at = 0;
    breaker_result(s, c, false, false, 0);
    EXPECT_EQ(breaker_admit(s, c, c.open_ms, at), BreakerAdmit::Probe);
    EXPECT_EQ(breaker_admit(s, c, c.open_ms + kProbeTimeoutMs - 1, at), BreakerAdmit::Skip);
    EXPECT_EQ(breaker_admit(s, c, c.open_ms + kProbeTimeoutMs, at), BreakerAdmit::Probe);   // lost probe
    breaker_abandon(s, true, 200000);
    EXPECT_EQ(s.state, BreakerState::Open);
    EXPECT_EQ(breaker_admit(s, c, 200000, at), BreakerAdmit::Probe);   // given back: the next call probes
}

TEST(Breaker, Disabled) {
    BreakerConfig c;
    c.enabled = false;
    c.failures = 1;
    BreakerSlot s{};
    std::int64_t at = 0;
    breaker_result(s, c, false, false, 0);
    breaker_result(s, c, false, false, 0);
    EXPECT_EQ(breaker_admit(s, c, 1, at), BreakerAdmit::Pass);
    EXPECT_EQ(s.consecutive_failures, 2);
    EXPECT_STREQ(breaker_state_name(BreakerState::HalfOpen), "half_open");
}

namespace {

GatewayConfig two_providers() {
    GatewayConfig c;
    ProviderConf a;
    a.name = "a";
    a.location = "/_llm/a";
    ProviderConf b;
    b.name = "b";
    b.type = ProviderType::Anthropic;
    b.location = "/_llm/b";
    c.add_provider(a);
    c.add_provider(b);
    return c;
}

}  // namespace

TEST(Failover, AliasTargetsInOrder) {
    GatewayConfig c = two_providers();
    AliasConf al{"smart", "a/gpt-4o", "x:1", {"b/claude-sonnet-4-5", "a/gpt-4o-mini"}};
    ASSERT_EQ(c.add_alias(al), "");
    ASSERT_EQ(c.finalize(), "");
    Resolution r;
    std::string err;
    ASSERT_TRUE(c.resolve_model("smart", r, err));
    EXPECT_EQ(r.canonical, "a/gpt-4o");
    ASSERT_EQ(r.targets.size(), 3u);
    EXPECT_EQ(r.targets[0].canonical, "a/gpt-4o");
    EXPECT_EQ(r.targets[1].canonical, "b/claude-sonnet-4-5");
    EXPECT_EQ(r.targets[1].provider->name, "b");
    EXPECT_EQ(r.targets[1].upstream_model, "claude-sonnet-4-5");
    EXPECT_EQ(r.targets[2].upstream_model, "gpt-4o-mini");
    ASSERT_TRUE(c.resolve_model("a/x", r, err));
    ASSERT_EQ(r.targets.size(), 1u);
    EXPECT_EQ(r.targets[0].canonical, "a/x");
}

TEST(Failover, AliasValidation) {
    {
        GatewayConfig c = two_providers();
        c.add_alias({"s", "a/m", "x:1", {"nope/m"}});
        EXPECT_EQ(c.finalize(), "alias \"s\" names unknown provider \"nope\" in x:1");
    }
    {
        GatewayConfig c = two_providers();
        c.add_alias({"s", "a/m", "x:1", {"b/n", "a/m"}});
        EXPECT_EQ(c.finalize(), "alias \"s\" names \"a/m\" twice in x:1");
    }
    {
        GatewayConfig c = two_providers();
        c.add_alias({"s", "a/m", "x:1", {"plain"}});
        EXPECT_EQ(c.finalize(), "alias \"s\" target \"plain\" is not of the form <provider>/<model> in x:1");
    }
    {
        GatewayConfig c = two_providers();
        c.add_alias({"t", "a/m", "x:1", {}});
        c.add_alias({"s", "a/m", "x:2", {"t"}});
        EXPECT_EQ(c.finalize(), "alias \"s\" points to another alias \"t\"; aliases must name <provider>/<model> in x:2");
    }
}
