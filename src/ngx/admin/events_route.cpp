// GET /admin/api/events: the failure feed (docs/events.md).
#include "core/events/event.h"
#include "ngx/admin/admin_http.h"
#include "ngx/admin/handlers.h"
#include "ngx/events/feed.h"
#include "ngx/http/respond.h"
#include "ngx/http/store_wait.h"
#include "ngx/main_conf.h"
#include "ngx/request/ctx.h"
#include "ngx/store/store.h"

namespace llmgw {
namespace {

// The failure feed: the shared list when a store is configured and
// readable (source "redis"), else this replica's ring (source "replica",
// degraded when the store could not be used). Elements that are not event
// objects are skipped.
ngx_int_t events(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    if (admin_secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    const int limit = events_limit(query_arg(r, "limit"));
    if (limit < 0) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, "limit must be an integer from 1 to 200", "invalid_request_error",
                          "invalid_limit");
    }
    const std::string& replica = mcf->state->replica;
    CounterStore* store = counter_store(mcf);
    if (store == nullptr || !store->shares_events()) {
        return send_json(r, NGX_HTTP_OK, render_events("replica", replica, ring_events(mcf, limit), false));
    }
    struct Answer {
        StoreReply reply;
        std::vector<std::string> items;
    };
    auto answer = std::make_shared<Answer>();
    return await_store(
        r, ctx, Resume::Finalize,
        [store, limit, answer, ctx](std::function<void()> answered) {
            std::weak_ptr<bool> alive = ctx->alive;
            store->read_events(static_cast<std::size_t>(limit),
                               [answer, alive, answered](const StoreReply& rep, const std::vector<std::string>& items) {
                                   auto token = alive.lock();
                                   if (!token || !*token) return;
                                   answer->reply = rep;
                                   answer->items = items;
                                   answered();
                               });
        },
        [r, mcf, limit, answer]() {
            const std::string& replica = mcf->state->replica;
            if (answer->reply.status != StoreStatus::Ok) {
                return send_json(r, NGX_HTTP_OK, render_events("replica", replica, ring_events(mcf, limit), true));
            }
            std::vector<std::string> events;
            for (std::string& e : answer->items) {
                if (is_event_object(e)) events.push_back(std::move(e));
            }
            return send_json(r, NGX_HTTP_OK, render_events("redis", replica, events, false));
        });
}

}  // namespace

ngx_int_t admin_events(ngx_http_request_t* r, RequestCtx* ctx) { return events(r, ctx); }

}  // namespace llmgw
