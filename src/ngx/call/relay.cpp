// The request's side of its provider calls: starts them, decides what reaches
// the client (a streamed answer as its codec produces it, a whole answer once
// it is complete and valid, the error envelope otherwise), and the filters
// that route a subrequest's output to its Call. The same filters turn
// nginx's own HTML error pages in gateway locations into the error envelope.
#include "core/json/envelope.h"
#include "ngx/call/call.h"
#include "ngx/http/headers.h"
#include "ngx/http/routes.h"
#include "ngx/module.h"

namespace llmgw {
namespace {

ngx_http_output_header_filter_pt next_header_filter;
ngx_http_output_body_filter_pt next_body_filter;

// ------------------------------------------------------------ client side

void copy_upstream_headers(ngx_http_request_t* sr, ngx_http_request_t* r, bool sse) {
    static const std::string_view skip[] = {"content-length", "transfer-encoding", "connection", "keep-alive",
                                            "content-type",   "content-encoding",  "server",     "date",
                                            "upgrade",        "proxy-connection",  "te",         "trailer"};
    for_each_header(sr->headers_out.headers, [&](const ngx_table_elt_t& h) {
        if (h.hash == 0) return true;
        for (std::string_view n : skip) {
            if (header_name_is(h.key, n)) return true;
        }
        if (sse && header_name_is(h.key, "cache-control")) return true;   // the gateway sets its own
        auto* copy = static_cast<ngx_table_elt_t*>(ngx_list_push(&r->headers_out.headers));
        if (copy == nullptr) return false;
        *copy = h;
        return true;
    });
}

// The client's head for a successful answer of the call: its status, its
// content type and its end-to-end headers.
void set_head(ngx_http_request_t* r, Call& call, bool sse) {
    ngx_http_request_t* sr = call.sr;
    r->headers_out.status = call.upstream_status;
    r->headers_out.content_type = sr->headers_out.content_type;
    r->headers_out.content_type_len = sr->headers_out.content_type_len;
    r->headers_out.content_type_lowcase = nullptr;
    copy_upstream_headers(sr, r, sse);
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
        set_head(r, call, false);
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
        if (!call.retry_after.empty() && add_header(r, "Retry-After", call.retry_after) != NGX_OK) return NGX_ERROR;
        return send_body(r, static_cast<ngx_uint_t>(res.status), res.content_type, call.pending());
    case EndState::Invalid:
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: provider \"%s\" sent an invalid response: %s",
                      provider_name(call).c_str(), log_text(res.text).c_str());
        return send_body(r, static_cast<ngx_uint_t>(res.status), res.content_type, call.pending());
    default:
        break;
    }
    // Cut short: nothing was sent, and a short 200 must never look complete.
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: provider \"%s\" response ended before completion",
                  provider_name(call).c_str());
    r->keepalive = 0;
    return NGX_ERROR;
}

// A streamed answer whose head went out: its last bytes.
ngx_int_t answer_stream(ngx_http_request_t* r, Call& call) {
    const CodecResult& res = call.outcome();
    const bool sse = !call.codec->spilled();
    switch (res.end) {
    case EndState::Complete:
    case EndState::StreamError:
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
    account_request(r->connection->log, main_conf(r), ctx);
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

void resume(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr || ctx->chosen == nullptr || calls_running(*ctx)) return;   // woken before the calls ended
    r->write_event_handler = ngx_http_request_empty_handler;
    ngx_int_t rc;
    try {
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
    const bool sse = !call.codec->spilled();
    set_head(r, call, sse);
    r->headers_out.content_length_n = -1;
    if (sse) {
        if (add_header(r, "Cache-Control", "no-cache") != NGX_OK) return NGX_ERROR;
        if (add_header(r, "X-Accel-Buffering", "no") != NGX_OK) return NGX_ERROR;
    }
    ctx->head_sent = true;
    ctx->own_response = true;
    return ngx_http_send_header(r);
}

// Sent on behalf of the subrequest: its output reaches the client through
// the postpone filter while it is the active request.
ngx_int_t request_on_stream_bytes(Call& call, std::string_view data) {
    RequestCtx* ctx = call.req;
    if (&call != ctx->chosen || !ctx->head_sent || data.empty()) return NGX_OK;
    ngx_http_request_t* sr = call.sr;
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
    return rc;
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

ngx_int_t start_provider_call(ngx_http_request_t* r, RequestCtx* ctx) {
    const ProviderConf& p = *ctx->resolved.provider;
    const CodecKind api = codec_for(*ctx);
    if (!codec_serves(api, p.type)) {
        return send_error(r, NGX_HTTP_NOT_IMPLEMENTED,
                          std::string("provider \"") + log_value(p.name) + "\" (type " +
                              std::string(provider_type_name(p.type)) + ") does not serve /v1/" + ctx->route->name,
                          "invalid_request_error", "unsupported_endpoint");
    }
    std::unique_ptr<Codec> codec = codec_for_attempt(*ctx, p);
    if (codec == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;

    ctx->calls.emplace_back(new Call(ctx, &p, std::move(codec), static_cast<unsigned>(ctx->calls.size() + 1),
                                     Call::Mode::Relay));
    Call& call = *ctx->calls.back();
    ctx->chosen = &call;   // one attempt: the first call answers
    CallerRequest in;
    in.body = ctx->body;
    in.doc = ctx->doc.get();
    in.upstream_model = ctx->resolved.upstream_model;
    in.provider_key = p.key;
    std::string refusal;
    ngx_int_t rc = call.start(r, in, nullptr, &refusal);
    if (rc != NGX_OK) {
        ctx->chosen = nullptr;
        ctx->calls.pop_back();
        if (rc == NGX_HTTP_BAD_REQUEST) {
            return send_error(r, NGX_HTTP_BAD_REQUEST, refusal, "invalid_request_error", "unsupported_parameter");
        }
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    // Hold the request until resume() finalizes it (the subrequest holds a
    // reference of its own, dropped when it ends).
    r->main->count++;
    r->write_event_handler = resume;
    return NGX_DONE;
}

}  // namespace llmgw
