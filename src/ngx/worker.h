// The per-worker runtime state: one object, created by init_process and
// dropped by exit_process (or, failing that, by the cycle pool's cleanup).
// Everything a worker learns while it runs lives here, never in function
// statics or in configuration structs.
#pragma once
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/mcp/tool_merge.h"
#include "core/metering/limits.h"
#include "core/store/latch.h"
#include "ngx/ngx_incl.h"
#include "ngx/store/store.h"

namespace llmgw {

struct MainConf;
struct UserConf;
class Directory;

// Identity of the users file (mtime, size, inode).
struct FileSig {
    std::int64_t mtime = 0, size = -1, ino = 0;
    bool operator==(const FileSig& o) const { return mtime == o.mtime && size == o.size && ino == o.ino; }
    bool operator!=(const FileSig& o) const { return !(*this == o); }
};

// The users-file poller's timer and what it has seen.
struct UsersPoll {
    ngx_event_t ev{};
    FileSig current;     // the file the active directory came from
    FileSig rejected;    // the last file that failed to load (reported once)
    bool have_rejected = false;
};

// Admission plans of the current second, per user (see admission.cpp).
struct PlanCache {
    struct Cached {
        std::time_t second = 0;
        std::shared_ptr<const AdmissionPlan> plan;
    };
    const Directory* dir = nullptr;   // the directory the users belong to
    std::unordered_map<const UserConf*, Cached> plans[2];   // [admin traffic]
};

// Test-only faults, from the LLMGW_TEST_FAULT environment variable at
// worker start (docs/testing.md).
struct TestFaults {
    bool redis_reply_bad_alloc = false;   // "redis-reply-bad-alloc": the next store reply handling throws
};

// Which tool server owns each federated tool name, per group, as this
// worker last listed them (a tools/call then needs no listing first).
struct ToolCache {
    struct Entry {
        ngx_msec_t at = 0;
        std::unordered_map<std::string, ToolRoute> routes;
    };
    std::unordered_map<std::string, Entry> entries;   // by group
};

struct Worker {
    explicit Worker(MainConf* conf) : mcf(conf) {}
    ~Worker();
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    MainConf* mcf;
    TestFaults faults;

    // The store: the shared-memory store of the zone, and the Redis store in
    // front of it when llm_gateway_store is set (created on first use).
    std::unique_ptr<CounterStore> shm;
    std::unique_ptr<CounterStore> redis;
    StoreHealth health;                   // Redis store-down latch, last-seen writes dropped

    PlanCache plans;
    // scope last-seen key -> minute of this worker's last write of it.
    std::unordered_map<std::string, std::int64_t> seen;

    std::unique_ptr<UsersPoll> users;     // null: no users file
    ToolCache mcp_tools;
};

// The running worker's state; nullptr outside a worker (configuration
// test, master) and after exit_process.
Worker* worker();
// This worker's shared-memory store over the zone (created on first use).
CounterStore* shm_store(ngx_shm_zone_t* zone);
// The configured store for this worker: Redis in front of shared memory, or
// shared memory alone; nullptr outside a worker.
CounterStore* counter_store(MainConf* mcf);
bool store_uses_in_process_ttls(MainConf* mcf);
ngx_int_t start_worker(ngx_cycle_t* cycle);
void stop_worker();

}  // namespace llmgw
