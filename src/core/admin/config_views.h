// The admin documents read from the configuration alone (no nginx, no store):
// the price catalog, the consumers and the effective configuration. None
// carries a secret: keys show only how they were given (env:NAME,
// file:/path, literal, sha256), the store only its redacted URL.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/gwconfig.h"
#include "core/json/writer.h"
#include "core/metering/pricing.h"

namespace llmgw {

// GET /admin/api/catalog: every configured model of every provider with the
// price billing uses for it and where that price comes from (override,
// builtin, free, or unpriced).
std::string render_catalog(const GatewayConfig& cfg, const PriceTable& prices, bool allow_unpriced,
                           std::string_view builtin_date);

// GET /admin/api/consumers: each user with its key's source, its grants
// (admin, group, limits, the group's limits) and the providers it may reach.
std::string render_consumers(const GatewayConfig& cfg, const Directory& dir);

// The settings of the http block the configuration document shows.
struct ConfigSettings {
    std::string replica, instance;
    std::string store_url;            // redacted; "" = shared memory only
    bool fail_open = true;
    std::string users_file;           // "" = none
    std::int64_t retries = 0, backoff_base_ms = 0, backoff_max_ms = 0;
    std::int64_t breaker_failures = 0, breaker_open_ms = 0;   // failures 0: off
    bool allow_unpriced = false;
    std::int64_t max_tokens_per_request = 0;
};

// GET /admin/api/config: providers, aliases, groups, users and settings.
std::string render_config(const GatewayConfig& cfg, const Directory& dir, const ConfigSettings& s);

// The http level's retries, backoff and breaker in s.
Resilience resilience_of(const ConfigSettings& s);
// Effective retries, backoff and breaker as fields of the object being
// written: "retries", "retryBackoffMs", "retryBackoffMaxMs", "breaker"
// (null when off, else {failures, openMs}); the http level's and each
// provider's in the config document and the overview.
void write_resilience(JsonWriter& w, const Resilience& r);

}  // namespace llmgw
