// The main request's output filter in gateway locations: the caller's
// allowance headers on whatever answer the request gets, and nginx's own
// HTML error pages replaced by the error envelope. The filter of provider
// subrequests is in call/relay.cpp.
#include "ngx/http/error_pages.h"
#include "ngx/http/headers.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/request/ctx.h"

namespace llmgw {

namespace {

ngx_http_output_header_filter_pt next_header_filter;
ngx_http_output_body_filter_pt next_body_filter;

// nginx's own error pages in gateway locations become the envelope.
struct Replacement {
    const char* message;
    const char* type;
    const char* code;
};

Replacement replacement_for(ngx_uint_t status) {
    switch (status) {
    case NGX_HTTP_BAD_REQUEST: return {"malformed request", "invalid_request_error", "bad_request"};
    case NGX_HTTP_NOT_FOUND: return {"not found", "invalid_request_error", "unknown_url"};
    case NGX_HTTP_NOT_ALLOWED: return {"method not allowed", "invalid_request_error", "method_not_allowed"};
    case NGX_HTTP_REQUEST_TIME_OUT: return {"the request body was not received in time", "invalid_request_error", "request_timeout"};
    case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
        return {"request body is larger than the gateway accepts", "invalid_request_error", "request_too_large"};
    case NGX_HTTP_BAD_GATEWAY: return {"the upstream provider could not be reached", "upstream_error", "bad_gateway"};
    case NGX_HTTP_GATEWAY_TIME_OUT: return {"the upstream provider timed out", "upstream_error", "upstream_timeout"};
    case NGX_HTTP_SERVICE_UNAVAILABLE: return {"service unavailable", "server_error", "service_unavailable"};
    default: break;
    }
    if (status >= 500) return {"internal server error", "server_error", "internal_error"};
    return {"request rejected", "invalid_request_error", "bad_request"};
}

// The caller's remaining allowance (llm_gateway_ratelimit_headers), on
// whatever answer the request gets: the provider's, an error, a 429.
void add_allowance_headers(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr || ctx->admission.allowance.empty() || ctx->admission.allowance_sent) return;
    ctx->admission.allowance_sent = true;
    for (const auto& [name, value] : ctx->admission.allowance) {
        if (add_header(r, name, value) != NGX_OK) return;
    }
}

ngx_int_t main_header_filter(ngx_http_request_t* r) {
    auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module));
    if (lcf == nullptr || lcf->mode == kModeNone || r->err_status < 400) return next_header_filter(r);
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr) ctx = create_ctx(r);
    if (ctx == nullptr || ctx->page.own_response) return next_header_filter(r);
    Replacement rep = replacement_for(r->err_status);
    ctx->page.replacement = gateway_error_body(r, r->err_status, rep.message, rep.type, rep.code);
    ctx->page.replacing = true;
    r->headers_out.content_length_n = static_cast<off_t>(ctx->page.replacement.size());
    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = nullptr;
    }
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = nullptr;
    r->headers_out.charset.len = 0;
    return next_header_filter(r);
}

ngx_int_t main_body_filter(ngx_http_request_t* r, RequestCtx* ctx, ngx_chain_t* in) {
    for (ngx_chain_t* cl = in; cl; cl = cl->next) {
        if (ngx_buf_in_memory(cl->buf)) cl->buf->pos = cl->buf->last;
        cl->buf->file_pos = cl->buf->file_last;
    }
    if (ctx->page.replacement_sent) return NGX_OK;
    ctx->page.replacement_sent = true;
    ngx_buf_t* b = string_buf(r->pool, ctx->page.replacement, true);
    if (b == nullptr) return NGX_ERROR;
    ngx_chain_t out{b, nullptr};
    return next_body_filter(r, &out);
}

// Subrequests pass: their output is the filter's of call/relay.cpp.
ngx_int_t error_page_header_filter(ngx_http_request_t* r) {
    if (r != r->main) return next_header_filter(r);
    try {
        add_allowance_headers(r);
        return main_header_filter(r);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: header filter failed: %s", e.what());
        return NGX_ERROR;
    }
}

ngx_int_t error_page_body_filter(ngx_http_request_t* r, ngx_chain_t* in) {
    if (r != r->main) return next_body_filter(r, in);
    try {
        RequestCtx* ctx = static_cast<RequestCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
        if (ctx != nullptr && ctx->page.replacing) return main_body_filter(r, ctx, in);
        return next_body_filter(r, in);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: body filter failed: %s", e.what());
        return NGX_ERROR;
    }
}

}  // namespace

ngx_int_t init_error_pages(ngx_conf_t*) {
    next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = error_page_header_filter;
    next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = error_page_body_filter;
    return NGX_OK;
}

}  // namespace llmgw
