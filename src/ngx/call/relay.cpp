// The request's side of its provider calls: starts them, decides what reaches
// the client (a streamed answer as its codec produces it, a whole answer once
// it is complete and valid, the error envelope otherwise), and the filters
// that route a subrequest's output to its Call. The same filters turn
// nginx's own HTML error pages in gateway locations into the error envelope.
#include "core/http/provider_headers.h"
#include "core/json/envelope.h"
#include "core/routing/retry.h"
#include "ngx/call/call.h"
#include "ngx/call/drain.h"
#include "ngx/call/health.h"
#include "ngx/call/stream_cutoff.h"
#include "ngx/http/request_events.h"
#include "ngx/http/headers.h"
#include "ngx/http/routes.h"
#include "ngx/module.h"

namespace llmgw {

std::unique_ptr<Codec> codec_for_attempt(const RequestCtx& ctx, const ProviderConf& p);

namespace {

ngx_http_output_header_filter_pt next_header_filter;
ngx_http_output_body_filter_pt next_body_filter;

// ------------------------------------------------------------ client side

// A provider's rate-limit headers describe the operator's account, never the
// caller's: they are not relayed (a tool server's or agent's are, as the
// rest of its answer). A configured secret in a value is masked.
bool copy_upstream_headers(ngx_http_request_t* sr, ngx_http_request_t* r, bool sse, bool from_provider) {
    bool ok = true;
    static const std::string_view skip[] = {"content-length", "transfer-encoding", "connection", "keep-alive",
                                            "content-type",   "content-encoding",  "server",     "date",
                                            "upgrade",        "proxy-connection",  "te",         "trailer"};
    for_each_header(sr->headers_out.headers, [&](const ngx_table_elt_t& h) {
        if (h.hash == 0) return true;
        for (std::string_view n : skip) {
            if (header_name_is(h.key, n)) return true;
        }
        if (from_provider && is_provider_rate_limit_header(sv(h.key))) return true;
        if (sse && header_name_is(h.key, "cache-control")) return true;   // the gateway sets its own
        auto* copy = static_cast<ngx_table_elt_t*>(ngx_list_push(&r->headers_out.headers));
        if (copy == nullptr) return ok = false;
        *copy = h;
        return ok = redact_value(r, copy->value);
    });
    return ok;
}

// The client's head for a successful answer of the call: its status, its
// content type and its end-to-end headers.
bool set_head(ngx_http_request_t* r, Call& call, bool sse) {
    ngx_http_request_t* sr = call.sr;
    r->headers_out.status = call.upstream_status;
    r->headers_out.content_type = sr->headers_out.content_type;
    if (!redact_value(r, r->headers_out.content_type)) return false;   // the same length
    r->headers_out.content_type_len = sr->headers_out.content_type_len;
    r->headers_out.content_type_lowcase = nullptr;
    return copy_upstream_headers(sr, r, sse, call.codec->kind() != CodecKind::Relay);
}

// The end of the client's response, after what was sent already.
ngx_int_t finish(ngx_http_request_t* r, std::string_view tail) {
    ngx_buf_t* b = string_buf(r->pool, tail, true);
    if (b == nullptr) return NGX_ERROR;
    ngx_chain_t out{b, nullptr};
    return ngx_http_output_filter(r, &out);
}

std::string provider_name(const Call& c) { return log_value(c.provider->name); }

ngx_int_t answer_whole(ngx_http_request_t* r, RequestCtx* ctx, Call& call) {
    const CodecResult& res = call.outcome();
    switch (res.end) {
    case EndState::Complete: {
        if (!set_head(r, call, false)) return NGX_ERROR;
        if (!res.content_type.empty()) {   // a translated answer: the codec's type, not the provider's
            r->headers_out.content_type.data = reinterpret_cast<u_char*>(const_cast<char*>(res.content_type.data()));
            r->headers_out.content_type.len = res.content_type.size();
            r->headers_out.content_type_len = res.content_type.size();
        }
        std::string& body = call.pending();
        r->headers_out.content_length_n = static_cast<off_t>(body.size());
        ctx->own_response = true;
        ngx_int_t rc = ngx_http_send_header(r);
        if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) return rc;
        return finish(r, body);
    }
    case EndState::UpstreamError:
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: provider \"%s\" returned status %ui: %s",
                      provider_name(call).c_str(), call.upstream_status, log_text(res.text).c_str());
        if (!call.retry_after.empty()) {
            std::string value = call.retry_after;
            main_conf(r)->state->secrets.mask(value);
            if (add_header(r, "Retry-After", value) != NGX_OK) return NGX_ERROR;
        }
        return send_body(r, static_cast<ngx_uint_t>(res.status), res.content_type, call.pending());
    case EndState::Invalid:
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: provider \"%s\" sent an invalid response: %s",
                      provider_name(call).c_str(), log_text(res.text).c_str());
        return send_body(r, static_cast<ngx_uint_t>(res.status), res.content_type, call.pending());
    default:
        break;
    }
    // Not expected (a whole answer cut short is Invalid: its 502 above; one
    // whose client left is never answered). A short 200 must never look complete.
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: provider \"%s\" response ended before completion",
                  provider_name(call).c_str());
    r->keepalive = 0;
    return NGX_ERROR;
}

// A streamed answer whose head went out: its last bytes.
ngx_int_t answer_stream(ngx_http_request_t* r, Call& call) {
    const CodecResult& res = call.outcome();
    const bool sse = call.codec->event_stream();
    switch (res.end) {
    case EndState::Complete:
    case EndState::StreamError:
    case EndState::UpstreamError:   // a passthrough's error status, relayed as it came
    case EndState::Stopped:         // ended at the caller's budget: its error event (logged then)
        return finish(r, call.pending());
    case EndState::Invalid:
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: provider \"%s\" sent an invalid response: %s",
                      provider_name(call).c_str(), log_text(res.text).c_str());
        break;
    default:
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: provider \"%s\" %s ended before completion",
                      provider_name(call).c_str(), sse ? "stream" : "response");
        break;
    }
    if (!sse) {   // a relayed JSON body: close, so the client sees it incomplete
        r->keepalive = 0;
        return NGX_ERROR;
    }
    return finish(r, call.pending());   // the closing error event
}

ngx_int_t answer(ngx_http_request_t* r, RequestCtx* ctx) {
    Call* call = ctx->chosen;
    account_request(r->connection->log, main_conf(r), ctx, ctx->client_left);
    if (ctx->client_left) return NGX_HTTP_CLIENT_CLOSED_REQUEST;   // read for its usage only: nobody to answer
    if (call->answered() && ctx->head_sent) return answer_stream(r, *call);
    if (call->answered()) return answer_whole(r, ctx, *call);
    if (call->garbled_head()) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm_gateway: provider \"%s\" sent an invalid response: incomplete response header",
                      provider_name(*call).c_str());
        return send_error(r, NGX_HTTP_BAD_GATEWAY, Codec::kInvalidMessage, "upstream_error", "bad_gateway");
    }
    // No response reached the filters: nginx itself failed the call
    // (connect error, timeout). Answer with the envelope, not its page.
    bool timeout = call->timed_out();
    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: provider \"%s\" %s", provider_name(*call).c_str(),
                  timeout ? "timed out" : "gave no response");
    if (timeout) {
        return send_error(r, NGX_HTTP_GATEWAY_TIME_OUT, "the upstream provider timed out", "upstream_error",
                          "upstream_timeout");
    }
    return send_error(r, NGX_HTTP_BAD_GATEWAY, "the upstream provider could not be reached", "upstream_error",
                      "bad_gateway");
}

bool calls_running(const RequestCtx& ctx) {
    for (const auto& c : ctx.calls) {
        if (c->running()) return true;
    }
    return false;
}

void resume(ngx_http_request_t* r);

}  // namespace

// ------------------------------------------------------- retries, failover
// (docs/failover.md) A failed call whose answer has not begun is retried on
// its target (llm_gateway_retries times, after the upstream's Retry-After
// up to 30 s, else a jittered backoff), then the next target is tried. The
// breaker of each provider is asked first and told every verdict.

namespace {

// A call worth another attempt: nothing reached the client, and the
// provider gave no answer, a 429, a 5xx, or an invalid answer (an answer
// cut before any byte reached the client is one: Codec::finish).
bool retryable(const RequestCtx& ctx, const Call& c) {
    // A passthrough may not be idempotent (a batch, an upload): one attempt.
    if (ctx.head_sent || codec_for(ctx) == CodecKind::Passthrough) return false;
    return call_failed(c);
}

std::size_t provider_index(const MainConf* mcf, const ProviderConf* p) {
    return static_cast<std::size_t>(p - mcf->state->config.providers().data());
}

void record_health(MainConf* mcf, Call& c) {
    if (c.health_recorded) return;
    c.health_recorded = true;
    health_result(mcf, c.provider_index, !call_failed(c) && c.outcome().end != EndState::Cut, c.probe);
}

struct Launch {
    bool started;
    ngx_int_t rc;   // !started: the response's rc, or NGX_DECLINED (no target left to try)
};

double uniform01() {
    return static_cast<double>(ngx_random() % 1000000) / 1000000.0;
}

// Starts the next attempt from ctx->target_index, skipping targets whose
// provider's breaker is open, whose type cannot serve the route, or that
// asked for a Retry-After over 30 s.
Launch launch(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    const auto& targets = ctx->resolved.targets;
    const CodecKind api = codec_for(*ctx);
    std::int64_t retry_at = 0;
    const ProviderConf* open_provider = nullptr;
    for (; ctx->target_index < targets.size(); ++ctx->target_index, ctx->same_target_retries = 0) {
        const Target& t = targets[ctx->target_index];
        if (!codec_serves(api, t.provider->type) || t.provider == ctx->avoid) continue;
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
        ctx->calls.emplace_back(new Call(ctx, t.provider, std::move(codec), static_cast<unsigned>(ctx->calls.size() + 1),
                                         Call::Mode::Relay));
        Call& call = *ctx->calls.back();
        call.target = &t;
        call.provider_index = pi;
        call.probe = admit == BreakerAdmit::Probe;
        CallerRequest in;
        in.body = ctx->body;
        in.doc = ctx->doc.get();
        in.upstream_model = t.upstream_model;
        in.provider_key = t.provider->key;
        in.method = sv(r->method_name);
        in.path = ctx->passthrough_path;
        in.query = sv(r->args);
        if (r->headers_in.content_type != nullptr) in.content_type = sv(r->headers_in.content_type->value);
        in.form = &ctx->form;
        std::string refusal;
        ngx_int_t rc = call.start(r, in, &refusal);
        if (rc == NGX_OK) {
            ctx->chosen = &call;
            ngx_log_debug6(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "llm_gateway: attempt %ui: provider \"%s\" model \"%s\" (target %uz of %uz%s)",
                           static_cast<ngx_uint_t>(call.attempt), log_value(t.provider->name).c_str(),
                           log_value(t.upstream_model).c_str(), ctx->target_index + 1, targets.size(),
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
        ctx->calls.pop_back();
        if (rc == NGX_HTTP_BAD_REQUEST) {
            return {false, send_error(r, NGX_HTTP_BAD_REQUEST, refusal, "invalid_request_error", "unsupported_parameter")};
        }
        return {false, NGX_HTTP_INTERNAL_SERVER_ERROR};
    }
    if (open_provider != nullptr && ctx->calls.empty()) {
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

// While a wait runs: a client that goes away ends it, with nothing more
// attempted or counted.
void wait_read_handler(ngx_http_request_t* r) {
    if (!client_gone(r)) return;
    RequestCtx* ctx = get_ctx(r);
    if (ctx != nullptr && ctx->retry_timer.timer_set) ngx_del_timer(&ctx->retry_timer);
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "llm_gateway: client closed the connection while a retry was waiting; no further attempt");
    ngx_http_finalize_request(r, NGX_HTTP_CLIENT_CLOSED_REQUEST);
}

ngx_int_t answer(ngx_http_request_t* r, RequestCtx* ctx);

// Launches the next attempt now; answers when there is none.
void attempt_now(ngx_http_request_t* r, RequestCtx* ctx) {
    Launch l = launch(r, ctx);
    if (l.started) return;
    r->write_event_handler = ngx_http_request_empty_handler;
    if (l.rc == NGX_DECLINED) {   // nothing left: the last failure is the answer
        ctx->chosen = ctx->last_failed;
        l.rc = answer(r, ctx);
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
    const auto& targets = ctx->resolved.targets;
    const std::int64_t ra = failed.retry_after.empty() ? -1 : parse_retry_after_ms(failed.retry_after, ngx_time());
    if (ra > kMaxRetryAfterMs) ctx->avoid = failed.provider;   // not waited for, not tried again
    std::int64_t wait = 0;
    if (ra <= kMaxRetryAfterMs && ctx->same_target_retries < static_cast<unsigned>(mcf->retries)) {
        ++ctx->same_target_retries;
        Backoff b;
        b.base_ms = static_cast<std::int64_t>(mcf->backoff_base);
        b.max_ms = static_cast<std::int64_t>(mcf->backoff_max);
        wait = ra >= 0 ? ra : backoff_ms(b, ctx->same_target_retries, uniform01());
    } else {
        ++ctx->target_index;
        ctx->same_target_retries = 0;
        // The next target on the same provider still waits its Retry-After.
        if (ra >= 0 && ra <= kMaxRetryAfterMs && ctx->target_index < targets.size() &&
            targets[ctx->target_index].provider == failed.provider) {
            wait = ra;
        }
    }
    ngx_log_debug6(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm_gateway: provider \"%s\" failed (status %ui%s): %s, wait %L ms%s",
                   log_value(failed.provider->name).c_str(), failed.upstream_status,
                   failed.answered() ? "" : ", no answer",
                   ctx->target_index >= targets.size() ? "no target left, the failure is the answer"
                   : ctx->same_target_retries > 0      ? "retry on the same target"
                                                       : "fail over to the next target",
                   static_cast<long long>(wait), ra >= 0 ? " (its Retry-After)" : "");
    if (ctx->target_index >= targets.size()) return false;
    account_call(r->connection->log, mcf, ctx, failed);   // its attempt and failure
    ctx->last_failed = &failed;
    ctx->chosen = nullptr;   // nothing chosen while waiting: a cancel counts nothing
    if (wait <= 0) {
        Launch l = launch(r, ctx);
        if (l.started) return true;
        ctx->chosen = &failed;
        if (l.rc == NGX_DECLINED) return false;
        r->write_event_handler = ngx_http_request_empty_handler;
        ngx_http_finalize_request(r, l.rc);
        return true;
    }
    ngx_event_t* ev = &ctx->retry_timer;
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

void resume(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr || ctx->chosen == nullptr || calls_running(*ctx)) return;   // woken before the calls ended
    ngx_int_t rc;
    try {
        Call& call = *ctx->chosen;
        // A call drained after its client left (or ended by the drain's
        // bounds) says nothing of the provider's health, fires no event and
        // is not retried: it was read for its usage only.
        if (!ctx->client_left) {
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
                       ctx->head_sent ? "sent" : "not sent", ctx->client_left ? ", client gone" : "");
        r->write_event_handler = ngx_http_request_empty_handler;
        rc = answer(r, ctx);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: relay failed: %s", e.what());
        rc = NGX_ERROR;
    }
    ngx_http_finalize_request(r, rc);
}

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
    if (ctx == nullptr || ctx->allowance.empty() || ctx->allowance_sent) return;
    ctx->allowance_sent = true;
    for (const auto& [name, value] : ctx->allowance) {
        if (add_header(r, name, value) != NGX_OK) return;
    }
}

ngx_int_t main_header_filter(ngx_http_request_t* r) {
    auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module));
    if (lcf == nullptr || lcf->mode == kModeNone || r->err_status < 400) return next_header_filter(r);
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr) ctx = create_ctx(r);
    if (ctx == nullptr || ctx->own_response) return next_header_filter(r);
    Replacement rep = replacement_for(r->err_status);
    ctx->replacement = gateway_error_body(r, r->err_status, rep.message, rep.type, rep.code);
    ctx->replacing = true;
    r->headers_out.content_length_n = static_cast<off_t>(ctx->replacement.size());
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
    if (ctx->replacement_sent) return NGX_OK;
    ctx->replacement_sent = true;
    ngx_buf_t* b = string_buf(r->pool, ctx->replacement, true);
    if (b == nullptr) return NGX_ERROR;
    ngx_chain_t out{b, nullptr};
    return next_body_filter(r, &out);
}

ngx_int_t header_filter(ngx_http_request_t* r) {
    try {
        if (r != r->main) {
            auto* sub = static_cast<SubCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
            if (sub != nullptr) return sub->call->on_header(r);
            return next_header_filter(r);
        }
        add_allowance_headers(r);
        return main_header_filter(r);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: header filter failed: %s", e.what());
        return NGX_ERROR;
    }
}

ngx_int_t body_filter(ngx_http_request_t* r, ngx_chain_t* in) {
    try {
        if (r != r->main) {
            auto* sub = static_cast<SubCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
            if (sub != nullptr) return sub->call->on_body(r, in);
            return next_body_filter(r, in);
        }
        RequestCtx* ctx = static_cast<RequestCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
        if (ctx != nullptr && ctx->replacing) return main_body_filter(r, ctx, in);
        return next_body_filter(r, in);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: body filter failed: %s", e.what());
        return NGX_ERROR;
    }
}

}  // namespace

ngx_int_t init_filters(ngx_conf_t*) {
    next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = header_filter;
    next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = body_filter;
    return NGX_OK;
}

// The request's side of a Call: only the chosen call of a request in
// relay mode reaches the client.
ngx_int_t request_on_stream_head(Call& call) {
    RequestCtx* ctx = call.req;
    if (&call != ctx->chosen || call.mode != Call::Mode::Relay || ctx->head_sent) return NGX_OK;
    ngx_http_request_t* r = call.sr->main;
    const bool sse = call.codec->event_stream();
    if (!set_head(r, call, sse)) return NGX_ERROR;
    // Bytes relayed unchanged keep their length (no chunked framing: the
    // head and a small body leave in one write); anything else is framed.
    r->headers_out.content_length_n = call.codec->relays_bytes() ? call.sr->headers_out.content_length_n : -1;
    if (sse) {
        if (add_header(r, "Cache-Control", "no-cache") != NGX_OK) return NGX_ERROR;
        if (add_header(r, "X-Accel-Buffering", "no") != NGX_OK) return NGX_ERROR;
    }
    ctx->head_sent = true;
    ctx->own_response = true;
#if (NGX_HTTP_V2)
    const bool http1 = r->stream == nullptr;
#else
    const bool http1 = true;
#endif
    if (main_conf(r)->drain_time > 0 && http1) call.sr->read_event_handler = drain_watch_handler;
    return ngx_http_send_header(r);
}

// Sent on behalf of the subrequest: its output reaches the client through
// the postpone filter while it is the active request.
ngx_int_t request_on_stream_bytes(Call& call, std::string_view data) {
    RequestCtx* ctx = call.req;
    if (&call != ctx->chosen || !ctx->head_sent || data.empty()) return NGX_OK;
    ngx_http_request_t* sr = call.sr;
    const bool drains = main_conf(sr)->drain_time > 0;
    if (drains && !ctx->client_left && sr->connection->error) start_drain(sr, ctx);
    if (ctx->client_left) {
        // Read for its usage only, and held to the caller's budget as a
        // client that stayed would be: at the read that crosses it the call
        // is ended, and what came before is billed as if it was relayed.
        if (cutoff_stops(call)) {
            ngx_log_debug0(NGX_LOG_DEBUG_HTTP, sr->connection->log, 0,
                           "llm_gateway: drain: the stream crossed the budget; ending the provider call");
            return NGX_OK;
        }
        cutoff_relayed(call);
        return NGX_OK;
    }
    if (cutoff_stops(call)) return NGX_OK;   // not sent: the stream ends at the budget
    ngx_chain_t* cl = ngx_chain_get_free_buf(sr->pool, &call.free_bufs);
    if (cl == nullptr) return NGX_ERROR;
    ngx_buf_t* b = cl->buf;
    if (b->start == nullptr || static_cast<std::size_t>(b->end - b->start) < data.size()) {
        std::size_t cap = data.size() < 4096 ? 4096 : data.size();
        b->start = static_cast<u_char*>(ngx_palloc(sr->pool, cap));
        if (b->start == nullptr) return NGX_ERROR;
        b->end = b->start + cap;
    }
    b->pos = b->start;
    b->last = ngx_cpymem(b->start, data.data(), data.size());
    b->temporary = 1;
    b->tag = reinterpret_cast<ngx_buf_tag_t>(&ngx_http_llm_gateway_module);
    b->flush = 1;
    ngx_int_t rc = next_body_filter(sr, cl);
    ngx_chain_update_chains(sr->pool, &call.free_bufs, &call.busy_bufs, &cl,
                            reinterpret_cast<ngx_buf_tag_t>(&ngx_http_llm_gateway_module));
    const bool gone = rc == NGX_ERROR && drains && sr->connection->error;   // the write found the client gone
    if (rc != NGX_ERROR || gone) cutoff_relayed(call);   // within the budget: billed as a client that stayed would be
    if (gone) {
        start_drain(sr, ctx);
        return NGX_OK;
    }
    return rc;
}

// Bytes read from the provider for a call: its codec has them all, unless
// its client left and the drain's byte bound is reached.
std::size_t request_on_answer_bytes(Call& call, std::size_t n) {
    RequestCtx* ctx = call.req;
    if (&call != ctx->chosen || !ctx->client_left) return n;
    return drain_take(call, n);
}

ngx_int_t answer_chosen(ngx_http_request_t* r, RequestCtx* ctx) { return answer(r, ctx); }

void release_calls(RequestCtx* ctx) {
    if (ctx->retry_timer.timer_set) ngx_del_timer(&ctx->retry_timer);   // the client left during a retry wait
    if (ngx_event_t* ev = ctx->drain_timer) {
        if (ev->timer_set) ngx_del_timer(ev);
        if (ev->posted) {   // nginx's macro is two statements
            ngx_delete_posted_event(ev);
        }
    }
    cutoff_release(ctx);
    // A probe whose verdict never came (the client left mid-call) is given
    // back, so the next call probes at once.
    Call* c = ctx->chosen;
    if (c != nullptr && c->probe && !c->health_recorded && ctx->mcf != nullptr) {
        c->health_recorded = true;
        health_abandon(ctx->mcf, c->provider_index, true);
    }
}

// The route table row names the API of its provider calls.
CodecKind codec_for(const RequestCtx& ctx) {
    return ctx.route ? ctx.route->codec : CodecKind::None;
}

// The codec of one attempt: the route's API spoken to that provider's type.
std::unique_ptr<Codec> codec_for_attempt(const RequestCtx& ctx, const ProviderConf& p) {
    CodecOptions opt;
    opt.provider = p.type;
    opt.client_stream = ctx.doc && ctx.doc->info().stream;
    opt.client_wants_usage = ctx.doc && ctx.doc->info().client_wants_usage;
    if (ctx.doc) opt.client_model = ctx.doc->info().model;
    return make_codec(codec_for(ctx), opt);
}

// (The access phase answered 501 when no target's type serves the route;
// launch() skips the targets that cannot.)
ngx_int_t start_provider_call(ngx_http_request_t* r, RequestCtx* ctx) {
    if (ctx->resolved.targets.empty()) ctx->resolved.targets.push_back(ctx->resolved);
    Launch l = launch(r, ctx);
    if (!l.started) return l.rc == NGX_DECLINED ? NGX_HTTP_INTERNAL_SERVER_ERROR : l.rc;
    // Hold the request until resume() finalizes it (each subrequest holds a
    // reference of its own, dropped when it ends).
    r->main->count++;
    r->write_event_handler = resume;
    return NGX_DONE;
}

}  // namespace llmgw
