// The passthrough codec alone: bytes in, bytes out, usage sniffed.
#include <gtest/gtest.h>

#include "core/codec/codec.h"

using namespace llmgw;

namespace {

struct Outcome {
    std::string out;
    CodecResult res;
};

Outcome run(int status, const std::string& ct, const std::string& body, std::size_t piece = 0,
        BodyEnd how = BodyEnd::Clean) {
    auto c = make_codec(CodecKind::Passthrough, CodecOptions());
    Outcome r;
    c->head(status, ct);
    if (piece == 0) piece = body.size() ? body.size() : 1;
    for (std::size_t i = 0; i < body.size(); i += piece) c->feed(std::string_view(body).substr(i, piece), r.out);
    c->finish(how, r.out);
    r.res = c->result();
    return r;
}

// Anthropic's stream, as recorded (abridged texts).
const std::string kAnthropicStream =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
    "\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

const std::string kGeminiStream =
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]}}],\"usageMetadata\":{\"promptTokenCount\":8,"
    "\"candidatesTokenCount\":1}}\r\n\r\n"
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\" there\"}]},\"finishReason\":\"STOP\"}],"
    "\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":2,\"totalTokenCount\":10}}\r\n\r\n";

// OpenAI's Responses API stream (POST /v1/responses through the
// passthrough): the usage comes in response.completed.
const std::string kResponsesStream =
    "event: response.created\n"
    "data: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-4o\",\"usage\":null}}\n\n"
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"
    "event: response.completed\n"
    "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-4o\","
    "\"usage\":{\"input_tokens\":21,\"output_tokens\":6,\"total_tokens\":27}}}\n\n";

}  // namespace

TEST(CodecPassthrough, RequestUnchanged) {
    auto c = make_codec(CodecKind::Passthrough, CodecOptions());
    CallerRequest in;
    in.body = "{\"model\":\"m\", \"x\" : 1}";
    in.path = "/messages";
    in.provider_key = "k";
    UpstreamRequest out;
    std::string err;
    ASSERT_TRUE(c->build_request(in, out, err));
    EXPECT_TRUE(out.caller_body);   // the caller's bytes, unchanged
    EXPECT_EQ(out.body, "");
    EXPECT_EQ(out.splice_len, 0u);
    EXPECT_EQ(out.method, "POST");
    EXPECT_EQ(out.path, "/messages");
    EXPECT_EQ(out.credential_header, "Authorization");
    EXPECT_EQ(c->kind(), CodecKind::Passthrough);
    EXPECT_FALSE(c->event_stream());
}

TEST(CodecPassthrough, MethodQueryContentTypeAndEachProvidersCredential) {
    struct Case {
        ProviderType type;
        const char* header;
        const char* value;
    } cases[] = {
        {ProviderType::OpenAI, "Authorization", "Bearer pk"},
        {ProviderType::Anthropic, "x-api-key", "pk"},
        {ProviderType::Gemini, "x-goog-api-key", "pk"},
    };
    for (const Case& k : cases) {
        CodecOptions o;
        o.provider = k.type;
        auto c = make_codec(CodecKind::Passthrough, o);
        CallerRequest in;
        in.method = "DELETE";
        in.path = "/v1/files/file-1";
        in.query = "key=caller-secret&limit=2&key=again&after=x";
        in.content_type = "multipart/form-data; boundary=b";
        in.provider_key = "pk";
        UpstreamRequest out;
        std::string err;
        ASSERT_TRUE(c->build_request(in, out, err));
        EXPECT_EQ(out.method, "DELETE");
        EXPECT_EQ(out.path, "/v1/files/file-1?limit=2&after=x");   // the caller's key never goes upstream
        EXPECT_EQ(out.credential_header, k.header);
        bool found = false, ct = false;
        for (const auto& [name, value] : out.headers) {
            if (name == k.header) found = value == k.value;
            if (name == "Content-Type") ct = value == "multipart/form-data; boundary=b";
        }
        EXPECT_TRUE(found) << k.header;
        EXPECT_TRUE(ct);
    }
    auto c = make_codec(CodecKind::Passthrough, CodecOptions());
    CallerRequest in;
    in.method = "GET";
    in.path = "/models";
    in.query = "key=only";
    UpstreamRequest out;
    std::string err;
    ASSERT_TRUE(c->build_request(in, out, err));
    EXPECT_EQ(out.path, "/models");
}

TEST(CodecPassthrough, ModelNamedByTheAnswer) {
    Outcome r = run(200, "application/json", R"({"id":"x","model":"gpt-4o-2024-08-06","usage":{"prompt_tokens":1}})");
    EXPECT_EQ(r.res.model, "gpt-4o-2024-08-06");
    Outcome a = run(200, "text/event-stream", kAnthropicStream, 7);
    EXPECT_EQ(a.res.model, "");   // the recorded stream names none
    std::string named = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\","
                        "\"usage\":{\"input_tokens\":3}}}\n\n";
    EXPECT_EQ(run(200, "text/event-stream", named).res.model, "claude-x");
    EXPECT_EQ(run(200, "application/json", R"({"modelVersion":"gemini-2.5-flash","usageMetadata":{}})").res.model,
              "gemini-2.5-flash");
    // A nested "model" is not the answer's.
    EXPECT_EQ(run(200, "application/json", R"({"data":{"model":"x"}})").res.model, "");
}

TEST(CodecPassthrough, WholeBodiesOfEachShape) {
    struct Case {
        std::string body;
        std::int64_t p, c;
    } cases[] = {
        {R"({"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}})", 3, 4},
        {R"({"type":"message","usage":{"input_tokens":10,"output_tokens":20}})", 10, 20},
        {R"({"candidates":[],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":6}})", 5, 6},
        // thinking tokens are completion tokens, tool-use prompt tokens prompt tokens (as translated)
        {R"({"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":6,"thoughtsTokenCount":20,"toolUsePromptTokenCount":2}})", 7, 26},
        {R"({"usageMetadata":{"promptTokenCount":5,"thoughtsTokenCount":20}})", 5, 20},
        {R"([{"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":1}},{"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":9}}])", 5, 9},
        {R"({"data":[{"embedding":[0.1,0.2]}],"usage":{"prompt_tokens":8,"total_tokens":8}})", 8, 0},
        // OpenAI's Responses API: the answer's usage, and response.completed's
        {R"({"object":"response","usage":{"input_tokens":12,"output_tokens":30,"total_tokens":42}})", 12, 30},
        {R"({"type":"response.completed","response":{"model":"gpt-4o","usage":{"input_tokens":9,"output_tokens":4}}})", 9, 4},
    };
    for (const Case& k : cases) {
        Outcome r = run(200, "application/json", k.body, 3);
        EXPECT_EQ(r.out, k.body);
        EXPECT_EQ(r.res.end, EndState::Complete);
        EXPECT_TRUE(r.res.usage.present) << k.body;
        EXPECT_EQ(r.res.usage.prompt_tokens, k.p) << k.body;
        EXPECT_EQ(r.res.usage.completion_tokens, k.c) << k.body;
    }
}

TEST(CodecPassthrough, NoUsageShape) {
    for (std::string body : {std::string(R"({"nested":{"usage":{"prompt_tokens":3}}})"), std::string("not json"),
                             std::string("{\"usage\":{\"prompt_tokens\":"), std::string("\xff\xfe")}) {
        Outcome r = run(200, "application/json", body);
        EXPECT_EQ(r.out, body);   // bytes out as they came, even when not JSON
        EXPECT_EQ(r.res.end, EndState::Complete);
        EXPECT_FALSE(r.res.usage.present) << body;
    }
}

TEST(CodecPassthrough, StreamsAtEveryByteBoundary) {
    for (const std::string* wire : {&kAnthropicStream, &kGeminiStream, &kResponsesStream}) {
        for (std::size_t piece = 1; piece <= wire->size(); piece += (piece < 40 ? 1 : 17)) {
            Outcome r = run(200, "text/event-stream", *wire, piece);
            ASSERT_EQ(r.out, *wire) << piece;
            ASSERT_EQ(r.res.end, EndState::Complete);
            ASSERT_TRUE(r.res.usage.present);
            if (wire == &kAnthropicStream) {
                ASSERT_EQ(r.res.usage.prompt_tokens, 25);
                ASSERT_EQ(r.res.usage.completion_tokens, 15);
            } else if (wire == &kResponsesStream) {
                ASSERT_EQ(r.res.usage.prompt_tokens, 21);
                ASSERT_EQ(r.res.usage.completion_tokens, 6);
                ASSERT_EQ(r.res.model, "gpt-4o");
            } else {
                ASSERT_EQ(r.res.usage.prompt_tokens, 8);
                ASSERT_EQ(r.res.usage.completion_tokens, 2);
            }
        }
    }
}

TEST(CodecPassthrough, CrLineEndsAndCutStream) {
    std::string wire = "data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\r\r";
    Outcome r = run(200, "text/event-stream", wire, 1, BodyEnd::Cut);
    EXPECT_EQ(r.res.end, EndState::Cut);
    EXPECT_EQ(r.out, wire);   // the provider's bytes only: no gateway event in a native stream
    EXPECT_EQ(r.res.usage.completion_tokens, 2);
    Outcome bad = run(200, "application/json", "{\"a\":", 0, BodyEnd::Invalid);
    EXPECT_EQ(bad.res.end, EndState::Invalid);
    EXPECT_EQ(bad.out, "{\"a\":");
}

TEST(CodecPassthrough, HugeEventStopsSniffingNotRelaying) {
    CodecOptions o;
    o.max_event_bytes = 64;
    auto c = make_codec(CodecKind::Passthrough, o);
    std::string out;
    c->head(200, "text/event-stream");
    std::string big = "data: " + std::string(200, 'x') + "\n\n";
    c->feed(big, out);
    EXPECT_FALSE(c->take_problem().empty());
    c->feed("data: {\"usage\":{\"prompt_tokens\":1}}\n\n", out);
    c->finish(BodyEnd::Clean, out);
    EXPECT_EQ(out, big + "data: {\"usage\":{\"prompt_tokens\":1}}\n\n");
    EXPECT_FALSE(c->result().usage.present);
}

TEST(CodecPassthrough, ErrorsAndBadStatuses) {
    const std::string body = R"({"type":"error","error":{"type":"overloaded_error","message":"busy"}})";
    Outcome r = run(503, "application/json", body, 5);
    EXPECT_EQ(r.out, body);   // relayed as it came
    EXPECT_EQ(r.res.end, EndState::UpstreamError);
    EXPECT_EQ(r.res.status, 503);
    EXPECT_EQ(r.res.text, "busy");
    EXPECT_FALSE(r.res.usage.present);
    Outcome nf = run(404, "text/html", "<h1>nope</h1>");
    EXPECT_EQ(nf.out, "<h1>nope</h1>");
    EXPECT_EQ(nf.res.end, EndState::UpstreamError);
    Outcome moved = run(302, "", "");
    EXPECT_EQ(moved.res.end, EndState::Complete);
    Outcome r2 = run(101, "", "x");
    EXPECT_EQ(r2.res.end, EndState::Invalid);
    EXPECT_EQ(r2.res.status, 502);
}

TEST(CodecFactory, Kinds) {
    EXPECT_EQ(make_codec(CodecKind::None, CodecOptions()), nullptr);
    EXPECT_EQ(make_codec(CodecKind::OpenAIChat, CodecOptions())->kind(), CodecKind::OpenAIChat);
    EXPECT_EQ(make_codec(CodecKind::OpenAIEmbeddings, CodecOptions())->kind(), CodecKind::OpenAIEmbeddings);
    EXPECT_STREQ(codec_kind_name(CodecKind::Passthrough), "passthrough");
}
