// POST /mcp, the federated tool endpoint (docs/mcp.md): JSON-RPC 2.0 over
// Streamable HTTP, answered with JSON. initialize hands out a sealed
// session id; ping answers; tools/list merges the tools of every tool
// server the caller's group may reach; tools/call goes to the server that
// owns the tool; notifications and responses are accepted (202); other
// methods are not found.
#include "core/json/writer.h"
#include "ngx/http/headers.h"
#include "ngx/mcp/fanout.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

constexpr ngx_msec_t kToolCacheMs = 60000;   // a worker's memory of which server owns a tool

ngx_int_t send_rpc(ngx_http_request_t* r, ngx_uint_t status, const std::string& body) {
    return send_body(r, status, "application/json", body);
}

std::string header_value(ngx_http_request_t* r, std::string_view name) {
    std::string out;
    for_each_header(r->headers_in.headers, [&](const ngx_table_elt_t& h) {
        if (!header_name_is(h.key, name)) return true;
        out.assign(sv(h.value));
        return false;
    });
    return out;
}

std::string server_info() {
    JsonWriter w;
    w.begin_object().field("name", "llm-gateway").field("version", "1.0.0").end_object();
    return w.take();
}

ngx_int_t initialize(ngx_http_request_t* r, RequestCtx* ctx, const McpEndpoint& ep, const RpcMessage& m) {
    const std::string_view version = negotiate_protocol(m.protocol_version);
    McpSession s{ctx->user->name, std::string(version), static_cast<std::int64_t>(ngx_time())};
    std::string token = ep.sealer->seal(s);
    if (token.empty()) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (add_header(r, "Mcp-Session-Id", token) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    JsonWriter w;
    w.begin_object().field("protocolVersion", version);
    w.key("capabilities").begin_object().key("tools").begin_object().field("listChanged", false).end_object().end_object();
    w.key("serverInfo").raw(server_info());
    w.field("instructions", "Tools of the MCP servers this gateway federates for your group.");
    w.end_object();
    return send_rpc(r, NGX_HTTP_OK, rpc_result(m.id, w.take()));
}

// The session a request names, when it names one: true when it is one this
// gateway issued to this user and still honours. A client told 404 (the
// SDKs' "session not found") initializes again.
bool session_valid(ngx_http_request_t* r, RequestCtx* ctx, const McpEndpoint& ep) {
    std::string id = header_value(r, "mcp-session-id");
    if (id.empty()) return true;
    McpSession s;
    const std::int64_t now = ngx_time();
    const bool valid = ep.sealer->open(id, s) && s.user == ctx->user->name && s.issued <= now + 300 &&
                       now - s.issued <= static_cast<std::int64_t>(ep.session_ttl / 1000);
    if (!valid) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "llm_gateway: user \"%s\" sent an unknown MCP session id",
                      log_value(ctx->user->name).c_str());
    }
    return valid;
}

// ------------------------------------------------------------ the answers

ToolCache::Entry* cached_tools(RequestCtx* ctx) {
    Worker* w = worker();
    if (w == nullptr) return nullptr;
    auto it = w->mcp_tools.entries.find(ctx->user->group);
    if (it == w->mcp_tools.entries.end() || ngx_current_msec - it->second.at > kToolCacheMs) return nullptr;
    return &it->second;
}

void remember_tools(RequestCtx* ctx, const MergedTools& merged) {
    Worker* w = worker();
    if (w == nullptr) return;
    if (w->mcp_tools.entries.size() > 1000) w->mcp_tools.entries.clear();
    ToolCache::Entry& e = w->mcp_tools.entries[ctx->user->group];
    e.at = ngx_current_msec;
    e.routes = merged.routes;
}

bool any_listed(const Federation& f) {
    for (const auto& op : f.ops) {
        if (op->outcome == BackendOp::Outcome::Result) return true;
    }
    return f.ops.empty();   // no server to ask: an empty list, not a failure
}

void respond(Federation& f, ngx_int_t rc) {
    ngx_http_request_t* r = f.r;
    r->write_event_handler = ngx_http_request_empty_handler;
    ngx_http_finalize_request(r, rc);
}

std::string call_failure(const BackendOp& op) {
    if (op.event_kind == std::string_view("timeout")) return "MCP server \"" + op.target->name + "\" timed out";
    return "MCP server \"" + op.target->name + "\" is unreachable or failed";
}

void called(Federation& f) {
    const BackendOp& op = *f.ops.back();
    std::string body;
    switch (op.outcome) {
    case BackendOp::Outcome::Result: body = rpc_result(f.msg.id, op.json); break;
    case BackendOp::Outcome::RpcError:
        body = "{\"jsonrpc\":\"2.0\",\"id\":" + f.msg.id + ",\"error\":" + op.json + "}";
        break;
    default: body = rpc_error(f.msg.id, kRpcInternalError, call_failure(op)); break;
    }
    respond(f, send_rpc(f.r, NGX_HTTP_OK, body));
}

void call_owner(Federation& f, const ToolRoute& route) {
    start_op(f, route.backend, "tools/call", with_tool_name(f.msg.params, route.name));
    when_settled(f, called);
}

void listed(Federation& f) {
    MergedTools merged = merge_tools(listed_tools(f));
    if (!f.listing_for_call) {
        if (!any_listed(f)) {
            respond(f, send_rpc(f.r, NGX_HTTP_OK, rpc_error(f.msg.id, kRpcInternalError, "no MCP server reachable")));
            return;
        }
        remember_tools(f.ctx, merged);
        respond(f, send_rpc(f.r, NGX_HTTP_OK, rpc_result(f.msg.id, "{\"tools\":" + merged.tools_json + "}")));
        return;
    }
    if (any_listed(f)) remember_tools(f.ctx, merged);
    auto it = merged.routes.find(f.msg.tool);
    if (it == merged.routes.end()) {
        const char* why = any_listed(f) ? "Unknown tool: " : "no MCP server reachable for tool ";
        respond(f, send_rpc(f.r, NGX_HTTP_OK,
                            rpc_error(f.msg.id, any_listed(f) ? kRpcInvalidParams : kRpcInternalError,
                                      why + log_value(f.msg.tool))));
        return;
    }
    f.listing_for_call = false;
    call_owner(f, it->second);
}

void list_tools(Federation& f) {
    for (std::size_t i : main_conf(f.r)->state->targets.federated_for(f.ctx->user->group)) {
        start_op(f, i, "tools/list", "{}");
    }
    when_settled(f, listed);
}

ngx_int_t federate(ngx_http_request_t* r, RequestCtx* ctx, const McpEndpoint& ep, RpcMessage m) {
    ctx->federation.reset(new Federation(r, ctx, &ep));
    Federation& f = *ctx->federation;
    f.msg = std::move(m);
    r->main->count++;   // held until respond() finalizes it
    if (f.msg.method == "tools/list") {
        list_tools(f);
        return NGX_DONE;
    }
    if (f.msg.tool.empty()) {
        r->main->count--;
        return send_rpc(r, NGX_HTTP_OK, rpc_error(f.msg.id, kRpcInvalidParams, "tools/call needs params.name"));
    }
    // A worker that listed the group's tools lately knows the owner.
    if (const ToolCache::Entry* cache = cached_tools(ctx)) {
        auto it = cache->routes.find(f.msg.tool);
        const auto& all = main_conf(r)->state->targets.all();
        if (it != cache->routes.end() && it->second.backend < all.size() &&
            all[it->second.backend].open_to(ctx->user->group)) {
            const ToolRoute route = it->second;
            call_owner(f, route);
            return NGX_DONE;
        }
    }
    f.listing_for_call = true;
    list_tools(f);
    return NGX_DONE;
}

}  // namespace

ngx_int_t mcp_handler(ngx_http_request_t* r, RequestCtx* ctx) {
    auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module));
    if (lcf->mcp == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    const McpEndpoint& ep = *lcf->mcp;
    ctx->own_response = true;
    RpcMessage m = parse_rpc(ctx->body);
    if (m.kind == RpcMessage::Kind::Invalid) {
        return send_rpc(r, NGX_HTTP_BAD_REQUEST, rpc_error(m.id, m.error_code, m.error));
    }
    if (m.method != "initialize") {
        if (!session_valid(r, ctx, ep)) {
            return send_rpc(r, NGX_HTTP_NOT_FOUND, rpc_error(m.id, kRpcSessionNotFound, "Session not found"));
        }
        std::string version = header_value(r, "mcp-protocol-version");
        if (!version.empty() && !known_protocol(version)) {
            return send_rpc(r, NGX_HTTP_BAD_REQUEST,
                            rpc_error(m.id, kRpcInvalidRequest, "Unsupported protocol version: " + log_value(version)));
        }
    }
    if (m.kind != RpcMessage::Kind::Request) {   // notifications and responses: accepted, nothing to answer
        r->headers_out.status = NGX_HTTP_ACCEPTED;
        r->headers_out.content_length_n = 0;
        r->header_only = 1;
        return ngx_http_send_header(r);
    }
    if (m.method == "initialize") return initialize(r, ctx, ep, m);
    if (m.method == "ping") return send_rpc(r, NGX_HTTP_OK, rpc_result(m.id, "{}"));
    if (m.method == "tools/list" || m.method == "tools/call") return federate(r, ctx, ep, std::move(m));
    return send_rpc(r, NGX_HTTP_OK, rpc_error(m.id, kRpcMethodNotFound, "Method not found: " + log_value(m.method)));
}

}  // namespace llmgw
