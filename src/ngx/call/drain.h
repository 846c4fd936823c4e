// The drain of a cancelled stream (llm_gateway_cancel_drain): a client that
// leaves mid-stream no longer ends its provider call; the answer is read on,
// dropped, for its real usage, within a time and a byte bound
// (docs/metering.md#accounting).
#pragma once
#include <cstddef>

#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

class Call;

// Whether the client's connection is gone (HTTP/1: EOF or an error on a
// peek; HTTP/2 ends its streams itself).
bool client_gone(ngx_http_request_t* r);

// The client left: from now on the answer is dropped and the bounds run.
void start_drain(ngx_http_request_t* r, RequestCtx* ctx);

// The subrequest's read handler while its answer streams, in place of the
// upstream module's (which would end the call when the client goes away).
void drain_watch_handler(ngx_http_request_t* s);

// n more bytes read from the provider (before its codec sees them) for an
// answer that nobody will read: how many of them its codec gets, so that no
// more than the byte bound is ever read. At the bound the call is ended
// (from a posted event) and stops reading; bytes past it are dropped unread.
std::size_t drain_take(Call& call, std::size_t n);

}  // namespace llmgw
