#include <gtest/gtest.h>

#include "core/config/digest.h"

using llmgw::Digest;

TEST(Digest, KnownVectors) {
    EXPECT_EQ(llmgw::to_hex(llmgw::sha256("abc")),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(llmgw::to_hex(llmgw::sha256("")),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(llmgw::to_hex(llmgw::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(llmgw::to_hex(llmgw::sha256(std::string(1000000, 'a'))),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    const std::string with_nul("a\0b", 3);
    EXPECT_NE(llmgw::sha256(with_nul), llmgw::sha256("a"));
}

TEST(Digest, HexRoundTrip) {
    const Digest d = llmgw::sha256("key");
    const std::string hex = llmgw::to_hex(d);
    ASSERT_EQ(hex.size(), 64u);
    EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
    Digest back{};
    ASSERT_TRUE(llmgw::from_hex(hex, back));
    EXPECT_EQ(back, d);
    std::string upper = hex;
    for (char& c : upper) c = static_cast<char>(toupper(c));
    Digest back2{};
    ASSERT_TRUE(llmgw::from_hex(upper, back2));
    EXPECT_EQ(back2, d);
}

TEST(Digest, FromHexRejects) {
    const std::string hex = llmgw::to_hex(llmgw::sha256("x"));
    Digest out{};
    out[0] = 0x5a;
    EXPECT_FALSE(llmgw::from_hex(hex.substr(0, 63), out));
    EXPECT_FALSE(llmgw::from_hex(hex + "0", out));
    EXPECT_FALSE(llmgw::from_hex("", out));
    EXPECT_FALSE(llmgw::from_hex("g" + hex.substr(1), out));
    EXPECT_FALSE(llmgw::from_hex(hex.substr(0, 63) + " ", out));
    EXPECT_FALSE(llmgw::from_hex(std::string("\0", 1) + hex.substr(1), out));
    EXPECT_EQ(out[0], 0x5a) << "out untouched on failure";
}

TEST(Digest, Equal) {
    const Digest a = llmgw::sha256("one");
    Digest b = a;
    EXPECT_TRUE(llmgw::digest_equal(a, b));
    b[31] ^= 1;
    EXPECT_FALSE(llmgw::digest_equal(a, b));
    b = a;
    b[0] ^= 0x80;
    EXPECT_FALSE(llmgw::digest_equal(a, b));
    EXPECT_FALSE(llmgw::digest_equal(a, llmgw::sha256("two")));
}
