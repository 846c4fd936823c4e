// The billing decision: every outcome of a request's accounting, with its
// exact deltas in the order they are written.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/metering/billing.h"
#include "metering_fixture.h"

using namespace llmgw;

namespace {

const Price kPrice = test::price_2_10();

// A chat completion of user alice (group eng) to oai/gpt-4o-mini, answered
// whole with 200 and usage 100 in, 20 out; a body of 400 bytes.
CallObservation served() {
    CallObservation o;
    o.tally = Tally::Tokens;
    o.answer.answered = true;
    o.answer.end = EndState::Complete;
    o.answer.status = 200;
    o.answer.usage.prompt_tokens = 100;
    o.answer.usage.completion_tokens = 20;
    o.answer.usage.present = true;
    o.body_bytes = 400;
    o.model = "oai/gpt-4o-mini";
    o.provider = "oai";
    o.upstream_model = "gpt-4o-mini";
    o.scopes = {{"user", "alice", nullptr}, {"group", "eng", nullptr}, {"total", "all", nullptr}};
    o.price = &kPrice;
    o.user = "alice";
    return o;
}

// A streamed answer (BodyMode::Stream) that ended as end.
CallObservation streamed(EndState end) {
    CallObservation o = served();
    o.answer.streamed = true;
    o.answer.end = end;
    o.answer.usage = Usage();
    return o;
}

Usage usage(std::int64_t in, std::int64_t out) {
    Usage u;
    u.prompt_tokens = in;
    u.completion_tokens = out;
    u.present = true;
    return u;
}

// One line per delta: "kind id [>overflow] metric=value..." (zero metrics left out).
std::vector<std::string> lines(const Bill& b) {
    std::vector<std::string> out;
    for (const ScopeDelta& d : b.deltas) {
        std::string s = std::string(d.kind) + " " + std::string(d.id);
        if (!d.overflow_id.empty()) s += " >" + std::string(d.overflow_id);
        for (int m = 0; m < kMetricCount; ++m) {
            if (d.delta[m] != 0) s += " " + std::string(metric_name(static_cast<Metric>(m))) + "=" + std::to_string(d.delta[m]);
        }
        out.push_back(s);
    }
    return out;
}

// The scopes' lines of a usage (user, group, total, model).
std::vector<std::string> usage_lines(const std::string& model, const std::string& overflow, const std::string& m) {
    return {"user alice" + m, "group eng" + m, "total all" + m, "model " + model + " >" + overflow + " req=1" + m};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

const std::vector<std::string> kProvOk = {"prov oai att=1", "provmodel oai/gpt-4o-mini >oai/other att=1"};
const std::vector<std::string> kProvFailed = {"prov oai att=1 fail=1",
                                              "provmodel oai/gpt-4o-mini >oai/other att=1 fail=1"};

void expect_tally(const Bill& b, const std::string& model, std::int64_t in, std::int64_t out, std::int64_t cost) {
    EXPECT_TRUE(b.tallied);
    EXPECT_EQ(b.model(), model);
    EXPECT_EQ(b.prompt_tokens(), in);
    EXPECT_EQ(b.completion_tokens(), out);
    EXPECT_EQ(b.cost_micros(), cost);
}

}  // namespace

// ---- chat, messages, embeddings (Tally::Tokens) ----

TEST(Billing, ServedWithUsageRead) {
    const Bill b = bill_request(served());
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20 cost=400") + kProvOk);
    expect_tally(b, "oai/gpt-4o-mini", 100, 20, 400);
    EXPECT_EQ(b.line, UsageLine::Tokens);
    EXPECT_FALSE(b.estimated());
    EXPECT_FALSE(b.cancelled);
    EXPECT_FALSE(b.cut_off);
    EXPECT_EQ(b.implausible, Implausible::None);
}

TEST(Billing, ServedWithoutUsageIsEstimatedFromTheBody) {
    CallObservation o = served();
    o.answer.usage = Usage();
    o.answer.text_bytes = 400;   // not counted: the answer was not cancelled
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 cost=200") + kProvOk);
    expect_tally(b, "oai/gpt-4o-mini", 100, 0, 200);
    EXPECT_TRUE(b.estimated());
}

TEST(Billing, UpstreamErrorIsNotBilledAndCountsAFailure) {
    for (int status : {500, 503, 429}) {
        CallObservation o = served();
        o.answer.end = EndState::UpstreamError;
        o.answer.status = status;
        const Bill b = bill_request(o);
        EXPECT_EQ(lines(b), kProvFailed) << status;
        EXPECT_FALSE(b.tallied);
        EXPECT_EQ(b.line, UsageLine::None);
    }
    // A 4xx other than 429 is the caller's error: an attempt, no failure.
    CallObservation o = served();
    o.answer.end = EndState::UpstreamError;
    o.answer.status = 400;
    EXPECT_EQ(lines(bill_request(o)), kProvOk);
}

TEST(Billing, NoAnswerIsNotBilledAndCountsAFailure) {
    CallObservation o = served();
    o.answer = AnswerFacts();
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), kProvFailed);
    EXPECT_FALSE(b.tallied);
}

TEST(Billing, WholeAnswerFoundInvalidIsNotBilled) {
    CallObservation o = served();
    o.answer.end = EndState::Invalid;
    o.answer.status = 502;
    EXPECT_EQ(lines(bill_request(o)), kProvFailed);
}

TEST(Billing, StreamThatTurnedInvalidIsBilledAsCut) {
    CallObservation o = streamed(EndState::Invalid);
    o.answer.usage = usage(100, 7);
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=7 cost=270") + kProvFailed);
}

TEST(Billing, CutOffAtTheBudgetBillsWhatWasRelayed) {
    CallObservation o = streamed(EndState::Stopped);
    o.answer.usage = usage(100, 500);   // the provider's later count: never relayed
    o.relayed_usage = usage(90, 5);
    o.relayed_text_bytes = 80;          // 20 tokens: more than the 5 reported
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=90 tokout=20 cost=380") + kProvOk);
    expect_tally(b, "oai/gpt-4o-mini", 90, 20, 380);
    EXPECT_TRUE(b.cut_off);
    EXPECT_FALSE(b.estimated());
}

TEST(Billing, CutOffWithoutRelayedUsageIsEstimated) {
    CallObservation o = streamed(EndState::Stopped);
    o.relayed_text_bytes = 41;   // 10 tokens
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=10 cost=300") + kProvOk);
    EXPECT_TRUE(b.cut_off);
    EXPECT_TRUE(b.estimated());
}

TEST(Billing, ClientCancelWithFinalUsage) {
    CallObservation o = streamed(EndState::Complete);   // the drain read the answer to its end
    o.cancelled = true;
    o.answer.usage = usage(100, 20);
    o.answer.text_bytes = 4000;
    const Bill b = bill_request(o);
    // No provider attempt: a cancel is neither a success nor a failure.
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20 cost=400"));
    expect_tally(b, "oai/gpt-4o-mini", 100, 20, 400);
    EXPECT_TRUE(b.cancelled);
    EXPECT_FALSE(b.estimated());
}

TEST(Billing, ClientCancelWithoutUsageIsEstimatedFromTheTextCarried) {
    CallObservation o = streamed(EndState::Complete);
    o.cancelled = true;
    o.answer.text_bytes = 203;   // 50 tokens
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=50 cost=700"));
    EXPECT_TRUE(b.cancelled);
    EXPECT_TRUE(b.estimated());
}

TEST(Billing, DrainTimeOutIsEstimatedFromTheTextCarried) {
    // The drain's bound ended the call as nginx's time-out would: cut, no usage.
    CallObservation o = streamed(EndState::Cut);
    o.cancelled = true;
    o.answer.text_bytes = 400;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=100 cost=1200"));
    EXPECT_TRUE(b.estimated());
    EXPECT_TRUE(b.cancelled);
    EXPECT_FALSE(b.cut_off);
}

TEST(Billing, ClientCancelBeforeTheAnswerIsEstimated) {
    CallObservation o = served();
    o.answer = AnswerFacts();
    o.cancelled = true;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 cost=200"));
    EXPECT_TRUE(b.estimated());
}

TEST(Billing, ClientCancelOfAnErrorStatusIsNotBilled) {
    CallObservation o = served();
    o.answer.end = EndState::Open;
    o.answer.status = 500;
    o.cancelled = true;
    const Bill b = bill_request(o);
    EXPECT_TRUE(b.deltas.empty());
    EXPECT_FALSE(b.tallied);
}

TEST(Billing, MalformedUsageIsEstimatedWithANote) {
    CallObservation o = served();
    o.answer.usage = usage(7, 20);
    o.answer.usage.malformed = true;   // e.g. 1e30 tokens out: the whole usage is unread
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 cost=200") + kProvOk);
    EXPECT_EQ(b.implausible, Implausible::Malformed);
    EXPECT_TRUE(b.estimated());
}

TEST(Billing, UsageOverMaxTokensIsEstimatedWithTheFigures) {
    CallObservation o = served();
    o.max_tokens_per_request = 1000;
    o.answer.usage = usage(7, 5000);
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 cost=200") + kProvOk);
    EXPECT_EQ(b.implausible, Implausible::OverMax);
    EXPECT_EQ(b.reported.prompt_tokens, 7);
    EXPECT_EQ(b.reported.completion_tokens, 5000);
    EXPECT_TRUE(b.estimated());
}

TEST(Billing, RelayedUsageOverMaxTokensIsEstimatedFromTheRelayedText) {
    CallObservation o = streamed(EndState::Stopped);
    o.max_tokens_per_request = 1000;
    o.relayed_usage = usage(2000, 3);
    o.relayed_text_bytes = 40;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=10 cost=300") + kProvOk);
    EXPECT_EQ(b.implausible, Implausible::OverMax);
    EXPECT_EQ(b.reported.prompt_tokens, 2000);
    EXPECT_TRUE(b.estimated());
    EXPECT_TRUE(b.cut_off);
}

TEST(Billing, FreeModelCostsNothing) {
    Price free = kPrice;
    free.free = true;
    CallObservation o = served();
    o.price = &free;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20") + kProvOk);
    expect_tally(b, "oai/gpt-4o-mini", 100, 20, 0);
}

TEST(Billing, UnpricedModelCostsNothing) {
    CallObservation o = served();
    o.price = nullptr;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20") + kProvOk);
    expect_tally(b, "oai/gpt-4o-mini", 100, 20, 0);
}

TEST(Billing, FailoverBillsTheAnsweringTarget) {
    Price dear;
    dear.input_micros_per_mtok = 3'000'000;
    dear.output_micros_per_mtok = 15'000'000;
    CallObservation o = served();
    o.model = "ant/claude";
    o.provider = "ant";
    o.upstream_model = "claude-3-5-haiku";
    o.price = &dear;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), (usage_lines("ant/claude", "ant/other", " tokin=100 tokout=20 cost=600") +
                         std::vector<std::string>{"prov ant att=1", "provmodel ant/claude-3-5-haiku >ant/other att=1"}));
    expect_tally(b, "ant/claude", 100, 20, 600);
}

// ---- images and audio (Tally::Requests) ----

TEST(Billing, RequestsOnlyAfterACompleteAnswer) {
    CallObservation o = served();
    o.tally = Tally::Requests;
    o.model = "oai/dall-e-3";
    o.upstream_model = "dall-e-3";
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), (std::vector<std::string>{"model oai/dall-e-3 >oai/other req=1", "prov oai att=1",
                                                  "provmodel oai/dall-e-3 >oai/other att=1"}));
    expect_tally(b, "oai/dall-e-3", 0, 0, 0);
    EXPECT_EQ(b.line, UsageLine::Requests);
}

TEST(Billing, RequestsOnlyNothingForAnIncompleteAnswer) {
    CallObservation o = streamed(EndState::Cut);
    o.tally = Tally::Requests;
    o.model = "oai/tts-1";
    o.upstream_model = "tts-1";
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), (std::vector<std::string>{"prov oai att=1", "provmodel oai/tts-1 >oai/other att=1"}));
    EXPECT_FALSE(b.tallied);
    EXPECT_EQ(b.line, UsageLine::None);
    // Cancelled before its end: nothing at all.
    o.cancelled = true;
    EXPECT_TRUE(bill_request(o).deltas.empty());
}

// ---- passthrough (Tally::Sniffed) ----

namespace {

CallObservation passthrough(std::string_view answer_model, bool with_usage) {
    CallObservation o = served();
    o.tally = Tally::Sniffed;
    o.model = "";            // a passthrough's model is the one its answer names
    o.upstream_model = "";
    o.answer.model = answer_model;
    o.answer.usage = with_usage ? usage(10, 5) : Usage();
    o.price = answer_model.empty() ? nullptr : &kPrice;
    return o;
}

}  // namespace

TEST(Billing, PassthroughWithUsageAndModel) {
    const Bill b = bill_request(passthrough("gpt-4o", true));
    EXPECT_EQ(lines(b), (usage_lines("oai/gpt-4o", "oai/other", " tokin=10 tokout=5 cost=70") +
                         std::vector<std::string>{"prov oai att=1", "provmodel oai/gpt-4o >oai/other att=1"}));
    expect_tally(b, "oai/gpt-4o", 10, 5, 70);
    EXPECT_EQ(b.line, UsageLine::Passthrough);
    EXPECT_FALSE(b.without_usage);
    EXPECT_FALSE(b.estimated());
}

TEST(Billing, PassthroughWithModelWithoutUsage) {
    const Bill b = bill_request(passthrough("gpt-4o", false));
    EXPECT_EQ(lines(b), (std::vector<std::string>{"model oai/gpt-4o >oai/other req=1", "prov oai att=1",
                                                  "provmodel oai/gpt-4o >oai/other att=1"}));
    expect_tally(b, "oai/gpt-4o", 0, 0, 0);
    EXPECT_EQ(b.line, UsageLine::Passthrough);
    EXPECT_TRUE(b.without_usage);
}

TEST(Billing, PassthroughWithUsageWithoutModel) {
    CallObservation o = passthrough("", true);
    o.price = &kPrice;   // no model named: never priced
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), (std::vector<std::string>{"user alice tokin=10 tokout=5", "group eng tokin=10 tokout=5",
                                                  "total all tokin=10 tokout=5", "prov oai att=1",
                                                  "provmodel oai/other >oai/other att=1"}));
    expect_tally(b, "", 10, 5, 0);
    EXPECT_FALSE(b.without_usage);
}

TEST(Billing, PassthroughWithoutUsageOrModelTalliesNothing) {
    const Bill b = bill_request(passthrough("", false));
    EXPECT_EQ(lines(b), (std::vector<std::string>{"prov oai att=1", "provmodel oai/other >oai/other att=1"}));
    EXPECT_FALSE(b.tallied);
    EXPECT_EQ(b.line, UsageLine::None);
}

TEST(Billing, PassthroughImplausibleUsageIsNotEstimated) {
    CallObservation o = passthrough("gpt-4o", true);
    o.answer.usage.malformed = true;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), (std::vector<std::string>{"model oai/gpt-4o >oai/other req=1", "prov oai att=1",
                                                  "provmodel oai/gpt-4o >oai/other att=1"}));
    EXPECT_TRUE(b.without_usage);
    EXPECT_EQ(b.implausible, Implausible::None);
}

TEST(Billing, PassthroughCancelledBeforeTheAnswerNamesNoModel) {
    CallObservation o = passthrough("gpt-4o", false);
    o.answer.answered = false;   // what the codec holds is not an answer
    o.cancelled = true;
    const Bill b = bill_request(o);
    EXPECT_TRUE(b.deltas.empty());
    EXPECT_FALSE(b.tallied);
}

// ---- statistics and provider counters ----

TEST(Billing, StatisticsScopesFollowTheModelScope) {
    CallObservation o = served();
    o.stat_user_model = true;
    o.stat_latency = true;
    o.elapsed_ms = 420;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), (usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20 cost=400") +
                         std::vector<std::string>{
                             "usermodel alice|oai/gpt-4o-mini >alice|oai/other req=1 tokin=100 tokout=20 cost=400",
                             "lat oai/gpt-4o-mini|500 >oai/other|500 req=1"} +
                         kProvOk));
}

TEST(Billing, LatencyNeedsAnElapsedTime) {
    CallObservation o = served();
    o.stat_latency = true;
    EXPECT_EQ(lines(bill_request(o)), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20 cost=400") + kProvOk);
    o.elapsed_ms = 120000;
    EXPECT_EQ(lines(bill_request(o))[4], "lat oai/gpt-4o-mini|inf >oai/other|inf req=1");
}

TEST(Billing, StatisticsOfRequestsOnlyAndPassthrough) {
    CallObservation o = served();
    o.tally = Tally::Requests;
    o.model = "oai/dall-e-3";
    o.upstream_model = "dall-e-3";
    o.stat_user_model = true;
    o.stat_latency = true;
    o.elapsed_ms = 0;
    EXPECT_EQ(lines(bill_request(o)),
              (std::vector<std::string>{"model oai/dall-e-3 >oai/other req=1",
                                        "usermodel alice|oai/dall-e-3 >alice|oai/other req=1",
                                        "lat oai/dall-e-3|100 >oai/other|100 req=1", "prov oai att=1",
                                        "provmodel oai/dall-e-3 >oai/other att=1"}));
    // A passthrough whose answer names no model has no model scope: no statistics.
    CallObservation p = passthrough("", true);
    p.stat_user_model = true;
    p.stat_latency = true;
    p.elapsed_ms = 10;
    EXPECT_EQ(lines(bill_request(p)).size(), 5u);
}

TEST(Billing, NoStatisticsWhenNothingIsBilled) {
    CallObservation o = served();
    o.answer.end = EndState::UpstreamError;
    o.answer.status = 500;
    o.stat_user_model = true;
    o.stat_latency = true;
    o.elapsed_ms = 50;
    EXPECT_EQ(lines(bill_request(o)), kProvFailed);
}

TEST(Billing, ProviderCountersOnceAndNotWhenCancelled) {
    CallObservation o = served();
    o.call_accounted = true;
    EXPECT_EQ(lines(bill_request(o)), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20 cost=400"));
    o.call_accounted = false;
    o.cancelled = true;
    EXPECT_EQ(lines(bill_request(o)), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20 cost=400"));
}

TEST(Billing, AttemptOfACallThatDidNotAnswerTheClient) {
    CallObservation o = served();
    o.answer.end = EndState::UpstreamError;
    o.answer.status = 503;
    EXPECT_EQ(lines(bill_attempt(o)), kProvFailed);
    o.call_accounted = true;
    EXPECT_TRUE(bill_attempt(o).deltas.empty());
    // A passthrough's model is the one its answer names.
    CallObservation p = passthrough("gpt-4o", false);
    p.answer.end = EndState::UpstreamError;
    p.answer.status = 429;
    EXPECT_EQ(lines(bill_attempt(p)),
              (std::vector<std::string>{"prov oai att=1 fail=1", "provmodel oai/gpt-4o >oai/other att=1 fail=1"}));
}

TEST(Billing, AnswerFailed) {
    AnswerFacts a;
    EXPECT_TRUE(answer_failed(a));   // no answer
    a.answered = true;
    a.status = 200;
    for (EndState e : {EndState::Open, EndState::Complete, EndState::StreamError, EndState::Cut, EndState::Stopped}) {
        a.end = e;
        EXPECT_FALSE(answer_failed(a));
    }
    a.end = EndState::Invalid;
    EXPECT_TRUE(answer_failed(a));
    a.end = EndState::UpstreamError;
    for (int s : {400, 401, 404, 499}) {
        a.status = s;
        EXPECT_FALSE(answer_failed(a)) << s;
    }
    for (int s : {429, 500, 502, 599}) {
        a.status = s;
        EXPECT_TRUE(answer_failed(a)) << s;
    }
}

TEST(Billing, DeltasViewStringsTheBillOwnsAfterAMove) {
    CallObservation o = served();
    o.stat_user_model = true;
    o.stat_latency = true;
    o.elapsed_ms = 300;
    std::string user = "alice";
    o.user = user;
    Bill moved = bill_request(o);
    Bill b = std::move(moved);
    o = CallObservation();   // the observation's strings are gone
    user.assign(64, 'x');
    EXPECT_EQ(lines(b), (usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20 cost=400") +
                         std::vector<std::string>{
                             "usermodel alice|oai/gpt-4o-mini >alice|oai/other req=1 tokin=100 tokout=20 cost=400",
                             "lat oai/gpt-4o-mini|500 >oai/other|500 req=1"} +
                         kProvOk));
}

// ---- the response cache (llm_gateway_cache) ----

TEST(Billing, CacheHitCountsItsTokensApartAtNoCostAndNoProviderAttempt) {
    CallObservation o = served();
    o.cache = CacheUse::Hit;
    o.stat_latency = true;
    o.elapsed_ms = 3;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " chit=1 chitin=100 chitout=20"));
    expect_tally(b, "oai/gpt-4o-mini", 100, 20, 0);
    EXPECT_TRUE(b.cache_hit);
}

TEST(Billing, CacheMissIsBilledAsAnyCallAndCountedAsAMiss) {
    CallObservation o = served();
    o.cache = CacheUse::Miss;
    const Bill b = bill_request(o);
    EXPECT_EQ(lines(b), usage_lines("oai/gpt-4o-mini", "oai/other", " tokin=100 tokout=20 cost=400 cmiss=1") + kProvOk);
    EXPECT_FALSE(b.cache_hit);
}
