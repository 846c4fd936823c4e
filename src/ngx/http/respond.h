// The gateway's own answers: bodies, the error envelope, headers.
#pragma once
#include <string>
#include <string_view>

#include "ngx/ngx_incl.h"

namespace llmgw {

// A copy of s in the pool as one buffer (last_buf when last); an empty s
// gives a special buffer that only marks the end.
ngx_buf_t* string_buf(ngx_pool_t* pool, std::string_view s, bool last);
ngx_int_t send_body(ngx_http_request_t* r, ngx_uint_t status, std::string_view content_type, std::string_view body);
// The same, keeping the validators already set (ETag: nginx's not-modified
// filter may answer 304); copy=false points at bytes that outlive the request
// (the module's own data) instead of copying them into its pool.
ngx_int_t send_whole(ngx_http_request_t* r, ngx_uint_t status, std::string_view content_type, std::string_view body,
                     bool copy);
ngx_int_t send_json(ngx_http_request_t* r, ngx_uint_t status, const std::string& body);
ngx_int_t send_error(ngx_http_request_t* r, ngx_uint_t status, std::string_view message, std::string_view type,
                     std::string_view code = {});
// The gateway's error body in the envelope of the request's route.
std::string gateway_error_body(ngx_http_request_t* r, ngx_uint_t status, std::string_view message,
                               std::string_view type, std::string_view code);
// From a phase handler: answers with the envelope, finalizes, returns NGX_DONE.
ngx_int_t reject(ngx_http_request_t* r, ngx_uint_t status, std::string_view message, std::string_view type,
                 std::string_view code);
ngx_int_t add_header(ngx_http_request_t* r, std::string_view name, std::string_view value);
std::string_view sv(const ngx_str_t& s);
ngx_str_t pstr(ngx_pool_t* pool, std::string_view s);   // copy into the pool (len 0 on failure)

}  // namespace llmgw
