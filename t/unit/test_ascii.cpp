// ASCII case rules of protocol tokens (core/http/ascii.h) and the provider
// rate-limit header rule built on them (core/http/provider_headers.h).
#include <gtest/gtest.h>

#include "core/http/ascii.h"
#include "core/http/provider_headers.h"

namespace llmgw {
namespace {

TEST(Ascii, CaseOfLettersOnly) {
    EXPECT_TRUE(ascii_iequals("Content-Disposition", "content-disposition"));
    EXPECT_TRUE(ascii_iequals("REDISS", "rediss"));
    EXPECT_TRUE(ascii_iequals("", ""));
    EXPECT_FALSE(ascii_iequals("redis", "rediss"));
    EXPECT_FALSE(ascii_iequals("[", "{"));             // 0x5B is not 'A'..'Z' shifted
    EXPECT_FALSE(ascii_iequals("\xC3\x89", "\xC3\xA9"));   // no locale: É is not é
    EXPECT_TRUE(ascii_istarts_with("X-RateLimit-Remaining", "x-ratelimit-"));
    EXPECT_FALSE(ascii_istarts_with("x-rate", "x-ratelimit-"));
    EXPECT_TRUE(ascii_iends_with("a.JSON", ".json"));
    EXPECT_FALSE(ascii_iends_with("json", ".json"));
}

TEST(ProviderHeaders, RateLimitStateOnly) {
    for (const char* h : {"x-ratelimit-limit-requests", "X-RateLimit-Remaining-Tokens", "anthropic-ratelimit-requests-remaining",
                          "Anthropic-RateLimit-Tokens-Reset", "RateLimit", "ratelimit-policy", "RATELIMIT-POLICY"}) {
        EXPECT_TRUE(is_provider_rate_limit_header(h)) << h;
    }
    for (const char* h : {"retry-after", "x-request-id", "ratelimits", "ratelimit-policy-x", "x-ratelimit", "ratelimit-",
                          "openai-processing-ms", ""}) {
        EXPECT_FALSE(is_provider_rate_limit_header(h)) << h;
    }
}

}  // namespace
}  // namespace llmgw
