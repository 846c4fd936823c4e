// A client that goes away mid-stream no longer ends the provider call at
// once: the answer is read on (and dropped) until it ends, so its final
// usage is billed, within llm_gateway_cancel_drain's time and bytes; past
// them the call is ended as nginx's own time-out would, and the usage seen
// so far (or the estimate) is billed.
#include "ngx/call/drain.h"

#include "ngx/call/call.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

bool client_gone(ngx_http_request_t* r) {
#if (NGX_HTTP_V2)
    if (r->stream != nullptr) return false;
#endif
    ngx_connection_t* c = r->connection;
    if (c->error) return true;
#if (NGX_HAVE_EPOLLRDHUP)
    if ((ngx_event_flags & NGX_USE_EPOLL_EVENT) && ngx_use_epoll_rdhup && c->read->pending_eof) return true;
#endif
    u_char buf;
    ssize_t n = recv(c->fd, &buf, 1, MSG_PEEK);
    if (n == 0) return true;
    return n == -1 && ngx_socket_errno != NGX_EAGAIN;
}

namespace {

void log_drain_bound(ngx_http_request_t* r, RequestCtx* ctx) {
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "llm_gateway: the drain of a cancelled stream reached its bound (%uz bytes read); closing the "
                  "provider's answer",
                  ctx->drain.bytes);
}

void drain_timer_handler(ngx_event_t* ev) {
    end_chosen_call(ev, log_drain_bound);
}

}  // namespace

void start_drain(ngx_http_request_t* r, RequestCtx* ctx) {
    if (ctx->drain.client_left) return;
    ctx->drain.client_left = true;
    MainConf* mcf = main_conf(r);
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "llm_gateway: client closed the connection mid-stream; reading the provider's answer for its usage "
                  "(at most %M ms, %uz bytes)",
                  mcf->drain_time, mcf->drain_size);
    ngx_event_t* ev = static_cast<ngx_event_t*>(ngx_pcalloc(r->main->pool, sizeof(ngx_event_t)));
    if (ev == nullptr) return;   // unbounded by time then; the byte bound and proxy_read_timeout still hold
    ctx->drain.timer = ev;
    ev->handler = drain_timer_handler;
    ev->data = r->main;
    ev->log = r->connection->log;
    ngx_add_timer(ev, mcf->drain_time);
}

// The subrequest's read handler while its answer streams (instead of the
// upstream module's, which would end the call when the client goes away).
void drain_watch_handler(ngx_http_request_t* s) {
    RequestCtx* ctx = get_ctx(s);
    if (ctx == nullptr || ctx->drain.client_left || !client_gone(s)) return;
    ngx_connection_t* c = s->connection;
    if ((ngx_event_flags & NGX_USE_LEVEL_EVENT) && c->read->active) ngx_del_event(c->read, NGX_READ_EVENT, 0);
    start_drain(s, ctx);
}

// Bytes read from the provider after the client left, counted against the
// bound as they come off the connection: what the client would have got
// (translated, hidden, or nothing at all for a ping) does not matter, and
// nothing past the bound reaches the codec, however much one turn of the
// event loop reads.
std::size_t drain_take(Call& call, std::size_t n) {
    RequestCtx* ctx = call.req;
    ngx_http_request_t* s = call.sr;
    const std::size_t bound = main_conf(s)->drain_size;
    const std::size_t left = ctx->drain.bytes < bound ? bound - ctx->drain.bytes : 0;
    const std::size_t take = n < left ? n : left;
    ctx->drain.bytes += take;
    if (take < n) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, s->connection->log, 0,
                       "llm_gateway: drain: %uz bytes past the bound of %uz dropped unread", n - take, bound);
    }
    if (left == 0 || ctx->drain.bytes < bound) return take;
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, s->connection->log, 0,
                   "llm_gateway: drain: %uz bytes read, the bound; ending the provider call", ctx->drain.bytes);
    ngx_event_t* ev = ctx->drain.timer;
    if (ev == nullptr) return take;   // no event to end it: it runs to its end, its bytes dropped
    if (ev->timer_set) ngx_del_timer(ev);
    ngx_post_event(ev, &ngx_posted_events);   // not from inside the upstream's own read
    call.stop_reading();
    return take;
}

}  // namespace llmgw
