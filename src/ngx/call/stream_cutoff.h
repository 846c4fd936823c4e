// The mid-stream budget cutoff (llm_gateway_stream_cutoff): a streamed
// answer whose running usage would cross what remained of the caller's token
// or cost budget at admission is ended with an error event in the caller's
// format; the provider call is closed and what was relayed is billed
// (docs/metering.md#mid-stream-cutoff). Admission keeps what remains
// (ngx/admission/admission.cpp); this is the relay's side.
#pragma once
#include <string_view>

#include "ngx/request/ctx.h"

namespace llmgw {

class Call;

// Before a batch of the chosen call's stream goes to the client (the codec
// has read it): true when it must not be sent, because the stream was ended
// at its budget now (its error event is the call's pending end; the provider
// call is ended from a posted event) or earlier.
bool cutoff_stops(Call& call);
// After a batch was sent: what of the answer reached the client.
void cutoff_relayed(Call& call);

// At the request's end: the posted event no longer runs.
void cutoff_release(RequestCtx* ctx);

}  // namespace llmgw
