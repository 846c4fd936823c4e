// The failure feed's event of a provider call (spec "Events", hook table):
// a timeout, a 429 or 5xx, no answer, an invalid or cut answer; for a
// passthrough, fixed texts and never the body.
#include "ngx/request/route.h"
#include "ngx/call/call.h"
#include "ngx/http/request_events.h"
#include "ngx/request/ctx.h"

namespace llmgw {

void call_event(const RequestCtx& ctx, const Call& call) {
    const bool proxied = ctx.route != nullptr &&
                         (ctx.route->codec == CodecKind::Passthrough || ctx.route->codec == CodecKind::Relay);
    const std::string route = event_route_of(ctx);
    const std::string_view model = call.target != nullptr ? std::string_view(call.target->canonical) : std::string_view();
    auto fire = [&](const char* kind, int status, std::string message) {
        request_event(ctx, kind, status, std::move(message), call.provider, model);
    };
    if (!call.answered()) {
        if (proxied) return fire("upstream", 502, "upstream connection error");
        if (call.timed_out()) return fire("timeout", 504, "the upstream provider timed out");
        return fire("upstream", 502, call.garbled_head() ? Codec::kInvalidMessage : "the upstream provider could not be reached");
    }
    const CodecResult& res = call.outcome();
    const int status = static_cast<int>(call.upstream_status);
    const bool failed_status = status == 429 || status >= 500;
    switch (res.end) {
    case EndState::UpstreamError:
        if (!failed_status) return;   // the caller's own mistake
        return fire("upstream", status, proxied ? route + " upstream returned status " + std::to_string(status) : res.text);
    case EndState::Invalid:
        return fire("upstream", 502, res.text.empty() ? Codec::kInvalidMessage : res.text);
    case EndState::Cut:
        return fire("upstream", 502, Codec::kCutMessage);
    case EndState::Stopped:
        return;   // the gateway ended it (a budget): not the provider's failure
    default:
        if (proxied && failed_status) fire("upstream", status, route + " upstream returned status " + std::to_string(status));
        return;
    }
}

}  // namespace llmgw
