// The provider of a passthrough request and the target of a per-target
// proxy request, with the path below them.
#pragma once
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

// The provider and path of a passthrough request (NGX_OK), or its answer
// (404 unknown provider, 400 refused path; NGX_DONE).
ngx_int_t route_passthrough(ngx_http_request_t* r, RequestCtx* ctx, const LocConf* lcf);
// The target and path of a per-target proxy request (NGX_OK), or its answer
// (404 unknown, 403 closed to the group, 400 path).
ngx_int_t route_target(ngx_http_request_t* r, RequestCtx* ctx, const LocConf* lcf);

}  // namespace llmgw
