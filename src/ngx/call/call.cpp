// The upstream Call: starts the subrequest (the caller's credentials and
// hop-by-hop headers never go upstream), feeds what the provider sends through
// its codec, and records how the call ended.
#include "ngx/call/call.h"

#include "ngx/call/cache.h"

#include "ngx/http/auth.h"
#include "ngx/http/headers.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/request/ctx.h"
#include "core/log/log_escape.h"

namespace llmgw {

void CallDeleter::operator()(Call* c) const { delete c; }
namespace {

bool hop_or_body_header(const ngx_table_elt_t& h) {
    static const std::string_view names[] = {
        "content-length", "transfer-encoding", "content-type", "accept-encoding", "expect",
        "connection",     "keep-alive",        "te",           "upgrade",         "host",
        "proxy-connection",
        // Headers some servers take as the host or the path instead of the
        // request's own: the caller cannot steer the call with them.
        "forwarded", "x-forwarded-host", "x-host", "x-original-url", "x-rewrite-url",
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
#if defined(nginx_version) && nginx_version >= 1023000
    h->next = nullptr;
#endif
    return h;
}

// The provider sees the caller's headers minus every credential, upstream
// organisation header and hop-by-hop/body header, plus the codec's headers.
ngx_int_t build_sr_headers(ngx_http_request_t* r, ngx_http_request_t* sr, const UpstreamRequest& up) {
    ngx_http_headers_in_t& hi = sr->headers_in;
    auto replaced = [&](const ngx_table_elt_t& h) {
        if (up.bare_headers) return true;   // the gateway's own request: none of the caller's headers
        for (const auto& kv : up.headers) {
            if (header_name_is(h.key, kv.first)) return true;
        }
        return false;
    };
    auto relayed = [&](const ngx_table_elt_t& h) {
        return !is_credential_header(h) && !hop_or_body_header(h) && !replaced(h);
    };
    // One part of exactly the headers the call sends (the request's pool
    // holds it as long as the request lives); the first 64 headers' verdicts
    // are kept for the copy.
    constexpr ngx_uint_t kKept = 64;
    bool keep[kKept];
    ngx_uint_t n = up.headers.size(), i = 0;
    for_each_header(r->headers_in.headers, [&](const ngx_table_elt_t& h) {
        const bool k = relayed(h);
        if (i < kKept) keep[i] = k;
        ++i;
        n += k ? 1 : 0;
        return true;
    });
    if (ngx_list_init(&hi.headers, r->pool, n > 0 ? n : 1, sizeof(ngx_table_elt_t)) != NGX_OK) return NGX_ERROR;

    bool ok = true;
    i = 0;
    for_each_header(r->headers_in.headers, [&](const ngx_table_elt_t& h) {
        const bool k = i < kKept ? keep[i] : relayed(h);
        ++i;
        if (!k) return true;
        auto* copy = static_cast<ngx_table_elt_t*>(ngx_list_push(&hi.headers));
        if (copy == nullptr) return ok = false;
        *copy = h;
        return true;
    });
    if (!ok) return NGX_ERROR;
    // The copied struct still points at the caller's headers: none of them
    // may reach the upstream module (an Upgrade would turn the call into a tunnel).
    hi.authorization = nullptr;
    hi.content_length = nullptr;
    hi.transfer_encoding = nullptr;
    hi.content_type = nullptr;
    hi.connection = nullptr;
    hi.upgrade = nullptr;
    hi.keep_alive = nullptr;
    hi.te = nullptr;
    hi.expect = nullptr;
#if (NGX_HTTP_GZIP || NGX_HTTP_HEADERS)
    hi.accept_encoding = nullptr;
#endif
    hi.chunked = 0;
    hi.connection_type = 0;
    hi.keep_alive_n = -1;
    hi.content_length_n = -1;   // the body's length comes in the PRECONTENT phase (subrequest_precontent)

    for (const auto& [name, value] : up.headers) {
        ngx_table_elt_t* h = push_header(&hi.headers, r->pool, name, value);
        if (h == nullptr) return NGX_ERROR;
        if (header_name_is(h->key, "content-type")) hi.content_type = h;
        if (header_name_is(h->key, "authorization")) hi.authorization = h;
    }
    return NGX_OK;
}

ngx_uint_t method_code(std::string_view m) {
    static const struct {
        std::string_view name;
        ngx_uint_t code;
    } methods[] = {{"GET", NGX_HTTP_GET},       {"HEAD", NGX_HTTP_HEAD},       {"POST", NGX_HTTP_POST},
                   {"PUT", NGX_HTTP_PUT},       {"DELETE", NGX_HTTP_DELETE},   {"PATCH", NGX_HTTP_PATCH},
                   {"OPTIONS", NGX_HTTP_OPTIONS}};
    for (const auto& e : methods) {
        if (e.name == m) return e.code;
    }
    return NGX_HTTP_UNKNOWN;
}

// A read-only memory buffer over bytes that outlive the subrequest (start
// = pos: nginx rewinds request buffers to start when it retries the call).
ngx_chain_t* view_link(ngx_pool_t* pool, std::string_view bytes) {
    auto* b = static_cast<ngx_buf_t*>(ngx_calloc_buf(pool));
    ngx_chain_t* cl = ngx_alloc_chain_link(pool);
    if (b == nullptr || cl == nullptr) return nullptr;
    auto* p = reinterpret_cast<u_char*>(const_cast<char*>(bytes.data()));
    b->start = b->pos = p;
    b->end = b->last = p + bytes.size();
    b->memory = bytes.empty() ? 0 : 1;   // an empty one is special (it only marks the end)
    cl->buf = b;
    cl->next = nullptr;
    return cl;
}

// The subrequest's body: the codec's bytes (own: held by the Call), or the
// caller's body as received around the codec's splice (views, never a copy
// of the body).
ngx_chain_t* body_chain(ngx_pool_t* pool, const CallerRequest& in, const UpstreamRequest& up, std::string_view own,
                        off_t& total) {
    std::string_view pieces[3];
    if (up.caller_body) {
        const std::size_t at = up.splice_at <= in.body.size() ? up.splice_at : in.body.size();
        const std::size_t len = up.splice_len <= in.body.size() - at ? up.splice_len : in.body.size() - at;
        pieces[0] = in.body.substr(0, at);
        pieces[1] = own;
        pieces[2] = in.body.substr(at + len);
    } else {
        pieces[1] = own;
    }
    ngx_chain_t* head = nullptr;
    ngx_chain_t** next = &head;
    ngx_chain_t* last = nullptr;
    total = 0;
    for (std::string_view piece : pieces) {
        if (piece.empty()) continue;
        ngx_chain_t* cl = view_link(pool, piece);
        if (cl == nullptr) return nullptr;
        *next = last = cl;
        next = &cl->next;
        total += static_cast<off_t>(piece.size());
    }
    if (last == nullptr) {   // no body: one empty buffer that only marks the end
        last = head = view_link(pool, {});
        if (head == nullptr) return nullptr;
    }
    last->buf->last_buf = 1;
    return head;
}

}  // namespace

Call::Call(RequestCtx* r, const ProviderConf* p, std::unique_ptr<Codec> c, unsigned n, Mode m)
    : req(r), provider(p), codec(std::move(c)), attempt(n), mode(m) {}

bool redact_value(ngx_http_request_t* r, ngx_str_t& value) {
    const SecretSet& secrets = main_conf(r)->state->secrets;
    if (secrets.empty() || !secrets.contains(sv(value))) return true;
    ngx_str_t copy = pstr(r->pool, sv(value));
    if (copy.data == nullptr) return false;
    std::size_t n = secrets.mask(reinterpret_cast<char*>(copy.data), copy.len);
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm_gateway: %uz occurrence(s) of a configured secret redacted from an upstream header", n);
    value = copy;
    return true;
}

Call::~Call() {
    if (stop_.timer_set) ngx_del_timer(&stop_);
    if (stop_.posted) {   // nginx's macro is two statements
        ngx_delete_posted_event(&stop_);
    }
}

ngx_int_t Call::start(ngx_http_request_t* r, const CallerRequest& in, std::string* refusal) {
    // Before anything of the answer is read: the gateway's credentials
    // upstream never reach the client, a log line or an event.
    codec->redact(&main_conf(r)->state->secrets);
    UpstreamRequest up;
    std::string err;
    if (!codec->build_request(in, up, err)) {
        if (up.refuse_status == NGX_HTTP_BAD_REQUEST) {
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "llm_gateway: request refused for provider \"%s\": %s",
                          log_value(provider->name).c_str(), log_text(err).c_str());
            if (refusal != nullptr) *refusal = std::move(err);
            return NGX_HTTP_BAD_REQUEST;
        }
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: provider \"%s\" call not started: %s",
                      log_value(provider->name).c_str(), log_text(err).c_str());
        return NGX_ERROR;
    }
    // The path's query (Gemini's ?alt=sse) goes in the subrequest's args:
    // nginx escapes a '?' inside the URI when it proxies it.
    std::string path = provider->location + up.path;
    std::string args;
    if (std::size_t q = path.find('?'); q != std::string::npos) {
        args = path.substr(q + 1);
        path.resize(q);
    }
    ngx_str_t sr_uri = pstr(r->pool, path);
    ngx_str_t sr_args = pstr(r->pool, args);
    auto* ps = static_cast<ngx_http_post_subrequest_t*>(ngx_palloc(r->pool, sizeof(ngx_http_post_subrequest_t)));
    auto* sub = static_cast<SubCtx*>(ngx_palloc(r->pool, sizeof(SubCtx)));
    auto* rb = static_cast<ngx_http_request_body_t*>(ngx_pcalloc(r->pool, sizeof(ngx_http_request_body_t)));
    ngx_str_t method = pstr(r->pool, up.method);
    off_t length = 0;
    body_ = std::move(up.body);   // the views point into it: no copy in the pool
    ngx_chain_t* body = body_chain(r->pool, in, up, body_, length);
    if (!sr_uri.data || (!args.empty() && !sr_args.data) || !ps || !sub || !rb || !method.data || !body) return NGX_ERROR;

    ps->handler = done_handler;
    ps->data = this;
    // Captured calls too go through the filters (bounded there), not in memory.
    ngx_http_request_t* s = nullptr;
    if (ngx_http_subrequest(r, &sr_uri, args.empty() ? nullptr : &sr_args, &s, ps,
                            background ? NGX_HTTP_SUBREQUEST_BACKGROUND : 0) != NGX_OK) {
        return NGX_ERROR;
    }

    rb->bufs = body;
    s->request_body = rb;
    s->method = method_code(up.method);
    s->method_name = method;
    // A bodiless request says nothing about a body (no "Content-Length: 0" on a GET).
    const bool body_method = s->method & (NGX_HTTP_POST | NGX_HTTP_PUT | NGX_HTTP_PATCH);
    if (build_sr_headers(r, s, up) != NGX_OK) return NGX_ERROR;
    sub->body_length = length == 0 && !body_method ? -1 : length;   // set in the PRECONTENT phase

    sub->call = this;
    ngx_http_set_ctx(s, sub, ngx_http_llm_gateway_module);
    sr = s;
    if (!cache_prepare(r, *this, body)) return NGX_ERROR;
    state = State::Running;
    started = ngx_current_msec;
    stop_.handler = stop_handler;
    stop_.data = this;
    stop_.log = r->connection->log;
    if (deadline != 0) {
        const ngx_msec_int_t left = static_cast<ngx_msec_int_t>(deadline - started);
        ngx_add_timer(&stop_, left > 0 ? static_cast<ngx_msec_t>(left) : 1);
    }
    return NGX_OK;
}

ngx_int_t subrequest_precontent(ngx_http_request_t* r) {
    if (r == r->main) return NGX_DECLINED;
    auto* sub = static_cast<SubCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
    if (sub != nullptr) r->headers_in.content_length_n = sub->body_length;
    return NGX_DECLINED;
}

ngx_int_t Call::on_header(ngx_http_request_t* s) {
    // The subrequest's own header is never sent: the request writes the client's.
    s->header_sent = 1;
    ngx_uint_t status = s->headers_out.status;
    const bool no_status_line = s->http_version == NGX_HTTP_VERSION_9;   // nginx read it as HTTP/0.9
    if (no_status_line) status = 0;
    answered_ = true;
    upstream_status = status;
    if (status >= 300) {   // as the client may see it: a configured secret masked
        retry_after = header_value(s->headers_out.headers, "retry-after");
        main_conf(s)->state->secrets.mask(retry_after);
    }
    cache_on_header(*this, s);
    BodyMode m = codec->head(no_status_line ? -1 : static_cast<int>(status), sv(s->headers_out.content_type));
    if (m == BodyMode::Invalid) {
        // Not a final answer (1xx, no status line, a status out of range):
        // stop reading it; nginx closes the upstream connection.
        return NGX_ERROR;
    }
    if (m == BodyMode::Stream && mode == Mode::Relay) {
        if (codec->head_waits_for_bytes()) {
            ngx_log_debug0(NGX_LOG_DEBUG_HTTP, s->connection->log, 0,
                           "llm_gateway: streamed answer: the client's head waits for its first bytes");
            return NGX_OK;
        }
        announced_ = true;
        return request_on_stream_head(*this);
    }
    return NGX_OK;
}

void Call::deliver(std::string& out) {
    if (std::string p = codec->take_problem(); !p.empty()) {
        ngx_log_error(NGX_LOG_ERR, sr->connection->log, 0, "llm_gateway: %s", log_text(p).c_str());
    }
    if (mode == Mode::Capture) {
        if (overflow_ == Overflow::None && captured_.empty() && out.size() <= capture_limit) {
            captured_.swap(out);   // a whole body at its end: taken, not copied
        } else if (overflow_ == Overflow::None && captured_.size() < capture_limit) {
            captured_.append(out, 0, capture_limit - captured_.size());
        }
        out.clear();
    }
}

// Capture mode: n more body bytes, within the call's bound and the shared
// budget? Past either, nothing more is read: the call is ended from a posted
// event (not from inside the upstream's read, which is running now).
bool Call::take(std::size_t n) {
    if (overflow_ != Overflow::None) return false;
    if (n <= capture_limit - received_ && (capture_budget == nullptr || n <= *capture_budget)) {
        received_ += n;
        if (capture_budget != nullptr) *capture_budget -= n;
        return true;
    }
    overflow_ = n > capture_limit - received_ ? Overflow::Call : Overflow::Budget;
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, sr->connection->log, 0,
                   "llm_gateway: call to \"%s\" read %uz bytes, %uz more exceed its %s bound; ending it",
                   log_value(provider->name).c_str(), received_, n,
                   overflow_ == Overflow::Call ? "per-call" : "shared");
    if (stop_.timer_set) ngx_del_timer(&stop_);
    if (!stop_.posted) {   // nginx's macro is an if of its own
        ngx_post_event(&stop_, &ngx_posted_events);
    }
    return false;
}

void Call::stop_handler(ngx_event_t* ev) {
    auto* call = static_cast<Call*>(ev->data);
    ngx_connection_t* c = call->sr->connection;
    try {
        if (ev->timedout) {
            ev->timedout = 0;
            if (call->running()) {
                call->deadline_passed_ = true;
                ngx_log_debug1(NGX_LOG_DEBUG_HTTP, c->log, 0, "llm_gateway: call to \"%s\" reached its deadline; ending it",
                               log_value(call->provider->name).c_str());
            }
        }
        if (call->running()) call->expire(true);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, c->log, 0, "llm_gateway: ending a call failed: %s", log_text(e.what()).c_str());
    }
    ngx_http_run_posted_requests(c);
}

// The pieces of a file nginx hands over are read this large.
constexpr std::size_t kFilePiece = 64 * 1024;
// The subrequest's r->buffered bit while a hit's file waits for the client
// (the four bits are filters' own; none of them runs in a provider location).
constexpr unsigned kFileBuffered = 0x08;

ngx_int_t Call::on_body(ngx_http_request_t* s, ngx_chain_t* in) {
    std::string out;
    if (file_buf_ != nullptr) {
        ngx_int_t rc = read_file(s, out);
        if (rc != NGX_OK) return rc;
    }
    // A cache hit relayed as a stream goes no faster than its client takes
    // it: the buffers nginx read from the cache's file wait here (held_)
    // while the client's connection has bytes it could not send yet, and
    // nginx reads no more of the file meanwhile (its copy filter's buffers
    // stay busy). A live answer is never held: its provider is not paused.
    const bool may_hold = s->cached && mode == Mode::Relay;
    if (may_hold && held_ != nullptr) {
        if (request_flush(*this) == NGX_ERROR) return NGX_ERROR;
        if (ngx_chain_add_copy(s->pool, &held_, in) != NGX_OK) return NGX_ERROR;
        in = held_;
        held_ = nullptr;
        s->buffered &= ~kFileBuffered;
    }
    for (ngx_chain_t* cl = in; cl; cl = cl->next) {
        if (may_hold && announced_ && (s->connection->buffered & NGX_HTTP_LOWLEVEL_BUFFERED)) {
            if (ngx_int_t rc = pass_on(out); rc == NGX_ERROR) return rc;
            // The links of `in` belong to the filter above: held in links of our own.
            if (ngx_chain_add_copy(s->pool, &held_, cl) != NGX_OK) return NGX_ERROR;
            s->buffered |= kFileBuffered;
            ngx_log_debug0(NGX_LOG_DEBUG_HTTP, s->connection->log, 0,
                           "llm_gateway: cache hit: the client is slow; reading of the cached answer waits");
            return NGX_AGAIN;
        }
        ngx_buf_t* b = cl->buf;
        if (b->last_in_chain || b->last_buf) saw_end_ = true;
        // Capture mode: bytes past the bound are neither read nor fed.
        const std::size_t size = ngx_buf_in_memory(b) ? static_cast<std::size_t>(b->last - b->pos)
                                 : b->in_file && b->file_last > b->file_pos
                                     ? static_cast<std::size_t>(b->file_last - b->file_pos)
                                     : 0;
        if (size > 0 && mode == Mode::Capture && !take(size)) {
            if (ngx_buf_in_memory(b)) b->pos = b->last;
            if (b->in_file) b->file_pos = b->file_last;
            continue;
        }
        if (ngx_buf_in_memory(b)) {
            std::string_view bytes(reinterpret_cast<const char*>(b->pos), static_cast<std::size_t>(b->last - b->pos));
            b->pos = b->last;
            if (b->in_file) b->file_pos = b->file_last;
            feed(bytes, out);
            if (may_hold) {
                if (ngx_int_t rc = pass_on(out); rc == NGX_ERROR) return rc;
            }
        } else if (b->in_file && b->file_last > b->file_pos) {
            // proxy_buffering on (or an answer being stored): the body went
            // to a temporary file; a cache hit with sendfile on: the cache's file.
            if (ngx_int_t rc = pass_on(out); rc == NGX_ERROR) return rc;
            file_buf_ = b;
            ngx_int_t rc = read_file(s, out);
            if (rc != NGX_OK) return rc;
        }
    }
    return pass_on(out);
}

// A file's bytes from file_buf_, a piece at a time, each fed and passed on.
// A cache hit relayed as a stream stops when the client's connection has
// more than it sent (NGX_AGAIN, the subrequest marked buffered): nginx
// calls the filters again when the client can take more (ngx_http_writer).
ngx_int_t Call::read_file(ngx_http_request_t* s, std::string& out) {
    ngx_buf_t* b = file_buf_;
    std::string piece;
    const bool may_wait = s->cached && mode == Mode::Relay;
    while (b->file_pos < b->file_last) {
        piece.resize(static_cast<std::size_t>(std::min<off_t>(b->file_last - b->file_pos, kFilePiece)));
        ssize_t n = ngx_read_file(b->file, reinterpret_cast<u_char*>(&piece[0]), piece.size(), b->file_pos);
        if (n != static_cast<ssize_t>(piece.size())) {
            file_buf_ = nullptr;
            s->buffered &= ~kFileBuffered;
            return NGX_ERROR;
        }
        b->file_pos += n;
        feed(piece, out);
        const ngx_int_t rc = pass_on(out);
        if (rc == NGX_ERROR) {
            file_buf_ = nullptr;
            s->buffered &= ~kFileBuffered;
            return rc;
        }
        if (rc == NGX_AGAIN && may_wait && b->file_pos < b->file_last) {
            ngx_log_debug2(NGX_LOG_DEBUG_HTTP, s->connection->log, 0,
                           "llm_gateway: cache hit: the client is slow; %O of %O bytes read, waiting",
                           b->file_pos, b->file_last);
            s->buffered |= kFileBuffered;
            return NGX_AGAIN;
        }
    }
    file_buf_ = nullptr;
    s->buffered &= ~kFileBuffered;
    return NGX_OK;
}

// Bytes of the answer as nginx read them: the cache's tool-call watch sees
// them all, the codec those the drain's bound leaves it.
void Call::feed(std::string_view bytes, std::string& out) {
    cache_on_bytes(*this, bytes);
    if (!bytes.empty() && mode == Mode::Relay) bytes = bytes.substr(0, request_on_answer_bytes(*this, bytes.size()));
    if (!bytes.empty()) codec->feed(bytes, out);
}

// What the codec produced goes to the request: captured, or relayed when
// the answer streams (a whole answer waits for its end, in on_done).
ngx_int_t Call::pass_on(std::string& out) {
    deliver(out);
    if (mode == Mode::Relay && codec->mode() == BodyMode::Stream && !out.empty()) {
        // A whole answer too big to hold (relayed from here on), or the
        // first bytes of an answer whose head waited for them.
        if (!announced_) {
            announced_ = true;
            if (request_on_stream_head(*this) == NGX_ERROR) return NGX_ERROR;
        }
        ngx_int_t rc = request_on_stream_bytes(*this, out);
        out.clear();
        return rc;
    }
    return NGX_OK;
}

std::string Call::response_header(std::string_view name) const {
    return answered_ && sr != nullptr ? header_value(sr->headers_out.headers, name) : std::string();
}

std::string_view Call::response_type() const {
    return answered_ && sr != nullptr ? sv(sr->headers_out.content_type) : std::string_view();
}

void Call::expire(bool planned) {
    if (state != State::Running || sr == nullptr || sr->upstream == nullptr) return;
    ngx_connection_t* pc = sr->upstream->peer.connection;
    if (pc == nullptr) return;
    // ngx_connection_error's level for the time-out of an answer begun
    // (before the header, ngx_http_upstream_next logs at error regardless).
    if (planned) pc->log_error = NGX_ERROR_INFO;
    // As nginx's timer would: the upstream module ends the call with 504.
    ngx_event_t* ev = pc->read;
    if (ev->timer_set) ngx_del_timer(ev);
    if (pc->write->timer_set) ngx_del_timer(pc->write);
    ev->timedout = 1;
    ev->handler(ev);
}

void Call::stop_reading() {
    if (state != State::Running || sr == nullptr || sr->upstream == nullptr) return;
    ngx_connection_t* pc = sr->upstream->peer.connection;
    // The upstream module's read loops (buffered or not) stop at a read
    // event that is not ready; the posted end runs in this same turn.
    if (pc != nullptr) pc->read->ready = 0;
}

void end_chosen_call(ngx_event_t* ev, void (*before)(ngx_http_request_t* r, RequestCtx* ctx)) {
    auto* r = static_cast<ngx_http_request_t*>(ev->data);
    ngx_connection_t* c = r->connection;
    try {
        RequestCtx* ctx = get_ctx(r);
        if (ctx != nullptr && ctx->attempts.chosen != nullptr && ctx->attempts.chosen->running()) {
            if (before != nullptr) before(r, ctx);
            ctx->attempts.chosen->expire(true);
        }
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, c->log, 0, "llm_gateway: ending a provider call failed: %s", log_text(e.what()).c_str());
    }
    ngx_http_run_posted_requests(c);
}

ngx_int_t Call::done_handler(ngx_http_request_t*, void* data, ngx_int_t rc) {
    auto* call = static_cast<Call*>(data);
    // A cache hit that waits for its client: nginx finalizes the subrequest
    // again once the filters have it all (ngx_http_writer).
    if ((call->file_buf_ != nullptr || call->held_ != nullptr) && rc == NGX_AGAIN) return rc;
    try {
        return call->on_done(rc);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "llm_gateway: provider call end failed: %s", e.what());
        call->state = State::Done;
        return NGX_OK;
    }
}

ngx_int_t Call::on_done(ngx_int_t rc) {
    if (state == State::Done) return NGX_OK;
    state = State::Done;
    if (file_buf_ != nullptr || held_ != nullptr) {   // the client went before it had a whole hit
        file_buf_ = nullptr;
        held_ = nullptr;
        sr->buffered &= ~kFileBuffered;
    }
    ended = ngx_current_msec;
    if (stop_.timer_set) ngx_del_timer(&stop_);
    sr_rc = rc;
    if (answered_) {
        // nginx finalizes a call whose body framing broke (invalid chunked
        // encoding) with NGX_ERROR; one cut short by the upstream (closed,
        // reset, timed out) after a flush, with NGX_OK. (One whose client
        // went away, with 499, terminates the request: nothing reads it.)
        BodyEnd how = saw_end_ ? BodyEnd::Clean : rc == NGX_ERROR ? BodyEnd::Invalid : BodyEnd::Cut;
        codec->finish(how, pending_);
        deliver(pending_);
        if (const std::size_t n = codec->result().redacted; n > 0) {
            ngx_log_error(NGX_LOG_INFO, sr->connection->log, 0,
                          "llm_gateway: %uz occurrence(s) of a configured secret redacted from the answer of \"%s\"", n,
                          log_value(provider->name).c_str());
        }
    } else if (rc != NGX_HTTP_GATEWAY_TIME_OUT && sr->upstream != nullptr && sr->upstream->state != nullptr &&
               sr->upstream->state->bytes_received > 0) {
        garbled_head_ = true;   // bytes came, but never a complete response header
    }
    if (on_end != nullptr) on_end(*this, end_data);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE || rc == NGX_ERROR) return NGX_OK;   // no nginx error page: the request answers
    return rc;
}

}  // namespace llmgw
