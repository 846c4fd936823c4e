// The per-request context. It is a C++ object placed in pool cleanup
// storage, so the pool owns it; r->ctx is only a cache, rebuilt from the
// cleanup list after an internal redirect has cleared it.
#include "ngx/main_conf.h"
#include "ngx/request/ctx.h"
#include "ngx/ngx_incl.h"

namespace llmgw {
namespace {

void destroy_ctx(void* data) {
    static_cast<RequestCtx*>(data)->~RequestCtx();
}

}  // namespace

RequestCtx::RequestCtx() = default;

RequestCtx::~RequestCtx() {
    *alive = false;
    if (on_end != nullptr) on_end(this);
}

RequestCtx* get_ctx(ngx_http_request_t* r) {
    r = r->main;
    auto* ctx = static_cast<RequestCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
    if (ctx != nullptr || !r->internal) return ctx;
    for (ngx_pool_cleanup_t* cln = r->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == destroy_ctx) {
            ctx = static_cast<RequestCtx*>(cln->data);
            ngx_http_set_ctx(r, ctx, ngx_http_llm_gateway_module);
            return ctx;
        }
    }
    return nullptr;
}

RequestCtx* create_ctx(ngx_http_request_t* r) {
    r = r->main;
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(r->pool, sizeof(RequestCtx));
    if (cln == nullptr) return nullptr;
    RequestCtx* ctx;
    try {
        ctx = new (cln->data) RequestCtx();
    } catch (...) {
        return nullptr;   // handler stays null: nothing to destroy
    }
    cln->handler = destroy_ctx;
    ctx->mcf = static_cast<MainConf*>(ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module));
    ngx_http_set_ctx(r, ctx, ngx_http_llm_gateway_module);
    return ctx;
}

}  // namespace llmgw
