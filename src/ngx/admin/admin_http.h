// What the admin location's handlers share (ngx/admin/*.cpp): their
// response headers, their query arguments, and one batched store read on
// behalf of a request.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"
#include "ngx/store/store.h"
#include "ngx/worker.h"

namespace llmgw {

// Every admin response: no sniffing, nothing loaded or framed
// (X-Content-Type-Options, Content-Security-Policy).
ngx_int_t admin_content_headers(ngx_http_request_t* r);
// The JSON routes: the same, and never cached (Cache-Control: no-store).
ngx_int_t admin_secure_headers(ngx_http_request_t* r);

// A query argument as sent ("" when absent), and percent-decoded.
std::string_view query_arg(ngx_http_request_t* r, const char* name);
std::string decoded_arg(ngx_http_request_t* r, const char* name);

// Reads keys in one batch for the request and answers with finish(reply,
// values) once the store answered (inline or later); the request is held
// meanwhile (store_wait.cpp).
using ReadFinish = std::function<ngx_int_t(const StoreReply&, const std::vector<std::int64_t>&)>;
ngx_int_t read_then(ngx_http_request_t* r, RequestCtx* ctx, CounterStore* store,
                    std::shared_ptr<const std::vector<std::string>> keys, ReadFinish finish);

// The 503 of an admin read that failed: an outage, never zeros.
ngx_int_t store_unreadable(ngx_http_request_t* r);

}  // namespace llmgw
