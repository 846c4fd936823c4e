// OpenAI chat request -> Anthropic Messages request, and Anthropic answers -> IR.
#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include "core/codec/anthropic_wire.h"

using namespace llmgw;

namespace {

// Translates a request given as JSON text; returns the body, or "ERR: <err>".
std::string tr(const std::string& json, std::int64_t default_max = 4096) {
    rapidjson::Document d;
    d.Parse(json.data(), json.size());
    if (d.HasParseError()) return "BAD TEST JSON";
    AnthropicRequestOptions o;
    o.default_max_tokens = default_max;
    std::string body, err;
    if (!anthropic_request_from_openai(d, "claude-x", o, body, err)) return "ERR: " + err;
    return body;
}

std::string with(const std::string& members) {
    return tr(R"({"model":"m","messages":[{"role":"user","content":"hi"}],)" + members + "}");
}

const std::string kHi = R"({"model":"claude-x","messages":[{"role":"user","content":"hi"}],"max_tokens":4096)";

}  // namespace

TEST(AnthropicRequest, Minimal) {
    EXPECT_EQ(tr(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})"), kHi + "}");
    EXPECT_EQ(tr(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})", 100),
              R"({"model":"claude-x","messages":[{"role":"user","content":"hi"}],"max_tokens":100})");
}

TEST(AnthropicRequest, RichConversation) {
    const std::string req = R"({"model":"m","messages":[
        {"role":"system","content":"Be brief."},
        {"role":"developer","content":[{"type":"text","text":"Use metric."}]},
        {"role":"user","content":[{"type":"text","text":"Look:"},
            {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
            {"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]},
        {"role":"assistant","content":"Checking.","tool_calls":[
            {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
            {"id":"call_2","type":"function","function":{"name":"get_time","arguments":""}}]},
        {"role":"tool","tool_call_id":"call_1","content":"Sunny"},
        {"role":"tool","tool_call_id":"call_2","content":"noon"},
        {"role":"user","content":"Thanks"}],
      "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
               {"type":"function","function":{"name":"get_time"}}],
      "tool_choice":{"type":"function","function":{"name":"get_weather"}},
      "parallel_tool_calls":false,
      "max_completion_tokens":300,"max_tokens":10,"temperature":0.5,"top_p":1,"stop":["END","STOP"],
      "user":"u-42","stream":true,"stream_options":{"include_usage":true}})";
    EXPECT_EQ(tr(req),
              R"({"model":"claude-x","system":"Be brief.\n\nUse metric.","messages":[)"
              R"({"role":"user","content":[{"type":"text","text":"Look:"},)"
              R"({"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},)"
              R"({"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}]},)"
              R"({"role":"assistant","content":[{"type":"text","text":"Checking."},)"
              R"({"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},)"
              R"({"type":"tool_use","id":"call_2","name":"get_time","input":{}}]},)"
              R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"Sunny"},)"
              R"({"type":"tool_result","tool_use_id":"call_2","content":"noon"},{"type":"text","text":"Thanks"}]}],)"
              R"("max_tokens":300,"temperature":0.5,"top_p":1.0,"stop_sequences":["END","STOP"],)"
              R"("tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},)"
              R"({"name":"get_time","input_schema":{"type":"object"}}],)"
              R"("tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},)"
              R"("metadata":{"user_id":"u-42"},"stream":true})");
}

TEST(AnthropicRequest, ToolChoiceForms) {
    EXPECT_EQ(with(R"("tool_choice":"auto")"), kHi + R"(,"tool_choice":{"type":"auto"}})");
    EXPECT_EQ(with(R"("tool_choice":"none")"), kHi + R"(,"tool_choice":{"type":"none"}})");
    EXPECT_EQ(with(R"("tool_choice":"required")"), kHi + R"(,"tool_choice":{"type":"any"}})");
    EXPECT_EQ(with(R"("parallel_tool_calls":false)"),
              kHi + R"(,"tool_choice":{"type":"auto","disable_parallel_tool_use":true}})");
    EXPECT_EQ(with(R"("parallel_tool_calls":true)"), kHi + "}");
    EXPECT_EQ(with(R"("stop":"X")"), kHi + R"(,"stop_sequences":["X"]})");
    EXPECT_EQ(with(R"("stop":[])"), kHi + "}");
    EXPECT_EQ(with(R"("n":1,"logprobs":false,"presence_penalty":0,"frequency_penalty":0,"logit_bias":{},"store":true,"response_format":{"type":"text"})"),
              kHi + "}");
}

TEST(AnthropicRequest, ReasoningEffortBecomesThinking) {
    EXPECT_EQ(with(R"("reasoning_effort":"low","max_tokens":5000)"),
              R"({"model":"claude-x","messages":[{"role":"user","content":"hi"}],"max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":1024}})");
    EXPECT_EQ(with(R"("reasoning_effort":"high")"),
              R"({"model":"claude-x","messages":[{"role":"user","content":"hi"}],"max_tokens":20480,"thinking":{"type":"enabled","budget_tokens":16384}})");
    EXPECT_EQ(with(R"("reasoning_effort":"none")"), kHi + "}");
}

TEST(AnthropicRequest, Refusals) {
    EXPECT_EQ(with(R"("n":2)"), "ERR: n greater than 1 is not supported by anthropic providers");
    EXPECT_EQ(with(R"("logprobs":true)"), "ERR: logprobs is not supported by anthropic providers");
    EXPECT_EQ(with(R"("top_logprobs":2)"), "ERR: top_logprobs is not supported by anthropic providers");
    EXPECT_EQ(with(R"("logit_bias":{"1":2})"), "ERR: logit_bias is not supported by anthropic providers");
    EXPECT_EQ(with(R"("presence_penalty":0.5)"), "ERR: presence_penalty is not supported by anthropic providers");
    EXPECT_EQ(with(R"("frequency_penalty":1)"), "ERR: frequency_penalty is not supported by anthropic providers");
    EXPECT_EQ(with(R"("seed":7)"), "ERR: seed is not supported by anthropic providers");
    EXPECT_EQ(with(R"("audio":{})"), "ERR: audio is not supported by anthropic providers");
    EXPECT_EQ(with(R"("modalities":["text","audio"])"), "ERR: audio in modalities is not supported by anthropic providers");
    EXPECT_EQ(with(R"("prediction":{})"), "ERR: prediction is not supported by anthropic providers");
    EXPECT_EQ(with(R"("functions":[])"), "ERR: functions is not supported by anthropic providers (use tools)");
    EXPECT_EQ(with(R"("response_format":{"type":"json_object"})"),
              "ERR: response_format json_object is not supported by anthropic providers");
    EXPECT_EQ(with(R"("response_format":{"type":"json_schema","json_schema":{}})"),
              "ERR: response_format json_schema is not supported by anthropic providers");
    EXPECT_EQ(with(R"("tools":[{"type":"web_search"}])"),
              "ERR: tools[0].type must be \"function\" (anthropic providers take function tools only)");
    EXPECT_EQ(tr(R"({"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]})"),
              "ERR: messages[0].content[0]: content part type \"input_audio\" is not supported by anthropic providers");
    EXPECT_EQ(tr(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]})"),
              "ERR: messages[0].content[0].image_url.url must be a base64 data URL (data:<type>;base64,<data>) or an http(s) URL");
    EXPECT_EQ(tr(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,"}}]}]})"),
              "ERR: messages[0].content[0].image_url.url must be a base64 data URL (data:<type>;base64,<data>) or an http(s) URL");
    EXPECT_EQ(tr(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"[1]"}}]}]})"),
              "ERR: messages[0].tool_calls[0].function.arguments must be a JSON object");
    EXPECT_EQ(tr(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}]})"),
              "ERR: messages[0].tool_calls[0].function.arguments must be a JSON object");
    EXPECT_EQ(tr(R"({"messages":[{"role":"wizard","content":"x"}]})"),
              "ERR: messages[0].role \"wizard\" is not supported by anthropic providers");
    EXPECT_EQ(tr(R"({"messages":[{"role":"system","content":"only"}]})"),
              "ERR: messages must hold at least one user, assistant or tool message");
}

TEST(AnthropicRequest, WrongTypes) {
    EXPECT_EQ(tr(R"([1])"), "ERR: the request body must be a JSON object");
    EXPECT_EQ(tr(R"({"messages":{}})"), "ERR: messages must be an array");
    EXPECT_EQ(tr(R"({})"), "ERR: messages must be an array");
    EXPECT_EQ(tr(R"({"messages":[1]})"), "ERR: messages[0] must be an object");
    EXPECT_EQ(tr(R"({"messages":[{"content":"x"}]})"), "ERR: messages[0].role must be a string");
    EXPECT_EQ(tr(R"({"messages":[{"role":"user","content":5}]})"), "ERR: messages[0].content must be a string or an array");
    EXPECT_EQ(tr(R"({"messages":[{"role":"user"}]})"), "ERR: messages[0].content is required");
    EXPECT_EQ(tr(R"({"messages":[{"role":"user","content":[{"type":"text","text":5}]}]})"),
              "ERR: messages[0].content[0].text must be a string");
    EXPECT_EQ(tr(R"({"messages":[{"role":"tool","content":"x"}]})"), "ERR: messages[0].tool_call_id must be a string");
    EXPECT_EQ(with(R"("max_tokens":"5")"), "ERR: max_tokens must be a positive integer");
    EXPECT_EQ(with(R"("max_tokens":0)"), "ERR: max_tokens must be a positive integer");
    EXPECT_EQ(with(R"("max_completion_tokens":1e30)"), "ERR: max_completion_tokens must be a positive integer");
    EXPECT_EQ(with(R"("temperature":"hot")"), "ERR: temperature must be a number");
    EXPECT_EQ(with(R"("stop":[1])"), "ERR: stop must be a string or an array of strings");
    EXPECT_EQ(with(R"("user":5)"), "ERR: user must be a string");
    EXPECT_EQ(with(R"("stream":"yes")"), "ERR: stream must be a boolean");
    EXPECT_EQ(with(R"("tools":{})"), "ERR: tools must be an array");
    EXPECT_EQ(with(R"("tools":[{"type":"function"}])"), "ERR: tools[0].function must be an object");
    EXPECT_EQ(with(R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])"),
              "ERR: tools[0].function.parameters must be an object");
    EXPECT_EQ(with(R"("tool_choice":5)"), "ERR: tool_choice must be a string or an object");
    EXPECT_EQ(with(R"("tool_choice":"maybe")"), "ERR: tool_choice must be auto, none, required or a function");
    EXPECT_EQ(with(R"("parallel_tool_calls":"no")"), "ERR: parallel_tool_calls must be a boolean");
    EXPECT_EQ(with(R"("reasoning_effort":"max")"), "ERR: reasoning_effort must be none, minimal, low, medium or high");
    EXPECT_EQ(with(R"("response_format":"json")"), "ERR: response_format.type must be a string");
}

TEST(AnthropicRequest, HostileText) {
    // Invalid UTF-8 in caller text comes out as U+FFFD; a refusal names the
    // offending value short, printable and scrubbed.
    EXPECT_EQ(tr("{\"messages\":[{\"role\":\"user\",\"content\":\"a\xff" "b\"}]}"),
              "{\"model\":\"claude-x\",\"messages\":[{\"role\":\"user\",\"content\":\"a\xEF\xBF\xBD" "b\"}],\"max_tokens\":4096}");
    std::string r = tr(R"({"messages":[{"role":"sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA\n","content":"x"}]})");
    EXPECT_EQ(r.find("AAAAAAAA"), std::string::npos) << r;
    EXPECT_EQ(r.find('\n'), std::string::npos) << r;
    // Deeply nested tool parameters are refused, never recursed into.
    std::string deep(300, '[');
    deep += std::string(300, ']');
    EXPECT_EQ(with(R"("tools":[{"type":"function","function":{"name":"f","parameters":{"a":)" + deep + "}}}]"),
              "ERR: tools[0].function.parameters is nested too deeply");
    // A big text passes through whole.
    std::string big(1 << 20, 'x');
    std::string out = tr(R"({"messages":[{"role":"user","content":")" + big + R"("}]})");
    EXPECT_NE(out.find(big), std::string::npos);
}

// ------------------------------------------------------------- the reader

namespace {

std::string kinds(const std::vector<StreamEventIR>& v) {
    std::string s;
    for (const auto& e : v) {
        switch (e.kind) {
        case StreamEventIR::Kind::Start: s += "Start(" + e.id + ")"; break;
        case StreamEventIR::Kind::Text: s += "Text(" + e.text + ")"; break;
        case StreamEventIR::Kind::Reasoning: s += "Reasoning(" + e.text + ")"; break;
        case StreamEventIR::Kind::Refusal: s += "Refusal(" + e.text + ")"; break;
        case StreamEventIR::Kind::ToolStart: s += "ToolStart(" + std::to_string(e.index) + "," + e.id + "," + e.name + ")"; break;
        case StreamEventIR::Kind::ToolArgs: s += "ToolArgs(" + std::to_string(e.index) + "," + e.text + ")"; break;
        case StreamEventIR::Kind::Finish: s += "Finish(" + std::to_string(static_cast<int>(e.finish)) + ")"; break;
        case StreamEventIR::Kind::Usage:
            s += "Usage(" + std::to_string(e.usage.prompt) + "," + std::to_string(e.usage.completion) + "," +
                 std::to_string(e.usage.cache_read) + "," + std::to_string(e.usage.cache_creation) + ")";
            break;
        case StreamEventIR::Kind::Error: s += "Error(" + e.error_type + ":" + e.text + ")"; break;
        }
        s += " ";
    }
    return s;
}

SseEvent ev(const std::string& name, const std::string& data) {
    SseEvent e;
    e.event = name;
    e.data = data;
    return e;
}

}  // namespace

TEST(AnthropicReader, Whole) {
    auto r = make_anthropic_reader();
    ChatResponseIR out;
    std::string err;
    ASSERT_TRUE(r->read_whole(
        R"({"id":"msg_1","type":"message","role":"assistant","model":"c","content":[)"
        R"({"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Hi "},{"type":"text","text":"there"},)"
        R"({"type":"tool_use","id":"toolu_1","name":"f","input":{"a":[1,2]}},{"type":"redacted_thinking","data":"x"}],)"
        R"("stop_reason":"tool_use","stop_sequence":null,)"
        R"("usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":3,"cache_read_input_tokens":7}})",
        out, err)) << err;
    EXPECT_EQ(out.id, "msg_1");
    EXPECT_EQ(out.text, "Hi there");
    EXPECT_EQ(out.reasoning, "hmm");
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].id, "toolu_1");
    EXPECT_EQ(out.tool_calls[0].name, "f");
    EXPECT_EQ(out.tool_calls[0].arguments, R"({"a":[1,2]})");
    EXPECT_EQ(out.finish, FinishReason::ToolCalls);
    EXPECT_TRUE(out.usage.present);
    EXPECT_EQ(out.usage.prompt, 20);
    EXPECT_EQ(out.usage.completion, 5);
    EXPECT_EQ(out.usage.cache_read, 7);
    EXPECT_EQ(out.usage.cache_creation, 3);
}

TEST(AnthropicReader, StopReasons) {
    const std::pair<const char*, FinishReason> cases[] = {
        {"end_turn", FinishReason::Stop},          {"pause_turn", FinishReason::Stop},
        {"stop_sequence", FinishReason::StopSequence}, {"max_tokens", FinishReason::Length},
        {"tool_use", FinishReason::ToolCalls},     {"refusal", FinishReason::ContentFilter},
        {"something_new", FinishReason::Stop},
    };
    for (const auto& [reason, want] : cases) {
        auto r = make_anthropic_reader();
        ChatResponseIR out;
        std::string err;
        ASSERT_TRUE(r->read_whole(std::string(R"({"type":"message","content":[],"stop_reason":")") + reason +
                                      R"(","stop_sequence":"END"})",
                                  out, err));
        EXPECT_EQ(out.finish, want) << reason;
        EXPECT_EQ(out.stop_sequence, "END");
    }
}

TEST(AnthropicReader, WholeMalformed) {
    const char* bad[] = {
        "",
        "{",
        "[]",
        R"({"type":"error","error":{"type":"overloaded_error","message":"x"}})",
        R"({"type":"message"})",
        R"({"type":"message","content":{}})",
        R"({"type":"message","content":[{"text":"no type"}]})",
        R"({"type":"message","content":[{"type":"text","text":5}]})",
        R"({"type":"message","content":[{"type":"tool_use","name":"f"}]})",
        "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]",
    };
    for (const char* b : bad) {
        auto r = make_anthropic_reader();
        ChatResponseIR out;
        std::string err;
        EXPECT_FALSE(r->read_whole(b, out, err)) << b;
        EXPECT_FALSE(err.empty()) << b;
    }
    // Wrong-typed or huge counts are never taken, never negative or wrapped:
    // the usage is malformed (billed as unread: the estimate).
    auto r = make_anthropic_reader();
    ChatResponseIR out;
    std::string err;
    ASSERT_TRUE(r->read_whole(
        R"({"type":"message","content":[],"usage":{"input_tokens":"10","output_tokens":-5,"cache_read_input_tokens":99999999999999999999,"cache_creation_input_tokens":9223372036854775807}})",
        out, err));
    EXPECT_TRUE(out.usage.present);
    EXPECT_TRUE(out.usage.malformed);
    EXPECT_EQ(out.usage.prompt, INT64_MAX);
    EXPECT_EQ(out.usage.completion, 0);
    // Each count out of range or not an integer, alone.
    const char* fields[] = {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"};
    for (const char* value : {"1e30", "9223372036854775808", "10.7", "-1", "\"5\"", "false", "{}"}) {
        for (const char* field : fields) {
            std::string usage = "{";
            for (const char* f : fields) {
                usage += std::string(usage.size() > 1 ? "," : "") + "\"" + f + "\":" + (f == field ? value : "2");
            }
            usage += "}";
            SCOPED_TRACE(usage);
            auto rr = make_anthropic_reader();
            ChatResponseIR o;
            ASSERT_TRUE(rr->read_whole(std::string(R"({"type":"message","content":[],"usage":)") + usage + "}", o, err)) << err;
            EXPECT_TRUE(o.usage.present);
            EXPECT_TRUE(o.usage.malformed);
            EXPECT_TRUE(o.usage.accounting().malformed);
        }
    }
    // null is absent; valid counts are not malformed.
    r = make_anthropic_reader();
    ASSERT_TRUE(r->read_whole(R"({"type":"message","content":[],"usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":null}})",
                              out, err));
    EXPECT_TRUE(out.usage.present);
    EXPECT_FALSE(out.usage.malformed);
    EXPECT_EQ(out.usage.prompt, 3);
}

TEST(AnthropicReader, StreamUsageOutOfRange) {
    // message_start's input_tokens 1e30, message_delta's output_tokens 2^63
    // or 10.7: a malformed usage from then on; a later count of the same
    // field replaces it.
    const auto start = [](const std::string& usage) {
        return ev("message_start", R"({"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":)" +
                                       usage + "}}");
    };
    const auto delta = [](const std::string& usage) {
        return ev("message_delta", R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":)" + usage + "}");
    };
    struct Case {
        std::string start, delta;
        bool malformed;
    };
    const Case cases[] = {
        {R"({"input_tokens":1e30,"output_tokens":1})", R"({"output_tokens":5})", true},
        {R"({"input_tokens":25,"output_tokens":1})", R"({"output_tokens":9223372036854775808})", true},
        {R"({"input_tokens":25,"output_tokens":1})", R"({"output_tokens":10.7})", true},
        {R"({"input_tokens":25,"output_tokens":1})", R"({"output_tokens":-2})", true},
        {R"({"input_tokens":1e30,"output_tokens":1})", R"({"input_tokens":25,"output_tokens":5})", false},
        {R"({"input_tokens":25,"output_tokens":1})", R"({"output_tokens":5})", false},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.start + " " + c.delta);
        auto r = make_anthropic_reader();
        std::vector<StreamEventIR> out;
        std::string err;
        ASSERT_EQ(r->read_event(start(c.start), out, err), ReadStep::More) << err;
        ASSERT_EQ(r->read_event(delta(c.delta), out, err), ReadStep::More) << err;
        const StreamEventIR* last = nullptr;
        for (const auto& e : out) {
            if (e.kind == StreamEventIR::Kind::Usage) last = &e;
        }
        ASSERT_NE(last, nullptr);
        EXPECT_TRUE(last->usage.present);
        EXPECT_EQ(last->usage.malformed, c.malformed);
        if (!c.malformed) {
            EXPECT_EQ(last->usage.prompt, 25);
            EXPECT_EQ(last->usage.completion, 5);
        }
    }
}

TEST(AnthropicReader, RealStream) {
    auto r = make_anthropic_reader();
    std::vector<StreamEventIR> out;
    std::string err;
    const std::vector<SseEvent> events = {
        ev("message_start", R"({"type":"message_start","message":{"id":"msg_9","type":"message","role":"assistant","content":[],"model":"c","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":5,"output_tokens":1}}})"),
        ev("content_block_start", R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}})"),
        ev("content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}})"),
        ev("content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQ"}})"),
        ev("content_block_stop", R"({"type":"content_block_stop","index":0})"),
        ev("content_block_start", R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})"),
        ev("ping", R"({"type": "ping"})"),
        ev("content_block_delta", R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Okay"}})"),
        ev("content_block_stop", R"({"type":"content_block_stop","index":1})"),
        ev("content_block_start", R"({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_a","name":"get_weather","input":{}}})"),
        ev("content_block_delta", R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}})"),
        ev("content_block_delta", R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}})"),
        ev("content_block_delta", R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}})"),
        ev("content_block_stop", R"({"type":"content_block_stop","index":2})"),
        ev("content_block_start", R"({"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_b","name":"t","input":{}}})"),
        ev("content_block_stop", R"({"type":"content_block_stop","index":3})"),
        ev("message_delta", R"({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}})"),
        ev("some_future_event", R"({"type":"some_future_event"})"),
    };
    for (const SseEvent& e : events) ASSERT_EQ(r->read_event(e, out, err), ReadStep::More) << e.data << err;
    EXPECT_FALSE(r->complete());
    EXPECT_EQ(r->read_event(ev("message_stop", R"({"type":"message_stop"})"), out, err), ReadStep::Done);
    EXPECT_TRUE(r->complete());
    EXPECT_EQ(kinds(out),
              "Start(msg_9) Usage(30,1,5,0) Reasoning(Let me) Text(Okay) ToolStart(0,toolu_a,get_weather) "
              "ToolArgs(0,{\"city\": ) ToolArgs(0,\"Paris\"}) ToolStart(1,toolu_b,t) Finish(4) Usage(30,89,5,0) ");
}

TEST(AnthropicReader, EventNameFromData) {
    auto r = make_anthropic_reader();
    std::vector<StreamEventIR> out;
    std::string err;
    EXPECT_EQ(r->read_event(ev("", R"({"type":"message_start","message":{"id":"m"}})"), out, err), ReadStep::More);
    EXPECT_EQ(kinds(out), "Start(m) ");
}

TEST(AnthropicReader, ErrorEvent) {
    auto r = make_anthropic_reader();
    std::vector<StreamEventIR> out;
    std::string err;
    EXPECT_EQ(r->read_event(ev("error", R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded sk-ant-api03-ZZZZZZZZZZZZZZZZZZZZ"}})"),
                            out, err),
              ReadStep::Failed);
    EXPECT_EQ(kinds(out), "Error(overloaded_error:Overloaded [redacted]) ");
}

TEST(AnthropicReader, MalformedEvents) {
    const std::pair<const char*, const char*> bad[] = {
        {"message_start", "{"},
        {"message_start", "[]"},
        {"message_start", R"({"type":"message_start"})"},
        {"content_block_start", R"({"type":"content_block_start","index":"0","content_block":{"type":"text"}})"},
        {"content_block_start", R"({"type":"content_block_start","index":0})"},
        {"content_block_start", R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use"}})"},
        {"content_block_delta", R"({"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"x"}})"},
        {"content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}})"},
        {"message_delta", R"({"type":"message_stop"})"},
        {"", R"({"no":"type"})"},
        {"message_start", "{\"type\":\"message_start\",\"message\":{\"id\":\"\xff\"}"},
    };
    for (const auto& [name, data] : bad) {
        auto r = make_anthropic_reader();
        std::vector<StreamEventIR> out;
        std::string err;
        // index 0 started for the delta cases that need it
        r->read_event(ev("content_block_start", R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"), out, err);
        EXPECT_EQ(r->read_event(ev(name, data), out, err), ReadStep::Invalid) << name << " " << data;
        EXPECT_FALSE(err.empty());
    }
    // input_json_delta on a text block
    auto r = make_anthropic_reader();
    std::vector<StreamEventIR> out;
    std::string err;
    r->read_event(ev("content_block_start", R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"), out, err);
    EXPECT_EQ(r->read_event(ev("content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}})"),
                            out, err),
              ReadStep::Invalid);
}
