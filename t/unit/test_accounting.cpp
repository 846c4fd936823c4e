// The post-response accounting batch.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/metering/accounting.h"
#include "core/metering/keys.h"

using namespace llmgw;

namespace {

constexpr std::time_t kNow = 1795268730;  // 2026-11-21T13:45:30Z

std::string key(const std::string& kind, const std::string& id, const char* metric, Window w) {
    return counter_key(kind, id, metric, w, bucket(w, kNow));
}

// key -> delta; every key appears once.
std::map<std::string, std::int64_t> by_key(const std::vector<Incr>& v) {
    std::map<std::string, std::int64_t> m;
    for (const Incr& in : v) {
        EXPECT_EQ(m.count(in.key), 0u) << "duplicate " << in.key;
        m[in.key] = in.delta;
    }
    return m;
}

AccountingInput input(std::int64_t prompt, std::int64_t completion, std::int64_t cost) {
    AccountingInput in;
    in.scopes = {{"user", "alice", nullptr}, {"group", "eng", nullptr}, {"total", "all", nullptr}};
    in.model = "openai/gpt-4o-mini";
    in.usage.prompt_tokens = prompt;
    in.usage.completion_tokens = completion;
    in.usage.present = true;
    in.cost_micros = cost;
    return in;
}

}  // namespace

TEST(Accounting, EveryScopeAndModelAllWindows) {
    const auto m = by_key(build_accounting(input(120, 30, 450), kNow, false));
    // 3 scopes x 3 metrics x 4 windows, plus the model: 3 metrics + req, x 4.
    EXPECT_EQ(m.size(), 3u * 3 * 4 + 4 * 4);
    const std::vector<std::pair<std::string, std::string>> scopes = {
        {"user", "alice"}, {"group", "eng"}, {"total", "all"}, {"model", "openai/gpt-4o-mini"}};
    for (const auto& [kind, id] : scopes) {
        for (int i = 0; i < kWindowCount; ++i) {
            const Window w = static_cast<Window>(i);
            EXPECT_EQ(m.at(key(kind, id, "tokin", w)), 120);
            EXPECT_EQ(m.at(key(kind, id, "tokout", w)), 30);
            EXPECT_EQ(m.at(key(kind, id, "cost", w)), 450);
            EXPECT_EQ(m.count(key(kind, id, "req", w)), kind == "model" ? 1u : 0u) << kind;
        }
    }
    for (int i = 0; i < kWindowCount; ++i) {
        EXPECT_EQ(m.at(key("model", "openai/gpt-4o-mini", "req", static_cast<Window>(i))), 1);
    }
}

TEST(Accounting, ZeroDirectionsSkipped) {
    // Embeddings: no completion tokens, and a free model: no cost.
    auto m = by_key(build_accounting(input(100, 0, 0), kNow, false));
    EXPECT_EQ(m.size(), 4u * 4 + 4);  // tokin for 4 scopes, model req
    for (const auto& [k, delta] : m) {
        EXPECT_TRUE(k.find(":tokout:") == std::string::npos && k.find(":cost:") == std::string::npos) << k;
    }
    // Nothing to count: only the model's request counter.
    m = by_key(build_accounting(input(0, 0, 0), kNow, false));
    ASSERT_EQ(m.size(), 4u);
    for (int i = 0; i < kWindowCount; ++i) {
        EXPECT_EQ(m.at(key("model", "openai/gpt-4o-mini", "req", static_cast<Window>(i))), 1);
    }
    // Negative values are skipped like zero.
    m = by_key(build_accounting(input(-5, 7, -1), kNow, false));
    EXPECT_EQ(m.size(), 4u * 4 + 4);
    EXPECT_EQ(m.at(key("user", "alice", "tokout", Window::Day)), 7);
}

TEST(Accounting, EstimatedUsageAllToTokin) {
    AccountingInput in = input(2048 / 4, 0, 0);
    in.estimated = true;
    in.usage.present = false;
    const auto m = by_key(build_accounting(in, kNow, false));
    EXPECT_EQ(m.at(key("user", "alice", "tokin", Window::Month)), 512);
    EXPECT_EQ(m.at(key("model", "openai/gpt-4o-mini", "tokin", Window::Min)), 512);
    EXPECT_EQ(m.count(key("user", "alice", "tokout", Window::Month)), 0u);
}

TEST(Accounting, Ttls) {
    for (bool in_process : {false, true}) {
        for (const Incr& in : build_accounting(input(1, 1, 1), kNow, in_process)) {
            Window w = Window::Min;
            const std::size_t colon = in.key.rfind(':');
            const std::size_t prev = in.key.rfind(':', colon - 1);
            ASSERT_TRUE(parse_window(in.key.substr(prev + 1, colon - prev - 1), w)) << in.key;
            EXPECT_EQ(in.ttl, in_process ? ttl_seconds_in_process(w) : ttl_seconds(w)) << in.key;
        }
    }
}

TEST(Accounting, NoScopesOrNoModel) {
    AccountingInput in = input(10, 10, 10);
    in.scopes.clear();
    auto m = by_key(build_accounting(in, kNow, false));
    EXPECT_EQ(m.size(), 4u * 4);  // model only
    in = input(10, 10, 10);
    in.model.clear();
    m = by_key(build_accounting(in, kNow, false));
    EXPECT_EQ(m.size(), 3u * 3 * 4);  // no model scope without a model
}

namespace llmgw {
namespace {

TEST(Accounting, ImplausibleUsageAboveTheCeiling) {
    Usage u;
    u.present = true;
    u.prompt_tokens = kDefaultMaxTokensPerRequest;
    u.completion_tokens = kDefaultMaxTokensPerRequest;
    EXPECT_TRUE(usage_plausible(u, kDefaultMaxTokensPerRequest));
    u.prompt_tokens = kDefaultMaxTokensPerRequest + 1;
    EXPECT_FALSE(usage_plausible(u, kDefaultMaxTokensPerRequest));
    u.prompt_tokens = 11;
    u.completion_tokens = INT64_MAX;
    EXPECT_FALSE(usage_plausible(u, kDefaultMaxTokensPerRequest));
    u.completion_tokens = -1;
    EXPECT_FALSE(usage_plausible(u, kDefaultMaxTokensPerRequest));
    u.completion_tokens = 7;
    EXPECT_TRUE(usage_plausible(u, 18));
    EXPECT_FALSE(usage_plausible(u, 10));
    u.malformed = true;   // a count the provider sent was not one: whatever the others say
    EXPECT_FALSE(usage_plausible(u, 18));
}

TEST(Accounting, WhichAnswersAreBilled) {
    BilledAnswer a;
    a.answered = true;
    a.success = true;
    for (EndState e : {EndState::Complete, EndState::StreamError, EndState::Cut, EndState::Stopped}) {
        a.end = e;
        a.streamed = false;
        EXPECT_TRUE(answer_billed(a)) << static_cast<int>(e);
        a.streamed = true;
        EXPECT_TRUE(answer_billed(a)) << static_cast<int>(e);
    }
    // Invalid: billed once part of it reached the client as a stream (what
    // it reported, else the estimate); a whole answer found invalid got a 502.
    a.end = EndState::Invalid;
    a.streamed = true;
    EXPECT_TRUE(answer_billed(a));
    a.streamed = false;
    EXPECT_FALSE(answer_billed(a));
    a.end = EndState::UpstreamError;
    a.success = false;
    EXPECT_FALSE(answer_billed(a));
    a.cancelled = true;
    EXPECT_FALSE(answer_billed(a));
    // Open: only a cancel of a 2xx answer that had begun.
    a.end = EndState::Open;
    EXPECT_FALSE(answer_billed(a));
    a.success = true;
    EXPECT_TRUE(answer_billed(a));
    a.cancelled = false;
    EXPECT_FALSE(answer_billed(a));
    // No answer: only a cancel.
    a.answered = false;
    EXPECT_FALSE(answer_billed(a));
    a.cancelled = true;
    EXPECT_TRUE(answer_billed(a));
}

TEST(Accounting, ModelDeltaCarriesItsOverflowId) {
    AccountingInput in;
    in.model = "openai/made-up";
    in.model_overflow = "openai/other";
    in.usage.prompt_tokens = 3;
    const std::vector<ScopeDelta> d = accounting_deltas(in);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].kind, "model");
    EXPECT_EQ(d[0].overflow_id, "openai/other");
}

}  // namespace
}  // namespace llmgw

// A delta's increments with the windows stamped once: per metric in enum
// order, per window, each with its window's bucket and TTL; zero metrics
// skipped.
TEST(Accounting, OneDeltaWithStamps) {
    ScopeDelta a;
    a.kind = "user";
    a.id = "alice";
    a.delta[kMetricTokIn] = 11;
    a.delta[kMetricCost] = 6;
    const std::time_t now = 1795781234;
    for (bool in_process : {false, true}) {
        const WindowStamps at(now, in_process);
        std::vector<Incr> out;
        append_incrs(a, at, out);
        ASSERT_EQ(out.size(), 8u);
        for (std::size_t i = 0; i < out.size(); ++i) {
            const Window w = static_cast<Window>(i % kWindowCount);
            const bool tokin = i < kWindowCount;
            EXPECT_EQ(out[i].key, counter_key("user", "alice", tokin ? "tokin" : "cost", w, bucket(w, now)));
            EXPECT_EQ(out[i].delta, tokin ? 11 : 6);
            EXPECT_EQ(out[i].ttl, in_process ? ttl_seconds_in_process(w) : ttl_seconds(w));
        }
    }
}

TEST(Accounting, AdmittedRequestDeltasCountOneRequestInEachDeferredScope) {
    AdmissionPlan plan;
    plan.deferred = {{"user", "alice"}, {"total", "all"}};
    const std::vector<ScopeDelta> d = admitted_request_deltas(plan);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].kind, "user");
    EXPECT_EQ(d[0].id, "alice");
    EXPECT_EQ(d[1].kind, "total");
    for (const ScopeDelta& x : d) {
        EXPECT_TRUE(x.overflow_id.empty());
        for (int m = 0; m < kMetricCount; ++m) EXPECT_EQ(x.delta[m], m == kMetricReq ? 1 : 0) << m;
    }
    EXPECT_TRUE(admitted_request_deltas(AdmissionPlan{}).empty());
}

TEST(Accounting, ScopeDeltaMetricsCountsTheNonZeroOnes) {
    ScopeDelta d;
    EXPECT_EQ(d.metrics(), 0u);
    d.delta[kMetricReq] = 1;
    d.delta[kMetricCost] = -3;
    EXPECT_EQ(d.metrics(), 2u);
}
