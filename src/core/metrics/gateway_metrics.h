// The gateway's metrics document (no nginx): the families of the spec's
// metrics endpoint from the values one scrape gathered. Store-backed series
// come from the same batched read as the admin usage route, plus the
// provider (and, with model_label, model) counters in that batch.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "core/config/gwconfig.h"

namespace llmgw {

struct ProviderGauge {
    std::string name;
    bool known = false;
    const char* state = "closed";   // closed, half_open, open
};

struct RejectionCount {
    std::string kind, id;
    std::int64_t count = 0;
};

struct MetricsInput {
    std::string replica;
    bool store_shared = false;   // a Redis store is configured
    bool store_up = true;        // this worker's latch is closed
    // The batch of store_keys(), read; false: the store could not be read
    // (down, latched, or a fail-open read served from shared memory):
    // every store-backed series is left out.
    bool store_read = false;
    std::vector<std::int64_t> values;
    const Directory* directory = nullptr;
    const GatewayConfig* config = nullptr;
    std::vector<std::string> models;     // model_label: the canonical ids read
    std::vector<ProviderGauge> health;
    std::vector<RejectionCount> rejections;
    // The response cache is on somewhere (an llm_gateway_cache with zone=):
    // its families are shown and their keys are in the batch.
    bool cache = false;
};

// The keys of one scrape's batch: the usage keys of every user, group and
// total (core/metering/keys.h), then per provider its attempts and failures
// this month, then per model (model_label) its four metrics this month, then
// the response cache's four counters this month (chit, cmiss, chitin,
// chitout) per user, group and total, then per model: only with cache (an
// llm_gateway_cache turns the cache on somewhere).
std::vector<std::string> metrics_keys(const Directory& dir, const GatewayConfig& cfg,
                                      const std::vector<std::string>& models, std::time_t now, bool cache);

std::string render_metrics(const MetricsInput& in);

}  // namespace llmgw
