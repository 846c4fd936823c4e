// The request's side of its provider calls: starts them, decides what reaches
// the client (a streamed answer as its codec produces it, a whole answer once
// it is complete and valid, the error envelope otherwise), and the filter
// that routes a subrequest's output to its Call. Retries and failover are in
// failover.cpp; nginx's own error pages in http/error_pages.cpp.
#include <algorithm>

#include "ngx/request/route.h"
#include "ngx/call/relay.h"

#include "core/http/provider_headers.h"
#include "core/log/log_escape.h"
#include "ngx/call/accounting.h"
#include "ngx/call/call.h"
#include "ngx/call/drain.h"
#include "ngx/call/failover.h"
#include "ngx/call/health.h"
#include "ngx/call/stream_cutoff.h"
#include "ngx/http/error_pages.h"
#include "ngx/http/headers.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

namespace {

// The first size of a buffer relaying a stream's bytes to the client.
constexpr std::size_t kRelayBufSize = 512;

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
        ctx->page.own_response = true;
        ngx_int_t rc = ngx_http_send_header(r);
        if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) return rc;
        return finish(r, body);
    }
    case EndState::UpstreamError:
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: provider \"%s\" returned status %ui: %s",
                      provider_name(call).c_str(), call.upstream_status, log_text(res.text).c_str());
        if (!call.retry_after.empty() && add_header(r, "Retry-After", call.retry_after) != NGX_OK) return NGX_ERROR;
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
    Call* call = ctx->attempts.chosen;
    account_request(r->connection->log, main_conf(r), ctx, ctx->drain.client_left);
    if (ctx->drain.client_left) return NGX_HTTP_CLIENT_CLOSED_REQUEST;   // read for its usage only: nobody to answer
    if (call->answered() && ctx->attempts.head_sent) return answer_stream(r, *call);
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

// ------------------------------------------------------ subrequest filter
// A provider subrequest's output goes to its Call (Call::on_header /
// on_body), which relays to the client through request_on_stream_*.

ngx_int_t header_filter(ngx_http_request_t* r) {
    try {
        if (r != r->main) {
            auto* sub = static_cast<SubCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
            if (sub != nullptr) return sub->call->on_header(r);
        }
        return next_header_filter(r);
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
        }
        return next_body_filter(r, in);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: body filter failed: %s", e.what());
        return NGX_ERROR;
    }
}

}  // namespace

// The module's output filters: the subrequests' (here) and, above it, the
// main request's (http/error_pages.cpp). The bytes relayed to the client
// (request_on_stream_bytes) go on below both, as they did through one filter.
ngx_int_t init_filters(ngx_conf_t* cf) {
    next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = header_filter;
    next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = body_filter;
    return init_error_pages(cf);
}

// The request's side of a Call: only the chosen call of a request in
// relay mode reaches the client.
ngx_int_t request_on_stream_head(Call& call) {
    RequestCtx* ctx = call.req;
    if (&call != ctx->attempts.chosen || call.mode != Call::Mode::Relay || ctx->attempts.head_sent) return NGX_OK;
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
    ctx->attempts.head_sent = true;
    ctx->page.own_response = true;
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
    if (&call != ctx->attempts.chosen || !ctx->attempts.head_sent || data.empty()) return NGX_OK;
    ngx_http_request_t* sr = call.sr;
    const bool drains = main_conf(sr)->drain_time > 0;
    if (drains && !ctx->drain.client_left && sr->connection->error) start_drain(sr, ctx);
    if (ctx->drain.client_left) {
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
    const std::size_t had = b->start != nullptr ? static_cast<std::size_t>(b->end - b->start) : 0;
    if (had < data.size()) {
        // Sized for a stream's events (a few hundred bytes each), from the
        // request's pool; a buffer that must grow at least doubles, and the
        // one it replaces goes back when the pool allocated it on its own
        // (ngx_pfree: a large one), so the growths of a stream stay few.
        std::size_t cap = std::max({data.size(), 2 * had, kRelayBufSize});
        if (b->start != nullptr) ngx_pfree(sr->pool, b->start);
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

ngx_int_t request_flush(Call& call) {
    // Down the subrequest's filters with nothing new: the postpone filter
    // passes the client connection's pending bytes on to the write filter.
    return next_body_filter(call.sr, nullptr);
}

// Bytes read from the provider for a call: its codec has them all, unless
// its client left and the drain's byte bound is reached.
std::size_t request_on_answer_bytes(Call& call, std::size_t n) {
    RequestCtx* ctx = call.req;
    if (&call != ctx->attempts.chosen || !ctx->drain.client_left) return n;
    return drain_take(call, n);
}

ngx_int_t answer_chosen(ngx_http_request_t* r, RequestCtx* ctx) { return answer(r, ctx); }

void release_calls(RequestCtx* ctx) {
    if (ctx->attempts.retry_timer.timer_set) ngx_del_timer(&ctx->attempts.retry_timer);   // the client left during a retry wait
    if (ngx_event_t* ev = ctx->drain.timer) {
        if (ev->timer_set) ngx_del_timer(ev);
        if (ev->posted) {   // nginx's macro is two statements
            ngx_delete_posted_event(ev);
        }
    }
    cutoff_release(ctx);
    // A probe whose verdict never came (the client left mid-call) is given
    // back, so the next call probes at once.
    Call* c = ctx->attempts.chosen;
    if (c != nullptr && c->probe && !c->health_recorded && ctx->mcf != nullptr) {
        c->health_recorded = true;
        health_abandon(ctx->mcf, c->provider_index, true);
    }
}

// The route table row names the API of its provider calls.
CodecKind codec_for(const RequestCtx& ctx) {
    return ctx.route ? ctx.route->codec : CodecKind::None;
}

// (The access phase answered 501 when no target's type serves the route;
// launch() skips the targets that cannot.)
ngx_int_t start_provider_call(ngx_http_request_t* r, RequestCtx* ctx) {
    if (ctx->in.resolved.targets.empty()) ctx->in.resolved.targets.push_back(ctx->in.resolved);
    Launch l = launch(r, ctx);
    if (!l.started) return l.rc == NGX_DECLINED ? NGX_HTTP_INTERNAL_SERVER_ERROR : l.rc;
    // Hold the request until resume() finalizes it (each subrequest holds a
    // reference of its own, dropped when it ends).
    r->main->count++;
    r->write_event_handler = resume;
    return NGX_DONE;
}

}  // namespace llmgw
