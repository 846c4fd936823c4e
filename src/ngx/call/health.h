// The providers' health breakers, shared by the workers of this nginx: one
// slot per provider (in configuration order) in the shared zone
// "llm_gateway_health", used under the zone's lock. The state machine is in
// core/routing/breaker.h; this is its storage and its clock.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/routing/breaker.h"
#include "ngx/main_conf.h"

namespace llmgw {

// add_health_zone registers the zone.

// The http level's retries, backoff and breaker (llm_gateway_retries,
// llm_gateway_retry_backoff, llm_gateway_breaker), and provider index i's
// effective ones (its own over them).
Resilience http_resilience(const MainConf& mcf);
Resilience provider_resilience(const MainConf& mcf, std::size_t i);
// Provider index i's breaker.
BreakerConfig breaker_config(const MainConf& mcf, std::size_t i);

// The breaker of provider index i (its position in the configuration):
// admission, result, abandoned probe, and a copy of the slot for views.
// Without the zone (no providers) every call passes.
BreakerAdmit health_admit(MainConf* mcf, std::size_t i, std::int64_t& retry_at_ms);
void health_result(MainConf* mcf, std::size_t i, bool success, bool was_probe);
void health_abandon(MainConf* mcf, std::size_t i, bool was_probe);
bool health_read(MainConf* mcf, std::size_t i, BreakerSlot& out);

// Milliseconds since the epoch on the nginx clock.
std::int64_t now_ms();

// The shared zone of the providers' breakers (from init_main_conf).
ngx_shm_zone_t* add_health_zone(ngx_conf_t* cf, std::size_t providers);

}  // namespace llmgw
