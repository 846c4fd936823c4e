#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <utility>

#include "core/config/digest.h"
#include "core/config/gwconfig.h"

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

// Key comparison is constant time: a presented key is hashed (SHA-256), the
// digest looked up in a table keyed by digests, and the digest found compared
// with CRYPTO_memcmp (digest_equal), whose time does not depend on where the
// arrays differ. What a unit test can hold: every byte and every bit takes
// part in the comparison, and no user keeps a key to compare byte by byte.
TEST(Digest, EqualSeesEveryBitOfEveryByte) {
    const Digest a = llmgw::sha256("constant-time");
    for (std::size_t i = 0; i < a.size(); ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            Digest b = a;
            b[i] = static_cast<std::uint8_t>(b[i] ^ (1u << bit));
            EXPECT_FALSE(llmgw::digest_equal(a, b)) << "byte " << i << " bit " << bit;
        }
    }
    EXPECT_TRUE(llmgw::digest_equal(a, Digest(a)));
}

namespace {
template <typename T, typename = void>
struct has_key_member : std::false_type {};
template <typename T>
struct has_key_member<T, std::void_t<decltype(std::declval<T>().key)>> : std::true_type {};
}  // namespace

static_assert(!has_key_member<llmgw::UserConf>::value,
              "a user keeps its key's SHA-256 digest only: keys are never compared byte by byte");

TEST(Digest, KeysAreFoundByTheirDigestOnly) {
    llmgw::Directory d;
    llmgw::UserConf u;
    u.name = "alice";
    u.key_digest = llmgw::sha256("sk-alice-0123456789");
    ASSERT_EQ(d.add_user(u), "");
    d.close();
    ASSERT_NE(d.find_by_key("sk-alice-0123456789"), nullptr);
    EXPECT_EQ(d.find_by_key("sk-alice-0123456789")->name, "alice");
    // Near misses: the last byte, the first byte, a prefix, one byte more, a
    // NUL inside, another case.
    for (const std::string& k : {std::string("sk-alice-0123456788"), std::string("tk-alice-0123456789"),
                                std::string("sk-alice-012345678"), std::string("sk-alice-01234567890"),
                                std::string("sk-alice-0123456789\0", 20), std::string("SK-ALICE-0123456789"),
                                std::string("")}) {
        EXPECT_EQ(d.find_by_key(k), nullptr) << k.size() << " bytes";
    }
}
