// The OpenAI codec alone, on recorded streams and bodies.
#include <gtest/gtest.h>

#include "core/codec/codec.h"

using namespace llmgw;

namespace {

const std::string kChunk1 =
    R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null})";
const std::string kChunk2 =
    R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}],"usage":null})";
const std::string kUsageChunk =
    R"({"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}})";
const std::string kErrorChunk = R"({"error":{"message":"overloaded","type":"server_error"}})";

std::string sse(const std::vector<std::string>& data, const std::string& eol = "\n") {
    std::string s;
    for (const auto& d : data) s += "data: " + d + eol + eol;
    return s;
}

struct Outcome {
    std::string out;
    CodecResult res;
    BodyMode mode;
};

std::unique_ptr<Codec> chat(bool stream, bool wants_usage) {
    CodecOptions o;
    o.client_stream = stream;
    o.client_wants_usage = wants_usage;
    return make_codec(CodecKind::OpenAIChat, o);
}

// Feeds body in pieces of `piece` bytes (0: whole).
Outcome run(Codec& c, int status, const std::string& ct, const std::string& body, std::size_t piece = 0,
        BodyEnd how = BodyEnd::Clean) {
    Outcome r;
    r.mode = c.head(status, ct);
    if (piece == 0) piece = body.size() ? body.size() : 1;
    for (std::size_t i = 0; i < body.size(); i += piece) c.feed(std::string_view(body).substr(i, piece), r.out);
    c.finish(how, r.out);
    r.res = c.result();
    return r;
}

const std::string kDone = "[DONE]";

}  // namespace

TEST(CodecOpenAI, BuildsChatRequest) {
    std::string err;
    auto doc = RequestDoc::parse(R"({"model":"alias","stream":true,"messages":[]})", err);
    ASSERT_TRUE(doc);
    CallerRequest in;
    in.doc = doc.get();
    in.upstream_model = "gpt-4o-mini";
    in.provider_key = "sk-provider";
    UpstreamRequest out;
    ASSERT_TRUE(chat(true, false)->build_request(in, out, err));
    EXPECT_EQ(out.method, "POST");
    EXPECT_EQ(out.path, "/chat/completions");
    EXPECT_EQ(out.credential_header, "Authorization");
    ASSERT_EQ(out.headers.size(), 2u);
    EXPECT_EQ(out.headers[0].first, "Content-Type");
    EXPECT_EQ(out.headers[1].second, "Bearer sk-provider");
    EXPECT_EQ(out.body, R"({"model":"gpt-4o-mini","stream":true,"messages":[],"stream_options":{"include_usage":true}})");
}

TEST(CodecOpenAI, BuildsEmbeddingsRequestWithoutKey) {
    std::string err;
    auto doc = RequestDoc::parse(R"({"model":"e","input":"x","stream":true})", err);
    ASSERT_TRUE(doc);
    CallerRequest in;
    in.doc = doc.get();
    in.upstream_model = "emb";
    UpstreamRequest out;
    auto c = make_codec(CodecKind::OpenAIEmbeddings, CodecOptions());
    ASSERT_TRUE(c->build_request(in, out, err));
    EXPECT_EQ(out.path, "/embeddings");
    EXPECT_EQ(out.credential_header, "");
    EXPECT_EQ(out.headers.size(), 1u);
    EXPECT_EQ(out.body, R"({"model":"emb","input":"x","stream":true})");   // no include_usage forced
    EXPECT_FALSE(c->build_request(CallerRequest(), out, err));
}

TEST(CodecOpenAI, WholeBody) {
    const std::string body =
        R"({"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}})";
    auto c = chat(false, false);
    Outcome r = run(*c, 200, "application/json", body, 5);
    EXPECT_EQ(r.mode, BodyMode::Whole);
    EXPECT_EQ(r.out, body);
    EXPECT_EQ(r.res.end, EndState::Complete);
    EXPECT_TRUE(r.res.usage.present);
    EXPECT_EQ(r.res.usage.prompt_tokens, 3);
    EXPECT_EQ(r.res.usage.completion_tokens, 4);
}

TEST(CodecOpenAI, StreamSplitAtEveryByte) {
    const std::string wire = sse({kChunk1, kChunk2, kUsageChunk, kDone});
    for (bool wants : {false, true}) {
        const std::string want = wants ? wire : sse({kChunk1, kChunk2, kDone});
        for (std::size_t piece = 1; piece <= wire.size(); ++piece) {
            auto c = chat(true, wants);
            Outcome r = run(*c, 200, "text/event-stream; charset=utf-8", wire, piece);
            ASSERT_EQ(r.mode, BodyMode::Stream);
            ASSERT_EQ(r.out, want) << piece;
            ASSERT_EQ(r.res.end, EndState::Complete) << piece;
            ASSERT_EQ(r.res.usage.prompt_tokens, 11);
            ASSERT_EQ(r.res.usage.completion_tokens, 7);
        }
    }
}

TEST(CodecOpenAI, LineEnds) {
    for (std::string eol : {"\n", "\r", "\r\n"}) {
        auto c = chat(true, false);
        Outcome r = run(*c, 200, "text/event-stream", sse({kChunk1, kUsageChunk, kDone}, eol), 3);
        EXPECT_EQ(r.out, sse({kChunk1, kDone})) << "relayed with LF line ends";
        EXPECT_EQ(r.res.end, EndState::Complete);
        EXPECT_TRUE(r.res.usage.present);
    }
}

TEST(CodecOpenAI, StreamWithoutDoneIsCut) {
    auto c = chat(true, false);
    Outcome r = run(*c, 200, "text/event-stream", sse({kChunk1, kChunk2}));
    EXPECT_EQ(r.res.end, EndState::Cut);
    EXPECT_EQ(r.out, sse({kChunk1, kChunk2}) +
                         "event: error\ndata: {\"error\":{\"message\":\"the upstream stream ended before completion\","
                         "\"type\":\"upstream_error\",\"code\":\"stream_interrupted\",\"param\":null}}\n\n");
    // [DONE] seen, but the connection was cut: still complete only with a clean end
    auto c2 = chat(true, false);
    Outcome r2 = run(*c2, 200, "text/event-stream", sse({kChunk1, kDone}), 0, BodyEnd::Cut);
    EXPECT_EQ(r2.res.end, EndState::Cut);
    // an event left half-way
    auto c3 = chat(true, false);
    Outcome r3 = run(*c3, 200, "text/event-stream", sse({kChunk1, kDone}) + "data: {\"a\"");
    EXPECT_EQ(r3.res.end, EndState::Cut);
}

TEST(CodecOpenAI, ErrorEventMidStream) {
    auto c = chat(true, false);
    Outcome r = run(*c, 200, "text/event-stream", sse({kChunk1, kErrorChunk}), 0, BodyEnd::Cut);
    EXPECT_EQ(r.res.end, EndState::StreamError);
    EXPECT_EQ(r.out, sse({kChunk1, kErrorChunk}));   // relayed as it is, nothing added
}

TEST(CodecOpenAI, InvalidFramingMidStream) {
    auto c = chat(true, false);
    Outcome r = run(*c, 200, "text/event-stream", sse({kChunk1}), 0, BodyEnd::Invalid);
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_EQ(r.out, sse({kChunk1}) +
                         "event: error\ndata: {\"error\":{\"message\":\"the upstream provider sent an invalid "
                         "response\",\"type\":\"upstream_error\",\"code\":\"bad_gateway\",\"param\":null}}\n\n");
    // The usage read before the framing broke stays (billed: answer_billed).
    c = chat(true, false);
    r = run(*c, 200, "text/event-stream", sse({kChunk1, kChunk2, kUsageChunk}), 0, BodyEnd::Invalid);
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_EQ(c->mode(), BodyMode::Stream);
    EXPECT_TRUE(r.res.usage.present);
    EXPECT_EQ(r.res.usage.prompt_tokens, 11);
    EXPECT_EQ(r.res.usage.completion_tokens, 7);
}

TEST(CodecOpenAI, MalformedUsage) {
    auto c = chat(true, false);
    const std::string bad = R"({"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":10.7}})";
    Outcome r = run(*c, 200, "text/event-stream", sse({kChunk1, kChunk2, bad, kDone}));
    EXPECT_EQ(r.res.end, EndState::Complete);
    EXPECT_EQ(r.out, sse({kChunk1, kChunk2, kDone}));   // hidden as any usage chunk the client did not ask for
    EXPECT_TRUE(r.res.usage.present);
    EXPECT_TRUE(r.res.usage.malformed);
    c = chat(false, false);
    r = run(*c, 200, "application/json",
            R"({"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1e30,"completion_tokens":5}})");
    EXPECT_TRUE(r.res.usage.present);
    EXPECT_TRUE(r.res.usage.malformed);
}

TEST(CodecOpenAI, TruncatedOrInvalidJsonBody) {
    for (std::string body : {std::string(R"({"id":"x","choices":[)"), std::string("<html>oops</html>"), std::string()}) {
        auto c = chat(false, false);
        Outcome r = run(*c, 200, "application/json", body);
        EXPECT_EQ(r.res.end, EndState::Invalid);
        EXPECT_EQ(r.res.status, 502);
        EXPECT_EQ(r.res.content_type, "application/json");
        EXPECT_EQ(r.out, "{\"error\":{\"message\":\"the upstream provider sent an invalid response\","
                         "\"type\":\"upstream_error\",\"code\":\"bad_gateway\",\"param\":null}}");
    }
}

// A whole answer is held until complete: one cut short reached nobody, so it
// is an invalid answer (the 502 envelope), a stream request's JSON answer too.
TEST(CodecOpenAI, WholeAnswerCutShort) {
    const std::string envelope = "{\"error\":{\"message\":\"the upstream provider sent an invalid response\","
                                 "\"type\":\"upstream_error\",\"code\":\"bad_gateway\",\"param\":null}}";
    for (bool stream : {false, true}) {
        for (const std::string& body : {std::string(R"({"id":"x")"), std::string()}) {
            auto c = chat(stream, false);
            Outcome r = run(*c, 200, "application/json", body, 0, BodyEnd::Cut);
            EXPECT_EQ(r.mode, BodyMode::Whole);
            EXPECT_EQ(r.res.end, EndState::Invalid);
            EXPECT_EQ(r.res.status, 502);
            EXPECT_EQ(r.res.content_type, "application/json");
            EXPECT_EQ(r.res.text, "the response body ended before completion");
            EXPECT_EQ(r.out, envelope);
        }
    }
    auto e = make_codec(CodecKind::OpenAIEmbeddings, CodecOptions());
    Outcome r = run(*e, 200, "application/json", R"({"data":[)", 0, BodyEnd::Cut);
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_EQ(r.out, envelope);
    // A stream cut after its first event ends with the error event.
    auto s = chat(true, false);
    r = run(*s, 200, "text/event-stream", sse({kChunk1}), 0, BodyEnd::Cut);
    EXPECT_EQ(r.res.end, EndState::Cut);
    EXPECT_EQ(r.out, sse({kChunk1}) + "event: error\ndata: {\"error\":{\"message\":\"the upstream stream ended before "
                                      "completion\",\"type\":\"upstream_error\",\"code\":\"stream_interrupted\",\"param\":null}}\n\n");
}

TEST(CodecOpenAI, InvalidUtf8IsRelayed) {
    const std::string chunk = "{\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}";
    auto c = chat(true, false);
    Outcome r = run(*c, 200, "text/event-stream", sse({chunk, kDone}), 1);
    EXPECT_EQ(r.out, sse({chunk, kDone}));
    EXPECT_EQ(r.res.end, EndState::Complete);
    const std::string body = "{\"id\":\"\xc3\x28\",\"usage\":{\"prompt_tokens\":1}}";
    auto c2 = chat(false, false);
    Outcome r2 = run(*c2, 200, "application/json", body);
    EXPECT_EQ(r2.out, body);
    EXPECT_EQ(r2.res.usage.prompt_tokens, 1);
}

TEST(CodecOpenAI, HugeEventEndsTheStream) {
    CodecOptions o;
    o.client_stream = true;
    o.max_event_bytes = 1024;
    auto c = make_codec(CodecKind::OpenAIChat, o);
    std::string out;
    c->head(200, "text/event-stream");
    c->feed(sse({kChunk1}), out);
    c->feed("data: " + std::string(2000, 'x'), out);
    EXPECT_EQ(c->take_problem(), "upstream SSE event too large");
    EXPECT_EQ(c->take_problem(), "");
    c->feed(sse({kDone}), out);
    c->finish(BodyEnd::Clean, out);
    EXPECT_EQ(c->result().end, EndState::Cut);
    EXPECT_EQ(out.rfind(sse({kChunk1}), 0), 0u);
    EXPECT_NE(out.find("stream_interrupted"), std::string::npos);
}

TEST(CodecOpenAI, HugeWholeBodySpills) {
    CodecOptions o;
    o.whole_limit = 10;
    auto c = make_codec(CodecKind::OpenAIChat, o);
    std::string out;
    c->head(200, "application/json");
    c->feed("{\"a\":", out);
    EXPECT_FALSE(c->spilled());
    EXPECT_EQ(out, "");
    c->feed("\"0123456789\"", out);
    EXPECT_TRUE(c->spilled());
    EXPECT_EQ(c->mode(), BodyMode::Stream);
    EXPECT_EQ(out, "{\"a\":\"0123456789\"");
    c->feed("}", out);
    c->finish(BodyEnd::Clean, out);
    EXPECT_EQ(out, "{\"a\":\"0123456789\"}");
    EXPECT_EQ(c->result().end, EndState::Complete);
    EXPECT_FALSE(c->result().usage.present);
}

TEST(CodecOpenAI, UpstreamErrorStatus) {
    auto c = chat(true, false);
    Outcome r = run(*c, 429, "application/json", R"({"error":{"message":"slow down sk-abcdefghijkl"}})", 4);
    EXPECT_EQ(r.mode, BodyMode::Error);
    EXPECT_EQ(r.res.end, EndState::UpstreamError);
    EXPECT_EQ(r.res.status, 429);
    EXPECT_EQ(r.res.text, "slow down [redacted]");
    EXPECT_EQ(r.out, R"({"error":{"message":"slow down sk-abcdefghijkl"}})");   // an error object: relayed
    auto c2 = chat(false, false);
    Outcome r2 = run(*c2, 500, "text/html", "<html>Bearer abc</html>");
    EXPECT_EQ(r2.res.status, 500);
    EXPECT_EQ(r2.out, "{\"error\":{\"message\":\"upstream returned status 500: upstream error without a message\","
                      "\"type\":\"upstream_error\",\"code\":\"upstream_error\",\"param\":null}}");
}

TEST(CodecOpenAI, NotAFinalStatus) {
    for (int status : {0, 100, 101, 103, 199, 600, 999}) {
        auto c = chat(true, false);
        Outcome r = run(*c, status, "text/event-stream", sse({kChunk1, kDone}));
        EXPECT_EQ(r.mode, BodyMode::Invalid) << status;
        EXPECT_EQ(r.res.end, EndState::Invalid);
        EXPECT_EQ(r.res.status, 502);
        EXPECT_EQ(r.out, "{\"error\":{\"message\":\"the upstream provider sent an invalid response\","
                         "\"type\":\"upstream_error\",\"code\":\"bad_gateway\",\"param\":null}}");
    }
    auto c = chat(false, false);
    EXPECT_EQ(c->head(-1, ""), BodyMode::Invalid);
    EXPECT_EQ(c->result().text, "no valid HTTP status line");
    auto c2 = chat(false, false);
    c2->head(999, "application/json");
    EXPECT_EQ(c2->result().text, "status 999 is not a final HTTP status");
}

TEST(CodecOpenAI, JsonAnswerToAStreamRequest) {
    auto c = chat(true, false);
    Outcome r = run(*c, 200, "application/json", R"({"usage":{"prompt_tokens":2,"completion_tokens":1}})");
    EXPECT_EQ(r.mode, BodyMode::Whole);
    EXPECT_EQ(r.res.end, EndState::Complete);
    EXPECT_EQ(r.res.usage.completion_tokens, 1);
}

TEST(CodecOpenAI, StoppedByTheGateway) {
    auto c = chat(true, true);
    c->head(200, "text/event-stream");
    std::string out;
    c->feed(sse({kChunk1}), out);
    const std::int64_t text = c->result().text_bytes;
    std::string tail;
    c->stop("budget exceeded: user \"alice\" tokensPerDay 1000", "insufficient_quota", "budget_exceeded", tail);
    EXPECT_EQ(c->result().end, EndState::Stopped);
    EXPECT_EQ(tail, "event: error\ndata: {\"error\":{\"message\":\"budget exceeded: user \\\"alice\\\" tokensPerDay 1000\","
                    "\"type\":\"insufficient_quota\",\"code\":\"budget_exceeded\",\"param\":null}}\n\n");
    // What comes after changes nothing: no bytes, no usage, no second end.
    std::string more;
    c->feed(sse({kChunk2, kUsageChunk, kDone}), more);
    c->finish(BodyEnd::Clean, more);
    EXPECT_EQ(more, "");
    EXPECT_EQ(c->result().end, EndState::Stopped);
    EXPECT_FALSE(c->result().usage.present);
    EXPECT_EQ(c->result().text_bytes, text);
    c->stop("again", "insufficient_quota", "budget_exceeded", more);
    EXPECT_EQ(more, "");
}
