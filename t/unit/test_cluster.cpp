// Redis Cluster's addressing (core/store/cluster.h): key slots with hash
// tags, CLUSTER SLOTS replies (and malformed ones), MOVED and ASK, the
// slot map.
#include <gtest/gtest.h>

#include "core/store/cluster.h"
#include "resp_values.h"

using namespace llmgw;
using namespace llmgw::test;
using T = RespValue::Type;

namespace {

RespValue node(const std::string& host, long long port) {
    return array({text(T::String, host), integer(port), text(T::String, "abc")});
}
RespValue range(long long a, long long b, RespValue master) { return array({integer(a), integer(b), std::move(master)}); }

}  // namespace

// The values Redis documents: CRC16("123456789") = 0x31C3; the slots of a
// few keys as CLUSTER KEYSLOT answers them.
TEST(Cluster, Crc16AndKeySlots) {
    EXPECT_EQ(crc16_xmodem("123456789"), 0x31C3);
    EXPECT_EQ(key_slot("foo"), 12182);
    EXPECT_EQ(key_slot("bar"), 5061);
    EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
    EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
    EXPECT_EQ(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));   // an empty tag: the whole key
    EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
    EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));        // from the first '{' to the first '}'
    EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
    EXPECT_EQ(key_slot("llmgw:{user:alice}:req:min:202611271200"), key_slot("llmgw:{user:alice}:rsv"));
    EXPECT_LT(key_slot(std::string(100000, '\xff')), kClusterSlots);
}

TEST(Cluster, ParsesClusterSlots) {
    const ClusterAddress asked{"10.0.0.9", 7009};
    std::vector<SlotRange> out;
    std::string err;
    ASSERT_TRUE(parse_cluster_slots(array({range(5461, 10922, node("10.0.0.2", 7001)),
                                           range(0, 5460, array({text(T::String, "10.0.0.1"), integer(7000)})),
                                           array({integer(10923), integer(16383), node("", 7002),
                                                  node("10.0.0.6", 7005)})}),
                                    asked, out, err))
        << err;
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].first, 0);   // sorted
    EXPECT_EQ(out[0].last, 5460);
    EXPECT_EQ(out[0].master, (ClusterAddress{"10.0.0.1", 7000}));
    EXPECT_EQ(out[2].master, (ClusterAddress{"10.0.0.9", 7002}));   // an empty host: the node asked
    SlotMap map;
    map.assign(out);
    EXPECT_EQ(map.nodes().size(), 3u);
    ASSERT_NE(map.node_of(key_slot("foo")), nullptr);
    EXPECT_EQ(*map.node_of(12182), (ClusterAddress{"10.0.0.9", 7002}));
    EXPECT_EQ(*map.node_of(5061), (ClusterAddress{"10.0.0.1", 7000}));
    // a MOVED slot changes owner; an ASK does not
    Redirect r;
    ASSERT_TRUE(parse_redirect(text(T::Error, "MOVED 12182 10.0.0.4:7003"), r));
    map.moved(r);
    EXPECT_EQ(*map.node_of(12182), (ClusterAddress{"10.0.0.4", 7003}));
    EXPECT_EQ(*map.node_of(12183), (ClusterAddress{"10.0.0.9", 7002}));
    ASSERT_TRUE(parse_redirect(text(T::Error, "ASK 12183 10.0.0.4:7003"), r));
    EXPECT_TRUE(r.ask);
    map.moved(r);
    EXPECT_EQ(*map.node_of(12183), (ClusterAddress{"10.0.0.9", 7002}));
    // slots no range names have no node
    map.assign({SlotRange{0, 10, ClusterAddress{"h", 1}}});
    EXPECT_EQ(map.node_of(11), nullptr);
    EXPECT_EQ(map.nodes().size(), 1u);
}

TEST(Cluster, RefusesMalformedClusterSlots) {
    const ClusterAddress asked{"h", 1};
    const std::vector<RespValue> bad = {
        RespValue{},
        integer(1),
        text(T::Error, "ERR This instance has cluster support disabled"),
        array({integer(0)}),
        array({array({integer(0), integer(10)})}),                                   // no master
        array({range(-1, 10, node("a", 1))}),
        array({range(0, 16384, node("a", 1))}),
        array({range(10, 5, node("a", 1))}),                                          // reversed
        array({range(0, 10, node("a", 1)), range(10, 20, node("b", 2))}),             // overlapping
        array({range(0, 10, node("a", 0))}),                                          // port 0
        array({range(0, 10, node("a", 65536))}),
        array({range(0, 10, array({integer(7), integer(1)}))}),                       // host not a string
        array({range(0, 10, node(std::string(256, 'a'), 1))}),                        // host too long
        array({range(0, 10, node("a\r\nb", 1))}),                                    // control bytes
        array({range(0, 10, node("a b", 1))}),
        array({array({text(T::String, "0"), integer(10), node("a", 1)})}),           // slot as a string
    };
    for (const RespValue& v : bad) {
        std::vector<SlotRange> out{SlotRange{1, 2, ClusterAddress{"keep", 9}}};
        std::string err;
        EXPECT_FALSE(parse_cluster_slots(v, asked, out, err));
        EXPECT_FALSE(err.empty());
        ASSERT_EQ(out.size(), 1u);   // untouched
        EXPECT_EQ(out[0].master.host, "keep");
    }
    std::vector<SlotRange> out;
    std::string err;
    EXPECT_FALSE(parse_cluster_slots(text(T::Error, "ERR " + std::string(100000, 'x')), asked, out, err));
    EXPECT_LE(err.size(), 300u);
}

TEST(Cluster, ParsesRedirects) {
    Redirect r;
    ASSERT_TRUE(parse_redirect(text(T::Error, "MOVED 0 redis-1.example:6379"), r));
    EXPECT_FALSE(r.ask);
    EXPECT_EQ(r.slot, 0);
    EXPECT_EQ(r.to, (ClusterAddress{"redis-1.example", 6379}));
    ASSERT_TRUE(parse_redirect(text(T::Error, "ASK 16383 ::1:7000"), r));   // IPv6: the last ':' splits
    EXPECT_TRUE(r.ask);
    EXPECT_EQ(r.slot, 16383);
    EXPECT_EQ(r.to, (ClusterAddress{"::1", 7000}));
    const std::vector<RespValue> bad = {
        text(T::String, "MOVED 1 h:1"),          // not an error reply
        text(T::Error, "ERR unknown"),
        text(T::Error, "MOVED"),
        text(T::Error, "MOVED 1"),
        text(T::Error, "MOVED x h:1"),
        text(T::Error, "MOVED 16384 h:1"),
        text(T::Error, "MOVED -1 h:1"),
        text(T::Error, "MOVED 1 h"),
        text(T::Error, "MOVED 1 :1"),
        text(T::Error, "MOVED 1 h:0"),
        text(T::Error, "MOVED 1 h:70000"),
        text(T::Error, "MOVED 1 h:1x"),
        text(T::Error, "MOVED 1 h\x01:1"),
        text(T::Error, "MOVED 1 " + std::string(300, 'h') + ":1"),
        text(T::Error, "moved 1 h:1"),
    };
    for (const RespValue& v : bad) {
        Redirect keep;
        keep.slot = 77;
        EXPECT_FALSE(parse_redirect(v, keep)) << v.str;
        EXPECT_EQ(keep.slot, 77);
    }
}
