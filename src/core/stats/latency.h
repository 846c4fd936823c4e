// The optional latency statistic (no nginx): a histogram per provider and
// model of the time from a provider call's start to its end, one counter per
// bucket (kind "lat", id "<provider>/<model>|<upper bound ms>"), and the
// percentiles read back from those counters.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmgw {

// Upper bounds in milliseconds; the last bucket is everything above.
inline constexpr std::int64_t kLatencyBoundsMs[] = {100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000};
inline constexpr std::size_t kLatencyBuckets = sizeof(kLatencyBoundsMs) / sizeof(kLatencyBoundsMs[0]) + 1;

// The id of the bucket a call of elapsed_ms falls in ("oai/gpt-4o|500", "...|inf").
std::string latency_id(const std::string& model, std::int64_t elapsed_ms);
// The ids of every bucket of a model, in bound order.
std::vector<std::string> latency_ids(const std::string& model);

struct Percentiles {
    std::int64_t count = 0;
    std::int64_t p50_ms = -1, p90_ms = -1, p99_ms = -1;   // -1: no call; the bucket's upper bound
};
// From the counts of latency_ids' buckets (the last one reports the last bound).
Percentiles latency_percentiles(const std::vector<std::int64_t>& counts);

// GET /admin/api/performance: per model with calls, its count and percentiles.
std::string render_performance(const std::vector<std::string>& models, const std::vector<std::int64_t>& values,
                               std::string_view window);

}  // namespace llmgw
