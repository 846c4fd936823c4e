// The failure feed's ring in shared memory and its mirror; the metrics'
// rejection counts beside it.
#include "ngx/events/feed.h"

#include <utility>

#include "core/events/ring.h"
#include "core/metrics/rejections.h"
#include "ngx/main_conf.h"
#include "ngx/shm_zone.h"
#include "ngx/store/store.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

// The zone holds the ring and the metrics' rejection counts (both written
// by every worker, under the zone's lock).
struct FeedZone {
    EventRing ring;
    RejectionTable rejections;

    static FeedZone* create(ngx_shm_zone_t&, ngx_slab_pool_t* shpool, std::uintptr_t) {
        auto* fz = static_cast<FeedZone*>(ngx_slab_alloc(shpool, sizeof(FeedZone)));
        if (fz == nullptr) return nullptr;
        fz->ring.clear();
        fz->rejections.clear();
        return fz;
    }
    void reuse(ngx_slab_pool_t*) {}   // a reload keeps both (same size)
};

template <class F>
bool with_zone(MainConf* mcf, F&& f) {
    return mcf != nullptr && with_shm_zone<FeedZone>(mcf->events_zone, std::forward<F>(f));
}

}  // namespace

ngx_shm_zone_t* add_events_zone(ngx_conf_t* cf) {
    ngx_str_t name = ngx_string("llm_gateway_events");
    const std::size_t size = 8 * ngx_pagesize + sizeof(FeedZone);
    return add_shm_zone_of<FeedZone>(cf, &name, size);
}

void record_event(MainConf* mcf, GatewayEvent e) {
    ngx_time_t* tp = ngx_timeofday();
    e.time_ms = static_cast<std::int64_t>(tp->sec) * 1000 + static_cast<std::int64_t>(tp->msec);
    e.replica = mcf->state->replica;
    e.instance = mcf->state->instance;
    const std::string json = event_json(e);
    bool mirror = false;
    CounterStore* store = counter_store(mcf);
    const bool shared = store != nullptr && store->shares_events();
    with_zone(mcf, [&](FeedZone& z) {
        z.ring.push(json);
        if (shared) mirror = z.ring.take_mirror(static_cast<std::int64_t>(ngx_time()));
    });
    if (mirror) store->push_event(json);   // off the request path: its reply is not awaited
}

std::vector<std::string> ring_events(MainConf* mcf, std::size_t limit) {
    std::vector<std::string> out;
    with_zone(mcf, [&](FeedZone& z) { out = z.ring.newest(limit); });
    return out;
}

void count_rejection(MainConf* mcf, std::string_view kind, std::string_view id) {
    with_zone(mcf, [&](FeedZone& z) { z.rejections.add(kind, id); });
}

void forget_rejections(MainConf* mcf, std::string_view kind, std::string_view id) {
    with_zone(mcf, [&](FeedZone& z) { z.rejections.forget(kind, id); });
}

std::vector<RejectionCount> rejection_counts(MainConf* mcf) {
    std::vector<RejectionCount> out;
    with_zone(mcf, [&](FeedZone& z) { out = z.rejections.list(); });
    return out;
}

}  // namespace llmgw
