#include <gtest/gtest.h>

#include <string>

#include "core/log/log_escape.h"

using llmgw::kLogCutMarker;
using llmgw::kLogTextCap;
using llmgw::kLogValueCap;
using llmgw::log_text;
using llmgw::log_value;

TEST(LogEscape, PlainAsciiUnchanged) {
    EXPECT_EQ(log_value("openai/gpt-4o-mini"), "openai/gpt-4o-mini");
    EXPECT_EQ(log_value("/v1/chat/completions?a=b&c=d ~!@#$%^*()_+{}[]|:;'<>,.?/`"),
              "/v1/chat/completions?a=b&c=d ~!@#$%^*()_+{}[]|:;'<>,.?/`");
    EXPECT_EQ(log_value(""), "");
}

TEST(LogEscape, QuoteAndBackslash) {
    EXPECT_EQ(log_value("a\"b"), "a\\x22b");
    EXPECT_EQ(log_value("a\\b"), "a\\x5Cb");
    // An escape sequence in the input cannot pass for one of ours.
    EXPECT_EQ(log_value("\\x0A"), "\\x5Cx0A");
}

TEST(LogEscape, TextKeepsQuotesButEscapesTheRest) {
    EXPECT_EQ(log_text("user \"gina\" tokensPerDay 18"), "user \"gina\" tokensPerDay 18");
    EXPECT_EQ(log_text("a\\b\r\nc"), "a\\x5Cb\\x0D\\x0Ac");
}

TEST(LogEscape, CrLfCannotStartALine) {
    std::string forged = "x\" prompt_tokens=1\r\n2024/01/01 00:00:00 [info] 1#1: llm_gateway: usage user=\"bob\"";
    std::string out = log_value(forged);
    EXPECT_EQ(out.find('\n'), std::string::npos);
    EXPECT_EQ(out.find('\r'), std::string::npos);
    EXPECT_EQ(out.find('"'), std::string::npos);
    EXPECT_EQ(out, "x\\x22 prompt_tokens=1\\x0D\\x0A2024/01/01 00:00:00 [info] 1#1: llm_gateway: usage user=\\x22bob\\x22");
}

TEST(LogEscape, ControlBytesNulAndDel) {
    EXPECT_EQ(log_value(std::string("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(log_value("\t\x1b[31m"), "\\x09\\x1B[31m");
    EXPECT_EQ(log_value("\x7f"), "\\x7F");
    EXPECT_EQ(log_value("\x1f\x20\x7e"), "\\x1F ~");
}

TEST(LogEscape, HighBytesAndInvalidUtf8) {
    EXPECT_EQ(log_value("\x80\xff"), "\\x80\\xFF");
    EXPECT_EQ(log_value("caf\xc3\xa9"), "caf\\xC3\\xA9");               // valid UTF-8: escaped bytewise
    EXPECT_EQ(log_value("\xc3\x28\xed\xa0\x80"), "\\xC3(\\xED\\xA0\\x80");  // invalid UTF-8: the same
    std::string all;
    for (int c = 0x80; c <= 0xFF; ++c) all.push_back(static_cast<char>(c));
    std::string out = log_value(all, 4096);
    ASSERT_EQ(out.size(), 128u * 4);
    for (unsigned char c : out) EXPECT_LE(c, 0x7E);
}

TEST(LogEscape, CapBoundary) {
    std::string exact(kLogValueCap, 'a');
    EXPECT_EQ(log_value(exact), exact);
    std::string over = exact + "b";
    EXPECT_EQ(log_value(over), exact + std::string(kLogCutMarker));
    // An escape that would cross the cap is not split: it is left out.
    std::string near(kLogValueCap - 3, 'a');
    EXPECT_EQ(log_value(near + "\n"), near + std::string(kLogCutMarker));
    std::string fits(kLogValueCap - 4, 'a');
    EXPECT_EQ(log_value(fits + "\n"), fits + "\\x0A");
    EXPECT_EQ(log_value(fits + "\n" + "z"), fits + "\\x0A" + std::string(kLogCutMarker));
    EXPECT_EQ(log_text(std::string(kLogTextCap, 'q')).size(), kLogTextCap);
    EXPECT_EQ(log_text(std::string(kLogTextCap + 1, 'q')).size(), kLogTextCap + kLogCutMarker.size());
}

TEST(LogEscape, HugeInputIsBounded) {
    std::string huge(8 * 1024 * 1024, '\n');
    std::string out = log_value(huge);
    EXPECT_LE(out.size(), kLogValueCap + kLogCutMarker.size());
    EXPECT_EQ(out.substr(0, 8), "\\x0A\\x0A");
    EXPECT_EQ(out.substr(out.size() - kLogCutMarker.size()), kLogCutMarker);
    std::string big_text(1 << 20, 'x');
    EXPECT_EQ(log_text(big_text).size(), kLogTextCap + kLogCutMarker.size());
}
