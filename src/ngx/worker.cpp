#include "ngx/worker.h"

#include <cstdlib>
#include <cstring>

#include "core/metering/keys.h"
#include "ngx/main_conf.h"
#include "ngx/store/settings.h"

namespace llmgw {
namespace {

Worker* g_worker = nullptr;

void drop(void* data) {
    auto* w = static_cast<Worker*>(data);
    if (g_worker == w) g_worker = nullptr;
    w->~Worker();
}

void read_faults(TestFaults& f) {
    const char* v = std::getenv("LLMGW_TEST_FAULT");
    if (v == nullptr) return;
    f.redis_reply_bad_alloc = std::strcmp(v, "redis-reply-bad-alloc") == 0;
}

}  // namespace

Worker::~Worker() {
    if (users && users->ev.timer_set) {
        ngx_del_timer(&users->ev);
    }
    // The Redis store goes first: it counts in shm as its fallback.
    redis.reset();
    shm.reset();
}

Worker* worker() { return g_worker; }

ngx_int_t start_worker(ngx_cycle_t* cycle) {
    auto* mcf = static_cast<MainConf*>(ngx_http_cycle_get_module_main_conf(cycle, ngx_http_llm_gateway_module));
    if (mcf == nullptr || mcf->state == nullptr) return NGX_OK;   // no http block with the module
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(cycle->pool, sizeof(Worker));
    if (cln == nullptr) return NGX_ERROR;
    const StoreSettings* st = mcf->state->store.get();
    set_key_layout(st != nullptr && st->cluster ? KeyLayout::Cluster : KeyLayout::Plain);
    auto* w = new (cln->data) Worker(mcf);
    cln->handler = drop;
    g_worker = w;
    read_faults(w->faults);
    return NGX_OK;
}

CounterStore* shm_store(ngx_shm_zone_t* zone) {
    Worker* w = g_worker;
    if (w == nullptr) return nullptr;
    if (!w->shm) w->shm = make_shm_store(zone);
    return w->shm.get();
}

CounterStore* counter_store(MainConf* mcf) {
    Worker* w = g_worker;
    if (w == nullptr) return nullptr;
    CounterStore* shm = shm_store(mcf->zone);
    const StoreSettings* st = mcf->state->store.get();
    if (st == nullptr || shm == nullptr) return shm;
    if (!w->redis) w->redis = make_redis_store(*st, shm, w->health, w->faults.redis_reply_bad_alloc);
    return w->redis.get();
}

bool store_uses_in_process_ttls(MainConf* mcf) { return mcf->state->store == nullptr; }

// Runs the destructor now (closing the store connection before nginx looks
// for open sockets); the pool cleanup then finds nothing left to do.
void stop_worker() {
    Worker* w = g_worker;
    if (w == nullptr) return;
    g_worker = nullptr;
    for (ngx_pool_cleanup_t* c = ngx_cycle->pool->cleanup; c; c = c->next) {
        if (c->handler == drop && c->data == w) c->handler = nullptr;
    }
    w->~Worker();
}

}  // namespace llmgw
