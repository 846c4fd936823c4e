#include "ngx/call/health.h"

#include <utility>

#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/shm_zone.h"

namespace llmgw {
namespace {

// The zone's size follows the number of providers, so a reload that keeps
// the zone (same size) has as many slots: they are reused and start closed
// again (the providers behind them may have changed). Old workers still
// finishing requests write to the same slots.
void reset_slot(BreakerSlot& s, ngx_slab_pool_t*) { s = BreakerSlot{BreakerState::Closed, 0, 0, 0}; }

using HealthZone = ShmSlots<BreakerSlot, reset_slot>;

template <class F>
bool with_slot(MainConf* mcf, std::size_t i, F&& f) {
    return mcf != nullptr && with_shm_slot<HealthZone>(mcf->health_zone, i, std::forward<F>(f));
}

}  // namespace

ngx_shm_zone_t* add_health_zone(ngx_conf_t* cf, std::size_t providers) {
    ngx_str_t name = ngx_string("llm_gateway_health");
    const std::size_t size = 8 * ngx_pagesize + providers * sizeof(BreakerSlot);
    return add_shm_zone_of<HealthZone>(cf, &name, size, providers);
}

Resilience http_resilience(const MainConf& mcf) {
    Resilience r;
    r.retries = mcf.retries;
    r.backoff_base_ms = static_cast<std::int64_t>(mcf.backoff_base);
    r.backoff_max_ms = static_cast<std::int64_t>(mcf.backoff_max);
    r.breaker_failures = mcf.breaker_failures;
    r.breaker_open_ms = static_cast<std::int64_t>(mcf.breaker_open);
    return r;
}

Resilience provider_resilience(const MainConf& mcf, std::size_t i) {
    const auto& providers = mcf.state->config.providers();
    const Resilience http = http_resilience(mcf);
    return i < providers.size() ? providers[i].resilience.over(http) : http;
}

BreakerConfig breaker_config(const MainConf& mcf, std::size_t i) {
    const Resilience r = provider_resilience(mcf, i);
    BreakerConfig c;
    c.enabled = r.breaker_failures > 0;
    c.failures = r.breaker_failures > 0 ? r.breaker_failures : 1;
    c.open_ms = r.breaker_open_ms;
    return c;
}

std::int64_t now_ms() {
    ngx_time_t* tp = ngx_timeofday();
    return static_cast<std::int64_t>(tp->sec) * 1000 + static_cast<std::int64_t>(tp->msec);
}

BreakerAdmit health_admit(MainConf* mcf, std::size_t i, std::int64_t& retry_at_ms) {
    BreakerAdmit a = BreakerAdmit::Pass;
    retry_at_ms = 0;
    const BreakerConfig c = breaker_config(*mcf, i);
    with_slot(mcf, i, [&](BreakerSlot& s) { a = breaker_admit(s, c, now_ms(), retry_at_ms); });
    return a;
}

void health_result(MainConf* mcf, std::size_t i, bool success, bool was_probe) {
    const BreakerConfig c = breaker_config(*mcf, i);
    with_slot(mcf, i, [&](BreakerSlot& s) { breaker_result(s, c, success, was_probe, now_ms()); });
}

void health_abandon(MainConf* mcf, std::size_t i, bool was_probe) {
    with_slot(mcf, i, [&](BreakerSlot& s) { breaker_abandon(s, was_probe, now_ms()); });
}

bool health_read(MainConf* mcf, std::size_t i, BreakerSlot& out) {
    return with_slot(mcf, i, [&](BreakerSlot& s) { out = s; });
}

}  // namespace llmgw
