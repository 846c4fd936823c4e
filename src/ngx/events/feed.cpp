// The failure feed's ring in shared memory, its mirror, and the events of
// requests and provider calls.
#include "ngx/events/feed.h"

#include "core/codec/codec.h"
#include "core/events/ring.h"
#include "core/metrics/rejections.h"
#include "ngx/call/call.h"
#include "ngx/call/health.h"
#include "ngx/http/routes.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

// The zone holds the ring and the metrics' rejection counts (both written
// by every worker, under the zone's lock).
struct FeedZone {
    EventRing ring;
    RejectionTable rejections;
};

ngx_int_t init_zone(ngx_shm_zone_t* zone, void* old) {
    if (old != nullptr) {   // a reload keeps both (same size)
        zone->data = old;
        return NGX_OK;
    }
    auto* shpool = reinterpret_cast<ngx_slab_pool_t*>(zone->shm.addr);
    auto* fz = static_cast<FeedZone*>(ngx_slab_alloc(shpool, sizeof(FeedZone)));
    if (fz == nullptr) return NGX_ERROR;
    fz->ring.clear();
    fz->rejections.clear();
    zone->data = fz;
    return NGX_OK;
}

template <class F>
bool with_zone(MainConf* mcf, F&& f) {
    if (mcf == nullptr || mcf->events_zone == nullptr || mcf->events_zone->shm.addr == nullptr) return false;
    auto* fz = static_cast<FeedZone*>(mcf->events_zone->data);
    if (fz == nullptr) return false;
    auto* shpool = reinterpret_cast<ngx_slab_pool_t*>(mcf->events_zone->shm.addr);
    ngx_shmtx_lock(&shpool->mutex);
    f(*fz);
    ngx_shmtx_unlock(&shpool->mutex);
    return true;
}

std::string route_of(const RequestCtx& ctx) {
    if (ctx.route == nullptr) return {};
    return ctx.route->event_route ? ctx.route->event_route : ctx.route->name;
}

}  // namespace

ngx_shm_zone_t* add_events_zone(ngx_conf_t* cf) {
    ngx_str_t name = ngx_string("llm_gateway_events");
    const std::size_t size = 8 * ngx_pagesize + sizeof(FeedZone);
    ngx_shm_zone_t* zone = ngx_shared_memory_add(cf, &name, size, &ngx_http_llm_gateway_module);
    if (zone == nullptr) return nullptr;
    zone->init = init_zone;
    return zone;
}

void record_event(MainConf* mcf, GatewayEvent e) {
    e.time_ms = now_ms();
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

void request_event(ngx_http_request_t*, const RequestCtx& ctx, std::string_view kind, int status, std::string message,
                   const Call* call, std::string_view route_override) {
    GatewayEvent e;
    if (ctx.user != nullptr) {
        e.user = ctx.user->name;
        if (!ctx.is_admin_traffic) e.group = ctx.user->group;
    }
    const ProviderConf* p = call ? call->provider : ctx.resolved.provider;
    if (p != nullptr) e.provider = p->name;
    if (call != nullptr && call->target != nullptr) {
        e.model = call->target->canonical;
    } else {
        e.model = ctx.resolved.canonical;
    }
    e.route = route_override.empty() ? route_of(ctx) : std::string(route_override);
    e.kind.assign(kind);
    e.message = std::move(message);
    e.status = status;
    record_event(ctx.mcf, std::move(e));
}

void call_event(ngx_http_request_t* r, const RequestCtx& ctx, const Call& call) {
    const bool proxied = ctx.route != nullptr && ctx.route->codec == CodecKind::Passthrough;
    const std::string route = route_of(ctx);
    if (!call.answered()) {
        if (proxied) return request_event(r, ctx, "upstream", 502, "upstream connection error", &call);
        if (call.timed_out()) return request_event(r, ctx, "timeout", 504, "the upstream provider timed out", &call);
        return request_event(r, ctx, "upstream", 502,
                             call.garbled_head() ? Codec::kInvalidMessage : "the upstream provider could not be reached",
                             &call);
    }
    const CodecResult& res = call.outcome();
    const int status = static_cast<int>(call.upstream_status);
    switch (res.end) {
    case EndState::UpstreamError:
        if (status != 429 && status < 500) return;   // the caller's own mistake
        if (proxied) {
            return request_event(r, ctx, "upstream", status,
                                 route + " upstream returned status " + std::to_string(status), &call);
        }
        return request_event(r, ctx, "upstream", status, res.text, &call);
    case EndState::Invalid:
        return request_event(r, ctx, "upstream", 502, res.text.empty() ? Codec::kInvalidMessage : res.text, &call);
    case EndState::Cut:
        return request_event(r, ctx, "upstream", 502, Codec::kCutMessage, &call);
    default:
        if (proxied && (status == 429 || status >= 500)) {
            return request_event(r, ctx, "upstream", status,
                                 route + " upstream returned status " + std::to_string(status), &call);
        }
        return;
    }
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
