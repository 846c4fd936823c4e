// The Responses API codecs: /v1/responses translated to Anthropic- and
// Gemini-type providers (request pivot, answers whole and streamed into the
// typed event sequence), native to OpenAI-type providers (bytes relayed,
// usage and the end read along), refusals and malformed requests.
#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include "core/codec/codec.h"
#include "core/codec/responses_wire.h"

using namespace llmgw;

namespace {

std::unique_ptr<Codec> codec(ProviderType p, bool stream, std::size_t whole_limit = 16 << 20) {
    CodecOptions o;
    o.provider = p;
    o.client_stream = stream;
    o.client_model = "alias-x";
    o.created = 1700000000;
    o.whole_limit = whole_limit;
    return make_codec(CodecKind::OpenAIResponses, o);
}

struct Outcome {
    std::string out;
    CodecResult res;
};

Outcome run(Codec& c, int status, const std::string& ct, const std::string& body, std::size_t piece = 0,
            BodyEnd how = BodyEnd::Clean) {
    Outcome r;
    c.head(status, ct);
    if (piece == 0) piece = body.size() ? body.size() : 1;
    for (std::size_t i = 0; i < body.size(); i += piece) c.feed(std::string_view(body).substr(i, piece), r.out);
    c.finish(how, r.out);
    r.res = c.result();
    return r;
}

// path + "\n" + body, or "ERR <status>: <err>".
std::string build(Codec& c, const std::string& body) {
    std::string err;
    auto doc = RequestDoc::parse(body, err);
    if (!doc) return "PARSE: " + err;
    CallerRequest in;
    in.body = body;
    in.doc = doc.get();
    in.upstream_model = "up-model";
    in.provider_key = "sk-prov";
    UpstreamRequest up;
    if (!c.build_request(in, up, err)) return "ERR " + std::to_string(up.refuse_status) + ": " + err;
    return up.path + "\n" + up.body;
}

// The event types of an SSE text, in order, and each event's data checked:
// JSON, its "type" the event's name, sequence numbers 0, 1, 2, ...
std::vector<std::string> types(const std::string& sse, std::vector<rapidjson::Document>* datas = nullptr) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    std::int64_t seq = 0;
    while (pos < sse.size()) {
        std::size_t end = sse.find("\n\n", pos);
        if (end == std::string::npos) break;
        std::string ev = sse.substr(pos, end - pos);
        pos = end + 2;
        EXPECT_EQ(ev.rfind("event: ", 0), 0u) << ev;
        std::size_t nl = ev.find('\n');
        std::string type = ev.substr(7, nl - 7);
        EXPECT_EQ(ev.compare(nl + 1, 6, "data: "), 0) << ev;
        rapidjson::Document d;
        d.Parse(ev.c_str() + nl + 7);
        EXPECT_FALSE(d.HasParseError()) << ev;
        if (d.HasParseError()) continue;
        EXPECT_EQ(std::string(d["type"].GetString()), type);
        EXPECT_EQ(d["sequence_number"].GetInt64(), seq++) << ev;
        out.push_back(type);
        if (datas) datas->push_back(std::move(d));
    }
    return out;
}

const std::string kAnthropicStream =
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
    "\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":4,"
    "\"output_tokens\":1}}}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\":\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Oslo\\\"}\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n"
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

const std::string kNativeStream =
    "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"content\":[]}}\n\n"
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"output_index\":0,\"content_index\":0,\"delta\":\"Hi there\"}\n\n"
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":3,\"output_index\":1,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"f\",\"arguments\":\"\"}}\n\n"
    "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":4,\"output_index\":1,\"delta\":\"{}\"}\n\n"
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":5,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[],"
    "\"usage\":{\"input_tokens\":20,\"input_tokens_details\":{\"cached_tokens\":8},\"output_tokens\":9,\"output_tokens_details\":{\"reasoning_tokens\":4},\"total_tokens\":29}}}\n\n";

}  // namespace

TEST(ResponsesCodec, ServedByEveryProviderType) {
    for (ProviderType p : {ProviderType::OpenAI, ProviderType::Anthropic, ProviderType::Gemini}) {
        EXPECT_TRUE(codec_serves(CodecKind::OpenAIResponses, p));
        auto c = codec(p, false);
        ASSERT_TRUE(c);
        EXPECT_EQ(c->kind(), CodecKind::OpenAIResponses);
    }
    EXPECT_STREQ(codec_kind_name(CodecKind::OpenAIResponses), "openai-responses");
}

TEST(ResponsesCodec, NativeRequestOnlyRewritesTheModel) {
    const std::string body =
        R"({"model":"alias-x","input":"hi","previous_response_id":"resp_0","store":true,"tools":[{"type":"web_search"}],"stream":true})";
    EXPECT_EQ(build(*codec(ProviderType::OpenAI, true), body),
              "/responses\n"
              R"({"model":"up-model","input":"hi","previous_response_id":"resp_0","store":true,"tools":[{"type":"web_search"}],"stream":true})");
}

TEST(ResponsesCodec, TranslatedRequests) {
    const std::string body =
        R"({"model":"alias-x","instructions":"Be brief.","input":[)"
        R"({"role":"user","content":[{"type":"input_text","text":"Weather?"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]},)"
        R"({"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking."}]},)"
        R"({"type":"reasoning","id":"rs_1","summary":[]},)"
        R"({"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},)"
        R"({"type":"function_call_output","call_id":"call_1","output":"12C"}],)"
        R"("tools":[{"type":"function","name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}],)"
        R"("tool_choice":"auto","max_output_tokens":100,"temperature":0.5,"store":false,"metadata":{"a":"b"},"stream":true})";
    EXPECT_EQ(build(*codec(ProviderType::Anthropic, true), body),
              "/v1/messages\n"
              R"({"model":"up-model","system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Weather?"},)"
              R"({"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},)"
              R"({"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Oslo"}}]},)"
              R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"12C"}]}],)"
              R"("max_tokens":100,"temperature":0.5,"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],)"
              R"("tool_choice":{"type":"auto"},"stream":true})");
    const std::string g = build(*codec(ProviderType::Gemini, false),
                                R"({"model":"m","input":"Hi","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}},"reasoning":{"effort":"low"}})");
    EXPECT_EQ(g.rfind("/v1beta/models/up-model:generateContent\n", 0), 0u) << g;
    EXPECT_NE(g.find(R"("responseMimeType":"application/json")"), std::string::npos) << g;
    EXPECT_NE(g.find(R"("responseJsonSchema":{"type":"object"})"), std::string::npos) << g;
    EXPECT_NE(g.find(R"("thinkingConfig")"), std::string::npos) << g;
    const std::string gs = build(*codec(ProviderType::Gemini, true), R"({"model":"m","input":"Hi","stream":true})");
    EXPECT_EQ(gs.rfind("/v1beta/models/up-model:streamGenerateContent?alt=sse\n", 0), 0u) << gs;
}

TEST(ResponsesCodec, RefusedOnTranslatedTargetsNamingTheParameter) {
    struct Row {
        ProviderType p;
        const char* body;
        const char* err;
    };
    const Row rows[] = {
        {ProviderType::Anthropic, R"({"model":"m","input":"x","previous_response_id":"resp_1"})",
         "previous_response_id is not supported for anthropic providers (it needs the provider's stored responses: use an OpenAI-type provider)"},
        {ProviderType::Gemini, R"({"model":"m","input":"x","store":true})",
         "store: true is not supported for gemini providers (it needs the provider's stored responses: use an OpenAI-type provider)"},
        {ProviderType::Gemini, R"({"model":"m","input":"x","background":true})",
         "background: true is not supported for gemini providers (it needs the provider's stored responses: use an OpenAI-type provider)"},
        {ProviderType::Anthropic, R"({"model":"m","input":"x","tools":[{"type":"web_search_preview"}]})",
         "tools[0]: the built-in tool \"web_search_preview\" is not supported for anthropic providers (function tools only; built-in tools need an OpenAI-type provider)"},
        {ProviderType::Anthropic, R"({"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"a","schema":{}}}})",
         "text.format \"json_schema\" is not supported for anthropic providers"},
        {ProviderType::Gemini, R"({"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]})",
         "input[0].content[0].file_id: a file id is not supported for gemini providers; send image_url"},
        {ProviderType::Gemini, R"({"model":"m","input":[{"type":"item_reference","id":"msg_1"}]})",
         "input[0]: item_reference is not supported for gemini providers (it needs the provider's stored items: use an OpenAI-type provider)"},
        {ProviderType::Gemini, R"({"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]})",
         "input[0]: item type \"web_search_call\" is not supported for gemini providers"},
        {ProviderType::Gemini, R"({"model":"m","input":"x","conversation":"conv_1"})",
         "conversation is not supported for gemini providers (it needs the provider's stored responses: use an OpenAI-type provider)"},
        // malformed
        {ProviderType::Gemini, R"({"model":"m"})", "input is required"},
        {ProviderType::Gemini, R"({"model":"m","input":7})", "input must be a string or an array of items"},
        {ProviderType::Gemini, R"({"model":"m","input":[]})", "input must hold at least one message"},
        {ProviderType::Gemini, R"({"model":"m","input":[{"role":"tool","content":"x"}]})",
         "input[0].role must be \"user\", \"assistant\", \"system\" or \"developer\""},
        {ProviderType::Anthropic, R"({"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"[1"}]})",
         "input[0].arguments must be the JSON text of an object"},
        {ProviderType::Anthropic, R"({"model":"m","input":"x","max_output_tokens":0})", "max_output_tokens must be a positive integer"},
        {ProviderType::Anthropic, R"({"model":"m","input":"x","reasoning":{"effort":"huge"}})",
         "reasoning.effort must be \"none\", \"minimal\", \"low\", \"medium\" or \"high\""},
        {ProviderType::Anthropic, R"({"model":"m","input":"x","store":"yes"})", "store must be a boolean"},
        {ProviderType::Anthropic, R"({"model":"m","input":"x","tool_choice":{"type":"file_search"}})",
         "tool_choice type \"file_search\" is not supported for anthropic providers"},
        {ProviderType::Anthropic, R"({"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_data":"x"}]}]})",
         "input[0].content[0]: content part type \"input_file\" is not supported for anthropic providers"},
    };
    for (const Row& row : rows) {
        EXPECT_EQ(build(*codec(row.p, false), row.body), std::string("ERR 400: ") + row.err) << row.body;
    }
    // Invalid UTF-8 in a refused item type is echoed as valid UTF-8, cut short.
    const std::string bad = build(*codec(ProviderType::Gemini, false),
                                  "{\"model\":\"m\",\"input\":[{\"type\":\"\xff\xfe" + std::string(200, 'a') + "\"}]}");
    EXPECT_EQ(bad.rfind("ERR 400: input[0]: item type \"", 0), 0u) << bad;
    EXPECT_LT(bad.size(), 200u);
    // A huge input: translated, never refused for its size here (the body bound is the shell's).
    std::string big = R"({"model":"m","input":")" + std::string(1 << 20, 'a') + "\"}";
    EXPECT_EQ(build(*codec(ProviderType::Gemini, false), big).rfind("/v1beta/", 0), 0u);
}

TEST(ResponsesCodec, AnthropicStreamIntoTheTypedEventsAtAnyPieceSize) {
    for (std::size_t piece : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}}) {
        auto c = codec(ProviderType::Anthropic, true);
        Outcome r = run(*c, 200, "text/event-stream", kAnthropicStream, piece);
        EXPECT_EQ(r.res.end, EndState::Complete);
        EXPECT_EQ(r.res.usage.prompt_tokens, 14);
        EXPECT_EQ(r.res.usage.completion_tokens, 7);
        std::vector<rapidjson::Document> d;
        const std::vector<std::string> t = types(r.out, &d);
        const std::vector<std::string> want = {
            "response.created", "response.in_progress",
            "response.output_item.added", "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done", "response.output_item.done",
            "response.output_item.added", "response.content_part.added", "response.output_text.delta",
            "response.output_text.delta", "response.output_text.done", "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added", "response.function_call_arguments.delta",
            "response.function_call_arguments.delta", "response.function_call_arguments.done",
            "response.output_item.done", "response.completed"};
        ASSERT_EQ(t, want) << "piece " << piece;
        const auto& done = d.back()["response"];
        EXPECT_STREQ(done["status"].GetString(), "completed");
        EXPECT_STREQ(done["model"].GetString(), "alias-x");
        EXPECT_EQ(std::string(done["id"].GetString()).rfind("resp_", 0), 0u);
        EXPECT_EQ(done["id"], d[0]["response"]["id"]);
        EXPECT_EQ(done["usage"]["input_tokens"].GetInt64(), 14);
        EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"].GetInt64(), 4);
        EXPECT_EQ(done["usage"]["output_tokens"].GetInt64(), 7);
        EXPECT_EQ(done["usage"]["total_tokens"].GetInt64(), 21);
        const auto& out = done["output"];
        ASSERT_EQ(out.Size(), 3u);
        EXPECT_STREQ(out[0]["type"].GetString(), "reasoning");
        EXPECT_STREQ(out[0]["summary"][0]["text"].GetString(), "hmm");
        EXPECT_STREQ(out[1]["type"].GetString(), "message");
        EXPECT_STREQ(out[1]["content"][0]["text"].GetString(), "Hello");
        EXPECT_STREQ(out[2]["type"].GetString(), "function_call");
        EXPECT_STREQ(out[2]["call_id"].GetString(), "toolu_1");
        EXPECT_STREQ(out[2]["name"].GetString(), "get_weather");
        EXPECT_STREQ(out[2]["arguments"].GetString(), "{\"city\":\"Oslo\"}");
        EXPECT_STREQ(d[18]["arguments"].GetString(), "{\"city\":\"Oslo\"}");
        // Item ids and output indexes agree across an item's events.
        EXPECT_EQ(d[10]["item_id"], d[8]["item"]["id"]);
        EXPECT_EQ(d[10]["output_index"].GetInt64(), 1);
    }
}

TEST(ResponsesCodec, StreamEndings) {
    // Cut by the max_tokens limit: response.incomplete with its reason.
    std::string s = kAnthropicStream;
    const std::string from = "\"stop_reason\":\"tool_use\"";
    s.replace(s.find(from), from.size(), "\"stop_reason\":\"max_tokens\"");
    auto c = codec(ProviderType::Anthropic, true);
    Outcome r = run(*c, 200, "text/event-stream", s);
    std::vector<rapidjson::Document> d;
    ASSERT_EQ(types(r.out, &d).back(), "response.incomplete");
    EXPECT_STREQ(d.back()["response"]["incomplete_details"]["reason"].GetString(), "max_output_tokens");
    // Cut mid-stream: the error event numbered after the others; Cut.
    c = codec(ProviderType::Anthropic, true);
    r = run(*c, 200, "text/event-stream", kAnthropicStream.substr(0, kAnthropicStream.find("event: content_block_stop")),
            0, BodyEnd::Cut);
    EXPECT_EQ(r.res.end, EndState::Cut);
    const std::vector<std::string> t = types(r.out, &d);
    ASSERT_EQ(t.back(), "error");
    EXPECT_STREQ(d.back()["error"]["message"].GetString(), "the upstream stream ended before completion");
    EXPECT_TRUE(d.back()["code"].IsString());
    // The provider's own error event: relayed as an error event, StreamError.
    c = codec(ProviderType::Anthropic, true);
    r = run(*c, 200, "text/event-stream",
            kAnthropicStream.substr(0, kAnthropicStream.find("event: content_block_stop")) +
                "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n");
    EXPECT_EQ(r.res.end, EndState::StreamError);
    d.clear();
    ASSERT_EQ(types(r.out, &d).back(), "error");
    EXPECT_STREQ(d.back()["message"].GetString(), "Overloaded");
    // Stopped by the gateway (a budget crossed): its error event, nothing after.
    c = codec(ProviderType::Anthropic, true);
    c->head(200, "text/event-stream");
    std::string out;
    c->feed(kAnthropicStream.substr(0, 600), out);
    c->stop("budget exceeded", "insufficient_quota", "budget_exceeded", out);
    c->feed(kAnthropicStream.substr(600), out);
    c->finish(BodyEnd::Clean, out);
    d.clear();
    ASSERT_EQ(types(out, &d).back(), "error");
    EXPECT_STREQ(d.back()["code"].GetString(), "budget_exceeded");
    EXPECT_EQ(c->result().end, EndState::Stopped);
}

TEST(ResponsesCodec, OutputBoundEndsTheStream) {
    auto c = codec(ProviderType::Anthropic, true, 300);
    std::string big = kAnthropicStream;
    const std::string text(400, 'z');
    big.replace(big.find("\"Hel\""), 5, "\"" + text + "\"");
    Outcome r = run(*c, 200, "text/event-stream", big);
    std::vector<rapidjson::Document> d;
    const auto t = types(r.out, &d);
    ASSERT_EQ(t.back(), "error");
    EXPECT_STREQ(d.back()["error"]["message"].GetString(), "the answer is larger than the gateway's response bound");
    EXPECT_EQ(r.out.find(text), std::string::npos);   // the delta past the bound never went out
    EXPECT_EQ(r.res.usage.completion_tokens, 7);      // still billed
}

TEST(ResponsesCodec, GeminiWholeAnswer) {
    auto c = codec(ProviderType::Gemini, false);
    Outcome r = run(*c, 200, "application/json",
                    R"({"candidates":[{"content":{"parts":[{"text":"Hi"},{"functionCall":{"name":"f","args":{"a":1}}}]},"finishReason":"STOP"}],)"
                    R"("usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"thoughtsTokenCount":3}})");
    EXPECT_EQ(r.res.end, EndState::Complete);
    EXPECT_EQ(r.res.content_type, "application/json");
    rapidjson::Document d;
    d.Parse(r.out.c_str());
    ASSERT_FALSE(d.HasParseError()) << r.out;
    EXPECT_STREQ(d["object"].GetString(), "response");
    EXPECT_STREQ(d["status"].GetString(), "completed");
    EXPECT_EQ(d["created_at"].GetInt64(), 1700000000);
    ASSERT_EQ(d["output"].Size(), 2u);
    EXPECT_STREQ(d["output"][0]["content"][0]["type"].GetString(), "output_text");
    EXPECT_STREQ(d["output"][0]["content"][0]["text"].GetString(), "Hi");
    EXPECT_STREQ(d["output"][0]["status"].GetString(), "completed");
    EXPECT_STREQ(d["output"][1]["type"].GetString(), "function_call");
    EXPECT_STREQ(d["output"][1]["arguments"].GetString(), "{\"a\":1}");
    EXPECT_EQ(std::string(d["output"][1]["call_id"].GetString()).rfind("call_", 0), 0u);
    EXPECT_EQ(d["usage"]["output_tokens"].GetInt64(), 5);
    EXPECT_EQ(d["usage"]["output_tokens_details"]["reasoning_tokens"].GetInt64(), 3);
    // A stream asked for and a whole answer given: still the typed events.
    c = codec(ProviderType::Gemini, true);
    r = run(*c, 200, "application/json",
            R"({"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}})");
    EXPECT_EQ(types(r.out).back(), "response.completed");
    // Upstream errors: the OpenAI envelope.
    c = codec(ProviderType::Gemini, false);
    r = run(*c, 429, "application/json", R"({"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}})");
    EXPECT_EQ(r.res.end, EndState::UpstreamError);
    EXPECT_NE(r.out.find(R"("type":"rate_limit_error")"), std::string::npos) << r.out;
}

TEST(ResponsesCodec, NativeRelaysBytesAndReadsUsage) {
    for (std::size_t piece : {std::size_t{0}, std::size_t{1}, std::size_t{13}}) {
        auto c = codec(ProviderType::OpenAI, true);
        Outcome r = run(*c, 200, "text/event-stream", kNativeStream, piece);
        EXPECT_EQ(r.out, kNativeStream);
        EXPECT_EQ(r.res.end, EndState::Complete);
        EXPECT_EQ(r.res.usage.prompt_tokens, 20);
        EXPECT_EQ(r.res.usage.completion_tokens, 9);
        EXPECT_EQ(r.res.text_bytes, 10);   // "Hi there" + "{}"
    }
    // Cut before response.completed: the gateway's error event continues the numbering.
    auto c = codec(ProviderType::OpenAI, true);
    const std::string cut = kNativeStream.substr(0, kNativeStream.find("event: response.completed"));
    Outcome r = run(*c, 200, "text/event-stream", cut, 0, BodyEnd::Cut);
    EXPECT_EQ(r.res.end, EndState::Cut);
    const std::string tail = r.out.substr(cut.size());
    EXPECT_EQ(tail.rfind("event: error\ndata: {\"type\":\"error\",\"sequence_number\":5,", 0), 0u) << tail;
    // response.failed: the provider's own end.
    c = codec(ProviderType::OpenAI, true);
    r = run(*c, 200, "text/event-stream",
            cut + "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":5,\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n");
    EXPECT_EQ(r.res.end, EndState::StreamError);
    // Whole: relayed as is, usage read.
    c = codec(ProviderType::OpenAI, false);
    const std::string whole =
        R"({"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"x"}]}],"usage":{"input_tokens":3,"output_tokens":2}})";
    r = run(*c, 200, "application/json", whole);
    EXPECT_EQ(r.out, whole);
    EXPECT_EQ(r.res.usage.prompt_tokens, 3);
    EXPECT_EQ(r.res.usage.completion_tokens, 2);
    // Not a response object: 502.
    c = codec(ProviderType::OpenAI, false);
    r = run(*c, 200, "application/json", R"({"choices":[]})");
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_EQ(r.res.status, 502);
    // Usage that is not a count: malformed (estimated by the shell).
    c = codec(ProviderType::OpenAI, false);
    r = run(*c, 200, "application/json", R"({"output":[],"usage":{"input_tokens":-1,"output_tokens":1e30}})");
    EXPECT_TRUE(r.res.usage.malformed);
}

TEST(ResponsesCodec, HostileNativeStreams) {
    const std::string cases[] = {
        "data: {\"type\":\"response.completed\"}\n\n",                           // no response object
        "data: [1,2]\n\n",                                                         // not an object
        "data: {\"type\":\"response.output_item.added\",\"output_index\":-5,\"item\":{\"type\":\"function_call\"}}\n\n"
        "data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":99,\"delta\":\"x\"}\n\n",
        "data: {\"type\":\"response.output_text.delta\",\"delta\":7}\n\n",
        "data: " + std::string(300, '[') + "\n\n",
    };
    for (const std::string& s : cases) {
        auto c = codec(ProviderType::OpenAI, true);
        Outcome r = run(*c, 200, "text/event-stream", s, 3);
        EXPECT_NE(r.res.end, EndState::Complete) << s;
        EXPECT_EQ(r.out.rfind(s, 0), 0u);   // what came was relayed
    }
}
