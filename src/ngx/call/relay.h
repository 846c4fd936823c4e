// The provider call of a request: started, and its answer to the client.
#pragma once
#include "core/codec/codec_kind.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

// The subrequest filters (and the error-page filter beside them).
ngx_int_t init_filters(ngx_conf_t* cf);
// Starts the request's provider call; NGX_DONE (the request is answered
// when the call ends) or an HTTP status. The chat, embeddings, images,
// audio and passthrough routes' handler.
ngx_int_t start_provider_call(ngx_http_request_t* r, RequestCtx* ctx);
// The answer of the request's chosen call, once it ended: its stream's end,
// its whole body, or the envelope when it gave none.
ngx_int_t answer_chosen(ngx_http_request_t* r, RequestCtx* ctx);
// The request's calls at its end: a pending retry timer is deleted, a
// breaker probe without a verdict given back.
void release_calls(RequestCtx* ctx);
// The API a route speaks (its route table row's codec column).
CodecKind codec_for(const RequestCtx& ctx);

}  // namespace llmgw
