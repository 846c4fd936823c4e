// The OpenAI shapes on both sides of the chat IR: the writer (IR -> OpenAI
// answers) and the reader (OpenAI answers -> IR).
#include <gtest/gtest.h>

#include "core/codec/openai_ir.h"

using namespace llmgw;

namespace {

StreamEventIR E(StreamEventIR::Kind k, std::string text = {}, std::size_t index = 0, std::string id = {},
                std::string name = {}) {
    StreamEventIR e;
    e.kind = k;
    e.text = std::move(text);
    e.index = index;
    e.id = std::move(id);
    e.name = std::move(name);
    return e;
}

UsageIR usage(std::int64_t p, std::int64_t c, std::int64_t cached = 0, std::int64_t reasoning = 0) {
    UsageIR u;
    u.present = true;
    u.prompt = p;
    u.completion = c;
    u.cache_read = cached;
    u.reasoning = reasoning;
    return u;
}

WriterOptions opts(bool include_usage) {
    WriterOptions o;
    o.model = "sonnet";
    o.created = 1700000000;
    o.include_usage = include_usage;
    return o;
}

using K = StreamEventIR::Kind;

std::string stream(bool include_usage) {
    auto w = make_openai_writer(opts(include_usage));
    std::string out;
    w->event(E(K::Start, {}, 0, "msg_1"), out);
    StreamEventIR u = E(K::Usage);
    u.usage = usage(11, 1);
    w->event(u, out);
    w->event(E(K::Text, "Hel"), out);
    w->event(E(K::Reasoning, "hidden"), out);
    w->event(E(K::Text, "lo"), out);
    w->event(E(K::ToolStart, {}, 0, "toolu_1", "f"), out);
    w->event(E(K::ToolArgs, "{\"a\":", 0), out);
    w->event(E(K::ToolArgs, "1}", 0), out);
    StreamEventIR f = E(K::Finish);
    f.finish = FinishReason::ToolCalls;
    w->event(f, out);
    u.usage = usage(11, 7, 3, 2);
    w->event(u, out);
    w->end(out);
    return out;
}

const std::string kHead = R"(data: {"id":"msg_1","object":"chat.completion.chunk","created":1700000000,"model":"sonnet","choices":[{"index":0,"delta":)";

}  // namespace

TEST(OpenAIWriter, WholeText) {
    auto w = make_openai_writer(opts(false));
    ChatResponseIR r;
    r.id = "msg_1";
    r.text = "Hello";
    r.reasoning = "dropped";
    r.finish = FinishReason::Stop;
    r.usage = usage(20, 5, 4, 1);
    std::string out;
    w->whole(r, out);
    EXPECT_EQ(out,
              R"({"id":"msg_1","object":"chat.completion","created":1700000000,"model":"sonnet","choices":[{"index":0,)"
              R"("message":{"role":"assistant","content":"Hello","refusal":null},"logprobs":null,"finish_reason":"stop"}],)"
              R"("usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":4},)"
              R"("completion_tokens_details":{"reasoning_tokens":1}}})");
}

TEST(OpenAIWriter, WholeToolsRefusalAndIds) {
    auto w = make_openai_writer(opts(false));
    ChatResponseIR r;
    r.tool_calls.push_back(ToolCallIR{"toolu_1", "f", R"({"a":1})"});
    r.tool_calls.push_back(ToolCallIR{"", "g", ""});
    r.finish = FinishReason::ToolCalls;
    std::string out;
    w->whole(r, out);
    ASSERT_EQ(out.rfind(R"({"id":"chatcmpl-)", 0), 0u) << out;
    EXPECT_EQ(out.substr(16 + 24, 1), "\"");   // 24 generated characters
    EXPECT_NE(out.find(R"("message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[)"
                       R"({"id":"toolu_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},)"
                       R"({"id":"call_)"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(R"("type":"function","function":{"name":"g","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}])"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(R"("usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0,)"), std::string::npos);

    ChatResponseIR refused;
    refused.refusal = "I can't";
    refused.finish = FinishReason::ContentFilter;
    std::string o2;
    w->whole(refused, o2);
    EXPECT_NE(o2.find(R"("content":null,"refusal":"I can't"},"logprobs":null,"finish_reason":"content_filter")"),
              std::string::npos)
        << o2;
}

TEST(OpenAIWriter, StreamWithoutUsage) {
    EXPECT_EQ(stream(false),
              kHead + R"({"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})" "\n\n" +
              kHead + R"({"content":"Hel"},"logprobs":null,"finish_reason":null}]})" "\n\n" +
              kHead + R"({"content":"lo"},"logprobs":null,"finish_reason":null}]})" "\n\n" +
              kHead + R"({"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"f","arguments":""}}]},"logprobs":null,"finish_reason":null}]})" "\n\n" +
              kHead + R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]},"logprobs":null,"finish_reason":null}]})" "\n\n" +
              kHead + R"({"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"logprobs":null,"finish_reason":null}]})" "\n\n" +
              kHead + R"({},"logprobs":null,"finish_reason":"tool_calls"}]})" "\n\n"
              "data: [DONE]\n\n");
}

TEST(OpenAIWriter, StreamWithUsage) {
    const std::string s = stream(true);
    EXPECT_EQ(s.rfind(kHead + R"({"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null})" "\n\n", 0), 0u)
        << s;
    EXPECT_NE(s.find(kHead + R"({},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null})" "\n\n"
                     R"(data: {"id":"msg_1","object":"chat.completion.chunk","created":1700000000,"model":"sonnet","choices":[],)"
                     R"("usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":3},)"
                     R"("completion_tokens_details":{"reasoning_tokens":2}}})" "\n\n" "data: [DONE]\n\n"),
              std::string::npos)
        << s;
}

TEST(OpenAIWriter, EventBeforeStartAndErrors) {
    auto w = make_openai_writer(opts(false));
    std::string out;
    w->event(E(K::Text, "x"), out);
    EXPECT_EQ(out.rfind(R"(data: {"id":"chatcmpl-)", 0), 0u);
    EXPECT_NE(out.find(R"("delta":{"role":"assistant","content":""})"), std::string::npos);
    EXPECT_NE(out.find(R"("delta":{"content":"x"})"), std::string::npos);
    std::string err;
    w->stream_error("boom Bearer abc.def", "overloaded_error", err);
    EXPECT_EQ(err, "event: error\ndata: {\"error\":{\"message\":\"boom Bearer [redacted]\",\"type\":\"overloaded_error\","
                   "\"code\":\"upstream_error\",\"param\":null}}\n\n");
    std::string after;
    w->event(E(K::Text, "y"), after);
    w->end(after);
    EXPECT_EQ(after, "");   // nothing after the error event
    EXPECT_EQ(w->error_body("m", "t", "c"), R"({"error":{"message":"m","type":"t","code":"c","param":null}})");
}

TEST(OpenAIWriter, InvalidUtf8StaysValid) {
    auto w = make_openai_writer(opts(false));
    std::string out;
    w->event(E(K::Text, "a\xff"), out);
    EXPECT_NE(out.find("\"content\":\"a\xEF\xBF\xBD\""), std::string::npos) << out;
}

TEST(OpenAIFinish, Names) {
    EXPECT_EQ(openai_finish_reason(FinishReason::None), "stop");
    EXPECT_EQ(openai_finish_reason(FinishReason::Stop), "stop");
    EXPECT_EQ(openai_finish_reason(FinishReason::StopSequence), "stop");
    EXPECT_EQ(openai_finish_reason(FinishReason::Length), "length");
    EXPECT_EQ(openai_finish_reason(FinishReason::ToolCalls), "tool_calls");
    EXPECT_EQ(openai_finish_reason(FinishReason::ContentFilter), "content_filter");
}

// ------------------------------------------------------------- the reader

namespace {

std::string kinds(const std::vector<StreamEventIR>& v) {
    std::string s;
    for (const auto& e : v) {
        switch (e.kind) {
        case K::Start: s += "Start(" + e.id + ")"; break;
        case K::Text: s += "Text(" + e.text + ")"; break;
        case K::Reasoning: s += "Reasoning(" + e.text + ")"; break;
        case K::Refusal: s += "Refusal(" + e.text + ")"; break;
        case K::ToolStart: s += "ToolStart(" + std::to_string(e.index) + "," + e.id + "," + e.name + ")"; break;
        case K::ToolArgs: s += "ToolArgs(" + std::to_string(e.index) + "," + e.text + ")"; break;
        case K::Finish: s += "Finish(" + std::string(openai_finish_reason(e.finish)) + ")"; break;
        case K::Usage:
            s += "Usage(" + std::to_string(e.usage.prompt) + "," + std::to_string(e.usage.completion) + "," +
                 std::to_string(e.usage.cache_read) + "," + std::to_string(e.usage.reasoning) + ")";
            break;
        case K::Error: s += "Error(" + e.error_type + ":" + e.text + ")"; break;
        }
        s += " ";
    }
    return s;
}

SseEvent data(const std::string& d) {
    SseEvent e;
    e.data = d;
    return e;
}

}  // namespace

TEST(OpenAIReader, Whole) {
    auto r = make_openai_reader();
    ChatResponseIR out;
    std::string err;
    ASSERT_TRUE(r->read_whole(
        R"({"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",)"
        R"("content":"Hi","refusal":null,"reasoning_content":"think","tool_calls":[{"id":"call_1","type":"function",)"
        R"("function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],)"
        R"("usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":10},)"
        R"("completion_tokens_details":{"reasoning_tokens":4}}})",
        out, err))
        << err;
    EXPECT_EQ(out.id, "chatcmpl-1");
    EXPECT_EQ(out.text, "Hi");
    EXPECT_EQ(out.reasoning, "think");
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].arguments, R"({"a":1})");
    EXPECT_EQ(out.finish, FinishReason::ToolCalls);
    EXPECT_EQ(out.usage.prompt, 30);
    EXPECT_EQ(out.usage.completion, 12);
    EXPECT_EQ(out.usage.cache_read, 10);
    EXPECT_EQ(out.usage.reasoning, 4);

    ChatResponseIR parts;
    ASSERT_TRUE(make_openai_reader()->read_whole(
        R"({"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"length"}]})",
        parts, err));
    EXPECT_EQ(parts.text, "ab");
    EXPECT_EQ(parts.finish, FinishReason::Length);
    EXPECT_FALSE(parts.usage.present);
}

TEST(OpenAIReader, WholeMalformed) {
    const char* bad[] = {
        "", "{", "[]", "null", R"({"choices":{}})", R"({"object":"x"})",
        R"({"choices":[{"message":"text"}]})",
        R"({"choices":[{"message":{"content":5}}]})",
        R"({"choices":[{"message":{"tool_calls":{}}}]})",
        R"({"choices":[{"message":{"tool_calls":[{"id":"x"}]}}]})",
        "{\"choices\":[{\"message\":{\"content\":\"\xff\"}}]",
        R"({"choices":[]} trailing)",
    };
    for (const char* b : bad) {
        ChatResponseIR out;
        std::string err;
        EXPECT_FALSE(make_openai_reader()->read_whole(b, out, err)) << b;
    }
    ChatResponseIR out;
    std::string err;
    ASSERT_TRUE(make_openai_reader()->read_whole(
        R"({"choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":1e300}})", out, err));
    EXPECT_TRUE(out.usage.present);   // counts that are not counts: a malformed usage (billed as unread)
    EXPECT_TRUE(out.usage.malformed);
    ChatResponseIR none;
    ASSERT_TRUE(make_openai_reader()->read_whole(R"({"choices":[],"usage":{"total_tokens":5}})", none, err));
    EXPECT_FALSE(none.usage.present);   // no count at all: no usage
}

TEST(OpenAIReader, UsageOutOfRangeIsMalformed) {
    for (const char* bad : {"1e30", "9223372036854775808", "10.7", "-3", "\"7\"", "true", "{}", "[1]"}) {
        for (const char* field : {"prompt_tokens", "completion_tokens"}) {
            const std::string other = std::string(field) == "prompt_tokens" ? "completion_tokens" : "prompt_tokens";
            const std::string usage = std::string(R"({")") + field + "\":" + bad + ",\"" + other + "\":5}";
            SCOPED_TRACE(usage);
            ChatResponseIR whole;
            std::string err;
            ASSERT_TRUE(make_openai_reader()->read_whole(R"({"choices":[],"usage":)" + usage + "}", whole, err)) << err;
            EXPECT_TRUE(whole.usage.present);
            EXPECT_TRUE(whole.usage.malformed);
            EXPECT_TRUE(whole.usage.accounting().malformed);
            auto r = make_openai_reader();
            std::vector<StreamEventIR> out;
            ASSERT_EQ(r->read_event(data(R"({"id":"c1","choices":[],"usage":)" + usage + "}"), out, err), ReadStep::More) << err;
            ASSERT_FALSE(out.empty());
            EXPECT_EQ(out.back().kind, StreamEventIR::Kind::Usage);
            EXPECT_TRUE(out.back().usage.present);
            EXPECT_TRUE(out.back().usage.malformed);
        }
    }
    // null is absent.
    ChatResponseIR whole;
    std::string err;
    ASSERT_TRUE(make_openai_reader()->read_whole(R"({"choices":[],"usage":{"prompt_tokens":null,"completion_tokens":5}})", whole, err));
    EXPECT_TRUE(whole.usage.present);
    EXPECT_FALSE(whole.usage.malformed);
    EXPECT_EQ(whole.usage.completion, 5);
}

TEST(OpenAIReader, RealStream) {
    auto r = make_openai_reader();
    std::vector<StreamEventIR> out;
    std::string err;
    const char* chunks[] = {
        R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}],"usage":null})",
        R"({"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null})",
        R"({"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]})",
        R"({"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"x\""}}]},"finish_reason":null}]})",
        R"({"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"call_b","function":{"name":"g","arguments":"{}"}}]},"finish_reason":null}]})",
        R"({"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":":1}"}}]},"finish_reason":null}]})",
        R"({"id":"c1","choices":[{"index":1,"delta":{"content":"other choice"},"finish_reason":null}]})",
        R"({"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})",
        R"({"id":"c1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"completion_tokens_details":{"reasoning_tokens":1}}})",
    };
    for (const char* c : chunks) ASSERT_EQ(r->read_event(data(c), out, err), ReadStep::More) << c << err;
    EXPECT_FALSE(r->complete());
    EXPECT_EQ(r->read_event(data("[DONE]"), out, err), ReadStep::Done);
    EXPECT_TRUE(r->complete());
    EXPECT_EQ(kinds(out),
              "Start(c1) Text(Hi) ToolStart(0,call_a,f) ToolArgs(0,{\"x\") ToolStart(1,call_b,g) ToolArgs(1,{}) "
              "ToolArgs(0,:1}) Finish(tool_calls) Usage(9,3,0,1) ");
}

TEST(OpenAIReader, ErrorAndMalformedChunks) {
    {
        auto r = make_openai_reader();
        std::vector<StreamEventIR> out;
        std::string err;
        EXPECT_EQ(r->read_event(data(R"({"error":{"message":"overloaded, key sk-proj-abcdefghijklmnopqrstuvwx","type":"server_error"}})"), out, err),
                  ReadStep::Failed);
        EXPECT_EQ(kinds(out), "Error(server_error:overloaded, key [redacted]) ");
    }
    const char* bad[] = {
        "{", "[1]", "nope", R"({"choices":{}})", R"({"choices":[5]})", R"({"choices":[{"delta":"x"}]})",
        R"({"choices":[{"delta":{"tool_calls":{}}}]})",
        R"({"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]})",
        R"({"choices":[{"delta":{"tool_calls":[{"index":1000}]}}]})",
        R"({"choices":[{"delta":{"tool_calls":[{"index":"0"}]}}]})",
        R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":"f"}]}}]})",
        R"({"choices":[{"delta":{},"finish_reason":5}]})",
        R"({"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":1e400}})",
    };
    for (const char* b : bad) {
        auto r = make_openai_reader();
        std::vector<StreamEventIR> out;
        std::string err;
        EXPECT_EQ(r->read_event(data(b), out, err), ReadStep::Invalid) << b;
        EXPECT_FALSE(err.empty()) << b;
    }
    auto r = make_openai_reader();
    std::vector<StreamEventIR> out;
    std::string err;
    EXPECT_EQ(r->read_event(data(""), out, err), ReadStep::More);
    EXPECT_TRUE(out.empty());
    // Invalid UTF-8 is carried; the writers repair it (OpenAIWriter.InvalidUtf8StaysValid).
    EXPECT_EQ(r->read_event(data("{\"choices\":[{\"delta\":{\"content\":\"a\xff\"}}]}"), out, err), ReadStep::More);
    EXPECT_EQ(kinds(out), "Start() Text(a\xff) ");
}
