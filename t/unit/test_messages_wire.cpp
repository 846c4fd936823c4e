// The Anthropic Messages client side: request translation to the OpenAI chat
// shape and the Anthropic response writer.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include <rapidjson/document.h>

#include "core/codec/messages_wire.h"

using namespace llmgw;

namespace {

struct Out {
    bool ok = false;
    std::string body;
    std::string err;
};

Out translate(const std::string& json, std::string_view model = "gpt-4o") {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseFullPrecisionFlag>(json.data(), json.size());
    EXPECT_FALSE(d.HasParseError()) << json;
    Out o;
    o.ok = openai_request_from_anthropic(d, model, o.body, o.err);
    return o;
}

std::string ok(const std::string& json) {
    Out o = translate(json);
    EXPECT_TRUE(o.ok) << o.err;
    EXPECT_TRUE(o.err.empty());
    return o.body;
}

std::string refused(const std::string& json) {
    Out o = translate(json);
    EXPECT_FALSE(o.ok) << o.body;
    return o.err;
}

// A request around the given members (max_tokens and one user message).
std::string req(const std::string& extra) {
    return R"({"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}])" +
           (extra.empty() ? std::string() : "," + extra) + "}";
}
const std::string kPrefix = R"({"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":100)";

// A request with one message whose content is the given JSON.
std::string msg(const std::string& role, const std::string& content) {
    return R"({"model":"m","max_tokens":5,"messages":[{"role":")" + role + R"(","content":)" + content + "}]}";
}

}  // namespace

// ---------------------------------------------------------------- requests

TEST(MessagesRequest, Minimal) {
    EXPECT_EQ(ok(req("")), kPrefix + "}");
}

TEST(MessagesRequest, SystemString) {
    EXPECT_EQ(ok(req(R"("system":"be brief")")),
              R"({"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":100})");
}

TEST(MessagesRequest, SystemBlocksJoinedCacheControlIgnored) {
    EXPECT_EQ(
        ok(req(R"("system":[{"type":"text","text":"one"},{"type":"text","text":"two","cache_control":{"type":"ephemeral"}}])")),
        R"({"model":"gpt-4o","messages":[{"role":"system","content":"one\n\ntwo"},{"role":"user","content":"hi"}],"max_tokens":100})");
}

TEST(MessagesRequest, EmptySystemOmitted) {
    EXPECT_EQ(ok(req(R"("system":"")")), kPrefix + "}");
    EXPECT_EQ(ok(req(R"("system":[])")), kPrefix + "}");
    EXPECT_EQ(ok(req(R"("system":null)")), kPrefix + "}");
}

TEST(MessagesRequest, MultiTurnWithImages) {
    const std::string in = R"({"model":"claude","max_tokens":1024,"messages":[
        {"role":"user","content":[
            {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
            {"type":"text","text":"what is this?","cache_control":{"type":"ephemeral"}}]},
        {"role":"assistant","content":"A logo."},
        {"role":"user","content":[
            {"type":"text","text":"and this?"},
            {"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}]},
        {"role":"assistant","content":[{"type":"text","text":"A cat."},{"type":"text","text":"Grey."}]},
        {"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]},
        {"role":"user","content":[{"type":"text","text":"only"}]}
    ]})";
    EXPECT_EQ(ok(in),
              R"({"model":"gpt-4o","messages":[)"
              R"({"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"text","text":"what is this?"}]},)"
              R"({"role":"assistant","content":"A logo."},)"
              R"({"role":"user","content":[{"type":"text","text":"and this?"},{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]},)"
              R"({"role":"assistant","content":"A cat.\n\nGrey."},)"
              R"({"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]},)"
              R"({"role":"user","content":"only"}],"max_tokens":1024})");
}

TEST(MessagesRequest, ToolRoundTripWithTwoParallelTools) {
    const std::string in = R"({"model":"claude","max_tokens":300,
        "system":"use tools",
        "tools":[
            {"name":"get_weather","description":"Weather for a city","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","maximum":14,"minimum":0.5}},"required":["city"]},"cache_control":{"type":"ephemeral"}},
            {"type":"custom","name":"get_time","input_schema":{"type":"object"}}],
        "tool_choice":{"type":"auto","disable_parallel_tool_use":false},
        "messages":[
        {"role":"user","content":"weather and time in Paris?"},
        {"role":"assistant","content":[
            {"type":"thinking","thinking":"hmm","signature":"sig"},
            {"type":"text","text":"Checking."},
            {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris","days":2}},
            {"type":"tool_use","id":"toolu_2","name":"get_time","input":{}}]},
        {"role":"user","content":[
            {"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},
            {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"12:00"},{"type":"text","text":"CET"}],"is_error":false},
            {"type":"text","text":"thanks"}]},
        {"role":"assistant","content":[
            {"type":"redacted_thinking","data":"xx"},
            {"type":"tool_use","id":"toolu_3","name":"get_time","input":{"tz":"UTC"}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_3","content":"tz unknown","is_error":true}]}
    ]})";
    EXPECT_EQ(ok(in),
              R"({"model":"gpt-4o","messages":[)"
              R"({"role":"system","content":"use tools"},)"
              R"({"role":"user","content":"weather and time in Paris?"},)"
              R"({"role":"assistant","content":"Checking.","tool_calls":[)"
              R"({"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"days\":2}"}},)"
              R"({"id":"toolu_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},)"
              R"({"role":"tool","tool_call_id":"toolu_1","content":"sunny"},)"
              R"({"role":"tool","tool_call_id":"toolu_2","content":"12:00\n\nCET"},)"
              R"({"role":"user","content":"thanks"},)"
              R"({"role":"assistant","content":null,"tool_calls":[)"
              R"({"id":"toolu_3","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]},)"
              R"({"role":"tool","tool_call_id":"toolu_3","content":"Error: tz unknown"}],)"
              R"("max_tokens":300,"tools":[)"
              R"({"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","maximum":14,"minimum":0.5}},"required":["city"]}}},)"
              R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}],)"
              R"("tool_choice":"auto"})");
}

TEST(MessagesRequest, ToolResultBeforeTextEvenWhenTextComesFirst) {
    EXPECT_EQ(ok(msg("user", R"([{"type":"text","text":"see"},{"type":"tool_result","tool_use_id":"t1"}])")),
              R"({"model":"gpt-4o","messages":[{"role":"tool","tool_call_id":"t1","content":""},{"role":"user","content":"see"}],"max_tokens":5})");
}

TEST(MessagesRequest, ToolUseWithoutInputAndOnlyThinking) {
    EXPECT_EQ(ok(msg("assistant", R"([{"type":"tool_use","id":"a","name":"f"}])")),
              R"({"model":"gpt-4o","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}],"max_tokens":5})");
    EXPECT_EQ(ok(msg("assistant", R"([{"type":"thinking","thinking":"x"}])")),
              R"({"model":"gpt-4o","messages":[{"role":"assistant","content":""}],"max_tokens":5})");
    EXPECT_EQ(ok(msg("user", "[]")), R"({"model":"gpt-4o","messages":[{"role":"user","content":""}],"max_tokens":5})");
}

TEST(MessagesRequest, ToolChoices) {
    const std::string tools = R"("tools":[{"name":"f","input_schema":{}}],)";
    const std::string tools_out = R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{}}}])";
    EXPECT_EQ(ok(req(tools + R"("tool_choice":{"type":"auto"})")), kPrefix + tools_out + R"(,"tool_choice":"auto"})");
    EXPECT_EQ(ok(req(tools + R"("tool_choice":{"type":"any"})")), kPrefix + tools_out + R"(,"tool_choice":"required"})");
    EXPECT_EQ(ok(req(tools + R"("tool_choice":{"type":"none"})")), kPrefix + tools_out + R"(,"tool_choice":"none"})");
    EXPECT_EQ(ok(req(tools + R"("tool_choice":{"type":"tool","name":"f"})")),
              kPrefix + tools_out + R"(,"tool_choice":{"type":"function","function":{"name":"f"}}})");
    EXPECT_EQ(ok(req(tools + R"("tool_choice":{"type":"any","disable_parallel_tool_use":true})")),
              kPrefix + tools_out + R"(,"tool_choice":"required","parallel_tool_calls":false})");
    // No tools: tools and tool_choice are left out.
    EXPECT_EQ(ok(req(R"("tools":[],"tool_choice":{"type":"auto"})")), kPrefix + "}");
    EXPECT_EQ(ok(req(R"("tool_choice":{"type":"none"})")), kPrefix + "}");
}

TEST(MessagesRequest, SamplingStopMetadataStream) {
    EXPECT_EQ(ok(req(R"("stream":true,"metadata":{"user_id":"u-42"},"stop_sequences":["END","\n\nHuman:"],)"
                     R"("top_p":0.9,"temperature":0.5,"service_tier":"auto","context_management":{},"unknown":1,)"
                     R"("thinking":{"type":"disabled"})")),
              kPrefix + R"(,"temperature":0.5,"top_p":0.9,"stop":["END","\n\nHuman:"],"user":"u-42",)"
                        R"("stream":true,"stream_options":{"include_usage":true}})");
    EXPECT_EQ(ok(req(R"("stream":false,"temperature":1,"stop_sequences":[],"metadata":{}, "top_k":null)")),
              kPrefix + R"(,"temperature":1})");
}

TEST(MessagesRequest, InvalidUtf8AndControlCharactersComeOutValid) {
    EXPECT_EQ(ok(msg("user", "\"a\xff" "b\\u0001\"")),
              "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"a\xEF\xBF\xBD" "b\\u0001\"}],\"max_tokens\":5}");
}

TEST(MessagesRequest, HugeStrings) {
    const std::string big(3 << 20, 'x');
    const std::string body = ok(msg("user", R"([{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":")" + big + R"("}}])"));
    EXPECT_EQ(body, R"({"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,)" +
                        big + R"("}}]}],"max_tokens":5})");
}

TEST(MessagesRequest, Refusals) {
    EXPECT_EQ(refused(req(R"("top_k":5)")), "top_k is not supported for this model");
    EXPECT_EQ(refused(req(R"("container":"c1")")), "container is not supported for this model");
    EXPECT_EQ(refused(req(R"("mcp_servers":[])")), "mcp_servers is not supported for this model");
    EXPECT_EQ(refused(req(R"("thinking":{"type":"enabled","budget_tokens":2000})")),
              R"(thinking is not supported for this model; only {"type":"disabled"} is accepted)");
    EXPECT_EQ(refused(req(R"("thinking":{})")),
              R"(thinking is not supported for this model; only {"type":"disabled"} is accepted)");
    EXPECT_EQ(refused(req(R"("tools":[{"type":"web_search_20250305","name":"web_search"}])")),
              R"(tools[0]: tool type "web_search_20250305" is not supported for this model)");
    EXPECT_EQ(refused(req(R"("tools":[{"name":"f","input_schema":{}},{"type":"bash_20250124","name":"bash"}])")),
              R"(tools[1]: tool type "bash_20250124" is not supported for this model)");
    EXPECT_EQ(refused(msg("user", R"([{"type":"document","source":{}}])")),
              R"(messages[0].content[0]: content block type "document" is not supported for this model)");
    EXPECT_EQ(refused(msg("user", R"([{"type":"text","text":"a"},{"type":"search_result"}])")),
              R"(messages[0].content[1]: content block type "search_result" is not supported for this model)");
    EXPECT_EQ(refused(msg("user", R"([{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{}}]}])")),
              "messages[0].content[0].content[0]: images in tool_result are not supported for this model");
    EXPECT_EQ(refused(msg("user", R"([{"type":"tool_result","tool_use_id":"t","content":[{"type":"document"}]}])")),
              R"(messages[0].content[0].content[0]: content block type "document" is not supported in tool_result)");
    EXPECT_EQ(refused(msg("user", R"([{"type":"tool_use","id":"a","name":"f","input":{}}])")),
              "messages[0].content[0]: tool_use blocks belong in assistant messages");
    EXPECT_EQ(refused(msg("assistant", R"([{"type":"tool_result","tool_use_id":"a"}])")),
              "messages[0].content[0]: tool_result blocks belong in user messages");
    EXPECT_EQ(refused(msg("assistant", R"([{"type":"image","source":{"type":"url","url":"u"}}])")),
              "messages[0].content[0]: image blocks are not supported in assistant messages");
    EXPECT_EQ(refused(msg("assistant", R"([{"type":"server_tool_use"}])")),
              R"(messages[0].content[0]: content block type "server_tool_use" is not supported for this model)");
}

TEST(MessagesRequest, EchoedNamesAreCutAndScrubbed) {
    EXPECT_EQ(refused(msg("user", R"([{"type":"sk-abcdefghijklmnopqrstuvwxyz"}])")),
              R"(messages[0].content[0]: content block type "[redacted]" is not supported for this model)");
    const std::string long_name(100, 'y');
    EXPECT_EQ(refused(req(R"("tools":[{"type":")" + long_name + "\\n\"}]")),
              "tools[0]: tool type \"" + std::string(64, 'y') + "...\" is not supported for this model");
    EXPECT_EQ(refused(req("\"tools\":[{\"type\":\"a\\nb\xff\"}]")),
              "tools[0]: tool type \"a b\xEF\xBF\xBD\" is not supported for this model");
}

TEST(MessagesRequest, RequiredMembers) {
    EXPECT_EQ(refused(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})"), "max_tokens is required");
    EXPECT_EQ(refused(R"({"model":"m","max_tokens":null,"messages":[]})"), "max_tokens is required");
    EXPECT_EQ(refused(R"({"model":"m","max_tokens":1})"), "messages is required");
    EXPECT_EQ(refused(R"({"model":"m","max_tokens":1,"messages":[]})"), "messages must not be empty");
}

TEST(MessagesRequest, WrongTypes) {
    const char* kMaxTokens = "max_tokens must be a positive integer";
    for (const char* v : {"0", "-1", "1.5", "100.0", "\"100\"", "true", "[]", "{}", "18446744073709551615", "1e30"})
        EXPECT_EQ(refused(R"({"model":"m","max_tokens":)" + std::string(v) + R"(,"messages":[]})"), kMaxTokens) << v;
    EXPECT_EQ(refused("[]"), "request body must be a JSON object");
    EXPECT_EQ(refused("\"x\""), "request body must be a JSON object");
    EXPECT_EQ(refused(req(R"("system":5)")), "system must be a string or an array of text blocks");
    EXPECT_EQ(refused(req(R"("system":{"type":"text","text":"a"})")), "system must be a string or an array of text blocks");
    EXPECT_EQ(refused(req(R"("system":["a"])")), "system[0] must be a text block with a string text");
    EXPECT_EQ(refused(req(R"("system":[{"type":"image"}])")), "system[0] must be a text block with a string text");
    EXPECT_EQ(refused(req(R"("system":[{"type":"text","text":1}])")), "system[0] must be a text block with a string text");
    EXPECT_EQ(refused(R"({"max_tokens":1,"messages":{}})"), "messages must be an array");
    EXPECT_EQ(refused(R"({"max_tokens":1,"messages":["hi"]})"), "messages[0] must be an object");
    EXPECT_EQ(refused(R"({"max_tokens":1,"messages":[{"role":"system","content":"x"}]})"),
              R"(messages[0].role must be "user" or "assistant")");
    EXPECT_EQ(refused(R"({"max_tokens":1,"messages":[{"content":"x"}]})"), R"(messages[0].role must be "user" or "assistant")");
    EXPECT_EQ(refused(R"({"max_tokens":1,"messages":[{"role":1,"content":"x"}]})"), R"(messages[0].role must be "user" or "assistant")");
    EXPECT_EQ(refused(R"({"max_tokens":1,"messages":[{"role":"user"}]})"),
              "messages[0].content must be a string or an array of content blocks");
    EXPECT_EQ(refused(msg("user", "5")), "messages[0].content must be a string or an array of content blocks");
    EXPECT_EQ(refused(msg("user", R"({"type":"text","text":"a"})")), "messages[0].content must be a string or an array of content blocks");
    EXPECT_EQ(refused(msg("user", R"(["a"])")), "messages[0].content[0] must be an object with a string type");
    EXPECT_EQ(refused(msg("user", R"([{"text":"a"}])")), "messages[0].content[0] must be an object with a string type");
    EXPECT_EQ(refused(msg("assistant", R"([{"type":7}])")), "messages[0].content[0] must be an object with a string type");
    EXPECT_EQ(refused(msg("user", R"([{"type":"text"}])")), "messages[0].content[0].text must be a string");
    EXPECT_EQ(refused(msg("assistant", R"([{"type":"text","text":[]}])")), "messages[0].content[0].text must be a string");
    EXPECT_EQ(refused(msg("user", R"([{"type":"image"}])")), "messages[0].content[0].source must be an object");
    EXPECT_EQ(refused(msg("user", R"([{"type":"image","source":"u"}])")), "messages[0].content[0].source must be an object");
    EXPECT_EQ(refused(msg("user", R"([{"type":"image","source":{"type":"file","file_id":"f"}}])")),
              R"(messages[0].content[0].source.type must be "base64" or "url")");
    EXPECT_EQ(refused(msg("user", R"([{"type":"image","source":{"type":"base64","data":"x"}}])")),
              "messages[0].content[0].source.media_type must be a string");
    EXPECT_EQ(refused(msg("user", R"([{"type":"image","source":{"type":"base64","media_type":"image/png","data":1}}])")),
              "messages[0].content[0].source.data must be a string");
    EXPECT_EQ(refused(msg("user", R"([{"type":"image","source":{"type":"url","url":{}}}])")),
              "messages[0].content[0].source.url must be a string");
    EXPECT_EQ(refused(msg("user", R"([{"type":"tool_result"}])")), "messages[0].content[0].tool_use_id must be a string");
    EXPECT_EQ(refused(msg("user", R"([{"type":"tool_result","tool_use_id":"t","is_error":"yes"}])")),
              "messages[0].content[0].is_error must be a boolean");
    EXPECT_EQ(refused(msg("user", R"([{"type":"tool_result","tool_use_id":"t","content":5}])")),
              "messages[0].content[0].content must be a string or an array of text blocks");
    EXPECT_EQ(refused(msg("user", R"([{"type":"tool_result","tool_use_id":"t","content":[{"type":"text"}]}])")),
              "messages[0].content[0].content[0].text must be a string");
    EXPECT_EQ(refused(msg("user", R"([{"type":"tool_result","tool_use_id":"t","content":[3]}])")),
              "messages[0].content[0].content[0] must be an object with a string type");
    EXPECT_EQ(refused(msg("assistant", R"([{"type":"tool_use","name":"f","input":{}}])")), "messages[0].content[0].id must be a string");
    EXPECT_EQ(refused(msg("assistant", R"([{"type":"tool_use","id":"a","input":{}}])")), "messages[0].content[0].name must be a string");
    EXPECT_EQ(refused(msg("assistant", R"([{"type":"tool_use","id":"a","name":"f","input":"{}"}])")),
              "messages[0].content[0].input must be an object");
    EXPECT_EQ(refused(req(R"("stop_sequences":"END")")), "stop_sequences must be an array of strings");
    EXPECT_EQ(refused(req(R"("stop_sequences":["a",1])")), "stop_sequences must be an array of strings");
    EXPECT_EQ(refused(req(R"("temperature":"0.5")")), "temperature must be a number");
    EXPECT_EQ(refused(req(R"("top_p":true)")), "top_p must be a number");
    EXPECT_EQ(refused(req(R"("metadata":"u")")), "metadata must be an object");
    EXPECT_EQ(refused(req(R"("metadata":{"user_id":5})")), "metadata.user_id must be a string");
    EXPECT_EQ(refused(req(R"("stream":"true")")), "stream must be a boolean");
    EXPECT_EQ(refused(req(R"("thinking":true)")), "thinking must be an object");
    EXPECT_EQ(refused(req(R"("tools":{})")), "tools must be an array");
    EXPECT_EQ(refused(req(R"("tools":["f"])")), "tools[0] must be an object");
    EXPECT_EQ(refused(req(R"("tools":[{"type":1}])")), "tools[0].type must be a string");
    EXPECT_EQ(refused(req(R"("tools":[{"input_schema":{}}])")), "tools[0].name must be a string");
    EXPECT_EQ(refused(req(R"("tools":[{"name":"f","description":1,"input_schema":{}}])")), "tools[0].description must be a string");
    EXPECT_EQ(refused(req(R"("tools":[{"name":"f"}])")), "tools[0].input_schema must be an object");
    EXPECT_EQ(refused(req(R"("tools":[{"name":"f","input_schema":[]}])")), "tools[0].input_schema must be an object");
    EXPECT_EQ(refused(req(R"("tool_choice":"auto")")), "tool_choice must be an object");
    EXPECT_EQ(refused(req(R"("tool_choice":{})")), R"(tool_choice.type must be "auto", "any", "tool" or "none")");
    EXPECT_EQ(refused(req(R"("tool_choice":{"type":"required"})")), R"(tool_choice.type must be "auto", "any", "tool" or "none")");
    EXPECT_EQ(refused(req(R"("tool_choice":{"type":"tool"})")), "tool_choice.name must be a string");
    EXPECT_EQ(refused(req(R"("tool_choice":{"type":"auto","disable_parallel_tool_use":1})")),
              "tool_choice.disable_parallel_tool_use must be a boolean");
}

TEST(MessagesRequest, DeepNesting) {
    std::string deep;
    for (int i = 0; i < 300; ++i) deep += "{\"a\":";
    deep += "1";
    for (int i = 0; i < 300; ++i) deep += "}";
    EXPECT_EQ(refused(req(R"("tools":[{"name":"f","input_schema":)" + deep + "}]")), "tools[0].input_schema is nested too deeply");
    EXPECT_EQ(refused(msg("assistant", R"([{"type":"tool_use","id":"a","name":"f","input":)" + deep + "}]")),
              "messages[0].content[0].input is nested too deeply");
}

TEST(MessagesRequest, NumbersKeepTheirValue) {
    EXPECT_EQ(ok(req(R"("tools":[{"name":"f","input_schema":{"a":-9223372036854775808,"b":1e-7,"c":123456789012,"d":true,"e":null}}])")),
              kPrefix + R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"a":-9223372036854775808,"b":1e-7,"c":123456789012,"d":true,"e":null}}}]})");
}

// ---------------------------------------------------------------- errors

TEST(MessagesErrors, Envelope) {
    EXPECT_EQ(anthropic_error_json("rate_limit_error", "slow \"down\""),
              R"({"type":"error","error":{"type":"rate_limit_error","message":"slow \"down\""}})");
    EXPECT_EQ(anthropic_error_json("", "x\xff"), "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\xEF\xBF\xBD\"}}");
}

TEST(MessagesErrors, TypeForStatus) {
    EXPECT_EQ(anthropic_error_type(400), "invalid_request_error");
    EXPECT_EQ(anthropic_error_type(401), "authentication_error");
    EXPECT_EQ(anthropic_error_type(402), "billing_error");
    EXPECT_EQ(anthropic_error_type(403), "permission_error");
    EXPECT_EQ(anthropic_error_type(404), "not_found_error");
    EXPECT_EQ(anthropic_error_type(413), "request_too_large");
    EXPECT_EQ(anthropic_error_type(429), "rate_limit_error");
    EXPECT_EQ(anthropic_error_type(500), "api_error");
    EXPECT_EQ(anthropic_error_type(502), "api_error");
    EXPECT_EQ(anthropic_error_type(503), "api_error");
    EXPECT_EQ(anthropic_error_type(504), "api_error");
    EXPECT_EQ(anthropic_error_type(529), "overloaded_error");
    EXPECT_EQ(anthropic_error_type(422), "invalid_request_error");
    EXPECT_EQ(anthropic_error_type(408), "invalid_request_error");
    EXPECT_EQ(anthropic_error_type(501), "api_error");
    EXPECT_EQ(anthropic_error_type(0), "api_error");
    EXPECT_EQ(anthropic_error_type(-1), "api_error");
}

// ---------------------------------------------------------------- writer

namespace {

std::unique_ptr<ResponseWriter> writer() {
    WriterOptions o;
    o.model = "claude-alias";
    return make_anthropic_writer(o);
}

std::string whole(const ChatResponseIR& r) {
    std::string out;
    writer()->whole(r, out);
    return out;
}

using K = StreamEventIR::Kind;

StreamEventIR ev(K kind, std::string text = {}, std::size_t index = 0) {
    StreamEventIR e;
    e.kind = kind;
    e.text = std::move(text);
    e.index = index;
    return e;
}
StreamEventIR start_ev(std::string id) {
    StreamEventIR e = ev(K::Start);
    e.id = std::move(id);
    return e;
}
StreamEventIR tool_start(std::size_t index, std::string id, std::string name) {
    StreamEventIR e = ev(K::ToolStart, {}, index);
    e.id = std::move(id);
    e.name = std::move(name);
    return e;
}
StreamEventIR finish_ev(FinishReason f, std::string seq = {}) {
    StreamEventIR e = ev(K::Finish);
    e.finish = f;
    e.stop_sequence = std::move(seq);
    return e;
}
UsageIR usage(std::int64_t prompt, std::int64_t completion, std::int64_t read = 0, std::int64_t creation = 0) {
    UsageIR u;
    u.present = true;
    u.prompt = prompt;
    u.completion = completion;
    u.cache_read = read;
    u.cache_creation = creation;
    return u;
}
StreamEventIR usage_ev(const UsageIR& u) {
    StreamEventIR e = ev(K::Usage);
    e.usage = u;
    return e;
}

const std::string kNoUsage =
    R"("usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}})";

std::string msg_start(const std::string& id, int input) {
    return "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"" + id +
           R"(","type":"message","role":"assistant","model":"claude-alias","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":)" +
           std::to_string(input) + ",\"output_tokens\":0}}}\n\n";
}

bool is_id(const std::string& s, const std::string& prefix) {
    if (s.compare(0, prefix.size(), prefix) != 0 || s.size() != prefix.size() + 24) return false;
    for (std::size_t i = prefix.size(); i < s.size(); ++i)
        if (!std::isalnum(static_cast<unsigned char>(s[i]))) return false;
    return true;
}

}  // namespace

TEST(MessagesWriter, WholeText) {
    ChatResponseIR r;
    r.id = "chatcmpl-abc";
    r.text = "Hello!";
    r.reasoning = "thinking is dropped";
    r.finish = FinishReason::Stop;
    r.usage = usage(12, 5);
    EXPECT_EQ(whole(r),
              R"({"id":"msg_chatcmpl-abc","type":"message","role":"assistant","model":"claude-alias",)"
              R"("content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn","stop_sequence":null,)"
              R"("usage":{"input_tokens":12,"output_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}})");
}

TEST(MessagesWriter, WholeToolsAndCachedUsage) {
    ChatResponseIR r;
    r.id = "msg_01XYZ";
    r.text = "Let me check.";
    r.tool_calls.push_back({"call_1", "get_weather", R"({"city": "Paris", "days": [1, 2.5], "deep": {"x": null}})"});
    r.tool_calls.push_back({"call_2", "get_time", "{}"});
    r.finish = FinishReason::ToolCalls;
    r.usage = usage(1000, 40, 600, 300);
    EXPECT_EQ(whole(r),
              R"({"id":"msg_01XYZ","type":"message","role":"assistant","model":"claude-alias","content":[)"
              R"({"type":"text","text":"Let me check."},)"
              R"({"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris","days":[1,2.5],"deep":{"x":null}}},)"
              R"({"type":"tool_use","id":"call_2","name":"get_time","input":{}}],)"
              R"("stop_reason":"tool_use","stop_sequence":null,)"
              R"("usage":{"input_tokens":100,"output_tokens":40,"cache_creation_input_tokens":300,"cache_read_input_tokens":600}})");
}

TEST(MessagesWriter, WholeStopReasons) {
    const std::pair<FinishReason, const char*> cases[] = {
        {FinishReason::Stop, "end_turn"},       {FinishReason::None, "end_turn"},
        {FinishReason::Length, "max_tokens"},   {FinishReason::ToolCalls, "tool_use"},
        {FinishReason::ContentFilter, "refusal"},
    };
    for (const auto& c : cases) {
        ChatResponseIR r;
        r.id = "msg_1";
        r.finish = c.first;
        EXPECT_EQ(whole(r), R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-alias","content":[],"stop_reason":")" +
                                std::string(c.second) + R"(","stop_sequence":null,)" + kNoUsage);
    }
    ChatResponseIR r;
    r.id = "msg_1";
    r.text = "a";
    r.finish = FinishReason::StopSequence;
    r.stop_sequence = "END";
    EXPECT_EQ(whole(r), R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-alias","content":[{"type":"text","text":"a"}],)"
                        R"("stop_reason":"stop_sequence","stop_sequence":"END",)" + kNoUsage);
    r.stop_sequence.clear();  // not known: null
    EXPECT_EQ(whole(r), R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-alias","content":[{"type":"text","text":"a"}],)"
                        R"("stop_reason":"stop_sequence","stop_sequence":null,)" + kNoUsage);
}

TEST(MessagesWriter, WholeRefusalAndCacheLargerThanPrompt) {
    ChatResponseIR r;
    r.id = "msg_1";
    r.text = "Hmm. ";
    r.refusal = "I can't help with that.";
    r.finish = FinishReason::ContentFilter;
    r.usage = usage(10, 3, 8, 7);
    r.usage.reasoning = 2;
    EXPECT_EQ(whole(r),
              R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-alias","content":[{"type":"text","text":"Hmm. I can't help with that."}],)"
              R"("stop_reason":"refusal","stop_sequence":null,)"
              R"("usage":{"input_tokens":0,"output_tokens":3,"cache_creation_input_tokens":7,"cache_read_input_tokens":8}})");
}

TEST(MessagesWriter, WholeGeneratedIdsAndBadArguments) {
    ChatResponseIR r;
    r.tool_calls.push_back({"", "f", "not json"});
    r.tool_calls.push_back({"t2", "g", "[1,2]"});
    r.tool_calls.push_back({"t3", "h", "{\"a\":1"});
    r.tool_calls.push_back({"t4", "i", ""});
    const std::string out = whole(r);
    rapidjson::Document d;
    d.Parse(out.data(), out.size());
    ASSERT_FALSE(d.HasParseError()) << out;
    const std::string id = d["id"].GetString();
    EXPECT_TRUE(is_id(id, "msg_")) << id;
    const std::string tid = d["content"][0]["id"].GetString();
    EXPECT_TRUE(is_id(tid, "toolu_")) << tid;
    EXPECT_EQ(out, R"({"id":")" + id + R"(","type":"message","role":"assistant","model":"claude-alias","content":[)"
                   R"({"type":"tool_use","id":")" + tid + R"(","name":"f","input":{}},)"
                   R"({"type":"tool_use","id":"t2","name":"g","input":{}},)"
                   R"({"type":"tool_use","id":"t3","name":"h","input":{}},)"
                   R"({"type":"tool_use","id":"t4","name":"i","input":{}}],)"
                   R"("stop_reason":"end_turn","stop_sequence":null,)" + kNoUsage);
    EXPECT_NE(whole(r), out);  // fresh ids each time
}

TEST(MessagesWriter, WholeDeepArgumentsAndInvalidUtf8) {
    std::string deep;
    for (int i = 0; i < 300; ++i) deep += "{\"a\":";
    deep += "1";
    for (int i = 0; i < 300; ++i) deep += "}";
    ChatResponseIR r;
    r.id = "msg_1";
    r.text = "bad \xC3\x28 byte";
    r.tool_calls.push_back({"t1", "n\xff", deep});
    r.tool_calls.push_back({"t2", "n", "{\"k\xfe\":\"v\xc0\"}"});
    EXPECT_EQ(whole(r),
              "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-alias\",\"content\":["
              "{\"type\":\"text\",\"text\":\"bad \xEF\xBF\xBD( byte\"},"
              "{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"n\xEF\xBF\xBD\",\"input\":{}},"
              "{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"n\",\"input\":{\"k\xEF\xBF\xBD\":\"v\xEF\xBF\xBD\"}}],"
              "\"stop_reason\":\"end_turn\",\"stop_sequence\":null," + kNoUsage);
}

TEST(MessagesWriter, WholeHugeText) {
    ChatResponseIR r;
    r.id = "msg_1";
    r.text.assign(5 << 20, 'z');
    EXPECT_EQ(whole(r), R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-alias","content":[{"type":"text","text":")" +
                            r.text + R"("}],"stop_reason":"end_turn","stop_sequence":null,)" + kNoUsage);
}

TEST(MessagesWriter, Stream) {
    auto w = writer();
    std::string out;
    w->event(start_ev("chatcmpl-9"), out);
    w->event(usage_ev(usage(25, 0, 5, 0)), out);
    w->event(ev(K::Reasoning, "hidden"), out);
    w->event(ev(K::Text, "Hel"), out);
    w->event(ev(K::Text, "lo"), out);
    w->event(tool_start(0, "call_a", "get_weather"), out);
    w->event(ev(K::ToolArgs, "{\"city\":", 0), out);
    w->event(ev(K::ToolArgs, "\"Paris\"}", 0), out);
    w->event(finish_ev(FinishReason::ToolCalls), out);
    w->event(usage_ev(usage(25, 17, 5, 0)), out);
    w->end(out);
    EXPECT_EQ(out,
              msg_start("msg_chatcmpl-9", 0) +
              "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
              "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n"
              "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n"
              "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
              "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_a\",\"name\":\"get_weather\",\"input\":{}}}\n\n"
              "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\":\"}}\n\n"
              "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n"
              "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
              "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},"
              "\"usage\":{\"input_tokens\":20,\"output_tokens\":17,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":5}}\n\n"
              "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    std::string more;
    w->event(ev(K::Text, "late"), more);
    w->end(more);
    w->stream_error("late", "api_error", more);
    EXPECT_EQ(more, "");
}

TEST(MessagesWriter, StreamTwoToolsRefusalAndStopSequence) {
    auto w = writer();
    std::string out;
    w->event(start_ev("msg_7"), out);
    w->event(tool_start(0, "t0", "a"), out);
    w->event(ev(K::ToolArgs, "{}", 0), out);
    w->event(tool_start(1, "", "b"), out);
    w->event(ev(K::ToolArgs, "{\"late\":1}", 0), out);   // tool 0 is closed: dropped
    w->event(ev(K::ToolArgs, "", 1), out);               // empty: nothing
    w->event(ev(K::Refusal, "no"), out);
    w->event(ev(K::Text, ""), out);
    w->event(finish_ev(FinishReason::StopSequence, "##"), out);
    w->end(out);
    const std::string tid = out.substr(out.find("toolu_"), 30);
    EXPECT_TRUE(is_id(tid, "toolu_")) << tid;
    EXPECT_EQ(out,
              msg_start("msg_7", 0) +
              "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t0\",\"name\":\"a\",\"input\":{}}}\n\n"
              "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n"
              "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
              "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"" + tid + "\",\"name\":\"b\",\"input\":{}}}\n\n"
              "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
              "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
              "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"no\"}}\n\n"
              "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
              "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\"##\"}," + kNoUsage +
              "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
}

TEST(MessagesWriter, EventsBeforeStart) {
    auto w = writer();
    std::string out;
    w->event(usage_ev(usage(30, 0, 10, 0)), out);   // shown in message_start
    w->event(ev(K::Text, "x"), out);
    w->event(start_ev("late"), out);                // already started: ignored
    w->end(out);
    const std::string id = out.substr(out.find("msg_"), 28);
    EXPECT_TRUE(is_id(id, "msg_")) << id;
    EXPECT_EQ(out,
              msg_start(id, 20) +
              "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
              "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"
              "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
              "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},"
              "\"usage\":{\"input_tokens\":20,\"output_tokens\":0,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":10}}\n\n"
              "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
}

TEST(MessagesWriter, EmptyStream) {
    auto w = writer();
    std::string out;
    w->end(out);
    const std::string id = out.substr(out.find("msg_"), 28);
    EXPECT_EQ(out, msg_start(id, 0) +
                       "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null}," +
                       kNoUsage + "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
}

TEST(MessagesWriter, StreamError) {
    auto w = writer();
    std::string out;
    w->event(start_ev("msg_1"), out);
    w->event(ev(K::Text, "par"), out);
    out.clear();
    w->stream_error("the upstream stream ended before completion", "", out);
    EXPECT_EQ(out, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"the upstream stream ended before completion\"}}\n\n");
    out.clear();
    w->event(ev(K::Text, "more"), out);
    w->end(out);
    EXPECT_EQ(out, "");  // the stream is over

    auto w2 = writer();
    out.clear();
    StreamEventIR e = ev(K::Error, "Overloaded, key sk-abcdefghijklmnop");
    e.error_type = "overloaded_error";
    w2->event(e, out);
    w2->end(out);
    EXPECT_EQ(out, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded, key [redacted]\"}}\n\n");

    auto w3 = writer();
    out.clear();
    w3->stream_error("x\xff", "server_error", out);
    EXPECT_EQ(out, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\xEF\xBF\xBD\"}}\n\n");
}

TEST(MessagesWriter, ErrorBody) {
    auto w = writer();
    EXPECT_EQ(w->error_body("budget exceeded", "insufficient_quota", "budget_exceeded"),
              R"({"type":"error","error":{"type":"rate_limit_error","message":"budget exceeded"}})");
    EXPECT_EQ(w->error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
              R"({"type":"error","error":{"type":"authentication_error","message":"Incorrect API key provided."}})");
    EXPECT_EQ(w->error_body("bad", "invalid_request_error", "bad_request"),
              R"({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})");
    EXPECT_EQ(w->error_body("gone", "upstream_error", "bad_gateway"),
              R"({"type":"error","error":{"type":"api_error","message":"gone"}})");
    EXPECT_EQ(w->error_body("busy", "overloaded_error", ""),
              R"({"type":"error","error":{"type":"overloaded_error","message":"busy"}})");
    EXPECT_EQ(w->error_body("no", "permission_error", "forbidden"),
              R"({"type":"error","error":{"type":"permission_error","message":"no"}})");
}

TEST(MessagesWriter, StreamInvalidUtf8AndHugeDelta) {
    auto w = writer();
    std::string out;
    w->event(start_ev("msg_1"), out);
    out.clear();
    w->event(ev(K::Text, "\xE2\x82"), out);
    EXPECT_EQ(out, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
                   "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\xEF\xBF\xBD\"}}\n\n");
    out.clear();
    const std::string big(4 << 20, 'q');
    w->event(ev(K::Text, big), out);
    EXPECT_EQ(out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + big + "\"}}\n\n");
    out.clear();
    StreamEventIR u = usage_ev(usage(-5, -1, -3, -2));   // broken counts: never negative
    w->event(u, out);
    w->end(out);
    EXPECT_EQ(out, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
                   "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null}," + kNoUsage +
                   "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
}

TEST(MessagesRequest, EmptyAndNullBodies) {
    EXPECT_EQ(refused("{}"), "max_tokens is required");
    rapidjson::Value null_value;
    std::string body, err;
    EXPECT_FALSE(openai_request_from_anthropic(null_value, "m", body, err));
    EXPECT_EQ(err, "request body must be a JSON object");
    EXPECT_EQ(body, "");
}
