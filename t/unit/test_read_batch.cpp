// Reading counters from Redis (core/store/read_batch.h): plain counters by
// MGET in chunks, reserved counters by one HMGET per scope's hash, values
// back in key order; replies that do not match are errors, never values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/metering/keys.h"
#include "core/store/read_batch.h"

namespace llmgw {
namespace {

using T = RespValue::Type;

RespValue arr(std::vector<RespValue> els) {
    RespValue v;
    v.type = T::Array;
    v.elements = std::move(els);
    return v;
}
RespValue str(const std::string& s) {
    RespValue v;
    v.type = T::String;
    v.str = s;
    return v;
}
RespValue nil() { return RespValue{}; }

TEST(ReadBatch, PlainKeysInChunksReservedKeysPerHash) {
    const std::string t1 = reserved_key("user", "a", true, 10), t2 = reserved_key("user", "a", true, 11);
    const std::string c1 = reserved_key("user", "a", false, 11), g1 = reserved_key("group", "g", true, 11);
    const std::vector<std::string> keys{"k1", t1, "k2", c1, "k3", g1, t2};
    const ReadBatch b = read_batch(keys, 2);
    ASSERT_EQ(b.commands.size(), 5u);
    EXPECT_EQ(b.commands[0], (std::vector<std::string>{"MGET", "k1", "k2"}));
    EXPECT_EQ(b.commands[1], (std::vector<std::string>{"HMGET", "llmgw:user:a:rsv", "t10", "c11"}));
    EXPECT_EQ(b.commands[2], (std::vector<std::string>{"MGET", "k3"}));
    EXPECT_EQ(b.commands[3], (std::vector<std::string>{"HMGET", "llmgw:group:g:rsv", "t11"}));
    EXPECT_EQ(b.commands[4], (std::vector<std::string>{"HMGET", "llmgw:user:a:rsv", "t11"}));   // chunk full
    const std::vector<RespValue> replies{arr({str("1"), nil()}), arr({str("10"), str("-3")}), arr({str("7")}),
                                         arr({str("40")}), arr({nil()})};
    std::vector<std::int64_t> values;
    std::string err;
    ASSERT_TRUE(read_values(b, replies, values, err)) << err;
    EXPECT_EQ(values, (std::vector<std::int64_t>{1, 10, 0, -3, 7, 40, 0}));
}

TEST(ReadBatch, ValuesComeBackInKeyOrder) {
    const std::string t1 = reserved_key("user", "a", true, 10), c1 = reserved_key("user", "a", false, 10);
    const std::vector<std::string> keys{"k1", t1, "k2", c1};
    const ReadBatch b = read_batch(keys, 800);
    ASSERT_EQ(b.commands.size(), 2u);
    EXPECT_EQ(b.commands[0], (std::vector<std::string>{"MGET", "k1", "k2"}));
    EXPECT_EQ(b.commands[1], (std::vector<std::string>{"HMGET", "llmgw:user:a:rsv", "t10", "c10"}));
    RespValue i;
    i.type = T::Integer;
    i.integer = 9;
    std::vector<std::int64_t> values;
    std::string err;
    ASSERT_TRUE(read_values(b, {arr({str("5"), nil()}), arr({i, str("12")})}, values, err)) << err;
    EXPECT_EQ(values, (std::vector<std::int64_t>{5, 9, 0, 12}));
    EXPECT_TRUE(read_batch({}, 800).commands.empty());
}

TEST(ReadBatch, RepliesThatDoNotMatchAreErrors) {
    const std::string t1 = reserved_key("user", "a", true, 10);
    const ReadBatch b = read_batch({"k1", t1}, 800);
    std::vector<std::int64_t> values;
    std::string err;
    RespValue e;
    e.type = T::Error;
    e.str = "WRONGTYPE";
    EXPECT_FALSE(read_values(b, {arr({str("1")}), e}, values, err));
    EXPECT_EQ(err, "unexpected reply to HMGET");
    EXPECT_FALSE(read_values(b, {arr({str("1"), str("2")}), arr({str("1")})}, values, err));   // wrong count
    EXPECT_EQ(err, "unexpected reply to MGET");
    EXPECT_FALSE(read_values(b, {arr({str("1")})}, values, err));                            // truncated
    EXPECT_EQ(err, "short reply to a counter read");
    RespValue status;
    status.type = T::Status;
    status.str = "OK";
    EXPECT_FALSE(read_values(b, {arr({str("1")}), arr({status})}, values, err));
    EXPECT_EQ(err, "unexpected element in HMGET reply");
    EXPECT_TRUE(values.empty());
}

}  // namespace
}  // namespace llmgw
