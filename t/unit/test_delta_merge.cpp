// MergedDeltas: many requests' accounting deltas as one write.
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "core/metering/delta_merge.h"

using namespace llmgw;

namespace {

ScopeDelta delta(std::string_view kind, std::string_view id, std::int64_t tokin, std::int64_t cost,
                 std::string_view overflow = {}) {
    ScopeDelta d;
    d.kind = kind;
    d.id = id;
    d.overflow_id = overflow;
    d.delta[kMetricTokIn] = tokin;
    d.delta[kMetricCost] = cost;
    return d;
}

struct Seen {
    std::time_t now;
    std::string kind, id, overflow;
    std::int64_t tokin, cost;
};

std::vector<Seen> seen(const MergedDeltas& m) {
    std::vector<Seen> out;
    m.for_each_minute([&](std::time_t now, const std::vector<ScopeDelta>& ds) {
        for (const ScopeDelta& d : ds) {
            out.push_back(Seen{now, std::string(d.kind), std::string(d.id), std::string(d.overflow_id),
                               d.delta[kMetricTokIn], d.delta[kMetricCost]});
        }
    });
    return out;
}

}  // namespace

TEST(DeltaMerge, SameScopeAndMinuteSummed) {
    MergedDeltas m;
    std::string alice = "alice";   // the caller's strings may go away after add
    m.add({delta("user", alice, 10, 100), delta("total", "all", 10, 100)}, 1000);
    alice = "xxxxx";
    m.add({delta("user", "alice", 5, 50), delta("total", "all", 5, 50)}, 1000);
    m.add({delta("user", "bob", 1, 1), delta("total", "all", 1, 1)}, 1000);
    const auto s = seen(m);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(m.size(), 3u);
    EXPECT_EQ(s[0].id, "alice");
    EXPECT_EQ(s[0].tokin, 15);
    EXPECT_EQ(s[0].cost, 150);
    EXPECT_EQ(s[1].kind, "total");
    EXPECT_EQ(s[1].tokin, 16);
    EXPECT_EQ(s[2].id, "bob");
    EXPECT_EQ(s[2].tokin, 1);
}

TEST(DeltaMerge, MinutesKeptApartInOrderSecondsOfOneMinuteMerged) {
    MergedDeltas m;
    m.add({delta("user", "a", 1, 0)}, 1800);   // 00:30:00
    m.add({delta("user", "a", 2, 0)}, 1799);   // a late settle of the minute before
    m.add({delta("user", "a", 4, 0)}, 1859);   // the last second of 00:30
    const auto s = seen(m);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].now, 1800) << "stamped at the minute's first second";
    EXPECT_EQ(s[0].tokin, 5);
    EXPECT_EQ(s[1].now, 1740);
    EXPECT_EQ(s[1].tokin, 2);
    // every window's bucket is the same at any second of a minute
    for (int w = 0; w < kWindowCount; ++w) {
        EXPECT_EQ(bucket(static_cast<Window>(w), 1800), bucket(static_cast<Window>(w), 1859)) << w;
    }
}

TEST(DeltaMerge, OverflowIdAndKindArePartOfTheScope) {
    MergedDeltas m;
    m.add({delta("model", "p/x", 1, 0, "p/other")}, 5);
    m.add({delta("model", "p/x", 1, 0)}, 5);            // no bound: another write
    m.add({delta("provmodel", "p/x", 1, 0, "p/other")}, 5);
    m.add({delta("model", "p/x", 3, 0, "p/other")}, 5);
    const auto s = seen(m);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].overflow, "p/other");
    EXPECT_EQ(s[0].tokin, 4);
    EXPECT_EQ(s[1].overflow, "");
    EXPECT_EQ(s[2].kind, "provmodel");
}

TEST(DeltaMerge, LengthPrefixedKeysDoNotCollide) {
    // "ab"+"c" and "a"+"bc" would collide if the parts were only joined.
    MergedDeltas m;
    m.add({delta("ab", "c", 1, 0)}, 1);
    m.add({delta("a", "bc", 1, 0)}, 1);
    m.add({delta("a", std::string_view("b\0c", 3), 1, 0)}, 1);   // any byte in an id
    EXPECT_EQ(seen(m).size(), 3u);
}

TEST(DeltaMerge, EmptyDeltasSkippedAndSumsSaturate) {
    MergedDeltas m;
    m.add({delta("user", "a", 0, 0)}, 1);
    EXPECT_TRUE(m.empty());
    m.add({delta("user", "a", INT64_MAX - 1, -5)}, 1);
    m.add({delta("user", "a", 10, INT64_MIN)}, 1);
    const auto s = seen(m);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].tokin, INT64_MAX);
    EXPECT_EQ(s[0].cost, INT64_MIN);
    m.clear();
    EXPECT_TRUE(m.empty());
    EXPECT_EQ(m.size(), 0u);
    m.add({delta("user", "a", 1, 0)}, 1);
    EXPECT_EQ(seen(m)[0].tokin, 1);
}
