// Accounting after the provider answered: tokens, cost, the served model's
// request and the provider's attempt counters, written to the store.
#pragma once
#include <vector>

#include "core/config/gwconfig.h"
#include "core/metering/pricing.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

class Call;

// Tokens and cost of the request, once, from the call that answered
// (ctx->attempts.chosen), with that call's provider counters in the same batch.
// cancelled: the client went away mid-call; tokens are still counted, the
// provider call is counted as neither success nor failure.
void account_request(ngx_log_t* log, MainConf* mcf, RequestCtx* ctx, bool cancelled = false);
// Releases the request's reservation, if it holds one no accounting settled.
void release_reservation(MainConf* mcf, RequestCtx* ctx);
// Provider attempt/failure counters of one call, once (calls that did not answer the client).
void account_call(ngx_log_t* log, MainConf* mcf, RequestCtx* ctx, Call& call);
// Whether the call failed in a way the breaker and the failure counters
// count: no answer, a 429, a 5xx, an invalid or cut answer.
bool call_failed(const Call& c);
// The price of the model that answered a call: the admitted one's, or,
// after a failover to another model, that model's own (null: unpriced).
const Price* answering_price(MainConf* mcf, const RequestCtx& ctx, const Call& c);
// One request of each tool server or agent listed (their scopes: kind mcp
// or agent), in one store operation.
void account_targets(MainConf* mcf, const std::vector<const TargetConf*>& targets);
// The end of a request that may have called a provider (RequestCtx::on_end):
// its calls released; an answer its client left counted; a reservation no
// accounting settled released.
void end_metered_request(RequestCtx* ctx) noexcept;

}  // namespace llmgw
