// The failure feed (docs/events.md): events recorded on error paths into the
// ring shared by this nginx's workers (zone "llm_gateway_events"), mirrored
// to the shared store's list when there is one, and read back by
// GET /admin/api/events.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/events/event.h"
#include "core/metrics/gateway_metrics.h"
#include "ngx/module.h"

namespace llmgw {

class Call;

// add_events_zone (declared in ngx/module.h) registers the zone.

// Stamps the event (time, replica, instance), stores it in the ring and,
// with a shared store that is not latched and under the throttle, mirrors it.
void record_event(MainConf* mcf, GatewayEvent e);

// An event of a request: user and group from its scopes, the model and
// provider of call (else of the resolved target), the route's event route
// (or route_override) .
void request_event(ngx_http_request_t* r, const RequestCtx& ctx, std::string_view kind, int status,
                   std::string message, const Call* call = nullptr, std::string_view route_override = {});

// The event of a provider call that failed, by the spec's hook table
// (nothing for a success, a 4xx other than 429, or a cut the client caused).
void call_event(ngx_http_request_t* r, const RequestCtx& ctx, const Call& call);

// Up to limit events of this replica's ring, newest first.
std::vector<std::string> ring_events(MainConf* mcf, std::size_t limit);

// The metrics' in-process rejection counts, kept in the same zone
// (core/metrics/rejections.h): one more, a removed user forgotten, all.
void count_rejection(MainConf* mcf, std::string_view kind, std::string_view id);
void forget_rejections(MainConf* mcf, std::string_view kind, std::string_view id);
std::vector<RejectionCount> rejection_counts(MainConf* mcf);

}  // namespace llmgw
