// A per-target proxy request (docs/mcp.md): one call to the tool server's or
// agent's location with the caller's method, path, query and body (its
// credentials stripped), the answer relayed as it arrives; the target's
// request counted; a 429, a 5xx or no answer recorded in the failure feed.
// An agent card fetched (GET) through the gateway is read whole and its
// service URLs rewritten to the gateway's own path.
#include "ngx/targets/target_proxy.h"

#include "core/log/log_escape.h"
#include "core/targets/agent_card.h"
#include "ngx/call/accounting.h"
#include "ngx/call/call.h"
#include "ngx/call/relay.h"
#include "ngx/http/request_events.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {
namespace {

// A GET of the agent's card. A HEAD of it is relayed as any other request
// (status and headers, no body to rewrite).
bool is_card_request(ngx_http_request_t* r, const RequestCtx& ctx) {
    return ctx.in.target->kind == TargetKind::Agent && r->method == NGX_HTTP_GET &&
           ctx.in.passthrough_path == ctx.in.target->card_path;
}

// "<scheme>://<host>" + the location's prefix + the agent's name: where a
// client reaches the agent through this gateway (the Host nginx validated).
// With llm_gateway_public_url, its value instead of "<scheme>://<host>"
// (behind a load balancer that terminates TLS, the client's connection to
// nginx is not the one its client sees).
std::string gateway_base(ngx_http_request_t* r, const RequestCtx& ctx) {
    auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module));
    std::string base;
    if (lcf->public_url != nullptr) {
        ngx_str_t v = ngx_null_string;
        std::string err;
        if (ngx_http_complex_value(r, lcf->public_url, &v) != NGX_OK) {
            err = "could not be evaluated";
        } else if (!public_base(sv(v), base, err)) {
            base.clear();
        }
        if (!err.empty()) {
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                          "llm_gateway: llm_gateway_public_url \"%s\": %s; the agent card names the connection's "
                          "scheme and Host",
                          log_value(std::string(sv(v))).c_str(), log_text(err).c_str());
        } else {
            ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "llm_gateway: agent card base %s",
                           log_value(base).c_str());
        }
    }
    if (base.empty()) {
        base = r->connection->ssl != nullptr ? "https://" : "http://";
        if (r->headers_in.host != nullptr) {
            base.append(sv(r->headers_in.host->value));
        } else {
            auto* cscf =
                static_cast<ngx_http_core_srv_conf_t*>(ngx_http_get_module_srv_conf(r, ngx_http_core_module));
            base.append(sv(r->headers_in.server.len ? r->headers_in.server : cscf->server_name));
        }
    }
    std::string_view prefix = sv(lcf->prefix);
    base.append(prefix);
    if (prefix.empty() || prefix.back() != '/') base += '/';
    return base + ctx.in.target->name;
}

ngx_int_t answer_card(ngx_http_request_t* r, RequestCtx* ctx, Call& call) {
    if (call.overflowed() != Call::Overflow::None) {   // its reading stopped at the bound
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: agent \"%s\": the agent card is larger than 1 MiB",
                      log_value(ctx->in.target->name).c_str());
        return send_error(r, NGX_HTTP_BAD_GATEWAY, "the agent sent an invalid agent card", "upstream_error",
                          "invalid_agent_card");
    }
    if (!call.answered() || call.outcome().end != EndState::Complete || call.upstream_status != NGX_HTTP_OK) {
        if (call.answered() && call.outcome().end != EndState::Cut && call.outcome().end != EndState::Invalid) {
            ngx_str_t type = pstr(r->pool, call.response_type());
            if (!redact_value(r, type)) return NGX_ERROR;
            return send_body(r, call.upstream_status, sv(type), call.captured());
        }
        return answer_chosen(r, ctx);
    }
    std::string out, err;
    if (!rewrite_agent_card(call.captured(), ctx->in.target->url_path(), gateway_base(r, *ctx), out, err)) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: agent \"%s\": %s",
                      log_value(ctx->in.target->name).c_str(), log_text(err).c_str());
        return send_error(r, NGX_HTTP_BAD_GATEWAY, "the agent sent an invalid agent card", "upstream_error",
                          "invalid_agent_card");
    }
    if (add_header(r, "Cache-Control", "no-store") != NGX_OK) return NGX_ERROR;
    return send_body(r, NGX_HTTP_OK, "application/json", out);
}

void target_resume(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr || ctx->attempts.chosen == nullptr || ctx->attempts.chosen->running()) return;
    ngx_int_t rc;
    try {
        Call& call = *ctx->attempts.chosen;
        if (!call.event_recorded) {
            call.event_recorded = true;
            account_targets(main_conf(r), {ctx->in.target});
            call_event(*ctx, call);
        }
        r->write_event_handler = ngx_http_request_empty_handler;
        rc = call.mode == Call::Mode::Capture ? answer_card(r, ctx, call) : answer_chosen(r, ctx);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: target proxy failed: %s", e.what());
        rc = NGX_ERROR;
    }
    ngx_http_finalize_request(r, rc);
}

}  // namespace

ngx_int_t start_target_call(ngx_http_request_t* r, RequestCtx* ctx) {
    const TargetConf& t = *ctx->in.target;
    std::unique_ptr<Codec> codec = make_codec(CodecKind::Relay, CodecOptions{});
    if (codec == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    const Call::Mode mode = is_card_request(r, *ctx) ? Call::Mode::Capture : Call::Mode::Relay;
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "llm_gateway: target \"%s\": %s", log_value(t.name).c_str(),
                   mode == Call::Mode::Capture ? "agent card fetch, read whole to rewrite" : "relayed as it arrives");
    ctx->attempts.calls.emplace_back(new Call(ctx, &t.upstream, std::move(codec), 1, mode));
    Call& call = *ctx->attempts.calls.back();
    call.capture_limit = kMaxAgentCardBytes;   // Capture: a card is read up to its bound, no further
    CallerRequest in;
    in.body = ctx->in.body;
    in.method = sv(r->method_name);
    in.path = ctx->in.passthrough_path;
    in.query = sv(r->args);
    if (r->headers_in.content_type != nullptr) in.content_type = sv(r->headers_in.content_type->value);
    if (call.start(r, in) != NGX_OK) {
        ctx->attempts.calls.pop_back();
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->attempts.chosen = &call;
    r->main->count++;
    r->write_event_handler = target_resume;
    return NGX_DONE;
}

}  // namespace llmgw
