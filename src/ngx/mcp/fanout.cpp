// The backend ops of a /mcp request (see fanout.h).
#include "ngx/mcp/fanout.h"

#include <rapidjson/document.h>

#include "core/json/writer.h"
#include "ngx/call/accounting.h"
#include "ngx/call/call.h"
#include "ngx/http/request_events.h"
#include "ngx/main_conf.h"
#include "ngx/request/ctx.h"
#include "core/log/log_escape.h"

namespace llmgw {

void FederationDeleter::operator()(Federation* f) const { delete f; }

Federation::~Federation() {
    for (auto& op : ops) {
        if (op->timer.timer_set) ngx_del_timer(&op->timer);
    }
}

namespace {

constexpr const char* kRoute = "mcp-federated";

void on_call_end(Call& call, void* data);

// A list (tools/list, prompts/list…) has list_timeout=, the rest call_timeout=.
bool is_list(const std::string& method) {
    return method.size() > 5 && method.compare(method.size() - 5, 5, "/list") == 0;
}

ngx_msec_t timeout_of(const BackendOp& op) {
    return is_list(op.method) ? op.fed->ep->list_timeout : op.fed->ep->call_timeout;
}

// The protocolVersion of an initialize result ("" when none).
std::string protocol_of(const std::string& result_json) {
    rapidjson::Document d;
    d.Parse(result_json.data(), result_json.size());
    if (d.HasParseError() || !d.IsObject()) return {};
    auto it = d.FindMember("protocolVersion");
    if (it == d.MemberEnd() || !it->value.IsString()) return {};
    return std::string(it->value.GetString(), it->value.GetStringLength());
}

// Starts one call of the op. body: a JSON-RPC message; with_session: the
// handshake's headers. DELETE: method "DELETE", no body, no hook.
bool send(BackendOp& op, std::string_view http_method, std::string body, bool with_session, bool tracked) {
    Federation& f = *op.fed;
    f.bodies.push_back(std::move(body));
    std::unique_ptr<Codec> codec = make_codec(CodecKind::Relay, CodecOptions{});
    if (codec == nullptr) return false;
    f.ctx->attempts.calls.emplace_back(new Call(f.ctx, &op.target->upstream, std::move(codec),
                                       static_cast<unsigned>(f.ctx->attempts.calls.size() + 1), Call::Mode::Capture));
    Call& call = *f.ctx->attempts.calls.back();
    call.background = true;
    call.capture_limit = f.ep->max_response;
    call.capture_budget = &f.capture_left;
    if (tracked) {
        call.on_end = on_call_end;
        call.end_data = &op;
    }
    CallerRequest in;
    in.own_request = true;
    in.method = http_method;
    in.body = f.bodies.back();
    if (!in.body.empty()) in.content_type = "application/json";
    in.headers.emplace_back("Accept", "application/json, text/event-stream");
    if (with_session) {
        if (!op.session.empty()) in.headers.emplace_back("Mcp-Session-Id", op.session);
        if (!op.protocol.empty()) in.headers.emplace_back("MCP-Protocol-Version", op.protocol);
    }
    if (call.start(f.r, in) != NGX_OK) {
        f.ctx->attempts.calls.pop_back();
        return false;
    }
    if (!tracked) return true;
    op.call = &call;
    if (op.timer.timer_set) ngx_del_timer(&op.timer);
    ngx_add_timer(&op.timer, timeout_of(op));
    return true;
}

std::string new_id(Federation& f) { return "\"gw-" + std::to_string(++f.next_id) + "\""; }

bool send_request(BackendOp& op, std::string_view method, std::string_view params, bool with_session) {
    op.want_id = new_id(*op.fed);
    return send(op, "POST", rpc_request(op.want_id, method, params), with_session, true);
}

// The request of the op (a further page: the cursor given).
bool send_main(BackendOp& op, const std::string& cursor = {}) {
    std::string params = op.params;
    if (!cursor.empty()) {
        JsonWriter w;
        w.begin_object().field("cursor", cursor).end_object();
        params = w.take();
    }
    return send_request(op, op.method, params, op.step == BackendOp::Step::Retry);
}

void finish_federation(Federation& f) {
    if (f.unsettled > 0 || f.on_settled == nullptr) return;
    void (*done)(Federation&) = f.on_settled;
    f.on_settled = nullptr;
    done(f);
}

void settle(BackendOp& op, BackendOp::Outcome outcome) {
    if (op.settled) return;
    op.settled = true;
    op.outcome = outcome;
    op.step = BackendOp::Step::Done;
    if (op.timer.timer_set) ngx_del_timer(&op.timer);
    Federation& f = *op.fed;
    f.counted.push_back(op.target);
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, f.r->connection->log, 0, "llm_gateway: MCP server \"%s\" %s: %s (%uz still out)",
                   log_value(op.target->name).c_str(), log_value(op.method).c_str(),
                   outcome == BackendOp::Outcome::Result     ? "result"
                   : outcome == BackendOp::Outcome::RpcError ? "JSON-RPC error"
                                                             : "failed",
                   f.unsettled > 0 ? f.unsettled - 1 : 0);
    if (outcome == BackendOp::Outcome::Failed) {
        std::vector<std::string>().swap(op.pages);   // a failed server contributes nothing
        ngx_log_error(NGX_LOG_WARN, f.r->connection->log, 0, "llm_gateway: MCP server \"%s\" failed in %s: %s",
                      log_value(op.target->name).c_str(), log_value(op.method).c_str(), log_text(op.why).c_str());
        if (op.event_status != 0) {
            request_event(*f.ctx, op.event_kind, op.event_status, op.event_message, &op.target->upstream, {}, kRoute);
        }
    }
    if (!op.session.empty()) {   // best effort: nobody waits for it, its answer is not read
        send(op, "DELETE", std::string(), true, false);
    }
    if (f.unsettled > 0) --f.unsettled;
    finish_federation(f);
}

void fail(BackendOp& op, const char* kind, int status, std::string message, std::string why) {
    op.event_kind = kind;
    op.event_status = status;
    op.event_message = std::move(message);
    op.why = std::move(why);
    settle(op, BackendOp::Outcome::Failed);
}

void fail_status(BackendOp& op, ngx_uint_t status) {
    const int st = static_cast<int>(status);
    const bool event = st == 429 || st >= 500;
    fail(op, "upstream", event ? st : 0, std::string(kRoute) + " upstream returned status " + std::to_string(st),
         "status " + std::to_string(st));
}

void begin_handshake(BackendOp& op) {
    op.step = BackendOp::Step::Initialize;
    JsonWriter w;
    w.begin_object().field("protocolVersion", kDefaultProtocol).key("capabilities").begin_object().end_object();
    w.key("clientInfo").begin_object().field("name", "llm-gateway").field("version", "1").end_object().end_object();
    if (!send_request(op, "initialize", w.take(), false)) {
        fail(op, "upstream", 502, "upstream connection error", "the handshake could not be started");
    }
}

void on_reply(BackendOp& op, Call& call) {
    const ngx_uint_t status = call.upstream_status;
    const bool ok = status >= 200 && status < 300 && call.outcome().end == EndState::Complete;
    switch (op.step) {
    case BackendOp::Step::Initialize: {
        if (!ok) return fail_status(op, status);
        BackendReply rep = read_backend_reply(call.response_type(), call.captured(), op.want_id);
        call.release_captured();
        if (rep.kind != BackendReply::Kind::Result) {
            return fail(op, "upstream", 502, std::string(kRoute) + " upstream sent an invalid response",
                        "initialize: " + (rep.why.empty() ? std::string("a JSON-RPC error") : rep.why));
        }
        op.session = call.response_header("mcp-session-id");
        if (op.session.size() > 1024) op.session.clear();
        op.protocol = protocol_of(rep.json);
        if (!known_protocol(op.protocol)) op.protocol = std::string(kDefaultProtocol);
        op.step = BackendOp::Step::Initialized;
        if (!send(op, "POST", rpc_notification("notifications/initialized"), true, true)) {
            fail(op, "upstream", 502, "upstream connection error", "the handshake could not be continued");
        }
        return;
    }
    case BackendOp::Step::Initialized:
        // Whatever the answer (202 is expected), the retry follows.
        op.step = BackendOp::Step::Retry;
        if (!send_main(op)) fail(op, "upstream", 502, "upstream connection error", "the retry could not be started");
        return;
    case BackendOp::Step::Bare:
    case BackendOp::Step::Retry:
        break;
    case BackendOp::Step::Done:
        return;
    }
    // Never a handshake after a 5xx (nor after no answer or a time-out).
    if (status >= 500 || status == 429) return fail_status(op, status);
    const bool client_error = status >= 400 && status < 500;
    if (client_error) {
        if (op.step == BackendOp::Step::Bare) return begin_handshake(op);
        return fail_status(op, status);
    }
    if (!ok) {
        if (status >= 300) return fail_status(op, status);
        return fail(op, "upstream", 502, std::string(kRoute) + " upstream sent an invalid response", "the reply was cut short");
    }
    BackendReply rep = read_backend_reply(call.response_type(), call.captured(), op.want_id);
    call.release_captured();   // read: what is kept is the result
    switch (rep.kind) {
    case BackendReply::Kind::Error:
        if (op.step == BackendOp::Step::Bare) return begin_handshake(op);
        op.json = std::move(rep.json);
        return settle(op, BackendOp::Outcome::RpcError);
    case BackendReply::Kind::Neither:
        return fail(op, "upstream", 502, std::string(kRoute) + " upstream sent an invalid response", rep.why);
    case BackendReply::Kind::Result:
        break;
    }
    if (is_list(op.method)) {   // the pages are kept, each once
        std::string cursor = next_cursor(rep.json);
        op.pages.push_back(std::move(rep.json));
        if (!cursor.empty() && --op.pages_left > 0) {
            if (!send_main(op, cursor)) fail(op, "upstream", 502, "upstream connection error", "the next page could not be asked");
            return;
        }
        return settle(op, BackendOp::Outcome::Result);
    }
    op.json = std::move(rep.json);
    settle(op, BackendOp::Outcome::Result);
}

// The answer crossed max_response= or max_total=: its reading was stopped.
void fail_too_large(BackendOp& op, const Call& call) {
    const McpEndpoint& ep = *op.fed->ep;
    const bool own = call.overflowed() == Call::Overflow::Call;
    fail(op, "upstream", 502, std::string(kRoute) + " upstream response too large",
         own ? "the reply is larger than max_response (" + std::to_string(ep.max_response) + " bytes)"
             : "the replies of this request are larger together than max_total (" + std::to_string(ep.max_total) +
                   " bytes)");
}

void on_call_end(Call& call, void* data) {
    auto* op = static_cast<BackendOp*>(data);
    if (op->settled || op->call != &call) return;   // given up already (time-out)
    if (op->timer.timer_set) ngx_del_timer(&op->timer);
    if (call.overflowed() != Call::Overflow::None) {
        call.release_captured();
        return fail_too_large(*op, call);
    }
    if (!call.answered()) {
        if (call.timed_out()) {
            return fail(*op, "timeout", 504, std::string(kRoute) + " upstream timed out", "timed out");
        }
        return fail(*op, "upstream", 502, "upstream connection error", "no response");
    }
    on_reply(*op, call);
}

void on_timeout(ngx_event_t* ev) {
    auto* op = static_cast<BackendOp*>(ev->data);
    ngx_connection_t* c = op->fed->r->connection;
    try {
        Call* call = op->call;
        fail(*op, "timeout", 504, std::string(kRoute) + " upstream timed out",
             "no answer within " + std::to_string(timeout_of(*op)) + " ms");
        if (call != nullptr) call->expire();   // its end is no longer awaited
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, c->log, 0, "llm_gateway: MCP time-out handling failed: %s", e.what());
    }
    ngx_http_run_posted_requests(c);
}

}  // namespace

void start_op(Federation& f, std::size_t backend, std::string method, std::string params) {
    f.ops.push_back(std::make_unique<BackendOp>());
    BackendOp& op = *f.ops.back();
    op.fed = &f;
    op.backend = backend;
    op.target = &main_conf(f.r)->state->targets.all()[backend];
    op.method = std::move(method);
    op.params = std::move(params);
    op.timer.handler = on_timeout;
    op.timer.data = &op;
    op.timer.log = f.r->connection->log;
    ++f.unsettled;
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, f.r->connection->log, 0, "llm_gateway: MCP server \"%s\" asked %s (%uz out)",
                   log_value(op.target->name).c_str(), log_value(op.method).c_str(), f.unsettled);
    if (!send_main(op)) fail(op, "upstream", 502, "upstream connection error", "the call could not be started");
}

void count_requests(Federation& f) {
    account_targets(main_conf(f.r), f.counted);
    f.counted.clear();
}

void when_settled(Federation& f, void (*done)(Federation& f)) {
    f.on_settled = done;
    finish_federation(f);
}

std::vector<ServerTools> listed_pages(Federation& f, std::string_view method) {
    std::vector<ServerTools> out;
    for (const auto& op : f.ops) {
        if (op->outcome != BackendOp::Outcome::Result || op->method != method) continue;
        ServerTools s;
        s.backend = op->backend;
        s.server = op->target->name;
        s.pages = std::move(op->pages);
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace llmgw
