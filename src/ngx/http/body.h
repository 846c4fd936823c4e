// The client body as one view.
#pragma once
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

// ctx->in.body from r->request_body (false: it could not be read).
bool read_body_view(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace llmgw
