// The latency histogram's buckets and percentiles.
#include "core/stats/latency.h"

#include "core/json/writer.h"

namespace llmgw {

std::string latency_id(const std::string& model, std::int64_t elapsed_ms) {
    for (std::int64_t b : kLatencyBoundsMs) {
        if (elapsed_ms <= b) return model + "|" + std::to_string(b);
    }
    return model + "|inf";
}

std::vector<std::string> latency_ids(const std::string& model) {
    std::vector<std::string> out;
    for (std::int64_t b : kLatencyBoundsMs) out.push_back(model + "|" + std::to_string(b));
    out.push_back(model + "|inf");
    return out;
}

Percentiles latency_percentiles(const std::vector<std::int64_t>& counts) {
    Percentiles p;
    for (std::int64_t c : counts) p.count += c > 0 ? c : 0;
    if (p.count == 0) return p;
    auto at = [&](double q) {
        const double want = q * static_cast<double>(p.count);
        std::int64_t seen = 0;
        for (std::size_t i = 0; i < counts.size(); ++i) {
            seen += counts[i] > 0 ? counts[i] : 0;
            if (static_cast<double>(seen) >= want) {
                return i < kLatencyBuckets - 1 ? kLatencyBoundsMs[i] : kLatencyBoundsMs[kLatencyBuckets - 2];
            }
        }
        return kLatencyBoundsMs[kLatencyBuckets - 2];
    };
    p.p50_ms = at(0.50);
    p.p90_ms = at(0.90);
    p.p99_ms = at(0.99);
    return p;
}

std::string render_performance(const std::vector<std::string>& models, const std::vector<std::int64_t>& values,
                               std::string_view window) {
    JsonWriter w;
    w.begin_object().field("window", window);
    w.key("bucketsMs").begin_array();
    for (std::int64_t b : kLatencyBoundsMs) w.num(b);
    w.end_array().key("models").begin_array();
    for (std::size_t i = 0; i < models.size(); ++i) {
        std::vector<std::int64_t> counts;
        for (std::size_t b = 0; b < kLatencyBuckets; ++b) {
            const std::size_t at = i * kLatencyBuckets + b;
            counts.push_back(at < values.size() ? values[at] : 0);
        }
        const Percentiles p = latency_percentiles(counts);
        if (p.count == 0) continue;
        w.begin_object().field("model", models[i]).field("calls", p.count);
        w.field("p50Ms", p.p50_ms).field("p90Ms", p.p90_ms).field("p99Ms", p.p99_ms);
        w.key("counts").begin_array();
        for (std::int64_t c : counts) w.num(c);
        w.end_array().end_object();
    }
    w.end_array().end_object();
    return w.take();
}

}  // namespace llmgw
