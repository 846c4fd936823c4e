// Asking the store for a request: answer inline, or suspend the request and
// resume it when the answer comes (ngx/http/store_wait.h).
#include "ngx/http/store_wait.h"

#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {
namespace {

struct Wait {
    bool async = false;   // await_store returned NGX_DONE: the answer resumes the request
};

}  // namespace

ngx_int_t await_store(ngx_http_request_t* r, RequestCtx* ctx, Resume how,
                      const std::function<void(std::function<void()> answered)>& ask,
                      std::function<ngx_int_t()> finish) {
    auto wait = std::make_shared<Wait>();
    std::weak_ptr<bool> alive = ctx->alive;
    ctx->store_pending = true;
    ask([r, ctx, how, wait, alive, finish]() {
        auto token = alive.lock();
        if (!token || !*token) return;   // the request ended while the store was asked
        ctx->store_pending = false;
        if (!wait->async) return;        // answered inside ask(): await_store continues
        wait->async = false;
        ngx_connection_t* c = r->connection;
        if (how == Resume::RunPhases) {
            r->main->count--;
            ngx_http_core_run_phases(r);
        } else {
            ngx_int_t rc;
            try {
                rc = finish();
            } catch (const std::exception& e) {
                ngx_log_error(NGX_LOG_ERR, c->log, 0, "llm_gateway: answering after the store failed: %s", e.what());
                rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            ngx_http_finalize_request(r, rc);   // releases the reference taken below
        }
        ngx_http_run_posted_requests(c);
    });
    if (ctx->store_pending) {
        // Hold a reference so the request outlives the call (the store
        // answers or times out within its bound).
        wait->async = true;
        r->main->count++;
        return NGX_DONE;
    }
    return finish();
}

}  // namespace llmgw
