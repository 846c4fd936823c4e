// The response cache's core: the directive's settings, the per-request
// decision, the key, and the tool-call marks of each provider's answers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cache/cache_key.h"
#include "core/cache/cache_settings.h"
#include "core/cache/tool_call_scan.h"

using namespace llmgw;

namespace {

bool parse(std::vector<std::string_view> args, CacheSettings& s, std::string& err) {
    return parse_cache_settings(args, s, err);
}

std::string refusal(std::vector<std::string_view> args) {
    CacheSettings s;
    std::string err;
    EXPECT_FALSE(parse(args, s, err));
    return err;
}

CacheSettings on() {
    CacheSettings s;
    std::string err;
    EXPECT_TRUE(parse({"zone=llm"}, s, err)) << err;
    return s;
}

CacheAsk ask() {
    CacheAsk a;
    a.route_cacheable = true;
    a.group = "eng";
    return a;
}

CacheKeyParts parts() {
    CacheKeyParts p;
    p.provider = "oai";
    p.upstream_model = "gpt-4o-mini";
    p.method = "POST";
    p.path = "/chat/completions";
    p.scope = "group:eng";
    p.body = {"{\"model\":\"gpt-4o-mini\"}"};
    return p;
}

// Fed whole, byte by byte and in pieces of 7: the same verdict.
bool scan(AnswerWire w, const std::string& body) {
    ToolCallScan whole(w), bytes(w), sevens(w);
    whole.feed(body);
    for (char c : body) bytes.feed(std::string_view(&c, 1));
    for (std::size_t i = 0; i < body.size(); i += 7) sevens.feed(std::string_view(body).substr(i, 7));
    EXPECT_EQ(whole.found(), bytes.found()) << body;
    EXPECT_EQ(whole.found(), sevens.found()) << body;
    return whole.found();
}

}  // namespace

TEST(CacheSettings, ParsesEveryParameter) {
    CacheSettings s;
    std::string err;
    ASSERT_TRUE(parse({"zone=llm_cache", "scope=shared", "max_temperature=0.25", "tool_calls=on", "groups=eng,ops"}, s, err))
        << err;
    EXPECT_TRUE(s.on);
    EXPECT_EQ(s.zone, "llm_cache");
    EXPECT_TRUE(s.shared_scope);
    EXPECT_DOUBLE_EQ(s.max_temperature, 0.25);
    EXPECT_TRUE(s.tool_calls);
    EXPECT_EQ(s.groups, (std::vector<std::string>{"eng", "ops"}));
}

TEST(CacheSettings, DefaultsAndOff) {
    CacheSettings s = on();
    EXPECT_FALSE(s.shared_scope);
    EXPECT_DOUBLE_EQ(s.max_temperature, 1.0);
    EXPECT_FALSE(s.tool_calls);
    EXPECT_TRUE(s.groups.empty());
    std::string err;
    ASSERT_TRUE(parse({"off"}, s, err));
    EXPECT_FALSE(s.on);
}

TEST(CacheSettings, RefusesWithASentence) {
    EXPECT_EQ(refusal({"scope=group"}), "zone= is required: the proxy_cache_path keys_zone the provider locations cache in");
    EXPECT_EQ(refusal({"zone="}), "zone= must name a proxy_cache_path keys_zone (letters, digits, '_', '-', '.')");
    EXPECT_EQ(refusal({"zone=a b"}), "zone= must name a proxy_cache_path keys_zone (letters, digits, '_', '-', '.')");
    EXPECT_EQ(refusal({"zone=z", "scope=team"}), "scope= must be \"group\" or \"shared\"");
    for (std::string_view t : {"max_temperature=", "max_temperature=2.5", "max_temperature=-1", "max_temperature=nan",
                               "max_temperature=1x", "max_temperature=inf"}) {
        EXPECT_EQ(refusal({"zone=z", t}), "max_temperature= must be a number from 0 to 2") << t;
    }
    EXPECT_EQ(refusal({"zone=z", "tool_calls=yes"}), "tool_calls= must be \"on\" or \"off\"");
    EXPECT_EQ(refusal({"zone=z", "groups=a,,b"}), "groups= must list group names separated by commas");
    EXPECT_EQ(refusal({"zone=z", "groups="}), "groups= must list group names separated by commas");
    EXPECT_EQ(refusal({"zone=z", "off"}), "\"off\" takes no other parameter");
    EXPECT_EQ(refusal({"zone=z", "ttl=5"}), "unknown parameter \"ttl=5\" (zone=, scope=, max_temperature=, tool_calls=, groups=)");
}

TEST(CacheDecision, EachReason) {
    CacheSettings s = on();
    EXPECT_EQ(cache_decision(s, ask()), CacheSkip::None);
    EXPECT_EQ(cache_decision(CacheSettings(), ask()), CacheSkip::Off);
    CacheAsk a = ask();
    a.route_cacheable = false;
    EXPECT_EQ(cache_decision(s, a), CacheSkip::Route);
    s.groups = {"ops"};
    EXPECT_EQ(cache_decision(s, ask()), CacheSkip::Group);
    s.groups = {"ops", "eng"};
    EXPECT_EQ(cache_decision(s, ask()), CacheSkip::None);
    a = ask();
    a.cache_control = "max-age=0, No-Cache";
    EXPECT_EQ(cache_decision(s, a), CacheSkip::Client);
    a.cache_control = "no-store";
    EXPECT_EQ(cache_decision(s, a), CacheSkip::Client);
    a.cache_control = "max-age=60,no-transform";
    EXPECT_EQ(cache_decision(s, a), CacheSkip::None);
    a = ask();
    a.temperature = 1.0;
    EXPECT_EQ(cache_decision(s, a), CacheSkip::None);   // at the bound: cached
    a.temperature = 1.01;
    EXPECT_EQ(cache_decision(s, a), CacheSkip::Temperature);
    s.max_temperature = 0;
    a.temperature = 0;
    EXPECT_EQ(cache_decision(s, a), CacheSkip::None);
    a.temperature = -1;   // none named
    EXPECT_EQ(cache_decision(s, a), CacheSkip::None);
}

TEST(CacheControl, Directives) {
    EXPECT_TRUE(cache_control_bypasses("no-cache"));
    EXPECT_TRUE(cache_control_bypasses(" NO-STORE "));
    EXPECT_TRUE(cache_control_bypasses("no-cache=\"set-cookie\""));
    EXPECT_FALSE(cache_control_bypasses(""));
    EXPECT_FALSE(cache_control_bypasses("no-cachex, max-age=3"));
    EXPECT_FALSE(cache_control_bypasses("private"));
}

TEST(CacheKey, EveryPartCounts) {
    const std::string base = cache_key(parts());
    ASSERT_EQ(base.size(), 64u);
    EXPECT_EQ(base.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_EQ(cache_key(parts()), base);
    std::vector<std::string> keys;
    CacheKeyParts p = parts();
    p.provider = "oai2";
    keys.push_back(cache_key(p));
    p = parts();
    p.upstream_model = "gpt-4o";
    keys.push_back(cache_key(p));
    p = parts();
    p.path = "/embeddings";
    keys.push_back(cache_key(p));
    p = parts();
    p.scope = "group:ops";
    keys.push_back(cache_key(p));
    p = parts();
    p.scope = "shared";
    keys.push_back(cache_key(p));
    p = parts();
    p.headers = {{"anthropic-beta", "x"}};
    keys.push_back(cache_key(p));
    p = parts();
    p.body = {"{\"model\":\"gpt-4o-mini\",\"temperature\":0}"};
    keys.push_back(cache_key(p));
    // Parts never run into each other.
    p = parts();
    p.provider = "oaigpt-4o-mini";
    p.upstream_model = "";
    keys.push_back(cache_key(p));
    for (const std::string& k : keys) EXPECT_NE(k, base);
    for (std::size_t i = 0; i < keys.size(); ++i) {
        for (std::size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << i << " " << j;
    }
}

TEST(CacheKey, BodyPiecesHashAsTheirConcatenationAndHeaderNamesAnyCase) {
    CacheKeyParts a = parts(), b = parts();
    a.body = {"{\"model\":", "\"gpt-4o-mini\"}"};
    EXPECT_EQ(cache_key(a), cache_key(b));
    a = parts();
    b = parts();
    a.headers = {{"Anthropic-Beta", "x"}};
    b.headers = {{"anthropic-beta", "x"}};
    EXPECT_EQ(cache_key(a), cache_key(b));
    EXPECT_TRUE(cache_keyed_header("OpenAI-Beta"));
    EXPECT_TRUE(cache_keyed_header("anthropic-version"));
    EXPECT_FALSE(cache_keyed_header("user-agent"));
    EXPECT_FALSE(cache_keyed_header("x-stainless-os"));
}

TEST(ToolCallScan, OpenAIChatWholeAndStreamed) {
    EXPECT_TRUE(scan(AnswerWire::OpenAIChat,
                     R"({"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type": "function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]})"));
    EXPECT_TRUE(scan(AnswerWire::OpenAIChat,
                     "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"function\","
                     "\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n"));
    EXPECT_TRUE(scan(AnswerWire::OpenAIChat, R"({"choices":[{"message":{"function_call" : {"name":"f"}}}]})"));
    // Text that mentions them, an empty list, a tool list of another format.
    EXPECT_FALSE(scan(AnswerWire::OpenAIChat,
                      R"({"choices":[{"message":{"content":"call \"function\" or \"function_call\": now","tool_calls":[]},"finish_reason":"stop"}]})"));
    EXPECT_FALSE(scan(AnswerWire::OpenAIChat, R"({"choices":[{"message":{"content":"function"}}]})"));
    EXPECT_FALSE(scan(AnswerWire::OpenAIChat, R"({"choices":[{"message":{"role" : "function"}}]})"));
}

TEST(ToolCallScan, ResponsesAnthropicGemini) {
    EXPECT_TRUE(scan(AnswerWire::Responses, R"({"output":[{"type":"function_call","call_id":"c","name":"f"}]})"));
    EXPECT_TRUE(scan(AnswerWire::Responses, R"({"item":{"type":"custom_tool_call"}})"));
    // The Responses API echoes the request's tools: not a call.
    EXPECT_FALSE(scan(AnswerWire::Responses,
                      R"({"output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"tools":[{"type":"function","name":"f"}]})"));
    EXPECT_TRUE(scan(AnswerWire::Anthropic, R"({"content":[{"type":"tool_use","id":"t","name":"f","input":{}}]})"));
    EXPECT_TRUE(scan(AnswerWire::Anthropic,
                     "event: content_block_start\ndata: {\"index\":1,\"content_block\":{\"type\":\n \"tool_use\"}}\n\n"));
    EXPECT_FALSE(scan(AnswerWire::Anthropic, R"({"content":[{"type":"text","text":"use \"tool_use\""}]})"));
    EXPECT_TRUE(scan(AnswerWire::Gemini, R"({"candidates":[{"content":{"parts":[{"functionCall" : {"name":"f"}}]}}]})"));
    EXPECT_FALSE(scan(AnswerWire::Gemini, R"({"candidates":[{"content":{"parts":[{"text":"\"functionCall\""}]}}]})"));
    EXPECT_FALSE(scan(AnswerWire::None, R"({"type":"tool_use","functionCall":1})"));
}

TEST(ToolCallScan, HugeAnswerIsScannedInBoundedMemory) {
    ToolCallScan s(AnswerWire::Anthropic);
    const std::string filler(1 << 16, 'x');
    for (int i = 0; i < 64; ++i) s.feed(filler);
    EXPECT_FALSE(s.found());
    s.feed("{\"type\":");
    s.feed("\"tool_use\"}");
    EXPECT_TRUE(s.found());
}
