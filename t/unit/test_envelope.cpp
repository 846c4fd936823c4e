#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include "core/json/envelope.h"
#include "core/codec/sse.h"

using llmgw::error_json;
using llmgw::error_sse_event;

namespace {

std::string esc(std::string_view s) {
    std::string out;
    llmgw::json_escape_append(out, s);
    return out;
}

// Parses with UTF-8 validation on; returns false when invalid.
bool valid_json(const std::string& s, rapidjson::Document& d) {
    d.Parse<rapidjson::kParseValidateEncodingFlag>(s.c_str(), s.size());
    return !d.HasParseError();
}

const std::string kFFFD = "\xEF\xBF\xBD";

}  // namespace

TEST(Envelope, ErrorJsonWithCode) {
    EXPECT_EQ(error_json("Rate limit reached", "rate_limit_error", "requests_per_minute"),
              "{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_error\","
              "\"code\":\"requests_per_minute\",\"param\":null}}");
}

TEST(Envelope, ErrorJsonWithoutCode) {
    EXPECT_EQ(error_json("bad", "invalid_request_error"),
              "{\"error\":{\"message\":\"bad\",\"type\":\"invalid_request_error\",\"code\":null,\"param\":null}}");
}

TEST(Envelope, ErrorJsonParsesBack) {
    const std::string msg = "a \"quoted\" \\ path\nnew line \x01 caf\xC3\xA9 \xFF";
    rapidjson::Document d;
    ASSERT_TRUE(valid_json(error_json(msg, "t\"", "c\n"), d));
    const auto& e = d["error"];
    EXPECT_EQ(std::string(e["message"].GetString()), "a \"quoted\" \\ path\nnew line \x01 caf\xC3\xA9 " + kFFFD);
    EXPECT_EQ(std::string(e["type"].GetString()), "t\"");
    EXPECT_EQ(std::string(e["code"].GetString()), "c\n");
    EXPECT_TRUE(e["param"].IsNull());
}

TEST(Envelope, SseEvent) {
    const std::string ev = error_sse_event("over budget", "insufficient_quota", "cost_per_day");
    EXPECT_EQ(ev, "event: error\ndata: " + error_json("over budget", "insufficient_quota", "cost_per_day") + "\n\n");
    // A message with line breaks stays one data line.
    llmgw::SseParser p;
    std::vector<llmgw::SseEvent> out;
    ASSERT_TRUE(p.feed(error_sse_event("line1\nline2\r\n", "x"), out));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].event, "error");
    EXPECT_EQ(out[0].lines.size(), 2u);
    EXPECT_EQ(out[0].data, error_json("line1\nline2\r\n", "x"));
}

TEST(Envelope, EscapeBasics) {
    EXPECT_EQ(esc(""), "");
    EXPECT_EQ(esc("plain text / 123"), "plain text / 123");
    EXPECT_EQ(esc("\"q\" \\b"), "\\\"q\\\" \\\\b");
    EXPECT_EQ(esc("\n\r\t\b\f"), "\\n\\r\\t\\b\\f");
    EXPECT_EQ(esc(std::string("\x00\x01\x1f", 3)), "\\u0000\\u0001\\u001f");
    EXPECT_EQ(esc("\x7f"), "\x7f");
    std::string out = "prefix:";
    llmgw::json_escape_append(out, "x");
    EXPECT_EQ(out, "prefix:x") << "appends";
}

TEST(Envelope, EscapeKeepsValidUtf8) {
    for (const char* s : {"caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xEF\xBF\xBD", "\xF4\x8F\xBF\xBF",
                          "\xED\x9F\xBF", "\xEE\x80\x80", "\xC2\x80"}) {
        EXPECT_EQ(esc(s), s);
    }
}

TEST(Envelope, EscapeReplacesInvalidUtf8) {
    EXPECT_EQ(esc("\xFF"), kFFFD);
    EXPECT_EQ(esc("a\x80z"), "a" + kFFFD + "z");
    EXPECT_EQ(esc("\xE2\x82"), kFFFD) << "truncated sequence: one replacement";
    EXPECT_EQ(esc("\xE2\x82X"), kFFFD + "X");
    EXPECT_EQ(esc("\xC0\xAF"), kFFFD + kFFFD) << "overlong";
    EXPECT_EQ(esc("\xE0\x80\xAF"), kFFFD + kFFFD + kFFFD) << "overlong 3-byte";
    EXPECT_EQ(esc("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD) << "surrogate";
    EXPECT_EQ(esc("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD) << "above U+10FFFF";
    EXPECT_EQ(esc("\xF0\x9F\x98"), kFFFD);
    EXPECT_EQ(esc("\xF0\x9F\x98\""), kFFFD + "\\\"");
    EXPECT_EQ(esc("\xF8\x88\x80\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD + kFFFD);
}

TEST(Envelope, EveryByteStringGivesValidJson) {
    // All single bytes and pairs of bytes, then pseudo-random strings.
    std::string s;
    for (int a = 0; a < 256; ++a) {
        for (int b = 0; b < 256; b += 7) {
            s.assign({static_cast<char>(a), static_cast<char>(b)});
            rapidjson::Document d;
            ASSERT_TRUE(valid_json("\"" + esc(s) + "\"", d)) << a << " " << b;
        }
    }
    unsigned x = 12345;
    for (int i = 0; i < 2000; ++i) {
        s.clear();
        for (int j = 0; j < 24; ++j) {
            x = x * 1103515245u + 12345u;
            s.push_back(static_cast<char>(x >> 16));
        }
        rapidjson::Document d;
        ASSERT_TRUE(valid_json(error_json(s, s, s), d)) << i;
    }
}
