// Writing the gateway's own responses: JSON bodies and the error envelope.
#include "ngx/request/route.h"
#include "ngx/http/respond.h"

#include "core/json/envelope.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

std::string_view sv(const ngx_str_t& s) {
    return {reinterpret_cast<const char*>(s.data), s.len};
}

// NUL-terminated too (not counted in len): nginx hands some strings, such as
// certificate paths, to C APIs.
ngx_str_t pstr(ngx_pool_t* pool, std::string_view s) {
    ngx_str_t out{0, nullptr};
    auto* p = static_cast<u_char*>(ngx_pnalloc(pool, s.size() + 1));
    if (p == nullptr) return out;
    ngx_memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
    out.data = p;
    out.len = s.size();
    return out;
}

ngx_int_t add_header(ngx_http_request_t* r, std::string_view name, std::string_view value) {
    auto* h = static_cast<ngx_table_elt_t*>(ngx_list_push(&r->headers_out.headers));
    if (h == nullptr) return NGX_ERROR;
    h->hash = 1;
    h->key = pstr(r->pool, name);
    h->value = pstr(r->pool, value);
    if (h->key.data == nullptr || h->value.data == nullptr) return NGX_ERROR;
    return NGX_OK;
}

ngx_buf_t* string_buf(ngx_pool_t* pool, std::string_view s, bool last) {
    auto* b = static_cast<ngx_buf_t*>(ngx_calloc_buf(pool));
    if (b == nullptr) return nullptr;
    if (!s.empty()) {   // an empty one stays a special buffer: nginx refuses zero-size memory buffers
        ngx_str_t copy = pstr(pool, s);
        if (copy.data == nullptr) return nullptr;
        b->pos = copy.data;
        b->last = copy.data + copy.len;
        b->memory = 1;
    }
    b->last_buf = last ? 1 : 0;
    b->last_in_chain = 1;
    return b;
}

ngx_int_t send_whole(ngx_http_request_t* r, ngx_uint_t status, std::string_view content_type, std::string_view body,
                     bool copy) {
    if (RequestCtx* ctx = get_ctx(r)) ctx->page.own_response = true;
    r->headers_out.status = status;
    r->headers_out.content_length_n = static_cast<off_t>(body.size());
    r->headers_out.content_type = pstr(r->pool, content_type);
    if (r->headers_out.content_type.data == nullptr) return NGX_ERROR;
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = nullptr;
    ngx_http_clear_accept_ranges(r);
    ngx_http_clear_last_modified(r);

    ngx_int_t rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) return rc;   // an error, HEAD, or a 304

    ngx_buf_t* b;
    if (copy) {
        b = string_buf(r->pool, body, r == r->main);
        if (b == nullptr) return NGX_ERROR;
    } else {
        b = static_cast<ngx_buf_t*>(ngx_calloc_buf(r->pool));
        if (b == nullptr) return NGX_ERROR;
        b->pos = reinterpret_cast<u_char*>(const_cast<char*>(body.data()));
        b->last = b->pos + body.size();
        b->memory = 1;   // read-only: nothing downstream writes into it
        b->last_buf = r == r->main ? 1 : 0;
        b->last_in_chain = 1;
    }
    ngx_chain_t out{b, nullptr};
    return ngx_http_output_filter(r, &out);
}

ngx_int_t send_body(ngx_http_request_t* r, ngx_uint_t status, std::string_view content_type, std::string_view body) {
    ngx_http_clear_etag(r);
    return send_whole(r, status, content_type, body, true);
}

ngx_int_t send_json(ngx_http_request_t* r, ngx_uint_t status, const std::string& body) {
    return send_body(r, status, "application/json", body);
}

// The caller's envelope: Anthropic's on the Anthropic-shaped route, OpenAI's elsewhere.
std::string gateway_error_body(ngx_http_request_t* r, ngx_uint_t status, std::string_view message,
                               std::string_view type, std::string_view code) {
    RequestCtx* ctx = get_ctx(r->main);
    if (ctx != nullptr && ctx->route != nullptr && ctx->route->codec == CodecKind::AnthropicMessages) {
        return anthropic_error_json(anthropic_error_type(static_cast<int>(status)), message);
    }
    return error_json(message, type, code);
}

ngx_int_t send_error(ngx_http_request_t* r, ngx_uint_t status, std::string_view message, std::string_view type,
                     std::string_view code) {
    std::string body;
    try {
        body = gateway_error_body(r, status, message, type, code);
    } catch (...) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    return send_json(r, status, body);
}

ngx_int_t reject(ngx_http_request_t* r, ngx_uint_t status, std::string_view message, std::string_view type,
                 std::string_view code) {
    if (ngx_http_discard_request_body(r) != NGX_OK) r->keepalive = 0;
    ngx_http_finalize_request(r, send_error(r, status, message, type, code));
    return NGX_DONE;
}

MainConf* main_conf(ngx_http_request_t* r) {
    return static_cast<MainConf*>(ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module));
}

}  // namespace llmgw
