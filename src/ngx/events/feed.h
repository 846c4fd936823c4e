// The failure feed (docs/events.md): events recorded on error paths into the
// ring shared by this nginx's workers (zone "llm_gateway_events"), mirrored
// to the shared store's list when there is one, and read back by
// GET /admin/api/events. The events of requests are made in
// http/request_events.cpp, those of provider calls in call/call_events.cpp.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/events/event.h"
#include "core/metrics/gateway_metrics.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"

namespace llmgw {

// add_events_zone registers the zone.

// Stamps the event (time, replica, instance), stores it in the ring and,
// with a shared store that is not latched and under the throttle, mirrors it.
void record_event(MainConf* mcf, GatewayEvent e);

// Up to limit events of this replica's ring, newest first.
std::vector<std::string> ring_events(MainConf* mcf, std::size_t limit);

// The metrics' in-process rejection counts, kept in the same zone
// (core/metrics/rejections.h): one more, a removed user forgotten, all.
void count_rejection(MainConf* mcf, std::string_view kind, std::string_view id);
void forget_rejections(MainConf* mcf, std::string_view kind, std::string_view id);
std::vector<RejectionCount> rejection_counts(MainConf* mcf);

// The failure feed's ring (from init_main_conf).
ngx_shm_zone_t* add_events_zone(ngx_conf_t* cf);

}  // namespace llmgw
