// The translating codecs end to end: caller request -> provider request,
// provider answer (whole or streamed, in pieces of any size) -> caller bytes,
// usage and end state; and /v1/messages to an Anthropic provider (native).
#include <gtest/gtest.h>

#include "core/codec/codec.h"

using namespace llmgw;

namespace {

struct Outcome {
    std::string out;
    CodecResult res;
    BodyMode mode;
    std::vector<std::string> pieces;   // what each feed() produced
};

std::unique_ptr<Codec> codec(CodecKind api, ProviderType p, bool stream, bool usage = false) {
    CodecOptions o;
    o.provider = p;
    o.client_stream = stream;
    o.client_wants_usage = usage;
    o.client_model = "alias-x";
    o.created = 1700000000;
    return make_codec(api, o);
}

Outcome run(Codec& c, int status, const std::string& ct, const std::string& body, std::size_t piece = 0,
            BodyEnd how = BodyEnd::Clean) {
    Outcome r;
    r.mode = c.head(status, ct);
    if (piece == 0) piece = body.size() ? body.size() : 1;
    for (std::size_t i = 0; i < body.size(); i += piece) {
        std::string o;
        c.feed(std::string_view(body).substr(i, piece), o);
        r.pieces.push_back(o);
        r.out += o;
    }
    c.finish(how, r.out);
    r.res = c.result();
    return r;
}

std::string build(Codec& c, const std::string& body, std::string* err_out = nullptr, int* refuse = nullptr) {
    std::string err;
    auto doc = RequestDoc::parse(body, err);
    if (!doc) return "PARSE: " + err;
    CallerRequest in;
    in.body = body;
    in.doc = doc.get();
    in.upstream_model = "up-model";
    in.provider_key = "sk-prov";
    UpstreamRequest up;
    if (!c.build_request(in, up, err)) {
        if (err_out) *err_out = err;
        if (refuse) *refuse = up.refuse_status;
        return "ERR";
    }
    std::string s = up.method + " " + up.path + "\n";
    for (auto& [k, v] : up.headers) s += k + ": " + v + "\n";
    return s + up.body;
}

const std::string kAnthropicStream =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],"
    "\"model\":\"c\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":4,\"output_tokens\":1}}}\r\n\r\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
    "event: ping\ndata: {\"type\": \"ping\"}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":7}}\n\n"
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

const std::string kChunk = R"(data: {"id":"msg_1","object":"chat.completion.chunk","created":1700000000,"model":"alias-x","choices":[{"index":0,"delta":)";

}  // namespace

TEST(TranslatingCodec, ServesTable) {
    EXPECT_TRUE(codec_serves(CodecKind::OpenAIChat, ProviderType::Anthropic));
    EXPECT_TRUE(codec_serves(CodecKind::AnthropicMessages, ProviderType::Gemini));
    EXPECT_FALSE(codec_serves(CodecKind::OpenAIEmbeddings, ProviderType::Anthropic));
    EXPECT_TRUE(codec_serves(CodecKind::OpenAIEmbeddings, ProviderType::Gemini));
    EXPECT_EQ(codec(CodecKind::OpenAIEmbeddings, ProviderType::Anthropic, false), nullptr);
}

TEST(TranslatingCodec, RequestsPerProviderType) {
    const std::string chat = R"({"model":"alias-x","messages":[{"role":"user","content":"hi"}],"stream":true})";
    EXPECT_EQ(build(*codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true), chat),
              "POST /v1/messages\nContent-Type: application/json\nanthropic-version: 2023-06-01\nx-api-key: sk-prov\n"
              R"({"model":"up-model","messages":[{"role":"user","content":"hi"}],"max_tokens":4096,"stream":true})");
    EXPECT_EQ(build(*codec(CodecKind::OpenAIChat, ProviderType::Gemini, true), chat),
              "POST /v1beta/models/up-model:streamGenerateContent?alt=sse\nContent-Type: application/json\n"
              "x-goog-api-key: sk-prov\n"
              R"({"contents":[{"role":"user","parts":[{"text":"hi"}]}]})");
    const std::string msgs = R"({"model":"alias-x","max_tokens":9,"messages":[{"role":"user","content":"hi"}]})";
    EXPECT_EQ(build(*codec(CodecKind::AnthropicMessages, ProviderType::OpenAI, false), msgs),
              "POST /chat/completions\nContent-Type: application/json\nAuthorization: Bearer sk-prov\n"
              R"({"model":"up-model","messages":[{"role":"user","content":"hi"}],"max_tokens":9})");
    EXPECT_EQ(build(*codec(CodecKind::AnthropicMessages, ProviderType::Gemini, false), msgs),
              "POST /v1beta/models/up-model:generateContent\nContent-Type: application/json\nx-goog-api-key: sk-prov\n"
              R"({"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":9}})");
    EXPECT_EQ(build(*codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, false), msgs),
              "POST /v1/messages\nContent-Type: application/json\nanthropic-version: 2023-06-01\nx-api-key: sk-prov\n"
              R"({"model":"up-model","max_tokens":9,"messages":[{"role":"user","content":"hi"}]})");
}

TEST(TranslatingCodec, RefusalsAre400) {
    std::string err;
    int status = 0;
    EXPECT_EQ(build(*codec(CodecKind::OpenAIChat, ProviderType::Anthropic, false),
                    R"({"model":"m","n":3,"messages":[{"role":"user","content":"hi"}]})", &err, &status),
              "ERR");
    EXPECT_EQ(status, 400);
    EXPECT_EQ(err, "n greater than 1 is not supported by anthropic providers");
    status = 0;
    EXPECT_EQ(build(*codec(CodecKind::AnthropicMessages, ProviderType::OpenAI, false),
                    R"({"model":"m","messages":[{"role":"user","content":"hi"}]})", &err, &status),
              "ERR");
    EXPECT_EQ(status, 400);
    EXPECT_EQ(err, "max_tokens is required");
}

TEST(TranslatingCodec, GeminiModelIdMustStayOneSegment) {
    for (const char* model : {"../../v1/files", "a/b", "x?y", "x#y", "a%2Fb", "..", "sp ace"}) {
        CodecOptions o;
        o.provider = ProviderType::Gemini;
        auto c = make_codec(CodecKind::OpenAIChat, o);
        const std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi"}]})";
        std::string err;
        auto doc = RequestDoc::parse(body, err);
        CallerRequest in;
        in.body = body;
        in.doc = doc.get();
        in.upstream_model = model;
        UpstreamRequest up;
        EXPECT_FALSE(c->build_request(in, up, err)) << model;
        EXPECT_EQ(up.refuse_status, 400) << model;
    }
}

TEST(TranslatingCodec, AnthropicStreamToOpenAIAtAnyPieceSize) {
    const std::string want =
        kChunk + R"({"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})" "\n\n" +
        kChunk + R"({"content":"Hello"},"logprobs":null,"finish_reason":null}]})" "\n\n" +
        kChunk + R"({},"logprobs":null,"finish_reason":"stop"}]})" "\n\n" "data: [DONE]\n\n";
    for (std::size_t piece : {0, 1, 2, 7, 64}) {
        auto c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true);
        Outcome r = run(*c, 200, "text/event-stream; charset=utf-8", kAnthropicStream, piece);
        EXPECT_EQ(r.mode, BodyMode::Stream);
        EXPECT_EQ(r.out, want) << "piece " << piece;
        EXPECT_EQ(r.res.end, EndState::Complete);
        EXPECT_TRUE(r.res.usage.present);
        EXPECT_EQ(r.res.usage.prompt_tokens, 14);
        EXPECT_EQ(r.res.usage.completion_tokens, 7);
        EXPECT_EQ(r.res.text_bytes, 5) << "the completion text seen: \"Hello\"";
    }
}

TEST(TranslatingCodec, NothingHeldBack) {
    // Each upstream event's client bytes come out of the feed() that completed it.
    auto c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true);
    c->head(200, "text/event-stream");
    std::string o1, o2;
    c->feed("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\n", o1);
    EXPECT_NE(o1.find(R"("delta":{"role":"assistant","content":""})"), std::string::npos);
    c->feed("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
            o2);
    EXPECT_NE(o2.find(R"("delta":{"content":"Hi"})"), std::string::npos);
}

TEST(TranslatingCodec, IncludeUsage) {
    auto c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true, true);
    Outcome r = run(*c, 200, "text/event-stream", kAnthropicStream);
    EXPECT_NE(r.out.find(R"("choices":[],"usage":{"prompt_tokens":14,"completion_tokens":7,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4})"),
              std::string::npos)
        << r.out;
}

TEST(TranslatingCodec, StreamEndings) {
    // Cut before message_stop: an error event, state Cut.
    std::string cut = kAnthropicStream.substr(0, kAnthropicStream.find("event: message_stop"));
    auto c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true);
    Outcome r = run(*c, 200, "text/event-stream", cut, 0, BodyEnd::Cut);
    EXPECT_EQ(r.res.end, EndState::Cut);
    EXPECT_NE(r.out.find("event: error\ndata: {\"error\":{\"message\":\"the upstream stream ended before completion\""),
              std::string::npos);
    EXPECT_EQ(r.out.find("[DONE]"), std::string::npos);
    // A clean end without message_stop is not complete either.
    c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true);
    r = run(*c, 200, "text/event-stream", cut);
    EXPECT_EQ(r.res.end, EndState::Cut);
    // The provider's error event: relayed in the caller's shape, StreamError.
    c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true);
    r = run(*c, 200, "text/event-stream",
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n");
    EXPECT_EQ(r.res.end, EndState::StreamError);
    EXPECT_NE(r.out.find(R"("message":"Overloaded","type":"overloaded_error")"), std::string::npos) << r.out;
    // A broken event: Invalid, an error event closes the stream.
    c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true);
    r = run(*c, 200, "text/event-stream", "event: message_start\ndata: {not json\n\n");
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_NE(r.out.find("the upstream provider sent an invalid response"), std::string::npos);
    // An oversized event.
    CodecOptions o;
    o.provider = ProviderType::Anthropic;
    o.client_stream = true;
    o.max_event_bytes = 64;
    c = make_codec(CodecKind::OpenAIChat, o);
    r = run(*c, 200, "text/event-stream", "data: " + std::string(200, 'x') + "\n\n");
    EXPECT_EQ(r.res.end, EndState::Invalid);
}

TEST(TranslatingCodec, WholeAnswers) {
    auto c = codec(CodecKind::OpenAIChat, ProviderType::Gemini, false);
    Outcome r = run(*c, 200, "application/json",
                    R"({"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}],)"
                    R"("usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"thoughtsTokenCount":3},"responseId":"r1"})");
    EXPECT_EQ(r.res.end, EndState::Complete);
    EXPECT_EQ(r.res.content_type, "application/json");
    EXPECT_EQ(r.out,
              R"({"id":"r1","object":"chat.completion","created":1700000000,"model":"alias-x","choices":[{"index":0,)"
              R"("message":{"role":"assistant","content":"Hi","refusal":null},"logprobs":null,"finish_reason":"stop"}],)"
              R"("usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":0},)"
              R"("completion_tokens_details":{"reasoning_tokens":3}}})");
    EXPECT_EQ(r.res.usage.completion_tokens, 5);
    // The caller asked for a stream, the provider answered whole: a stream.
    c = codec(CodecKind::AnthropicMessages, ProviderType::OpenAI, true);
    r = run(*c, 200, "application/json",
            R"({"id":"c1","choices":[{"message":{"content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}})");
    EXPECT_EQ(r.res.content_type, "text/event-stream");
    EXPECT_EQ(r.out.rfind("event: message_start\n", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("event: message_stop\n"), std::string::npos);
    // Not an answer of the format: 502 in the caller's envelope.
    c = codec(CodecKind::AnthropicMessages, ProviderType::OpenAI, false);
    r = run(*c, 200, "application/json", R"({"unexpected":true})");
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_EQ(r.res.status, 502);
    EXPECT_EQ(r.out, R"({"type":"error","error":{"type":"api_error","message":"the upstream provider sent an invalid response"}})");
}

TEST(TranslatingCodec, UpstreamErrorsInTheCallerEnvelope) {
    auto c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, false);
    Outcome r = run(*c, 429, "application/json",
                    R"({"type":"error","error":{"type":"rate_limit_error","message":"Slow down, key sk-ant-api03-SECRETSECRETSECRET"}})");
    EXPECT_EQ(r.res.end, EndState::UpstreamError);
    EXPECT_EQ(r.out, R"({"error":{"message":"upstream returned status 429: Slow down, key [redacted]","type":"rate_limit_error","code":"upstream_error","param":null}})");
    c = codec(CodecKind::AnthropicMessages, ProviderType::Gemini, false);
    r = run(*c, 503, "application/json", R"({"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}})");
    EXPECT_EQ(r.out, R"({"type":"error","error":{"type":"api_error","message":"upstream returned status 503: The model is overloaded."}})");
}

TEST(AnthropicNativeCodec, RelaysBytesAndReadsUsage) {
    for (std::size_t piece : {0, 3}) {
        auto c = codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, true);
        Outcome r = run(*c, 200, "text/event-stream", kAnthropicStream, piece);
        EXPECT_EQ(r.out, kAnthropicStream);
        EXPECT_EQ(r.res.end, EndState::Complete);
        EXPECT_EQ(r.res.usage.prompt_tokens, 14);
        EXPECT_EQ(r.res.usage.completion_tokens, 7);
    }
    auto c = codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, false);
    const std::string whole =
        R"({"id":"msg_2","type":"message","content":[{"type":"text","text":"x"}],"stop_reason":"end_turn",)"
        R"("usage":{"input_tokens":3,"cache_creation_input_tokens":100,"output_tokens":2}})";
    Outcome r = run(*c, 200, "application/json", whole);
    EXPECT_EQ(r.out, whole);
    EXPECT_EQ(r.res.usage.prompt_tokens, 103);
    // The provider's own error passes as it is; another body is wrapped.
    c = codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, false);
    r = run(*c, 529, "application/json", R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
    EXPECT_EQ(r.out, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
    c = codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, false);
    r = run(*c, 502, "text/html", "<html>bad gateway</html>");
    EXPECT_EQ(r.out.rfind(R"({"type":"error","error":{"type":"api_error","message":"upstream returned status 502)", 0), 0u) << r.out;
    // Cut mid-stream: Anthropic's error event closes it.
    c = codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, true);
    r = run(*c, 200, "text/event-stream", kAnthropicStream.substr(0, 200), 0, BodyEnd::Cut);
    EXPECT_EQ(r.res.end, EndState::Cut);
    EXPECT_NE(r.out.find("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\""), std::string::npos);
}

TEST(GeminiEmbedCodec, OneAndMany) {
    auto c = codec(CodecKind::OpenAIEmbeddings, ProviderType::Gemini, false);
    EXPECT_EQ(build(*c, R"({"model":"e","input":"hello"})"),
              "POST /v1beta/models/up-model:embedContent\nContent-Type: application/json\nx-goog-api-key: sk-prov\n"
              R"({"content":{"parts":[{"text":"hello"}]}})");
    Outcome r = run(*c, 200, "application/json", R"({"embedding":{"values":[0.5,-1]}})");
    EXPECT_EQ(r.res.end, EndState::Complete);
    EXPECT_EQ(r.out, R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-1.0]}],"model":"alias-x","usage":{"prompt_tokens":0,"total_tokens":0}})");
    EXPECT_FALSE(r.res.usage.present);
    c = codec(CodecKind::OpenAIEmbeddings, ProviderType::Gemini, false);
    EXPECT_EQ(build(*c, R"({"model":"e","input":["a","b"],"encoding_format":"base64"})").substr(0, 47),
              "POST /v1beta/models/up-model:batchEmbedContents");
    r = run(*c, 200, "application/json", R"({"embeddings":[{"values":[1]},{"values":[0]}]})");
    EXPECT_EQ(r.out, R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPw=="},{"object":"embedding","index":1,"embedding":"AAAAAA=="}],"model":"alias-x","usage":{"prompt_tokens":0,"total_tokens":0}})");
    c = codec(CodecKind::OpenAIEmbeddings, ProviderType::Gemini, false);
    build(*c, R"({"model":"e","input":"x"})");
    r = run(*c, 200, "application/json", R"({"embedding":{}})");
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_EQ(r.res.status, 502);
}

// batchEmbedContents answers one vector per input, in order: another number
// of vectors is an invalid answer (502), never a 200 matching other inputs.
TEST(GeminiEmbedCodec, AsManyVectorsAsInputs) {
    const std::string envelope = "{\"error\":{\"message\":\"the upstream provider sent an invalid response\","
                                 "\"type\":\"upstream_error\",\"code\":\"bad_gateway\",\"param\":null}}";
    const std::pair<const char*, std::size_t> wrong[] = {
        {R"({"embeddings":[]})", 0},
        {R"({"embeddings":[{"values":[1]}]})", 1},
        {R"({"embeddings":[{"values":[1]},{"values":[2]},{"values":[3]}]})", 3},
    };
    for (const auto& [body, n] : wrong) {
        auto c = codec(CodecKind::OpenAIEmbeddings, ProviderType::Gemini, false);
        build(*c, R"({"model":"e","input":["a","b"]})");
        Outcome r = run(*c, 200, "application/json", body);
        EXPECT_EQ(r.res.end, EndState::Invalid) << body;
        EXPECT_EQ(r.res.status, 502);
        EXPECT_EQ(r.res.content_type, "application/json");
        EXPECT_EQ(r.res.text, "the number of embeddings (" + std::to_string(n) + ") is not the number of inputs (2)");
        EXPECT_EQ(r.out, envelope);
    }
    auto c = codec(CodecKind::OpenAIEmbeddings, ProviderType::Gemini, false);
    build(*c, R"({"model":"e","input":["a","b"]})");
    Outcome r = run(*c, 200, "application/json", R"({"embeddings":[{"values":[1]},{"values":[2]}]})");
    EXPECT_EQ(r.res.end, EndState::Complete);
    EXPECT_EQ(r.out, R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":[1.0]},{"object":"embedding","index":1,"embedding":[2.0]}],"model":"alias-x","usage":{"prompt_tokens":0,"total_tokens":0}})");
    // A list of one input: one vector.
    c = codec(CodecKind::OpenAIEmbeddings, ProviderType::Gemini, false);
    build(*c, R"({"model":"e","input":["only"]})");
    r = run(*c, 200, "application/json", R"({"embeddings":[{"values":[1]},{"values":[2]}]})");
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_EQ(r.res.text, "the number of embeddings (2) is not the number of inputs (1)");
}

TEST(TranslatingCodec, StoppedByTheGatewayInTheCallersShape) {
    const std::string msg = "budget exceeded: user \"alice\" tokensPerDay 1000";
    const std::string half = kAnthropicStream.substr(0, kAnthropicStream.find("event: content_block_stop"));
    // Chat completions from an Anthropic stream: OpenAI's error event.
    auto c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true);
    c->head(200, "text/event-stream");
    std::string out;
    c->feed(half, out);
    out.clear();
    c->stop(msg, "insufficient_quota", "budget_exceeded", out);
    EXPECT_EQ(out, "event: error\ndata: {\"error\":{\"message\":\"budget exceeded: user \\\"alice\\\" tokensPerDay 1000\","
                   "\"type\":\"insufficient_quota\",\"code\":\"budget_exceeded\",\"param\":null}}\n\n");
    std::string rest;
    c->finish(BodyEnd::Cut, rest);
    EXPECT_EQ(rest, "");
    EXPECT_EQ(c->result().end, EndState::Stopped);
    EXPECT_EQ(c->result().usage.prompt_tokens, 14) << "the usage read before the stop stays";
    // Messages, translated and native: Anthropic's error event, a rate_limit_error as a 429 budget answer says.
    const std::string want = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
                             "\"message\":\"budget exceeded: user \\\"alice\\\" tokensPerDay 1000\"}}\n\n";
    c = codec(CodecKind::AnthropicMessages, ProviderType::OpenAI, true);
    c->head(200, "text/event-stream");
    out.clear();
    c->stop(msg, "insufficient_quota", "budget_exceeded", out);
    EXPECT_EQ(out, want);
    c = codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, true);
    c->head(200, "text/event-stream");
    out.clear();
    c->feed(half, out);
    out.clear();
    c->stop(msg, "insufficient_quota", "budget_exceeded", out);
    EXPECT_EQ(out, want);
    c->feed(kAnthropicStream.substr(half.size()), rest);
    c->finish(BodyEnd::Clean, rest);
    EXPECT_EQ(rest, "");
    EXPECT_EQ(c->result().end, EndState::Stopped);
}

// A stream that turns invalid after the provider reported its usage ends
// Invalid with that usage kept, on every codec: the accounting bills it
// (answer_billed: a streamed answer, invalid) instead of nothing.
TEST(TranslatingCodec, InvalidAfterUsageKeepsTheUsage) {
    const std::string broken = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":\n\n";
    const std::string upto = kAnthropicStream.substr(0, kAnthropicStream.find("event: content_block_stop"));
    const std::string rest = kAnthropicStream.substr(upto.size());
    // OpenAI client, Anthropic provider.
    auto c = codec(CodecKind::OpenAIChat, ProviderType::Anthropic, true);
    Outcome r = run(*c, 200, "text/event-stream", upto + broken + rest);
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_EQ(c->mode(), BodyMode::Stream);
    EXPECT_TRUE(r.res.usage.present);
    EXPECT_EQ(r.res.usage.prompt_tokens, 14);
    EXPECT_EQ(r.res.usage.completion_tokens, 1);
    EXPECT_EQ(r.res.text_bytes, 5);
    // Anthropic client, OpenAI provider: invalid after the usage chunk.
    c = codec(CodecKind::AnthropicMessages, ProviderType::OpenAI, true);
    r = run(*c, 200, "text/event-stream",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n"
            "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":21,\"completion_tokens\":7}}\n\n"
            "data: {\"choices\":\"not an array\"}\n\n"
            "data: [DONE]\n\n");
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_TRUE(r.res.usage.present);
    EXPECT_EQ(r.res.usage.prompt_tokens, 21);
    EXPECT_EQ(r.res.usage.completion_tokens, 7);
    // OpenAI client, Gemini provider.
    c = codec(CodecKind::OpenAIChat, ProviderType::Gemini, true);
    r = run(*c, 200, "text/event-stream",
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]}}],\"usageMetadata\":{\"promptTokenCount\":40,\"candidatesTokenCount\":6}}\r\n\r\n"
            "data: {\"candidates\":7}\r\n\r\n");
    EXPECT_EQ(r.res.end, EndState::Invalid);
    EXPECT_TRUE(r.res.usage.present);
    EXPECT_EQ(r.res.usage.prompt_tokens, 40);
    EXPECT_EQ(r.res.usage.completion_tokens, 6);
    // Native /v1/messages: relayed on, cut, with the usage read before the
    // broken event (as it always billed).
    c = codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, true);
    r = run(*c, 200, "text/event-stream", upto + broken + rest);
    EXPECT_EQ(r.res.end, EndState::Cut);
    EXPECT_EQ(r.res.usage.prompt_tokens, 14);
    EXPECT_EQ(r.res.usage.completion_tokens, 1);
}

// A usage count out of range reaches the codec's result as malformed, on
// the translated and the native codecs, whole and streamed.
TEST(TranslatingCodec, MalformedUsageReachesTheResult) {
    std::string stream = kAnthropicStream;
    const std::string at = "\"usage\":{\"output_tokens\":7}";
    stream.replace(stream.find(at), at.size(), "\"usage\":{\"output_tokens\":10.7}");
    for (CodecKind api : {CodecKind::OpenAIChat, CodecKind::AnthropicMessages}) {
        auto c = codec(api, ProviderType::Anthropic, true);
        Outcome r = run(*c, 200, "text/event-stream", stream);
        EXPECT_EQ(r.res.end, EndState::Complete);
        EXPECT_TRUE(r.res.usage.present);
        EXPECT_TRUE(r.res.usage.malformed) << codec_kind_name(api);
    }
    auto c = codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, false);
    Outcome r = run(*c, 200, "application/json",
                    R"({"id":"m","type":"message","content":[{"type":"text","text":"x"}],"usage":{"input_tokens":9223372036854775808,"output_tokens":2}})");
    EXPECT_TRUE(r.res.usage.malformed);
    c = codec(CodecKind::OpenAIChat, ProviderType::Gemini, false);
    r = run(*c, 200, "application/json",
            R"({"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1e30,"candidatesTokenCount":2}})");
    EXPECT_TRUE(r.res.usage.malformed);
    c = codec(CodecKind::AnthropicMessages, ProviderType::OpenAI, false);
    r = run(*c, 200, "application/json",
            R"({"id":"c1","choices":[{"message":{"content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":-3,"completion_tokens":1}})");
    EXPECT_TRUE(r.res.usage.malformed);
}
