// Limit admission: the request's scopes checked (and counted) in the store
// before the provider is called, and the reservation it holds.
#pragma once
#include <vector>

#include "core/metering/limits.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

// The user, group and total scopes of the request.
std::vector<Scope> request_scopes(const RequestCtx& ctx);
// NGX_DECLINED admitted, NGX_DONE answered (or waiting for the store).
ngx_int_t admit_request(ngx_http_request_t* r, RequestCtx* ctx);
// Once the store answered: admitted (NGX_DECLINED) or the 429/402/503.
ngx_int_t finish_admission(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace llmgw
