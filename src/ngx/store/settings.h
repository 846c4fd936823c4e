// llm_gateway_store: the shared store's settings, read once at configuration
// time (the latch and counters that change at run time are per worker:
// StoreHealth in store.h, held by ngx/worker.h).
#pragma once
#include <string>

#include "ngx/store/redis_conn.h"

namespace llmgw {

struct StoreSettings {
    RedisSettings redis;
    bool fail_open = true;
    std::string redacted_url;
};

}  // namespace llmgw
