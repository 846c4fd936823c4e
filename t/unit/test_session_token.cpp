// Sealed MCP session ids: round trip, other keys, alterations, junk.
#include <gtest/gtest.h>

#include "core/mcp/session_token.h"

using namespace llmgw;

TEST(SessionToken, RoundTrip) {
    SessionSealer s("secret-one");
    McpSession in{"alice", "2025-06-18", 1764000000};
    std::string t = s.seal(in);
    ASSERT_FALSE(t.empty());
    EXPECT_EQ(t.rfind("g1.", 0), 0u);
    for (char c : t) EXPECT_TRUE(c >= 0x21 && c <= 0x7e);   // visible ASCII (MCP's rule for session ids)
    EXPECT_EQ(t.find("alice"), std::string::npos);          // not readable
    McpSession out;
    ASSERT_TRUE(s.open(t, out));
    EXPECT_EQ(out.user, "alice");
    EXPECT_EQ(out.protocol, "2025-06-18");
    EXPECT_EQ(out.issued, 1764000000);
    // Another sealer with the same key (another replica) opens it too.
    McpSession again;
    EXPECT_TRUE(SessionSealer("secret-one").open(t, again));
    EXPECT_NE(s.seal(in), t);   // a fresh nonce every time
}

TEST(SessionToken, Refused) {
    SessionSealer s("secret-one");
    std::string t = s.seal(McpSession{"alice", "2025-11-25", 1});
    McpSession out;
    EXPECT_FALSE(SessionSealer("secret-two").open(t, out));
    for (std::size_t i = 3; i < t.size(); ++i) {   // every single-character alteration
        std::string bad = t;
        bad[i] = bad[i] == 'A' ? 'B' : 'A';
        EXPECT_FALSE(s.open(bad, out)) << i;
    }
    EXPECT_FALSE(s.open(t.substr(0, t.size() - 1), out));
    EXPECT_FALSE(s.open(t + "A", out));
    EXPECT_FALSE(s.open("", out));
    EXPECT_FALSE(s.open("g1.", out));
    EXPECT_FALSE(s.open("g1.!!!!", out));
    EXPECT_FALSE(s.open("0123e4567-e89b-12d3-a456-426614174000", out));
    EXPECT_FALSE(s.open("g1." + std::string(2000, 'A'), out));
}

TEST(SessionToken, Base64url) {
    std::string out;
    for (std::string in : {std::string(), std::string("f"), std::string("fo"), std::string("foo"), std::string("foob"), std::string("fooba"), std::string("foobar"), std::string("\0\xff\xfe", 3)}) {
        ASSERT_TRUE(base64url_decode(base64url_encode(in), out));
        EXPECT_EQ(out, in);
    }
    EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
    EXPECT_FALSE(base64url_decode("a", out));
    EXPECT_FALSE(base64url_decode("ab=c", out));
}
