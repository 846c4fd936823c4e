// Retries and failover (docs/failover.md): the attempts of a request's
// provider call, each on the next target its breaker admits, and what
// follows a failed one (a retry after a wait, the next target, the answer).
#pragma once
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

struct Launch {
    bool started;
    ngx_int_t rc;   // !started: the response's rc, or NGX_DECLINED (no target left to try)
};

// Starts the next attempt from ctx->attempts.target_index.
Launch launch(ngx_http_request_t* r, RequestCtx* ctx);

// The request's write handler while its calls run: when the chosen call
// ended, another attempt or the answer, and the request finalized.
void resume(ngx_http_request_t* r);

}  // namespace llmgw
