// The gateway's own JSON documents built from plain data (no nginx):
// GET /v1/models and the admin usage and overview views. Field order is part
// of the contract.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/gwconfig.h"

namespace llmgw {

// {"object":"list","data":[...]}: every provider's models as provider/model,
// then every alias, owned by its target's provider, then each provider's
// discovered ids (discovered[i] for provider i, may be shorter): as
// provider/id, except an id that carries an owner prefix ("meta-llama/x"),
// shown only as it is, owned by that owner. No id is listed twice.
// With a group, the providers closed to it (groups=) and the aliases that
// name them are left out.
std::string render_models(const GatewayConfig& cfg,
                          const std::vector<std::vector<std::string>>& discovered = {},
                          std::string_view group = {});

// The response cache's counters the usage view reads for one scope, in
// this order: chit, cmiss, chitin, chitout (core/metering/accounting.h) of
// the current UTC day, then of the current UTC month.
enum UsageCacheSlot {
    kCacheHitsDay, kCacheMissesDay, kCacheInDay, kCacheOutDay,
    kCacheHitsMonth, kCacheMissesMonth, kCacheInMonth, kCacheOutMonth, kUsageCacheSlots
};
void append_usage_cache_keys(std::string_view kind, std::string_view id, std::time_t now,
                             std::vector<std::string>& out);

// values: kUsageSlots values (core/metering/keys.h order) per user, per
// group, then for the total, as read from the keys of append_usage_keys.
// reserved (llm_gateway_budget_mode reserve): two values per scope in the
// same order, the tokens and the micro-USD its live reservations hold,
// shown as reservedTokens and reservedCostMicroUsd; empty: not shown.
// cache: kUsageCacheSlots values per scope in the same order (the keys of
// append_usage_cache_keys), shown as each entry's last field, "cache":
// {"day":{...},"month":{...}}, each window with hits, misses, hitTokensIn,
// hitTokensOut and hitRate (hits / (hits + misses); null when both are 0);
// any other size: not shown.
std::string render_usage(const Directory& dir, std::time_t now, const std::vector<std::int64_t>& values,
                         const std::string& replica, const std::vector<std::int64_t>& reserved = {},
                         const std::vector<std::int64_t>& cache = {});

struct OverviewStore {
    bool shared = false;           // a Redis store; false: shared memory only
    std::string url;               // redacted
    bool up = true;
    bool fail_open = true;
    bool has_error = false;
    std::string last_error;
    std::int64_t last_error_time = 0;   // unix seconds
    std::uint64_t telemetry_dropped = 0;
};

// A provider's health breaker, as the overview shows it.
struct ProviderHealth {
    bool known = false;                 // false: not shown
    const char* state = "closed";       // closed, open, half_open
    std::int64_t consecutive_failures = 0;
    std::int64_t retry_at_ms = 0;       // open: when the next call may probe (0: none)
};

struct OverviewInput {
    std::string replica, instance;             // instance "" = not shown
    const GatewayConfig* config = nullptr;     // providers
    std::vector<ProviderHealth> health;        // by provider index (may be shorter)
    const Directory* directory = nullptr;      // groups, user count
    OverviewStore store;
    std::string builtin_price_date;
    std::size_t priced_models = 0;
    bool allow_unpriced = false;
    bool users_file = false;
    // features beyond the store and the users file
    bool passthrough = false, metrics = false, breaker = false;
    std::int64_t retries = 0;
    Resilience resilience;                      // the http level's: each provider shows its own over it
    // the discovered model lists (cache), by provider index; -1: no discovery
    std::vector<std::int64_t> discovered;
    std::vector<std::string> warnings;          // logged while the configuration was built
};

// Secrets never appear: a provider shows how its key was given (key_ref).
std::string render_overview(const OverviewInput& in);

}  // namespace llmgw
