// The per-target MCP and A2A proxies: a request's call to its target.
#pragma once
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

ngx_int_t start_target_call(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace llmgw
