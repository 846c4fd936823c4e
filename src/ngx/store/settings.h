// llm_gateway_store: the shared store's settings, read once at configuration
// time (the latch and counters that change at run time are per worker:
// StoreHealth in store.h, held by ngx/worker.h).
#pragma once
#include <string>
#include <vector>

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
    // cluster=on: a Redis Cluster (docs/store.md#redis-cluster), reached
    // first through the URL's address and then these (seeds=), each
    // resolved at configuration time.
    bool cluster = false;
    struct Seed {
        std::string host;          // as written (a name or an address)
        int port = 0;
        ngx_addr_t addr{};
        std::string addr_text;     // host:port
    };
    std::vector<Seed> seeds;
};

}  // namespace llmgw
