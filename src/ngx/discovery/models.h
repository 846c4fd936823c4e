// GET /v1/models: the configured models and the providers' discovered ones.
#pragma once
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

ngx_int_t models_handler(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace llmgw
