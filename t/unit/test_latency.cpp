// The latency histogram: bucket ids, percentiles, the performance document.
#include <gtest/gtest.h>

#include "core/stats/latency.h"

namespace llmgw {
namespace {

TEST(Latency, BucketIds) {
    EXPECT_EQ(latency_id("oai/m", 0), "oai/m|100");
    EXPECT_EQ(latency_id("oai/m", 100), "oai/m|100");
    EXPECT_EQ(latency_id("oai/m", 101), "oai/m|250");
    EXPECT_EQ(latency_id("oai/m", 60001), "oai/m|inf");
    EXPECT_EQ(latency_ids("x").size(), kLatencyBuckets);
    EXPECT_EQ(latency_ids("x").back(), "x|inf");
}

TEST(Latency, PercentilesFromBuckets) {
    std::vector<std::int64_t> c(kLatencyBuckets, 0);
    EXPECT_EQ(latency_percentiles(c).count, 0);
    EXPECT_EQ(latency_percentiles(c).p50_ms, -1);
    c[0] = 50;   // <= 100 ms
    c[2] = 40;   // <= 500 ms
    c[5] = 9;    // <= 5 s
    c[9] = 1;    // over 60 s
    Percentiles p = latency_percentiles(c);
    EXPECT_EQ(p.count, 100);
    EXPECT_EQ(p.p50_ms, 100);
    EXPECT_EQ(p.p90_ms, 500);
    EXPECT_EQ(p.p99_ms, 5000);
    EXPECT_EQ(render_performance({"a/m", "b/idle"}, [&] {
                  std::vector<std::int64_t> v = c;
                  v.resize(2 * kLatencyBuckets, 0);
                  return v;
              }(), "day"),
              R"({"window":"day","bucketsMs":[100,250,500,1000,2500,5000,10000,30000,60000],"models":[)"
              R"({"model":"a/m","calls":100,"p50Ms":100,"p90Ms":500,"p99Ms":5000,"counts":[50,0,40,0,0,9,0,0,0,1]}]})");
}

}  // namespace
}  // namespace llmgw
