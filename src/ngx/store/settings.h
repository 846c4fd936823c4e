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
    // flush=: how long a settled request's accounting may wait to be written
    // with others (docs/store.md#accounting-batches); 0: at once, or when
    // the batch in flight answers.
    ngx_msec_t flush_ms = 0;
    std::string redacted_url;
};

}  // namespace llmgw
