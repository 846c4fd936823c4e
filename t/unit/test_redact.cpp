// Configured secrets masked in relayed bytes: whole strings, streams split
// at every byte, overlapping secrets, the codecs' use of it.
#include <gtest/gtest.h>

#include "core/codec/codec.h"
#include "core/http/redact.h"

using namespace llmgw;

namespace {

std::string stars(std::size_t n) { return std::string(n, kRedactionByte); }

// The body through a StreamRedactor in pieces of `piece` bytes (0: whole).
std::string streamed(const SecretSet& set, const std::string& body, std::size_t piece, std::size_t* held_max = nullptr,
                     std::size_t* count = nullptr) {
    StreamRedactor r(set);
    std::string out;
    if (piece == 0) piece = body.empty() ? 1 : body.size();
    for (std::size_t i = 0; i < body.size(); i += piece) {
        out.append(r.pass(std::string_view(body).substr(i, piece), false));
        if (held_max != nullptr && r.held() > *held_max) *held_max = r.held();
    }
    out.append(r.pass({}, true));
    EXPECT_EQ(r.held(), 0u);
    if (count != nullptr) *count = r.redacted();
    return out;
}

const std::string kKey = "sk-live-abc123def456";

}  // namespace

TEST(Redact, ShortSecretsAreNotRedacted) {
    SecretSet s;
    EXPECT_FALSE(s.add(""));
    EXPECT_FALSE(s.add("EMPTY"));
    EXPECT_FALSE(s.add("ollama1"));   // 7 bytes
    EXPECT_TRUE(s.empty());
    std::string t = "EMPTY ollama1";
    EXPECT_EQ(s.mask(t), 0u);
    EXPECT_EQ(t, "EMPTY ollama1");
    EXPECT_TRUE(s.add("12345678"));
    EXPECT_EQ(s.longest(), 8u);
}

TEST(Redact, WholeStringEveryOccurrenceSameLength) {
    SecretSet s;
    ASSERT_TRUE(s.add(kKey));
    EXPECT_EQ(s.patterns(), 1u);   // nothing to escape: one form
    std::string body = R"({"error":{"message":"Incorrect API key provided: )" + kKey + R"(. Key )" + kKey + R"("}})";
    const std::size_t len = body.size();
    EXPECT_TRUE(s.contains(body));
    EXPECT_EQ(s.mask(body), 2u);
    EXPECT_EQ(body.size(), len);
    EXPECT_EQ(body, R"({"error":{"message":"Incorrect API key provided: )" + stars(kKey.size()) + ". Key " +
                        stars(kKey.size()) + R"("}})");
    EXPECT_FALSE(s.contains(body));
    std::string other = "sk-live-abc123def45 is not it";   // one byte short
    EXPECT_EQ(s.mask(other), 0u);
    EXPECT_EQ(other, "sk-live-abc123def45 is not it");
}

TEST(Redact, OverlappingSecretsAndOverlappingOccurrences) {
    SecretSet s;
    ASSERT_TRUE(s.add("abcdefgh"));
    ASSERT_TRUE(s.add("efghijkl"));   // overlaps the first's end
    ASSERT_TRUE(s.add("xxxxxxxx"));
    std::string t = "..abcdefghijkl..xxxxxxxxxx..";
    EXPECT_EQ(s.mask(t), 5u);   // abcdefgh, efghijkl, xxxxxxxx three times (overlapping)
    EXPECT_EQ(t, ".." + stars(12) + ".." + stars(10) + "..");
    // One secret inside another.
    SecretSet in;
    ASSERT_TRUE(in.add("0123456789abcdef"));
    ASSERT_TRUE(in.add("456789ab"));
    std::string u = "[0123456789abcdef][456789ab]";
    in.mask(u);
    EXPECT_EQ(u, "[" + stars(16) + "][" + stars(8) + "]");
}

TEST(Redact, JsonEscapedAndPercentEncodedForms) {
    SecretSet s;
    const std::string key = "k/ey+\"q\\uote=";
    ASSERT_TRUE(s.add(key));
    EXPECT_EQ(s.patterns(), 4u);   // raw, JSON, JSON with \/, percent-encoded
    std::string json = R"({"m":"bad key k/ey+\"q\\uote="})";
    EXPECT_EQ(s.mask(json), 1u);
    EXPECT_EQ(json, R"({"m":"bad key )" + stars(15) + R"("})");
    std::string slashed = R"({"m":"k\/ey+\"q\\uote="})";
    EXPECT_EQ(s.mask(slashed), 1u);
    EXPECT_EQ(slashed, R"({"m":")" + stars(16) + R"("})");
    std::string url = "https://x/?key=k%2Fey%2B%22q%5Cuote%3D&a=1";
    EXPECT_EQ(s.mask(url), 1u);
    EXPECT_EQ(url, "https://x/?key=" + stars(23) + "&a=1");
    std::string raw = "Bearer " + key;
    EXPECT_EQ(s.mask(raw), 1u);
    EXPECT_EQ(raw, "Bearer " + stars(key.size()));
}

TEST(Redact, StreamSplitAtEveryByte) {
    SecretSet s;
    ASSERT_TRUE(s.add(kKey));
    ASSERT_TRUE(s.add("AIzaSyGeminiKey0123"));
    const std::string body = "data: {\"m\":\"" + kKey + "\"}\n\nsk-live-abc sk-live-abc123def456AIzaSyGeminiKey0123 ss" +
                             kKey + "s";
    std::string want = body;
    s.mask(want);
    ASSERT_NE(want, body);
    EXPECT_EQ(want.find("sk-live-abc1"), std::string::npos);
    for (std::size_t piece = 1; piece <= body.size(); ++piece) {
        std::size_t held = 0, count = 0;
        EXPECT_EQ(streamed(s, body, piece, &held, &count), want) << "pieces of " << piece;
        EXPECT_LE(held, s.longest() - 1) << "pieces of " << piece;
        EXPECT_EQ(count, 4u) << "pieces of " << piece;
    }
}

TEST(Redact, StreamOverlappingSecretsSplitAtEveryByte) {
    SecretSet s;
    ASSERT_TRUE(s.add("abcdefgh"));
    ASSERT_TRUE(s.add("efghijklmnop"));
    ASSERT_TRUE(s.add("abcdefghXYZW"));
    const std::string body = "abcdefghijklmnop abcdefghXYZW abcdefgabcdefgh efghijklmnoefghijklmnop";
    std::string want = body;
    s.mask(want);
    EXPECT_EQ(want, stars(16) + " " + stars(12) + " abcdefg" + stars(8) + " efghijklmno" + stars(12));
    for (std::size_t piece = 1; piece <= body.size(); ++piece) {
        EXPECT_EQ(streamed(s, body, piece), want) << "pieces of " << piece;
    }
}

TEST(Redact, StreamPassesPiecesUntouchedWhenNothingCanBeginASecret) {
    SecretSet s;
    ASSERT_TRUE(s.add(kKey));
    StreamRedactor r(s);
    const std::string piece = "data: {\"choices\":[]}\n\n";
    std::string_view out = r.pass(piece, false);
    EXPECT_EQ(out.data(), piece.data());   // the piece itself: no copy
    EXPECT_EQ(out.size(), piece.size());
    // A piece ending in what could begin the key is held back, then given
    // back unchanged when the next piece shows it is not the key.
    EXPECT_EQ(r.pass("hello sk-li", false), "hello ");
    EXPECT_EQ(r.held(), 5u);
    EXPECT_EQ(r.pass("ght\n", false), "sk-light\n");
    EXPECT_EQ(r.held(), 0u);
    EXPECT_EQ(r.pass("end sk", false), "end ");
    EXPECT_EQ(r.pass({}, true), "sk");   // the end: nothing held back
    r.pass("x sk-live", false);
    r.drop();
    EXPECT_EQ(r.held(), 0u);
    EXPECT_EQ(r.pass({}, true), "");
}

// The codecs mask the upstream's bytes before anything reads them.
namespace {

struct CodecRun {
    std::string out;
    CodecResult res;
};

CodecRun run_codec(CodecKind kind, ProviderType p, const SecretSet* secrets, int status, const std::string& ct,
              const std::string& body, std::size_t piece, bool stream = false) {
    CodecOptions o;
    o.provider = p;
    o.client_stream = stream;
    auto c = make_codec(kind, o);
    c->redact(secrets);
    CodecRun r;
    c->head(status, ct);
    if (piece == 0) piece = body.size() ? body.size() : 1;
    for (std::size_t i = 0; i < body.size(); i += piece) c->feed(std::string_view(body).substr(i, piece), r.out);
    c->finish(BodyEnd::Clean, r.out);
    r.res = c->result();
    return r;
}

}  // namespace

TEST(RedactCodec, PassthroughAndRelayBytesSameLengthEveryPiece) {
    SecretSet s;
    ASSERT_TRUE(s.add(kKey));
    const std::string body = R"({"error":{"message":"Incorrect API key provided: )" + kKey + R"(","type":"x"}})";
    std::string want = body;
    s.mask(want);
    for (CodecKind k : {CodecKind::Passthrough, CodecKind::Relay}) {
        for (std::size_t piece = 1; piece <= body.size(); ++piece) {
            CodecRun r = run_codec(k, ProviderType::OpenAI, &s, 401, "application/json", body, piece);
            ASSERT_EQ(r.out, want) << codec_kind_name(k) << " pieces of " << piece;
            EXPECT_EQ(r.res.redacted, 1u);
            EXPECT_EQ(r.res.text.find("abc123"), std::string::npos);
        }
    }
    // Without secrets the bytes are the upstream's.
    CodecRun plain = run_codec(CodecKind::Passthrough, ProviderType::OpenAI, nullptr, 401, "application/json", body, 7);
    EXPECT_EQ(plain.out, body);
    EXPECT_EQ(plain.res.redacted, 0u);
}

TEST(RedactCodec, NativeAndTranslatedErrorBodiesAndLogText) {
    SecretSet s;
    const std::string key = "plainprovidersecret0042";   // no sk- shape the log scrubber knows
    ASSERT_TRUE(s.add(key));
    const std::string openai_err = R"({"error":{"message":"bad key )" + key + R"(","type":"invalid_request_error"}})";
    CodecRun native = run_codec(CodecKind::OpenAIChat, ProviderType::OpenAI, &s, 401, "application/json", openai_err, 5);
    EXPECT_EQ(native.res.end, EndState::UpstreamError);
    EXPECT_EQ(native.out, R"({"error":{"message":"bad key )" + stars(key.size()) + R"(","type":"invalid_request_error"}})");
    EXPECT_EQ(native.res.text.find(key), std::string::npos);
    EXPECT_NE(native.res.text.find(stars(key.size())), std::string::npos);

    const std::string gemini_err = R"({"error":{"code":400,"message":"API key not valid: )" + key + R"(","status":"X"}})";
    CodecRun translated = run_codec(CodecKind::OpenAIChat, ProviderType::Gemini, &s, 400, "application/json", gemini_err, 3);
    EXPECT_EQ(translated.res.end, EndState::UpstreamError);
    EXPECT_EQ(translated.out.find(key.substr(0, 8)), std::string::npos) << translated.out;
    EXPECT_NE(translated.out.find(stars(key.size())), std::string::npos) << translated.out;

    const std::string anthropic_err = R"({"type":"error","error":{"type":"authentication_error","message":"x-api-key )" +
                                      key + R"( is invalid"}})";
    CodecRun messages =
        run_codec(CodecKind::AnthropicMessages, ProviderType::Anthropic, &s, 401, "application/json", anthropic_err, 4);
    EXPECT_EQ(messages.out.find(key.substr(0, 8)), std::string::npos) << messages.out;
    EXPECT_EQ(messages.out.size(), anthropic_err.size());
}

TEST(RedactCodec, TranslatedStreamErrorEventAndBodyLongerThanTheLogText) {
    SecretSet s;
    const std::string key = "plainprovidersecret0042";
    ASSERT_TRUE(s.add(key));
    // The secret straddles the 300 bytes an error message is cut to: no
    // half of it survives either.
    const std::string filler(290, 'm');
    const std::string body = R"({"error":{"message":")" + filler + key + R"("}})";
    CodecRun r = run_codec(CodecKind::OpenAIChat, ProviderType::Gemini, &s, 500, "application/json", body, 9);
    EXPECT_EQ(r.out.find("plainpro"), std::string::npos) << r.out;
    EXPECT_EQ(r.res.text.find("plainpro"), std::string::npos);
    // An Anthropic stream's error event, translated to OpenAI chunks.
    const std::string sse = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"" +
                            filler + key + "\"}}\n\n";
    CodecRun st = run_codec(CodecKind::OpenAIChat, ProviderType::Anthropic, &s, 200, "text/event-stream", sse, 11, true);
    EXPECT_EQ(st.out.find("plainpro"), std::string::npos) << st.out;
    EXPECT_EQ(st.res.text.find("plainpro"), std::string::npos);
}
