// Provider calls as nginx subrequests, and the filters that relay their
// responses: SSE streams event by event (usage chunk suppressed for clients
// that did not ask for it), JSON bodies as they arrive (a copy kept for the
// usage), upstream errors in a documented form. The same filters turn
// nginx's own HTML error pages in gateway locations into the error envelope.
#include "core/json/envelope.h"
#include "ngx/http/headers.h"
#include "ngx/module.h"

namespace llmgw {
namespace {

ngx_http_output_header_filter_pt next_header_filter;
ngx_http_output_body_filter_pt next_body_filter;

constexpr std::size_t kCaptureLimit = 16 * 1024 * 1024;   // non-stream body copy kept for usage
constexpr std::size_t kErrorCaptureLimit = 64 * 1024;

// sr->ctx[module]: which main-request context a provider subrequest feeds.
struct SubCtx {
    RequestCtx* ctx;
};

// ---------------------------------------------------------------- subrequest

bool hop_or_body_header(const ngx_table_elt_t& h) {
    static const std::string_view names[] = {
        "content-length", "transfer-encoding", "content-type", "accept-encoding", "expect",
        "connection",     "keep-alive",        "te",           "upgrade",         "host",
    };
    for (std::string_view n : names) {
        if (header_name_is(h.key, n)) return true;
    }
    return false;
}

ngx_table_elt_t* push_header(ngx_list_t* list, ngx_pool_t* pool, std::string_view name, std::string_view value) {
    auto* h = static_cast<ngx_table_elt_t*>(ngx_list_push(list));
    if (h == nullptr) return nullptr;
    h->key = pstr(pool, name);
    h->value = pstr(pool, value);
    h->lowcase_key = static_cast<u_char*>(ngx_pnalloc(pool, name.size() ? name.size() : 1));
    if (h->key.data == nullptr || h->value.data == nullptr || h->lowcase_key == nullptr) return nullptr;
    ngx_strlow(h->lowcase_key, h->key.data, h->key.len);
    h->hash = ngx_hash_key(h->lowcase_key, h->key.len);
    return h;
}

// The provider sees the caller's headers minus every credential, upstream
// organisation header and hop-by-hop/body header, plus its own credential.
ngx_int_t build_sr_headers(ngx_http_request_t* r, ngx_http_request_t* sr, const ProviderConf& p, std::size_t len) {
    ngx_http_headers_in_t& hi = sr->headers_in;
    if (ngx_list_init(&hi.headers, r->pool, 16, sizeof(ngx_table_elt_t)) != NGX_OK) return NGX_ERROR;

    bool ok = true;
    for_each_header(r->headers_in.headers, [&](const ngx_table_elt_t& h) {
        if (is_credential_header(h) || hop_or_body_header(h)) return true;
        auto* copy = static_cast<ngx_table_elt_t*>(ngx_list_push(&hi.headers));
        if (copy == nullptr) return ok = false;
        *copy = h;
        return true;
    });
    if (!ok) return NGX_ERROR;
    hi.authorization = nullptr;
    hi.content_length = nullptr;
    hi.transfer_encoding = nullptr;
    hi.content_type = nullptr;
#if (NGX_HTTP_GZIP || NGX_HTTP_HEADERS)
    hi.accept_encoding = nullptr;
#endif
    hi.chunked = 0;
    hi.content_length_n = static_cast<off_t>(len);

    hi.content_type = push_header(&hi.headers, r->pool, "Content-Type", "application/json");
    if (hi.content_type == nullptr) return NGX_ERROR;
    if (!p.key.empty()) {
        hi.authorization = push_header(&hi.headers, r->pool, "Authorization", "Bearer " + p.key);
        if (hi.authorization == nullptr) return NGX_ERROR;
    }
    return NGX_OK;
}

void resume(ngx_http_request_t* r);

ngx_int_t subrequest_done(ngx_http_request_t* sr, void* data, ngx_int_t rc) {
    auto* ctx = static_cast<RequestCtx*>(data);
    ctx->sr_done = true;
    ctx->sr_rc = rc;
    if (ctx->relay == RequestCtx::Relay::Pending) {
        // No response reached the filters: nginx itself failed the call
        // (connect error, timeout). Answer with the envelope, not its page.
        ctx->relay = RequestCtx::Relay::NoResponse;
        ctx->upstream_status = (rc == NGX_HTTP_GATEWAY_TIME_OUT) ? NGX_HTTP_GATEWAY_TIME_OUT : NGX_HTTP_BAD_GATEWAY;
    }
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE || rc == NGX_ERROR) {
        if (rc == NGX_HTTP_GATEWAY_TIME_OUT && ctx->relay == RequestCtx::Relay::NoResponse) {
            ctx->upstream_status = NGX_HTTP_GATEWAY_TIME_OUT;
        }
        return NGX_OK;   // the parent answers; no nginx error page for the subrequest
    }
    (void)sr;
    return rc;
}

// ------------------------------------------------------------ output helpers

ngx_buf_t* take_buf(ngx_http_request_t* r, RequestCtx* ctx, std::size_t size) {
    ngx_chain_t* cl = ngx_chain_get_free_buf(r->pool, &ctx->free_bufs);
    if (cl == nullptr) return nullptr;
    ngx_buf_t* b = cl->buf;
    if (b->start == nullptr || static_cast<std::size_t>(b->end - b->start) < size) {
        std::size_t cap = size < 4096 ? 4096 : size;
        b->start = static_cast<u_char*>(ngx_palloc(r->pool, cap));
        if (b->start == nullptr) return nullptr;
        b->end = b->start + cap;
    }
    b->pos = b->start;
    b->last = b->start;
    b->temporary = 1;
    b->tag = reinterpret_cast<ngx_buf_tag_t>(&ngx_http_llm_gateway_module);
    b->flush = 1;
    return b;
}

// Sends data on behalf of a subrequest (its output reaches the client through
// the postpone filter while it is the active request).
ngx_int_t emit(ngx_http_request_t* sr, RequestCtx* ctx, std::string_view data) {
    ngx_chain_t* out = nullptr;
    if (!data.empty()) {
        ngx_buf_t* b = take_buf(sr, ctx, data.size());
        if (b == nullptr) return NGX_ERROR;
        b->last = ngx_cpymem(b->pos, data.data(), data.size());
        out = ngx_alloc_chain_link(sr->pool);
        if (out == nullptr) return NGX_ERROR;
        out->buf = b;
        out->next = nullptr;
    }
    ngx_int_t rc = next_body_filter(sr, out);
    ngx_chain_update_chains(sr->pool, &ctx->free_bufs, &ctx->busy_bufs, &out,
                            reinterpret_cast<ngx_buf_tag_t>(&ngx_http_llm_gateway_module));
    return rc;
}

void copy_upstream_headers(ngx_http_request_t* sr, ngx_http_request_t* r, bool sse) {
    static const std::string_view skip[] = {"content-length", "transfer-encoding", "connection", "keep-alive",
                                            "content-type",   "content-encoding",  "server",     "date"};
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

std::string find_header(ngx_http_request_t* sr, std::string_view name) {
    std::string value;
    for_each_header(sr->headers_out.headers, [&](const ngx_table_elt_t& h) {
        if (h.hash == 0 || !header_name_is(h.key, name)) return true;
        value.assign(sv(h.value));
        return false;
    });
    return value;
}

// ------------------------------------------------------------ subrequest side

ngx_int_t sr_header_filter(ngx_http_request_t* sr, RequestCtx* ctx) {
    ngx_http_request_t* r = sr->main;
    ngx_uint_t status = sr->headers_out.status;
    sr->header_sent = 1;
    ctx->upstream_status = status;
    if (status < 200 || status >= 300) {
        ctx->relay = RequestCtx::Relay::UpstreamError;
        ctx->retry_after = find_header(sr, "retry-after");
        return NGX_OK;
    }
    bool sse = starts_with_ci(sr->headers_out.content_type, "text/event-stream");
    ctx->relay = (sse && ctx->doc->info().stream) ? RequestCtx::Relay::Sse : RequestCtx::Relay::Pass;

    r->headers_out.status = status;
    r->headers_out.content_type = sr->headers_out.content_type;
    r->headers_out.content_type_len = sr->headers_out.content_type_len;
    r->headers_out.content_type_lowcase = nullptr;
    copy_upstream_headers(sr, r, ctx->relay == RequestCtx::Relay::Sse);
    if (ctx->relay == RequestCtx::Relay::Sse) {
        r->headers_out.content_length_n = -1;
        if (add_header(r, "Cache-Control", "no-cache") != NGX_OK) return NGX_ERROR;
        if (add_header(r, "X-Accel-Buffering", "no") != NGX_OK) return NGX_ERROR;
    } else {
        r->headers_out.content_length_n = sr->headers_out.content_length_n;
    }
    ctx->own_response = true;
    return ngx_http_send_header(r);
}

ngx_int_t relay_sse(ngx_http_request_t* sr, RequestCtx* ctx, std::string_view bytes) {
    ctx->events.clear();
    if (!ctx->sse.feed(bytes, ctx->events)) {
        ngx_log_error(NGX_LOG_ERR, sr->connection->log, 0, "llm_gateway: upstream SSE event too large");
        ctx->stream_broken = true;
        return NGX_OK;
    }
    std::string out;
    for (const SseEvent& ev : ctx->events) {
        if (!ev.data.empty()) {
            Usage u;
            ChunkKind kind = inspect_stream_chunk(ev.data, u);
            if (u.present) ctx->usage = u;
            if (kind == ChunkKind::Done) ctx->saw_done_event = true;
            if (kind == ChunkKind::Error) ctx->stream_error_event = true;
            if (kind == ChunkKind::UsageOnly && !ctx->doc->info().client_wants_usage) continue;
        }
        out += sse_serialize(ev);
    }
    if (out.empty()) return NGX_OK;
    return emit(sr, ctx, out);
}

ngx_int_t sr_body_filter(ngx_http_request_t* sr, RequestCtx* ctx, ngx_chain_t* in) {
    ngx_int_t rc = NGX_OK;
    bool pass = ctx->relay == RequestCtx::Relay::Pass;
    for (ngx_chain_t* cl = in; cl; cl = cl->next) {
        ngx_buf_t* b = cl->buf;
        if (b->last_in_chain || b->last_buf) ctx->saw_end = true;
        if (!ngx_buf_in_memory(b)) {
            if (!pass) b->file_pos = b->file_last;
            continue;
        }
        std::string_view bytes(reinterpret_cast<const char*>(b->pos), static_cast<std::size_t>(b->last - b->pos));
        switch (ctx->relay) {
        case RequestCtx::Relay::Sse:
            b->pos = b->last;
            if (!bytes.empty() && relay_sse(sr, ctx, bytes) == NGX_ERROR) rc = NGX_ERROR;
            break;
        case RequestCtx::Relay::Pass:
            if (ctx->captured.size() + bytes.size() <= kCaptureLimit) {
                ctx->captured.append(bytes);
            } else {
                ctx->captured_overflow = true;
            }
            break;
        case RequestCtx::Relay::UpstreamError:
            if (ctx->captured.size() < kErrorCaptureLimit) {
                ctx->captured.append(bytes.substr(0, kErrorCaptureLimit - ctx->captured.size()));
            }
            b->pos = b->last;
            break;
        default:
            b->pos = b->last;
            break;
        }
    }
    if (pass) return next_body_filter(sr, in);
    return rc;
}

// ------------------------------------------------------------ main-request side

// The end of the client's response, after what the provider sent.
ngx_int_t finish(ngx_http_request_t* r, std::string_view tail) {
    ngx_buf_t* b = string_buf(r->pool, tail, true);
    if (b == nullptr) return NGX_ERROR;
    ngx_chain_t out{b, nullptr};
    return ngx_http_output_filter(r, &out);
}

ngx_int_t answer_upstream_error(ngx_http_request_t* r, RequestCtx* ctx) {
    ngx_uint_t status = ctx->upstream_status;
    const std::string text = upstream_error_text(ctx->captured);   // scrubbed
    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: provider \"%s\" returned status %ui: %s",
                  log_value(ctx->resolved.provider->name).c_str(), status, log_text(text).c_str());
    if (!ctx->retry_after.empty() && add_header(r, "Retry-After", ctx->retry_after) != NGX_OK) return NGX_ERROR;
    if (Usage dummy; inspect_stream_chunk(ctx->captured, dummy) == ChunkKind::Error) {
        return send_json(r, status, ctx->captured);   // already an OpenAI-style error object
    }
    std::string msg = "upstream returned status " + std::to_string(status) + ": " + text;
    return send_error(r, status, msg, "upstream_error", "upstream_error");
}

ngx_int_t answer(ngx_http_request_t* r, RequestCtx* ctx) {
    switch (ctx->relay) {
    case RequestCtx::Relay::Sse: {
        bool complete = ctx->saw_end && ctx->saw_done_event && !ctx->sse.has_partial() && !ctx->stream_broken;
        account_request(r->connection->log, main_conf(r), ctx);
        if (complete || ctx->stream_error_event) return finish(r, {});
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm_gateway: provider \"%s\" stream ended before completion",
                      log_value(ctx->resolved.provider->name).c_str());
        return finish(r, error_sse_event("the upstream stream ended before completion", "upstream_error",
                                              "stream_interrupted"));
    }
    case RequestCtx::Relay::Pass:
        if (!ctx->captured_overflow) ctx->usage = usage_from_response(ctx->captured);
        account_request(r->connection->log, main_conf(r), ctx);
        if (!ctx->saw_end) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "llm_gateway: provider \"%s\" response ended before completion",
                          log_value(ctx->resolved.provider->name).c_str());
            r->keepalive = 0;
            return NGX_ERROR;   // close: the client sees an incomplete response, not a short 200
        }
        return finish(r, {});
    case RequestCtx::Relay::UpstreamError:
        account_request(r->connection->log, main_conf(r), ctx);
        return answer_upstream_error(r, ctx);
    case RequestCtx::Relay::NoResponse:
    case RequestCtx::Relay::Pending:
        break;
    }
    account_request(r->connection->log, main_conf(r), ctx);
    bool timeout = ctx->upstream_status == NGX_HTTP_GATEWAY_TIME_OUT;
    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: provider \"%s\" %s",
                  log_value(ctx->resolved.provider->name).c_str(), timeout ? "timed out" : "gave no response");
    if (timeout) {
        return send_error(r, NGX_HTTP_GATEWAY_TIME_OUT, "the upstream provider timed out", "upstream_error",
                          "upstream_timeout");
    }
    return send_error(r, NGX_HTTP_BAD_GATEWAY, "the upstream provider could not be reached", "upstream_error",
                      "bad_gateway");
}

void resume(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr || !ctx->sr_done) return;   // woken before the provider call ended
    r->write_event_handler = ngx_http_request_empty_handler;
    ngx_int_t rc;
    try {
        rc = answer(r, ctx);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: relay failed: %s", log_text(e.what()).c_str());
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
    ctx->replacement = error_json(rep.message, rep.type, rep.code);
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
            if (sub != nullptr) return sr_header_filter(r, sub->ctx);
            return next_header_filter(r);
        }
        return main_header_filter(r);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: header filter failed: %s", log_text(e.what()).c_str());
        return NGX_ERROR;
    }
}

ngx_int_t body_filter(ngx_http_request_t* r, ngx_chain_t* in) {
    try {
        if (r != r->main) {
            auto* sub = static_cast<SubCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
            if (sub != nullptr) return sr_body_filter(r, sub->ctx, in);
            return next_body_filter(r, in);
        }
        RequestCtx* ctx = static_cast<RequestCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
        if (ctx != nullptr && ctx->replacing) return main_body_filter(r, ctx, in);
        return next_body_filter(r, in);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: body filter failed: %s", log_text(e.what()).c_str());
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

ngx_int_t start_provider_call(ngx_http_request_t* r, RequestCtx* ctx) {
    const ProviderConf& p = *ctx->resolved.provider;
    std::string uri = p.location + (ctx->route == Route::Embeddings ? "/embeddings" : "/chat/completions");
    ngx_str_t sr_uri = pstr(r->pool, uri);
    auto* ps = static_cast<ngx_http_post_subrequest_t*>(ngx_palloc(r->pool, sizeof(ngx_http_post_subrequest_t)));
    auto* sub = static_cast<SubCtx*>(ngx_palloc(r->pool, sizeof(SubCtx)));
    auto* rb = static_cast<ngx_http_request_body_t*>(ngx_pcalloc(r->pool, sizeof(ngx_http_request_body_t)));
    ngx_str_t body = pstr(r->pool, ctx->upstream_body);
    ngx_buf_t* b = static_cast<ngx_buf_t*>(ngx_calloc_buf(r->pool));
    ngx_chain_t* cl = ngx_alloc_chain_link(r->pool);
    if (!sr_uri.data || !ps || !sub || !rb || !body.data || !b || !cl) return NGX_HTTP_INTERNAL_SERVER_ERROR;

    ps->handler = subrequest_done;
    ps->data = ctx;
    ngx_http_request_t* sr = nullptr;
    if (ngx_http_subrequest(r, &sr_uri, nullptr, &sr, ps, 0) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;

    b->pos = body.data;
    b->last = body.data + body.len;
    b->memory = 1;
    b->last_buf = 1;
    cl->buf = b;
    cl->next = nullptr;
    rb->bufs = cl;
    sr->request_body = rb;
    sr->method = NGX_HTTP_POST;
    ngx_str_set(&sr->method_name, "POST");
    if (build_sr_headers(r, sr, p, body.len) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;

    sub->ctx = ctx;
    ngx_http_set_ctx(sr, sub, ngx_http_llm_gateway_module);
    ctx->sr = sr;

    // Hold the request until resume() finalizes it (the subrequest holds a
    // reference of its own, dropped when it ends).
    r->main->count++;
    r->write_event_handler = resume;
    return NGX_DONE;
}

}  // namespace llmgw
