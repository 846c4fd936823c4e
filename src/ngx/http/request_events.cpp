// The events of a request (see request_events.h).
#include "ngx/request/route.h"
#include "ngx/http/request_events.h"

#include "ngx/events/feed.h"
#include "ngx/request/ctx.h"

namespace llmgw {

std::string event_route_of(const RequestCtx& ctx) {
    if (ctx.route == nullptr) return {};
    return ctx.route->event_route ? ctx.route->event_route : ctx.route->name;
}

void request_event(const RequestCtx& ctx, std::string_view kind, int status, std::string message,
                   const ProviderConf* provider, std::string_view model, std::string_view route_override) {
    GatewayEvent e;
    if (ctx.auth.user != nullptr) {
        e.user = ctx.auth.user->name;
        if (!ctx.auth.is_admin_traffic) e.group = ctx.auth.user->group;
    }
    const ProviderConf* p = provider ? provider : ctx.in.resolved.provider;
    if (p != nullptr) e.provider = p->name;
    e.model.assign(provider ? model : std::string_view(ctx.in.resolved.canonical));
    e.route = route_override.empty() ? event_route_of(ctx) : std::string(route_override);
    e.kind.assign(kind);
    e.message = std::move(message);
    e.status = status;
    record_event(ctx.mcf, std::move(e));
}

}  // namespace llmgw
