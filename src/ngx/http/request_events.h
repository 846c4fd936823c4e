// The failure feed's events of a request (docs/events.md): who asked, which
// route, which provider and model. Admission's refusals are made here; the
// events of provider calls in call/call_events.cpp.
#pragma once
#include <string>
#include <string_view>

#include "ngx/request/ctx.h"

namespace llmgw {

// The route value of a request's events: its row's event route, else its name.
std::string event_route_of(const RequestCtx& ctx);

// Records an event of the request: user and group from its scopes (an
// admin's requests have no group), the provider and model given (else the
// resolved ones), the request's route (or route_override).
void request_event(const RequestCtx& ctx, std::string_view kind, int status, std::string message,
                   const ProviderConf* provider = nullptr, std::string_view model = {},
                   std::string_view route_override = {});

// The event of a provider call that failed, by the spec's hook table
// (nothing for a success, a 4xx other than 429, or a call the client left).
// call/call_events.cpp.
class Call;
void call_event(const RequestCtx& ctx, const Call& call);

}  // namespace llmgw
