#include "ngx/call/stream_cutoff.h"

#include "ngx/call/accounting.h"
#include "ngx/call/call.h"
#include "ngx/main_conf.h"
#include "ngx/request/ctx.h"
#include "core/log/log_escape.h"

namespace llmgw {
namespace {

// Posted: the provider call is ended as nginx's own time-out would end it
// (not from inside the subrequest's body filter); its end resumes the
// request, which sends the error event and finishes the response.
void cutoff_handler(ngx_event_t* ev) {
    end_chosen_call(ev, nullptr);
}

}  // namespace

bool cutoff_stops(Call& call) {
    RequestCtx* ctx = call.req;
    auto& co = ctx->cutoff;
    if (co.stopped) return true;
    if (!co.active || !call.codec->event_stream()) return false;
    ngx_http_request_t* sr = call.sr;
    MainConf* mcf = main_conf(sr);
    const CodecResult& res = call.outcome();
    const StreamUsage running = stream_usage(res.usage, res.text_bytes, ctx->in.body.size(), answering_price(mcf, *ctx, call));
    std::string_view why;
    if (!crosses(co.remaining, running, &why)) return false;

    const std::string message(why);
    co.stopped = true;
    call.codec->stop(message, "insufficient_quota", "budget_exceeded", call.pending());
    const StreamUsage relayed = stream_usage(co.relayed_usage, co.relayed_text_bytes, ctx->in.body.size(), nullptr);
    ngx_log_error(NGX_LOG_WARN, sr->connection->log, 0, "llm_gateway: stream cut off for user \"%s\": %s (%L tokens relayed)",
                  log_value(ctx->auth.user->name).c_str(), log_text(message).c_str(), static_cast<long long>(relayed.tokens()));
    ngx_http_request_t* r = sr->main;
    ngx_event_t* ev = static_cast<ngx_event_t*>(ngx_pcalloc(r->pool, sizeof(ngx_event_t)));
    if (ev == nullptr) return true;   // the call then runs to its end, its bytes dropped
    co.event = ev;
    ev->handler = cutoff_handler;
    ev->data = r;
    ev->log = r->connection->log;
    ngx_post_event(ev, &ngx_posted_events);
    call.stop_reading();
    return true;
}

void cutoff_relayed(Call& call) {
    auto& co = call.req->cutoff;
    if (!co.active) return;
    co.relayed_text_bytes = call.outcome().text_bytes;
    co.relayed_usage = call.outcome().usage;
}

void cutoff_release(RequestCtx* ctx) {
    ngx_event_t* ev = ctx->cutoff.event;
    if (ev != nullptr && ev->posted) {   // nginx's macro is two statements
        ngx_delete_posted_event(ev);
    }
}

}  // namespace llmgw
