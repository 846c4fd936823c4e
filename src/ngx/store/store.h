// The counter store seen by the request path. Admission and accounting are
// each one batched operation that may complete later (a network store), so
// results come through callbacks; the shared-memory store calls them before
// returning.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/metering/accounting.h"
#include "core/metering/limits.h"
#include "core/metering/reservation.h"
#include "core/store/latch.h"
#include "ngx/ngx_incl.h"

namespace llmgw {

enum class StoreStatus {
    Ok,
    Error,        // the operation failed (zone full, store unreachable, bad reply)
};

struct StoreReply {
    StoreStatus status = StoreStatus::Ok;
    std::string error;                 // for logs; never contains a secret
};

using AdmitDone = std::function<void(const StoreReply&, const AdmissionResult&)>;
using WriteDone = std::function<void(const StoreReply&)>;
using ReadDone = std::function<void(const StoreReply&, const std::vector<std::int64_t>&)>;
using ListDone = std::function<void(const StoreReply&, const std::vector<std::string>&)>;

class CounterStore {
public:
    virtual ~CounterStore() = default;
    virtual const char* name() const = 0;      // "shm" or "redis"
    // One request's admission by plan (the worker's for this second, shared
    // by its requests and never changed; a store that answers later keeps
    // it), reserving amounts (none in check mode).
    virtual void admit(std::shared_ptr<const AdmissionPlan> plan, const ReserveAmounts& amounts, AdmitDone done) = 0;
    // Values of keys (0 when absent), in order.
    virtual void read(const std::vector<std::string>& keys, ReadDone done) = 0;
    // Sets key to value when value is larger (last-seen stamps).
    virtual void touch(const std::string& key, std::int64_t value, std::int64_t ttl) = 0;
    // The accounting of one request: every delta in every window, in one
    // store operation.
    void apply(const std::vector<ScopeDelta>& deltas, std::time_t now, WriteDone done) {
        settle(deltas, {}, now, std::move(done));
    }
    // The same, releasing the request's held reservation in the same
    // operation: each reservation's amount is taken from its counter while
    // that exists (never below 0), core/metering/reservation.h.
    virtual void settle(const std::vector<ScopeDelta>& deltas, HeldReservation releases, std::time_t now,
                        WriteDone done) = 0;
    virtual bool in_process_ttls() const = 0;

    // The failure feed's shared list (core/metering/keys.h kEventsKey); only
    // a shared store has one. push_event mirrors one event (LPUSH + LTRIM in
    // one pipeline), skipped while the store-down latch is open; a failure is
    // logged, at most once per 30 s, and never opens the latch.
    virtual bool shares_events() const { return false; }
    virtual void push_event(const std::string& json) { (void)json; }
    // Up to limit elements of the list, newest first; elements that are not
    // strings are skipped.
    virtual void read_events(std::size_t limit, ListDone done) {
        (void)limit;
        done(StoreReply{StoreStatus::Error, "no shared store"}, {});
    }
};

// What a worker learns about the shared store while it runs: the store-down
// latch (with the last error) and the last-seen writes dropped.
struct StoreHealth {
    StoreLatch latch;
    std::uint64_t telemetry_dropped = 0;
};

// shm_store.cpp: the zone directive's zone, one per http block.
ngx_shm_zone_t* add_shm_zone(ngx_conf_t* cf, ngx_str_t* name, size_t size);
// The store over a zone (one per worker: ngx/worker.h keeps it).
std::unique_ptr<CounterStore> make_shm_store(ngx_shm_zone_t* zone);
// Zeroes one metric of every counter whose key starts with scope_prefix
// ("llmgw:user:bob:"): the rejection counters of removed users.
// shm: a store of make_shm_store.
void shm_reset_metric(CounterStore* shm, const std::string& scope_prefix, const std::string& metric);

// redis_store.cpp: the Redis store in front of fallback (the shared-memory
// store, used while the store is down with fail_open). fail_next_reply:
// the test-only fault (docs/testing.md).
struct StoreSettings;
std::unique_ptr<CounterStore> make_redis_store(const StoreSettings& settings, CounterStore* fallback,
                                               StoreHealth& health, bool fail_next_reply);

}  // namespace llmgw
