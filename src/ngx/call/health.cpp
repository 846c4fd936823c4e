#include "ngx/call/health.h"

#include <cstring>

#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"

namespace llmgw {
namespace {

struct HealthZone {
    std::size_t count;
    BreakerSlot slots[1];   // count of them
};

ngx_int_t init_zone(ngx_shm_zone_t* zone, void* old) {
    auto* shpool = reinterpret_cast<ngx_slab_pool_t*>(zone->shm.addr);
    const std::size_t count = reinterpret_cast<std::uintptr_t>(zone->data);
    // The zone's size follows the number of providers, so a reload that
    // keeps the zone (same size) has as many slots: they are reused and
    // start closed again (the providers behind them may have changed).
    // Old workers still finishing requests write to the same slots.
    auto* hz = static_cast<HealthZone*>(old);
    if (hz == nullptr) {
        const std::size_t size = sizeof(HealthZone) + sizeof(BreakerSlot) * (count ? count - 1 : 0);
        hz = static_cast<HealthZone*>(ngx_slab_calloc(shpool, size));
        if (hz == nullptr) return NGX_ERROR;
        hz->count = count;
    }
    ngx_shmtx_lock(&shpool->mutex);
    for (std::size_t i = 0; i < hz->count; ++i) hz->slots[i] = BreakerSlot{BreakerState::Closed, 0, 0, 0};
    ngx_shmtx_unlock(&shpool->mutex);
    zone->data = hz;
    return NGX_OK;
}

template <class F>
bool with_slot(MainConf* mcf, std::size_t i, F&& f) {
    if (mcf == nullptr || mcf->health_zone == nullptr || mcf->health_zone->shm.addr == nullptr) return false;
    auto* hz = static_cast<HealthZone*>(mcf->health_zone->data);
    if (hz == nullptr || i >= hz->count) return false;
    auto* shpool = reinterpret_cast<ngx_slab_pool_t*>(mcf->health_zone->shm.addr);
    ngx_shmtx_lock(&shpool->mutex);
    f(hz->slots[i]);
    ngx_shmtx_unlock(&shpool->mutex);
    return true;
}

}  // namespace

ngx_shm_zone_t* add_health_zone(ngx_conf_t* cf, std::size_t providers) {
    ngx_str_t name = ngx_string("llm_gateway_health");
    const std::size_t size = 8 * ngx_pagesize + providers * sizeof(BreakerSlot);
    ngx_shm_zone_t* zone = ngx_shared_memory_add(cf, &name, size, &ngx_http_llm_gateway_module);
    if (zone == nullptr) return nullptr;
    zone->init = init_zone;
    zone->data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(providers));
    return zone;
}

BreakerConfig breaker_config(const MainConf& mcf) {
    BreakerConfig c;
    c.enabled = mcf.breaker_failures > 0;
    c.failures = mcf.breaker_failures > 0 ? mcf.breaker_failures : 1;
    c.open_ms = static_cast<std::int64_t>(mcf.breaker_open);
    return c;
}

std::int64_t now_ms() {
    ngx_time_t* tp = ngx_timeofday();
    return static_cast<std::int64_t>(tp->sec) * 1000 + static_cast<std::int64_t>(tp->msec);
}

BreakerAdmit health_admit(MainConf* mcf, std::size_t i, std::int64_t& retry_at_ms) {
    BreakerAdmit a = BreakerAdmit::Pass;
    retry_at_ms = 0;
    const BreakerConfig c = breaker_config(*mcf);
    with_slot(mcf, i, [&](BreakerSlot& s) { a = breaker_admit(s, c, now_ms(), retry_at_ms); });
    return a;
}

void health_result(MainConf* mcf, std::size_t i, bool success, bool was_probe) {
    const BreakerConfig c = breaker_config(*mcf);
    with_slot(mcf, i, [&](BreakerSlot& s) { breaker_result(s, c, success, was_probe, now_ms()); });
}

void health_abandon(MainConf* mcf, std::size_t i, bool was_probe) {
    with_slot(mcf, i, [&](BreakerSlot& s) { breaker_abandon(s, was_probe, now_ms()); });
}

bool health_read(MainConf* mcf, std::size_t i, BreakerSlot& out) {
    return with_slot(mcf, i, [&](BreakerSlot& s) { out = s; });
}

}  // namespace llmgw
