// Retries and failover (docs/failover.md): the attempts of a request's
// provider call. A failed call whose answer has not begun is retried on its
// target (llm_gateway_retries times, after the upstream's Retry-After up to
// 30 s, else a jittered backoff), then the next target is tried. The breaker
// of each provider is asked first and told every verdict. relay.cpp starts
// the first attempt and answers from the last.
#include "core/log/log_escape.h"
#include "core/routing/retry.h"
#include "ngx/call/accounting.h"
#include "ngx/call/call.h"
#include "ngx/call/drain.h"
#include "ngx/call/failover.h"

#include "ngx/call/cache.h"
#include "ngx/call/health.h"
#include "ngx/call/relay.h"
#include "ngx/http/request_events.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

namespace {

// The codec of one attempt: the route's API spoken to that provider's type.
std::unique_ptr<Codec> codec_for_attempt(const RequestCtx& ctx, const ProviderConf& p) {
    CodecOptions opt;
    opt.provider = p.type;
    opt.client_stream = ctx.in.doc && ctx.in.doc->info().stream;
    opt.client_wants_usage = ctx.in.doc && ctx.in.doc->info().client_wants_usage;
    if (ctx.in.doc) opt.client_model = ctx.in.doc->info().model;
    return make_codec(codec_for(ctx), opt);
}

// A call worth another attempt: nothing reached the client, and the
// provider gave no answer, a 429, a 5xx, or an invalid answer (an answer
// cut before any byte reached the client is one: Codec::finish).
bool retryable(const RequestCtx& ctx, const Call& c) {
    // A passthrough may not be idempotent (a batch, an upload): one attempt.
    if (ctx.attempts.head_sent || codec_for(ctx) == CodecKind::Passthrough) return false;
    return call_failed(c);
}

std::size_t provider_index(const MainConf* mcf, const ProviderConf* p) {
    return static_cast<std::size_t>(p - mcf->state->config.providers().data());
}

void record_health(MainConf* mcf, Call& c) {
    if (c.health_recorded) return;
    c.health_recorded = true;
    if (cache_use(c) == CacheUse::Hit) {   // answered by nginx's cache: nothing learnt of the provider
        health_abandon(mcf, c.provider_index, c.probe);
        return;
    }
    health_result(mcf, c.provider_index, !call_failed(c) && c.outcome().end != EndState::Cut, c.probe);
}

double uniform01() {
    return static_cast<double>(ngx_random() % 1000000) / 1000000.0;
}

}  // namespace

// Starts the next attempt from ctx->attempts.target_index, skipping targets whose
// provider's breaker is open, whose type cannot serve the route, or that
// asked for a Retry-After over 30 s.
Launch launch(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    const auto& targets = ctx->in.resolved.targets;
    const CodecKind api = codec_for(*ctx);
    std::int64_t retry_at = 0;
    const ProviderConf* open_provider = nullptr;
    for (; ctx->attempts.target_index < targets.size(); ++ctx->attempts.target_index, ctx->attempts.same_target_retries = 0) {
        const Target& t = targets[ctx->attempts.target_index];
        if (!codec_serves(api, t.provider->type) || t.provider == ctx->attempts.avoid) continue;
        const std::size_t pi = provider_index(mcf, t.provider);
        std::int64_t at = 0;
        BreakerAdmit admit = health_admit(mcf, pi, at);
        if (admit == BreakerAdmit::Skip) {
            if (open_provider == nullptr || at < retry_at) retry_at = at;
            if (open_provider == nullptr) open_provider = t.provider;
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "llm_gateway: provider \"%s\" skipped: its breaker is open", log_value(t.provider->name).c_str());
            continue;
        }
        std::unique_ptr<Codec> codec = codec_for_attempt(*ctx, *t.provider);
        if (codec == nullptr) {
            health_abandon(mcf, pi, admit == BreakerAdmit::Probe);
            return {false, NGX_HTTP_INTERNAL_SERVER_ERROR};
        }
        ctx->attempts.calls.emplace_back(new Call(ctx, t.provider, std::move(codec), static_cast<unsigned>(ctx->attempts.calls.size() + 1),
                                         Call::Mode::Relay));
        Call& call = *ctx->attempts.calls.back();
        call.target = &t;
        call.provider_index = pi;
        call.probe = admit == BreakerAdmit::Probe;
        CallerRequest in;
        in.body = ctx->in.body;
        in.doc = ctx->in.doc.get();
        in.upstream_model = t.upstream_model;
        in.provider_key = t.provider->key;
        in.method = sv(r->method_name);
        in.path = ctx->in.passthrough_path;
        in.query = sv(r->args);
        if (r->headers_in.content_type != nullptr) in.content_type = sv(r->headers_in.content_type->value);
        in.form = &ctx->in.form;
        std::string refusal;
        ngx_int_t rc = call.start(r, in, &refusal);
        if (rc == NGX_OK) {
            ctx->attempts.chosen = &call;
            ngx_log_debug6(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "llm_gateway: attempt %ui: provider \"%s\" model \"%s\" (target %uz of %uz%s)",
                           static_cast<ngx_uint_t>(call.attempt), log_value(t.provider->name).c_str(),
                           log_value(t.upstream_model).c_str(), ctx->attempts.target_index + 1, targets.size(),
                           call.probe ? ", the breaker's probe" : "");
            if (call.attempt > 1) {
                ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "llm_gateway: attempt %ui to provider \"%s\" model \"%s\"",
                              static_cast<ngx_uint_t>(call.attempt), log_value(t.provider->name).c_str(),
                              log_value(t.upstream_model).c_str());
            }
            return {true, NGX_OK};
        }
        call.health_recorded = true;
        health_abandon(mcf, pi, call.probe);
        ctx->attempts.calls.pop_back();
        if (rc == NGX_HTTP_BAD_REQUEST) {
            return {false, send_error(r, NGX_HTTP_BAD_REQUEST, refusal, "invalid_request_error", "unsupported_parameter")};
        }
        return {false, NGX_HTTP_INTERNAL_SERVER_ERROR};
    }
    if (open_provider != nullptr && ctx->attempts.calls.empty()) {
        std::int64_t secs = (retry_at - now_ms() + 999) / 1000;
        if (secs < 1) secs = 1;
        if (add_header(r, "Retry-After", std::to_string(secs)) != NGX_OK) return {false, NGX_ERROR};
        return {false, send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                  "provider \"" + log_value(open_provider->name) +
                                      "\" is unavailable: its circuit breaker opened after repeated failures",
                                  "server_error", "provider_unavailable")};
    }
    return {false, NGX_DECLINED};
}

namespace {

// While a wait runs: a client that goes away ends it, with nothing more
// attempted or counted.
void wait_read_handler(ngx_http_request_t* r) {
    if (!client_gone(r)) return;
    RequestCtx* ctx = get_ctx(r);
    if (ctx != nullptr && ctx->attempts.retry_timer.timer_set) ngx_del_timer(&ctx->attempts.retry_timer);
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "llm_gateway: client closed the connection while a retry was waiting; no further attempt");
    ngx_http_finalize_request(r, NGX_HTTP_CLIENT_CLOSED_REQUEST);
}

// Launches the next attempt now; answers when there is none.
void attempt_now(ngx_http_request_t* r, RequestCtx* ctx) {
    Launch l = launch(r, ctx);
    if (l.started) return;
    r->write_event_handler = ngx_http_request_empty_handler;
    if (l.rc == NGX_DECLINED) {   // nothing left: the last failure is the answer
        ctx->attempts.chosen = ctx->attempts.last_failed;
        l.rc = answer_chosen(r, ctx);
    }
    ngx_http_finalize_request(r, l.rc);
}

void retry_timer_handler(ngx_event_t* ev) {
    auto* r = static_cast<ngx_http_request_t*>(ev->data);
    ngx_connection_t* c = r->connection;
    try {
        RequestCtx* ctx = get_ctx(r);
        r->read_event_handler = ngx_http_block_reading;
        if (ctx == nullptr) {
            ngx_http_finalize_request(r, NGX_ERROR);
        } else {
            attempt_now(r, ctx);
        }
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, c->log, 0, "llm_gateway: retry failed: %s", log_text(e.what()).c_str());
        ngx_http_finalize_request(r, NGX_ERROR);
    }
    ngx_http_run_posted_requests(c);
}

// After a failed call: true when another attempt was started or is
// waiting (the request stays held), false when the failure is the answer.
bool next_attempt(ngx_http_request_t* r, RequestCtx* ctx, Call& failed) {
    MainConf* mcf = main_conf(r);
    const auto& targets = ctx->in.resolved.targets;
    const std::int64_t ra = failed.retry_after.empty() ? -1 : parse_retry_after_ms(failed.retry_after, ngx_time());
    if (ra > kMaxRetryAfterMs) ctx->attempts.avoid = failed.provider;   // not waited for, not tried again
    std::int64_t wait = 0;
    // The failed provider's own retries and backoff (llm_gateway_provider), else the http level's.
    const Resilience res = provider_resilience(*mcf, failed.provider_index);
    if (ra <= kMaxRetryAfterMs && ctx->attempts.same_target_retries < static_cast<std::uint64_t>(res.retries)) {
        ++ctx->attempts.same_target_retries;
        Backoff b;
        b.base_ms = res.backoff_base_ms;
        b.max_ms = res.backoff_max_ms;
        wait = ra >= 0 ? ra : backoff_ms(b, ctx->attempts.same_target_retries, uniform01());
    } else {
        ++ctx->attempts.target_index;
        ctx->attempts.same_target_retries = 0;
        // The next target on the same provider still waits its Retry-After.
        if (ra >= 0 && ra <= kMaxRetryAfterMs && ctx->attempts.target_index < targets.size() &&
            targets[ctx->attempts.target_index].provider == failed.provider) {
            wait = ra;
        }
    }
    ngx_log_debug6(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm_gateway: provider \"%s\" failed (status %ui%s): %s, wait %L ms%s",
                   log_value(failed.provider->name).c_str(), failed.upstream_status,
                   failed.answered() ? "" : ", no answer",
                   ctx->attempts.target_index >= targets.size() ? "no target left, the failure is the answer"
                   : ctx->attempts.same_target_retries > 0      ? "retry on the same target"
                                                       : "fail over to the next target",
                   static_cast<long long>(wait), ra >= 0 ? " (its Retry-After)" : "");
    if (ctx->attempts.target_index >= targets.size()) return false;
    account_call(r->connection->log, mcf, ctx, failed);   // its attempt and failure
    ctx->attempts.last_failed = &failed;
    ctx->attempts.chosen = nullptr;   // nothing chosen while waiting: a cancel counts nothing
    if (wait <= 0) {
        Launch l = launch(r, ctx);
        if (l.started) return true;
        ctx->attempts.chosen = &failed;
        if (l.rc == NGX_DECLINED) return false;
        r->write_event_handler = ngx_http_request_empty_handler;
        ngx_http_finalize_request(r, l.rc);
        return true;
    }
    ngx_event_t* ev = &ctx->attempts.retry_timer;
    ev->handler = retry_timer_handler;
    ev->data = r;
    ev->log = r->connection->log;
    ngx_add_timer(ev, static_cast<ngx_msec_t>(wait));
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "llm_gateway: provider \"%s\" failed; next attempt in %L ms",
                  log_value(failed.provider->name).c_str(), static_cast<long long>(wait));
    r->read_event_handler = wait_read_handler;
    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK || client_gone(r)) wait_read_handler(r);
    return true;
}

bool calls_running(const RequestCtx& ctx) {
    for (const auto& c : ctx.attempts.calls) {
        if (c->running()) return true;
    }
    return false;
}

}  // namespace

void resume(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr || ctx->attempts.chosen == nullptr || calls_running(*ctx)) return;   // woken before the calls ended
    ngx_int_t rc;
    try {
        Call& call = *ctx->attempts.chosen;
        // A call drained after its client left (or ended by the drain's
        // bounds) says nothing of the provider's health, fires no event and
        // is not retried: it was read for its usage only.
        if (!ctx->drain.client_left) {
            record_health(main_conf(r), call);
            if (!call.event_recorded) {
                call.event_recorded = true;
                call_event(*ctx, call);
            }
            if (retryable(*ctx, call) && next_attempt(r, ctx, call)) return;   // resume() runs again after it
        }
        ngx_log_debug5(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "llm_gateway: answering from attempt %ui (status %ui, answer %s, head %s%s)",
                       static_cast<ngx_uint_t>(call.attempt), call.upstream_status,
                       call.answered() ? end_state_name(call.outcome().end) : "none",
                       ctx->attempts.head_sent ? "sent" : "not sent", ctx->drain.client_left ? ", client gone" : "");
        r->write_event_handler = ngx_http_request_empty_handler;
        rc = answer_chosen(r, ctx);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: relay failed: %s", e.what());
        rc = NGX_ERROR;
    }
    ngx_http_finalize_request(r, rc);
}

}  // namespace llmgw
