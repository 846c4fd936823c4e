// GET /v1/models: the configured models and aliases, then the providers'
// discovered lists from the shared cache. A request that finds a provider's
// list stale (and nobody refreshing it) refreshes it: it walks the
// provider's pages one after another (providers in parallel) with GET
// subrequests to the provider's location, stores the list, and answers.
// Other requests answer at once from the last good list; chat requests never
// wait for any of this.
#include "ngx/discovery/models.h"

#include "core/admin/views.h"
#include "core/codec/codec.h"
#include "core/log/log_escape.h"
#include "ngx/call/call.h"
#include "ngx/discovery/model_cache.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {
namespace {

const std::vector<ProviderConf>& providers(ngx_http_request_t* r) { return main_conf(r)->state->config.providers(); }

std::string timeout_why(const ProviderConf& p, const DiscoveryRun& run) {
    return "the walk took longer than discover_timeout (" + std::to_string(p.discover_timeout_ms) + " ms) at page " +
           std::to_string(run.walk.pages() + 1);
}

// Starts the call of the run's next page; false (run failed) when it cannot.
// The page is read up to what the walk's byte bounds leave, until the walk's
// deadline.
bool start_page(ngx_http_request_t* r, RequestCtx* ctx, DiscoveryRun& run) {
    const ProviderConf& p = providers(r)[run.provider];
    if (static_cast<ngx_msec_int_t>(ngx_current_msec - run.deadline) >= 0) {
        run.failed = true;
        run.why = timeout_why(p, run);
        return false;
    }
    const std::size_t limit = run.walk.next_page_limit();
    ctx->attempts.calls.emplace_back(new Call(ctx, &p, make_model_list_codec(p.type, run.walk.next_path(), limit),
                                     static_cast<unsigned>(run.walk.pages() + 1), Call::Mode::Capture));
    Call& call = *ctx->attempts.calls.back();
    call.capture_limit = limit;
    call.deadline = run.deadline;
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm_gateway: model discovery of provider \"%s\": page %uz, at most %uz bytes",
                   log_value(p.name).c_str(), run.walk.pages() + 1, limit);
    CallerRequest in;
    in.provider_key = p.key;
    if (call.start(r, in) != NGX_OK) {
        ctx->attempts.calls.pop_back();
        run.failed = true;
        run.why = "the list request could not be started";
        return false;
    }
    run.call = &call;
    return true;
}

ngx_int_t render(ngx_http_request_t* r) {
    MainConf* mcf = main_conf(r);
    std::vector<std::vector<std::string>> discovered(providers(r).size());
    for (std::size_t i = 0; i < discovered.size(); ++i) {
        if (providers(r)[i].discover_ms > 0) discovered[i] = model_cache_read(mcf, i);
    }
    const RequestCtx* ctx = get_ctx(r);
    std::string_view group = ctx != nullptr && ctx->auth.user != nullptr ? std::string_view(ctx->auth.user->group) : std::string_view();
    return send_json(r, NGX_HTTP_OK, render_models(mcf->state->config, discovered, group));
}

// The end of the refresh: store or keep each list, then answer.
ngx_int_t finish_refresh(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    for (DiscoveryRun& run : ctx->discovery) {
        const ProviderConf& p = providers(r)[run.provider];
        if (run.failed) {
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                          "llm_gateway: model discovery of provider \"%s\" failed: %s; the last good list is kept",
                          log_value(p.name).c_str(), log_text(run.why).c_str());
            model_cache_fail(mcf, run.provider, p.discover_ms);
            continue;
        }
        if (run.walk.truncated()) {
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                          "llm_gateway: model discovery of provider \"%s\" stopped after %uz pages and %uz ids",
                          log_value(p.name).c_str(), run.walk.pages(), run.walk.ids().size());
        }
        model_cache_store(mcf, run.provider, run.walk.ids(), p.discover_ms);
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "llm_gateway: model discovery of provider \"%s\": %uz models in %uz pages",
                      log_value(p.name).c_str(), run.walk.ids().size(), run.walk.pages());
    }
    return render(r);
}

void models_resume(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr) return;
    for (const auto& c : ctx->attempts.calls) {
        if (c->running()) return;   // woken before every call ended
    }
    ngx_int_t rc;
    try {
        bool waiting = false;
        for (DiscoveryRun& run : ctx->discovery) {
            if (run.failed || run.call == nullptr) continue;
            Call& c = *run.call;
            run.call = nullptr;
            const ProviderConf& p = providers(r)[run.provider];
            if (c.overflowed() != Call::Overflow::None) {
                run.failed = true;
                run.walk.overflow(run.why);
            } else if (c.deadline_passed()) {
                run.failed = true;
                run.why = timeout_why(p, run);
            } else if (!c.answered()) {
                run.failed = true;
                run.why = c.timed_out() ? "the provider timed out" : "the provider gave no response";
            } else if (c.upstream_status < 200 || c.upstream_status >= 300 || c.outcome().end != EndState::Complete) {
                run.failed = true;
                run.why = "the provider answered status " + std::to_string(c.upstream_status) +
                          (c.outcome().text.empty() ? std::string() : ": " + c.outcome().text);
            } else if (!run.walk.feed(c.captured(), run.why)) {
                run.failed = true;
            } else if (!run.walk.done()) {
                waiting = start_page(r, ctx, run) || waiting;
            }
            c.release_captured();   // read: one page at a time is held
        }
        if (waiting) return;   // the next pages run; this runs again when they end
        r->write_event_handler = ngx_http_request_empty_handler;
        rc = finish_refresh(r, ctx);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: model discovery failed: %s", log_text(e.what()).c_str());
        rc = NGX_ERROR;
    }
    ngx_http_finalize_request(r, rc);
}

}  // namespace

ngx_int_t models_handler(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    const auto& ps = providers(r);
    for (std::size_t i = 0; i < ps.size(); ++i) {
        if (ps[i].discover_ms > 0 && model_cache_claim(mcf, i)) {
            ctx->discovery.push_back(DiscoveryRun{i, ModelWalk(ps[i].type, ps[i].discover_bounds), nullptr, false, {},
                                                  ngx_current_msec + static_cast<ngx_msec_t>(ps[i].discover_timeout_ms)});
        }
    }
    if (ctx->discovery.empty()) return render(r);
    bool started = false;
    for (DiscoveryRun& run : ctx->discovery) started = start_page(r, ctx, run) || started;
    if (!started) return finish_refresh(r, ctx);
    r->main->count++;   // held until models_resume finalizes it
    r->write_event_handler = models_resume;
    return NGX_DONE;
}

}  // namespace llmgw
