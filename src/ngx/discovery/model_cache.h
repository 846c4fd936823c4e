// The discovered model lists, shared by the workers of this nginx: one slot
// per provider (configuration order) in the shared zone
// "llm_gateway_models", holding the last good list, when it goes stale, and
// who is refreshing it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ngx/main_conf.h"

namespace llmgw {

// The most bytes of ids kept per provider (ids joined by newlines).
inline constexpr std::size_t kModelCacheBytes = 256 * 1024;

// add_model_cache_zone registers the zone when
// some provider discovers.

// True when provider i's list is stale and nobody is refreshing it: the
// caller now is (for at most 60 s).
bool model_cache_claim(MainConf* mcf, std::size_t i);
// The end of a refresh: the new list (fresh for interval_ms), or a failure
// (the last good list stays; the next refresh in min(interval, 60 s)).
void model_cache_store(MainConf* mcf, std::size_t i, const std::vector<std::string>& ids, std::int64_t interval_ms);
void model_cache_fail(MainConf* mcf, std::size_t i, std::int64_t interval_ms);
// The last good list of provider i.
std::vector<std::string> model_cache_read(MainConf* mcf, std::size_t i);

// The shared zone of the discovered model lists (from init_main_conf).
ngx_shm_zone_t* add_model_cache_zone(ngx_conf_t* cf, std::size_t providers, std::size_t discovering);

}  // namespace llmgw
