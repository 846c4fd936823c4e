#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include "core/codec/openai.h"

using llmgw::ChunkKind;
using llmgw::RequestDoc;
using llmgw::Usage;

namespace {

std::unique_ptr<RequestDoc> parse_ok(const std::string& body) {
    std::string err;
    auto doc = RequestDoc::parse(body, err);
    EXPECT_NE(doc, nullptr) << err;
    return doc;
}

std::string parse_err(const std::string& body) {
    std::string err;
    auto doc = RequestDoc::parse(body, err);
    EXPECT_EQ(doc, nullptr) << body;
    return err;
}

rapidjson::Document json(const std::string& s) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(s.c_str(), s.size());
    EXPECT_FALSE(d.HasParseError()) << s;
    return d;
}

// The usage of a whole answer (read_whole_response), valid or not.
Usage usage_from_response(std::string_view body) {
    Usage u;
    llmgw::read_whole_response(body, u);
    return u;
}

Usage usage(std::int64_t p, std::int64_t c) {
    Usage u;
    u.prompt_tokens = p;
    u.completion_tokens = c;
    u.present = true;
    return u;
}

// A usage with a count that is not one (Usage::malformed): present, and the
// valid counts as read.
Usage malformed(std::int64_t p, std::int64_t c) {
    Usage u = usage(p, c);
    u.malformed = true;
    return u;
}

void expect_usage(const Usage& got, const Usage& want) {
    EXPECT_EQ(got.present, want.present);
    EXPECT_EQ(got.malformed, want.malformed);
    EXPECT_EQ(got.prompt_tokens, want.prompt_tokens);
    EXPECT_EQ(got.completion_tokens, want.completion_tokens);
}

const char kChat[] = R"({"model":"gpt-4o","messages":[{"role":"user","content":"Hi \"there\" \u00e9\n"}],)"
                     R"("temperature":0.7,"max_tokens":100})";

}  // namespace

// ------------------------------------------------------------ parse / info

TEST(OpenAiRequest, ParseErrors) {
    EXPECT_EQ(parse_err(""), "request body is not valid JSON");
    EXPECT_EQ(parse_err("{\"model\":"), "request body is not valid JSON");
    EXPECT_EQ(parse_err("{\"model\":\"a\"} x"), "request body is not valid JSON");
    EXPECT_EQ(parse_err("{'model':'a'}"), "request body is not valid JSON");
    EXPECT_EQ(parse_err("[1,2]"), "request body must be a JSON object");
    EXPECT_EQ(parse_err("\"gpt\""), "request body must be a JSON object");
    EXPECT_EQ(parse_err("null"), "request body must be a JSON object");
    EXPECT_EQ(parse_err("{}"), "model is required");
    EXPECT_EQ(parse_err("{\"messages\":[]}"), "model is required");
    EXPECT_EQ(parse_err("{\"model\":\"\"}"), "model must be a non-empty string");
    EXPECT_EQ(parse_err("{\"model\":5}"), "model must be a non-empty string");
    EXPECT_EQ(parse_err("{\"model\":null}"), "model must be a non-empty string");
    EXPECT_EQ(parse_err("{\"model\":\"a\",\"stream\":\"true\"}"), "stream must be a boolean");
    EXPECT_EQ(parse_err("{\"model\":\"a\",\"stream\":1}"), "stream must be a boolean");
}

TEST(OpenAiRequest, DuplicateMembersRejected) {
    EXPECT_NE(parse_err(R"({"model":"cheap","model":"expensive"})").find("model"), std::string::npos);
    EXPECT_NE(parse_err(R"({"model":"a","stream":false,"stream":true})").find("stream"), std::string::npos);
    EXPECT_NE(parse_err(R"({"model":"a","stream_options":{},"stream_options":{}})").find("stream_options"),
              std::string::npos);
    EXPECT_NE(parse_err(R"({"model":"a","stream_options":{"include_usage":false,"include_usage":true}})")
                  .find("include_usage"),
              std::string::npos);
}

TEST(OpenAiRequest, Info) {
    auto d = parse_ok(kChat);
    EXPECT_EQ(d->info().model, "gpt-4o");
    EXPECT_FALSE(d->info().stream);
    EXPECT_FALSE(d->info().client_wants_usage);

    d = parse_ok(R"({"stream":true,"model":"m/x:1"})");
    EXPECT_EQ(d->info().model, "m/x:1");
    EXPECT_TRUE(d->info().stream);
    EXPECT_FALSE(d->info().client_wants_usage);

    d = parse_ok(R"({"model":"a","stream":false})");
    EXPECT_FALSE(d->info().stream);
    d = parse_ok(R"({"model":"a","stream":null})");
    EXPECT_FALSE(d->info().stream);
}

TEST(OpenAiRequest, ClientWantsUsage) {
    struct Case {
        const char* body;
        bool wants;
    } cases[] = {
        {R"({"model":"a","stream":true,"stream_options":{"include_usage":true}})", true},
        {R"({"model":"a","stream":true,"stream_options":{"include_usage":false}})", false},
        {R"({"model":"a","stream":true,"stream_options":{"include_usage":"true"}})", false},
        {R"({"model":"a","stream":true,"stream_options":{"include_usage":1}})", false},
        {R"({"model":"a","stream":true,"stream_options":{}})", false},
        {R"({"model":"a","stream":true,"stream_options":null})", false},
        {R"({"model":"a","stream":true,"stream_options":[true]})", false},
        {R"({"model":"a","stream":true,"include_usage":true})", false},
        {R"({"model":"a","stream":true,"stream_options":{"x":{"include_usage":true}}})", false},
    };
    for (const auto& c : cases) {
        auto d = parse_ok(c.body);
        ASSERT_NE(d, nullptr);
        EXPECT_EQ(d->info().client_wants_usage, c.wants) << c.body;
    }
}

TEST(OpenAiRequest, NestingLimit) {
    auto nested = [](int depth) {
        return R"({"model":"a","metadata":)" + std::string(depth, '[') + std::string(depth, ']') + "}";
    };
    EXPECT_NE(parse_ok(nested(200)), nullptr);
    EXPECT_EQ(parse_err(nested(400)), "request body is nested too deeply");
    EXPECT_EQ(parse_err(std::string(1000000, '[')), "request body is nested too deeply");
    // Brackets inside strings do not count, escaped quotes included.
    const std::string s = R"({"model":"a","x":"\\\")" + std::string(5000, '[') + R"(\"\\"})";
    auto d = parse_ok(s);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(json(d->rewrite("b", true))["x"].GetStringLength(), 5004u);
}

// ------------------------------------------------------------ rewrite

TEST(OpenAiRequest, RewriteReplacesModelKeepsTheRest) {
    auto d = parse_ok(kChat);
    const std::string out = d->rewrite("gpt-4o-2024-08-06", true);
    EXPECT_EQ(out,
              R"({"model":"gpt-4o-2024-08-06","messages":[{"role":"user","content":"Hi \"there\" )"
              "\xC3\xA9"
              R"(\n"}],"temperature":0.7,"max_tokens":100})");
    // Not streaming: no stream_options even with force.
    EXPECT_EQ(out.find("stream_options"), std::string::npos);
}

TEST(OpenAiRequest, RewriteAddsStreamOptions) {
    auto d = parse_ok(R"({"model":"a","messages":[{"role":"user","content":"hi"}],"stream":true})");
    EXPECT_EQ(d->rewrite("b", true),
              R"({"model":"b","messages":[{"role":"user","content":"hi"}],"stream":true,)"
              R"("stream_options":{"include_usage":true}})");
    EXPECT_EQ(d->rewrite("b", false), R"({"model":"b","messages":[{"role":"user","content":"hi"}],"stream":true})");
}

TEST(OpenAiRequest, RewriteKeepsStreamOptionsMembers) {
    auto d = parse_ok(
        R"({"stream_options":{"include_obfuscation":false,"include_usage":false,"z":{"k":[1,2]}},"model":"a","stream":true})");
    EXPECT_EQ(d->rewrite("b", true),
              R"({"stream_options":{"include_obfuscation":false,"z":{"k":[1,2]},"include_usage":true},)"
              R"("model":"b","stream":true})");
    // Without force the client's stream_options go through untouched.
    EXPECT_EQ(d->rewrite("b", false),
              R"({"stream_options":{"include_obfuscation":false,"include_usage":false,"z":{"k":[1,2]}},)"
              R"("model":"b","stream":true})");
}

TEST(OpenAiRequest, RewriteReplacesNonObjectStreamOptions) {
    for (const char* opts : {"null", "\"x\"", "[1]", "true"}) {
        auto d = parse_ok(std::string(R"({"model":"a","stream":true,"stream_options":)") + opts + "}");
        ASSERT_NE(d, nullptr);
        EXPECT_EQ(d->rewrite("b", true), R"({"model":"b","stream":true,"stream_options":{"include_usage":true}})")
            << opts;
    }
}

TEST(OpenAiRequest, RewriteStreamFalseUntouched) {
    auto d = parse_ok(R"({"model":"a","stream":false,"stream_options":{"include_usage":false}})");
    EXPECT_EQ(d->rewrite("b", true), R"({"model":"b","stream":false,"stream_options":{"include_usage":false}})");
}

TEST(OpenAiRequest, RewriteEscapesModelAndKeepsNumbersAndText) {
    auto d = parse_ok(
        R"({"model":"a","seed":12345678901234567890,"n":-3,"t":0.1,"p":1e-7,"big":1.7976931348623157e308,)"
        R"("s":"tab\there \/ \u0001 \ud83d\ude00 )"
        "\xE2\x82\xAC"
        R"(","deep":{"a":[{"b":null,"c":[true,false]}]}})");
    ASSERT_NE(d, nullptr);
    const std::string out = d->rewrite("we\"ird\\model\n", false);
    auto j = json(out);
    EXPECT_EQ(std::string(j["model"].GetString()), "we\"ird\\model\n");
    EXPECT_EQ(j["seed"].GetUint64(), 12345678901234567890ull);
    EXPECT_EQ(j["n"].GetInt(), -3);
    EXPECT_EQ(j["t"].GetDouble(), 0.1);
    EXPECT_EQ(j["p"].GetDouble(), 1e-7);
    EXPECT_EQ(j["big"].GetDouble(), 1.7976931348623157e308);
    EXPECT_EQ(std::string(j["s"].GetString()), "tab\there / \x01 \xF0\x9F\x98\x80 \xE2\x82\xAC");
    EXPECT_TRUE(j["deep"]["a"][0]["b"].IsNull());
    EXPECT_NE(out.find("\"t\":0.1,"), std::string::npos) << out;
    EXPECT_EQ(out.find('\n'), std::string::npos) << "compact";
}

TEST(OpenAiRequest, RewriteIsRepeatable) {
    auto d = parse_ok(R"({"model":"a","stream":true})");
    EXPECT_EQ(d->rewrite("x", true), d->rewrite("x", true));
    EXPECT_EQ(d->info().model, "a") << "rewrite does not change info";
    EXPECT_EQ(d->rewrite("y", false), R"({"model":"y","stream":true})");
}

// ------------------------------------------------------------ usage

TEST(OpenAiUsage, ChatCompletion) {
    expect_usage(usage_from_response(
                     R"({"id":"x","object":"chat.completion","choices":[{"message":{"content":"hi"}}],)"
                     R"("usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29}})"),
                 usage(19, 10));
}

TEST(OpenAiUsage, ReasoningTokensAreNotAddedAgain) {
    expect_usage(usage_from_response(
                     R"({"usage":{"prompt_tokens":5,"completion_tokens":300,"total_tokens":305,)"
                     R"("prompt_tokens_details":{"cached_tokens":2},)"
                     R"("completion_tokens_details":{"reasoning_tokens":256,"prompt_tokens":99}}})"),
                 usage(5, 300));
}

TEST(OpenAiUsage, Embeddings) {
    expect_usage(usage_from_response(
                     R"({"object":"list","data":[{"embedding":[0.1,-0.2,3e-5],"index":0}],"model":"e",)"
                     R"("usage":{"prompt_tokens":8,"total_tokens":8}})"),
                 usage(8, 0));
}

TEST(OpenAiUsage, UsageFirstOrLast) {
    expect_usage(usage_from_response(R"({"usage":{"completion_tokens":4},"choices":[]})"), usage(0, 4));
}

// One pass reads a whole answer: it is valid exactly when the body is one
// JSON document, and its usage is read in the same pass.
TEST(OpenAiUsage, ReadWholeResponseChecksAndReads) {
    Usage u;
    ASSERT_TRUE(llmgw::read_whole_response(R"({"usage":{"prompt_tokens":3,"completion_tokens":4}})", u));
    expect_usage(u, usage(3, 4));
    ASSERT_TRUE(llmgw::read_whole_response(R"([1,2])", u));   // valid, not an answer: no usage
    EXPECT_FALSE(u.present);
    ASSERT_TRUE(llmgw::read_whole_response(R"({"usage":{"prompt_tokens":"x"}})", u));
    EXPECT_TRUE(u.malformed);
    u.present = true;
    for (const char* bad : {"", "{", R"({"usage":{"prompt_tokens":3})", "{}x", R"({"a":1,})", "nul", "\xff",
                            R"({"usage":{"prompt_tokens":3,"completion_tokens":4}} {})"}) {
        EXPECT_FALSE(llmgw::read_whole_response(bad, u)) << bad;
        EXPECT_FALSE(u.present) << bad;
    }
}

TEST(OpenAiUsage, Missing) {
    const Usage none;
    for (const char* body : {
             R"({"choices":[]})",
             R"({"usage":null})",
             R"({"usage":{}})",
             R"({"usage":{"total_tokens":8}})",
             R"({"usage":[1,2]})",
             R"({"usage":{"prompt_tokens":null,"completion_tokens":null}})",
             R"({"choices":[{"usage":{"prompt_tokens":3}}]})",
             R"({"x":{"usage":{"prompt_tokens":3}}})",
             R"([{"usage":{"prompt_tokens":3}}])",
             R"({"usage":{"prompt_tokens":3})",  // truncated
             R"({"usage":{"prompt_tokens":3}} trailing)",
             "",
             "<html>502 Bad Gateway</html>",
             "null",
         }) {
        SCOPED_TRACE(body);
        expect_usage(usage_from_response(body), none);
    }
}

TEST(OpenAiUsage, PartlyInvalidCounts) {
    // One count that is not a count makes the usage malformed (billed as
    // unread: the estimate), never a direction counted as 0.
    expect_usage(usage_from_response(R"({"usage":{"prompt_tokens":12,"completion_tokens":-4}})"),
                 malformed(12, 0));
}

TEST(OpenAiUsage, CountsThatAreNotCounts) {
    for (const char* bad : {"-1", "1.5", "10.7", "1e3", "1e30", "9223372036854775808", "18446744073709551616",
                            "100000000000000000000", "\"7\"", "true", "{}", "[3]"}) {
        SCOPED_TRACE(bad);
        expect_usage(usage_from_response(std::string(R"({"usage":{"prompt_tokens":)") + bad + "}}"), malformed(0, 0));
        expect_usage(usage_from_response(std::string(R"({"usage":{"prompt_tokens":21,"completion_tokens":)") + bad +
                                                R"(,"total_tokens":5}})"),
                     malformed(21, 0));
    }
    // The details' counts are not billed: not looked at.
    expect_usage(usage_from_response(
                     R"({"usage":{"prompt_tokens":3,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":1e30}}})"),
                 usage(3, 4));
}

TEST(OpenAiUsage, LargeCounts) {
    expect_usage(usage_from_response(R"({"usage":{"prompt_tokens":99999999999,"completion_tokens":4294967296}})"),
                 usage(99999999999, 4294967296));
    expect_usage(usage_from_response(R"({"usage":{"prompt_tokens":9223372036854775807}})"),
                 usage(INT64_MAX, 0));
    expect_usage(usage_from_response(
                     R"({"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":-99999999999}})"),
                 malformed(0, 0));
    expect_usage(usage_from_response(R"({"usage":{"prompt_tokens":100000000000000000000}})"), malformed(0, 0));
}

TEST(OpenAiUsage, DeepResponseDoesNotRecurse) {
    const std::string deep = R"({"x":)" + std::string(200000, '[') + std::string(200000, ']') +
                             R"(,"usage":{"prompt_tokens":1,"completion_tokens":2}})";
    expect_usage(usage_from_response(deep), usage(1, 2));
}

// ------------------------------------------------------------ stream chunks

TEST(OpenAiChunk, Done) {
    Usage u = usage(1, 1);
    EXPECT_EQ(llmgw::inspect_stream_chunk("[DONE]", u), ChunkKind::Done);
    EXPECT_FALSE(u.present);
    EXPECT_EQ(llmgw::inspect_stream_chunk("  [DONE] ", u), ChunkKind::Done);
    EXPECT_EQ(llmgw::inspect_stream_chunk("[DONE]x", u), ChunkKind::Other);
    EXPECT_EQ(llmgw::inspect_stream_chunk("[done]", u), ChunkKind::Other);
}

TEST(OpenAiChunk, Data) {
    Usage u = usage(9, 9);
    EXPECT_EQ(llmgw::inspect_stream_chunk(
                  R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]})", u),
              ChunkKind::Data);
    expect_usage(u, Usage());
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[{"delta":{}}],"usage":null})", u), ChunkKind::Data);
    expect_usage(u, Usage());
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[{"delta":{}}],"usage":{"prompt_tokens":3,"completion_tokens":4}})", u),
              ChunkKind::Data);
    expect_usage(u, usage(3, 4));
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"usage":{"prompt_tokens":3,"completion_tokens":4}})", u), ChunkKind::Data);
    expect_usage(u, usage(3, 4));
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[],"usage":null})", u), ChunkKind::Data);
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"error":null,"choices":[{}]})", u), ChunkKind::Data);
}

TEST(OpenAiChunk, UsageOnly) {
    Usage u;
    EXPECT_EQ(llmgw::inspect_stream_chunk(
                  R"({"id":"c","object":"chat.completion.chunk","choices":[],)"
                  R"("usage":{"prompt_tokens":17,"completion_tokens":42,"total_tokens":59,)"
                  R"("completion_tokens_details":{"reasoning_tokens":30}}})",
                  u),
              ChunkKind::UsageOnly);
    expect_usage(u, usage(17, 42));
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"usage":{"prompt_tokens":1},"choices":[]})", u), ChunkKind::UsageOnly);
    expect_usage(u, usage(1, 0));
    // Out of range or not an integer: a malformed usage.
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":21,"completion_tokens":10.7}})", u),
              ChunkKind::UsageOnly);
    expect_usage(u, malformed(21, 0));
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":9223372036854775808,"completion_tokens":5}})", u),
              ChunkKind::UsageOnly);
    expect_usage(u, malformed(0, 5));
}

TEST(OpenAiChunk, Error) {
    Usage u;
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"error":{"message":"overloaded","type":"server_error"}})", u),
              ChunkKind::Error);
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[],"error":"x"})", u), ChunkKind::Error);
}

TEST(OpenAiChunk, Other) {
    Usage u = usage(1, 2);
    for (const char* d : {"", "   ", "not json", "[1,2]", "42", "\"str\"", "{\"a\":", "null", "{} {}"}) {
        EXPECT_EQ(llmgw::inspect_stream_chunk(d, u), ChunkKind::Other) << d;
        EXPECT_FALSE(u.present);
    }
}

// ------------------------------------------------------------ errors, scrubbing

TEST(OpenAiErrorText, Messages) {
    EXPECT_EQ(llmgw::upstream_error_text(
                  R"({"error":{"message":"The model `x` does not exist","type":"invalid_request_error","code":null}})"),
              "The model `x` does not exist");
    EXPECT_EQ(llmgw::upstream_error_text(R"({"error":"quota exceeded"})"), "quota exceeded");
    EXPECT_EQ(llmgw::upstream_error_text(R"({"object":"error","message":"bad request","code":400})"), "bad request");
    const std::string fixed = llmgw::upstream_error_text("<html><body>502 Bad Gateway</body></html>");
    EXPECT_FALSE(fixed.empty());
    EXPECT_EQ(fixed.find('<'), std::string::npos);
    EXPECT_EQ(llmgw::upstream_error_text(""), fixed);
    EXPECT_EQ(llmgw::upstream_error_text(R"({"error":{"code":500}})"), fixed);
    EXPECT_EQ(llmgw::upstream_error_text(R"({"error":{"message":""}})"), fixed);
    EXPECT_EQ(llmgw::upstream_error_text(R"({"error":{"message":7}})"), fixed);
}

TEST(OpenAiErrorText, ScrubsAndFlattens) {
    const std::string t = llmgw::upstream_error_text(
        R"({"error":{"message":"Incorrect API key provided: sk-proj-abcDEF123456789xyz.\nSee https://platform.openai.com"}})");
    EXPECT_EQ(t, "Incorrect API key provided: [redacted]. See https://platform.openai.com");
}

TEST(OpenAiErrorText, TruncatesAtUtf8Boundary) {
    std::string msg;
    for (int i = 0; i < 200; ++i) msg += "\xC3\xA9";  // 400 bytes
    std::string t = llmgw::upstream_error_text(R"({"error":{"message":")" + msg + "\"}}");
    EXPECT_EQ(t.size(), 300u);
    EXPECT_EQ(t, msg.substr(0, 300));
    msg = "a" + msg;  // 401 bytes: byte 300 is in the middle of a character
    t = llmgw::upstream_error_text(R"({"error":{"message":")" + msg + "\"}}");
    EXPECT_EQ(t.size(), 299u);
    EXPECT_EQ(t, msg.substr(0, 299));
    const std::string ascii(1000, 'x');
    EXPECT_EQ(llmgw::upstream_error_text(R"({"error":{"message":")" + ascii + "\"}}"), ascii.substr(0, 300));
}

TEST(OpenAiErrorText, SecretNotHalfCut) {
    // The key straddles byte 300: scrubbing happens before the cut.
    const std::string msg = std::string(290, 'x') + " sk-abcdefghijklmnopqrstuvwxyz0123456789";
    const std::string t = llmgw::upstream_error_text(R"({"error":{"message":")" + msg + "\"}}");
    EXPECT_EQ(t.find("sk-"), std::string::npos) << t;
    EXPECT_EQ(t.find("abcdef"), std::string::npos) << t;
}

TEST(Scrub, Bearer) {
    EXPECT_EQ(llmgw::scrub_secrets("Authorization: Bearer abc.DEF-123_x/y+z="), "Authorization: Bearer [redacted]");
    EXPECT_EQ(llmgw::scrub_secrets("header \"Bearer tok\" sent"), "header \"Bearer [redacted]\" sent");
    EXPECT_EQ(llmgw::scrub_secrets("bearer  tok, next"), "bearer  [redacted], next");
    EXPECT_EQ(llmgw::scrub_secrets("Bearer"), "Bearer");
    EXPECT_EQ(llmgw::scrub_secrets("Bearer "), "Bearer ");
    EXPECT_EQ(llmgw::scrub_secrets("XBearer tok"), "XBearer tok");
}

TEST(Scrub, ApiKeys) {
    EXPECT_EQ(llmgw::scrub_secrets("key sk-abc123 is bad"), "key [redacted] is bad");
    EXPECT_EQ(llmgw::scrub_secrets("sk-proj-Abc_123-xyz"), "[redacted]");
    EXPECT_EQ(llmgw::scrub_secrets("x-api-key: sk-ant-api03-AbCdEf_gh-ij"), "x-api-key: [redacted]");
    EXPECT_EQ(llmgw::scrub_secrets("(sk-123456)."), "([redacted]).");
    EXPECT_EQ(llmgw::scrub_secrets("sk-12345"), "sk-12345") << "too short";
    EXPECT_EQ(llmgw::scrub_secrets("task-abcdefgh"), "task-abcdefgh") << "not at a word start";
    EXPECT_EQ(llmgw::scrub_secrets("a sk-aaaaaaa b sk-bbbbbbb c"), "a [redacted] b [redacted] c");
    EXPECT_EQ(llmgw::scrub_secrets("google AIzaSyA1234567890abcdefghijklmnopqrstu"), "google [redacted]");
}

TEST(Scrub, QueryKeys) {
    EXPECT_EQ(llmgw::scrub_secrets("GET /v1beta/models?key=AIzaXYZ&alt=sse"), "GET /v1beta/models?key=[redacted]&alt=sse");
    EXPECT_EQ(llmgw::scrub_secrets("https://h/p?alt=sse&api_key=abc#frag"), "https://h/p?alt=sse&api_key=[redacted]#frag");
    EXPECT_EQ(llmgw::scrub_secrets("?access_token=t0k&x=1"), "?access_token=[redacted]&x=1");
    EXPECT_EQ(llmgw::scrub_secrets("?sig=abc%2B"), "?sig=[redacted]");
    EXPECT_EQ(llmgw::scrub_secrets("?key=&x=1"), "?key=&x=1");
    EXPECT_EQ(llmgw::scrub_secrets("?monkeys=3&keyboard=1"), "?monkeys=3&keyboard=1");
}

TEST(Scrub, UrlUserinfo) {
    EXPECT_EQ(llmgw::scrub_secrets("connect to https://user:p4ss@api.example.com/v1 failed"),
              "connect to https://[redacted]@api.example.com/v1 failed");
    EXPECT_EQ(llmgw::scrub_secrets("redis://:pw@127.0.0.1:6379"), "redis://[redacted]@127.0.0.1:6379");
    EXPECT_EQ(llmgw::scrub_secrets("see https://example.com/a@b"), "see https://example.com/a@b");
    EXPECT_EQ(llmgw::scrub_secrets("mail me at a@b.c or http://x"), "mail me at a@b.c or http://x");
}

TEST(Scrub, NothingToScrub) {
    const std::string s = "The model `gpt-4o` does not exist or you do not have access to it. \xC3\xA9";
    EXPECT_EQ(llmgw::scrub_secrets(s), s);
    EXPECT_EQ(llmgw::scrub_secrets(""), "");
    EXPECT_EQ(llmgw::scrub_secrets(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(OpenAIStream, CompletionTextBytesOfAChunk) {
    llmgw::Usage u;
    std::int64_t n = -1;
    // content, reasoning and tool-call arguments count; ids, roles, names and logprob tokens do not
    EXPECT_EQ(llmgw::inspect_stream_chunk(
                  R"({"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello","reasoning_content":"hm",)"
                  R"("tool_calls":[{"index":0,"id":"call_1","function":{"name":"get","arguments":"{\"a\":1}"}}]},)"
                  R"("logprobs":{"content":[{"token":"Hello","logprob":-0.1}]}}]})",
                  u, &n),
              ChunkKind::Data);
    EXPECT_EQ(n, 5 + 2 + 7);
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[{"delta":{"refusal":"no"}}]})", u, &n), ChunkKind::Data);
    EXPECT_EQ(n, 2);
    // "content" outside choices, null content, an empty chunk, [DONE], junk: nothing
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"content":"outside","choices":[{"delta":{"content":null}}]})", u, &n),
              ChunkKind::Data);
    EXPECT_EQ(n, 0);
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}})", u, &n),
              ChunkKind::UsageOnly);
    EXPECT_EQ(n, 0);
    EXPECT_EQ(llmgw::inspect_stream_chunk("[DONE]", u, &n), ChunkKind::Done);
    EXPECT_EQ(n, 0);
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[{"delta":{"content":"tru)", u, &n), ChunkKind::Other);
    EXPECT_EQ(n, 0);
    // escapes count as the decoded bytes
    EXPECT_EQ(llmgw::inspect_stream_chunk(R"({"choices":[{"delta":{"content":"\u00e9\n"}}]})", u, &n), ChunkKind::Data);
    EXPECT_EQ(n, 3);
}
