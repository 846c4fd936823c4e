// CONTENT phase: run the handler of an admitted request's route.
#include "ngx/phases/content.h"

#include "core/log/log_escape.h"
#include "ngx/http/respond.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"
#include "ngx/request/route.h"

namespace llmgw {
namespace {

ngx_int_t content(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr || ctx->phase != RequestCtx::Phase::Admitted) {
        // The access handler did not admit this request (e.g. "satisfy any"
        // let another module grant access first): never serve it.
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm_gateway: request reached the content phase without gateway admission "
                      "(is \"satisfy any\" set in this location?)");
        if (ngx_http_discard_request_body(r) != NGX_OK) r->keepalive = 0;
        return send_error(r, NGX_HTTP_UNAUTHORIZED, "authentication required", "invalid_request_error",
                          "missing_api_key");
    }
    const RouteRow* row = ctx->route;
    if (row == nullptr) {
        return send_error(r, NGX_HTTP_NOT_FOUND, "Unknown request URL", "invalid_request_error", "unknown_url");
    }
    if (row->body == BodyRule::None && ngx_http_discard_request_body(r) != NGX_OK) r->keepalive = 0;
    return row->handler(r, ctx);
}

}  // namespace

ngx_int_t content_handler(ngx_http_request_t* r) {
    try {
        return content(r);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: content phase failed: %s", log_text(e.what()).c_str());
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
}

}  // namespace llmgw
