// The module's configuration structs: the http block's (MainConf and the
// C++ state it owns) and a location's (LocConf). Read by every part of the
// shell; they hold configuration only (run-time state is in ngx/worker.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/cache/cache_settings.h"
#include "core/config/gwconfig.h"
#include "core/http/redact.h"
#include "core/mcp/session_token.h"
#include "core/targets/target.h"
#include "core/metering/pricing.h"
#include "core/routing/breaker.h"
#include "core/routing/retry.h"
#include "ngx/ngx_incl.h"
#include "ngx/store/settings.h"

namespace llmgw {

// Which endpoint family a location serves (llm_gateway / llm_gateway_admin /
// llm_gateway_passthrough / llm_gateway_metrics / llm_gateway_mcp /
// llm_gateway_target_proxy mcp|agent).
enum LocMode : ngx_uint_t {
    kModeNone = 0, kModeApi = 1, kModeAdmin = 2, kModePassthrough = 3, kModeMetrics = 4,
    kModeMcp = 5, kModeMcpProxy = 6, kModeAgentProxy = 7,
};

// An llm_gateway_mcp location's settings (owned by GatewayState).
struct McpEndpoint {
    std::unique_ptr<SessionSealer> sealer;
    bool own_key = false;             // session_key= given (else a key of this configuration only)
    std::string key_ref;              // how the key was given (never the key)
    ngx_msec_t list_timeout = 20000;  // a backend call of tools/list
    ngx_msec_t call_timeout = 120000; // a backend call of tools/call (and the rest)
    ngx_msec_t session_ttl = 86400000;   // how long a session id is honoured
    std::size_t max_response = 4 * 1024 * 1024;   // the body bytes one backend call may read
    std::size_t max_total = 8 * 1024 * 1024;      // the body bytes all backend calls of a request may read
};

// Everything C++ the main conf owns; lives in cf->pool, destroyed by a pool
// cleanup when the cycle goes.
struct GatewayState {
    GatewayConfig config;
    PriceTable prices = PriceTable::builtin();
    std::shared_ptr<const Directory> directory;   // inline users + users file, swapped on reload
    std::string users_file;                         // "" = none
    std::string users_file_where;                   // file:line of its directive
    std::string users_file_warning;                 // it holds keys others may read ("" = no)
    std::unique_ptr<StoreSettings> store;           // null: shared memory only
    std::string replica;                            // llm_gateway_replica (default: host name)
    std::string instance;                           // llm_gateway_instance
    std::vector<std::string> warnings;              // logged while the configuration was built (overview)
    bool has_passthrough = false;                   // an llm_gateway_passthrough location exists
    bool has_metrics = false;                       // an llm_gateway_metrics location exists
    TargetTable targets;                            // tool servers and agents
    std::vector<std::unique_ptr<McpEndpoint>> mcp_endpoints;   // one per llm_gateway_mcp location
    // One per llm_gateway_cache directive that turns the cache on, with the
    // file:line its zone= is checked against (postconfiguration).
    std::vector<std::pair<std::unique_ptr<CacheSettings>, std::string>> caches;
    // The credentials the gateway sends upstream (provider keys, tool server
    // and agent keys): masked in every answer it relays (docs/decisions.md#redaction).
    SecretSet secrets;
};

struct MainConf {
    GatewayState* state;
    ngx_shm_zone_t* zone;             // llm_gateway_zone (or the default zone)
    ngx_flag_t allow_unpriced;        // llm_gateway_allow_unpriced
    ngx_flag_t ratelimit_headers;     // llm_gateway_ratelimit_headers
    ngx_int_t reserve_ttl;            // llm_gateway_budget_mode reserve ttl= (seconds; 0: check mode)
    ngx_int_t reserve_output;         // llm_gateway_budget_mode reserve output=
    ngx_flag_t stream_cutoff;         // llm_gateway_stream_cutoff
    ngx_msec_t users_file_interval;
    ngx_int_t max_tokens_per_request; // llm_gateway_max_tokens_per_request
    ngx_int_t retries;                // llm_gateway_retries: same-target retries of a failed call
    ngx_msec_t drain_time;            // llm_gateway_cancel_drain (0: off)
    size_t drain_size;
    ngx_msec_t backoff_base;          // llm_gateway_retry_backoff
    ngx_msec_t backoff_max;
    ngx_int_t breaker_failures;       // llm_gateway_breaker failures= (0: off)
    ngx_msec_t breaker_open;          // llm_gateway_breaker open=
    ngx_shm_zone_t* health_zone;      // the breakers' slots (ngx/call/health.h)
    ngx_shm_zone_t* events_zone;      // the failure feed's ring (ngx/events/feed.h)
    ngx_flag_t stat_user_model;       // llm_gateway_stats user_model=
    ngx_flag_t stat_latency;          // llm_gateway_stats latency=
    ngx_shm_zone_t* models_zone;      // discovered model lists (ngx/discovery/model_cache.h)
};

MainConf* main_conf(ngx_http_request_t* r);

struct LocConf {
    ngx_uint_t mode;          // LocMode; not inherited
    off_t max_body_size;      // llm_gateway_max_body_size
    ngx_str_t prefix;         // passthrough: the location's prefix (the provider name follows it)
    ngx_array_t* metrics_allow;   // metrics: ngx_cidr_t that may scrape without a key (nullptr: none)
    bool metrics_model_label;     // metrics: the per-provider-and-model families
    McpEndpoint* mcp;             // llm_gateway_mcp: its settings
    // llm_gateway_public_url: where clients reach the gateway (the base of
    // rewritten agent cards); nullptr: the connection's scheme and Host.
    ngx_http_complex_value_t* public_url;
    // llm_gateway_cache: its settings (held by the GatewayState); nullptr: off.
    const CacheSettings* cache;
};

}  // namespace llmgw
