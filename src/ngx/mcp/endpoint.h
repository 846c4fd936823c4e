// POST /mcp: the federated MCP endpoint.
#pragma once
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

ngx_int_t mcp_handler(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace llmgw
