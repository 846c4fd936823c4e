// POST /mcp, the federated tool endpoint (docs/mcp.md): JSON-RPC 2.0 over
// Streamable HTTP, answered with JSON. initialize hands out a sealed
// session id; ping answers; tools/list, prompts/list, resources/list and
// resources/templates/list merge the lists of every tool server the
// caller's group may reach; tools/call, prompts/get, resources/read and
// completion/complete go to the server that owns the name or URI;
// notifications and responses are accepted (202); other methods are not found.
#include "ngx/mcp/endpoint.h"

#include "core/json/writer.h"
#include "ngx/http/headers.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/mcp/fanout.h"
#include "ngx/request/ctx.h"
#include "ngx/worker.h"
#include "core/log/log_escape.h"

namespace llmgw {
namespace {

constexpr ngx_msec_t kToolCacheMs = 60000;   // a worker's memory of which server owns a tool

ngx_int_t send_rpc(ngx_http_request_t* r, ngx_uint_t status, const std::string& body) {
    return send_body(r, status, "application/json", body);
}

std::string server_info() {
    JsonWriter w;
    w.begin_object().field("name", "llm-gateway").field("version", "1.0.0").end_object();
    return w.take();
}

ngx_int_t initialize(ngx_http_request_t* r, RequestCtx* ctx, const McpEndpoint& ep, const RpcMessage& m) {
    const std::string_view version = negotiate_protocol(m.protocol_version);
    McpSession s{ctx->auth.user->name, std::string(version), static_cast<std::int64_t>(ngx_time())};
    std::string token = ep.sealer->seal(s);
    if (token.empty()) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (add_header(r, "Mcp-Session-Id", token) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    JsonWriter w;
    w.begin_object().field("protocolVersion", version);
    w.key("capabilities").begin_object();
    for (const char* c : {"tools", "prompts", "resources"}) w.key(c).begin_object().field("listChanged", false).end_object();
    w.key("completions").begin_object().end_object();
    w.end_object();
    w.key("serverInfo").raw(server_info());
    w.field("instructions", "Tools, prompts and resources of the MCP servers this gateway federates for your group.");
    w.end_object();
    return send_rpc(r, NGX_HTTP_OK, rpc_result(m.id, w.take()));
}

// The session a request names, when it names one: true when it is one this
// gateway issued to this user and still honours. A client told 404 (the
// SDKs' "session not found") initializes again.
bool session_valid(ngx_http_request_t* r, RequestCtx* ctx, const McpEndpoint& ep) {
    std::string id = header_value(r->headers_in.headers, "mcp-session-id");
    if (id.empty()) return true;
    McpSession s;
    const std::int64_t now = ngx_time();
    const bool valid = ep.sealer->open(id, s) && s.user == ctx->auth.user->name && s.issued <= now + 300 &&
                       now - s.issued <= static_cast<std::int64_t>(ep.session_ttl / 1000);
    if (!valid) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "llm_gateway: user \"%s\" sent an unknown MCP session id",
                      log_value(ctx->auth.user->name).c_str());
    }
    return valid;
}

// ------------------------------------------------------------ the answers

// The federated lists: the method, its result's array, the member that keys
// an entry, and whether colliding keys are renamed (names) or owned by the
// first server (URIs).
struct ListSpec {
    std::string_view method, array, key;
    bool rename;
};
constexpr ListSpec kTools{"tools/list", "tools", "name", true};
constexpr ListSpec kPrompts{"prompts/list", "prompts", "name", true};
constexpr ListSpec kResources{"resources/list", "resources", "uri", false};
constexpr ListSpec kTemplates{"resources/templates/list", "resourceTemplates", "uriTemplate", false};
constexpr const ListSpec* kLists[] = {&kTools, &kPrompts, &kResources, &kTemplates};

const ListSpec* list_of(std::string_view method) {
    for (const ListSpec* l : kLists) {
        if (l->method == method) return l;
    }
    return nullptr;
}

// A routed request: the list that names its owner, whether its key is in
// params.ref (completion), and whether, with no listed owner, every server
// is asked and the first answer taken (a resource URI made from a template).
struct RouteSpec {
    const ListSpec* list;
    bool in_ref;
    bool ask_all;
};

bool route_of(const RpcMessage& m, RouteSpec& out) {
    if (m.method == "tools/call") out = {&kTools, false, false};
    else if (m.method == "prompts/get") out = {&kPrompts, false, false};
    else if (m.method == "resources/read") out = {&kResources, false, true};
    else if (m.method == "completion/complete" && m.ref_type == "ref/prompt") out = {&kPrompts, true, false};
    else if (m.method == "completion/complete" && m.ref_type == "ref/resource") out = {&kTemplates, true, true};
    else return false;
    return true;
}

std::string cache_key(const RequestCtx* ctx, const ListSpec& l) { return ctx->auth.user->group + "\n" + std::string(l.method); }

const ToolCache::Entry* cached(RequestCtx* ctx, const ListSpec& l) {
    Worker* w = worker();
    if (w == nullptr) return nullptr;
    auto it = w->mcp_tools.entries.find(cache_key(ctx, l));
    if (it == w->mcp_tools.entries.end() || ngx_current_msec - it->second.at > kToolCacheMs) return nullptr;
    return &it->second;
}

void remember(RequestCtx* ctx, const ListSpec& l, const MergedTools& merged) {
    Worker* w = worker();
    if (w == nullptr) return;
    if (w->mcp_tools.entries.size() > 4000) w->mcp_tools.entries.clear();
    ToolCache::Entry& e = w->mcp_tools.entries[cache_key(ctx, l)];
    e.at = ngx_current_msec;
    e.routes = merged.routes;
}

// Whether some server answered the list. A server that answers prompts/list
// or resources/list with an error has none to give (it does not serve
// them): it answered. For tools/list an error is a failure (the spec's "no
// MCP server reachable" when every server fails).
bool any_answer(const Federation& f, const ListSpec& list) {
    for (const auto& op : f.ops) {
        if (op->outcome == BackendOp::Outcome::Result) return true;
        if (op->outcome == BackendOp::Outcome::RpcError && &list != &kTools) return true;
    }
    return f.ops.empty();   // no server to ask: an empty list, not a failure
}

void respond(Federation& f, ngx_int_t rc) {
    count_requests(f);
    ngx_http_request_t* r = f.r;
    r->write_event_handler = ngx_http_request_empty_handler;
    ngx_http_finalize_request(r, rc);
}

void answer(Federation& f, const std::string& body) { respond(f, send_rpc(f.r, NGX_HTTP_OK, body)); }

std::string call_failure(const BackendOp& op) {
    if (op.event_kind == std::string_view("timeout")) return "MCP server \"" + op.target->name + "\" timed out";
    return "MCP server \"" + op.target->name + "\" is unreachable or failed";
}

std::string op_answer(const Federation& f, const BackendOp& op) {
    switch (op.outcome) {
    case BackendOp::Outcome::Result: return rpc_result(f.msg.id, op.json);
    case BackendOp::Outcome::RpcError: return "{\"jsonrpc\":\"2.0\",\"id\":" + f.msg.id + ",\"error\":" + op.json + "}";
    default: return rpc_error(f.msg.id, kRpcInternalError, call_failure(op));
    }
}

// The owner's answer (the last op started).
void called(Federation& f) { answer(f, op_answer(f, *f.ops.back())); }

// Every server was asked: the first result in configuration order, else
// the first server's error, else the internal error.
void asked_all(Federation& f) {
    const BackendOp* error = nullptr;
    for (const auto& op : f.ops) {
        if (op->method != f.msg.method) continue;
        if (op->outcome == BackendOp::Outcome::Result) return answer(f, op_answer(f, *op));
        if (op->outcome == BackendOp::Outcome::RpcError && error == nullptr) error = op.get();
    }
    if (error != nullptr) return answer(f, op_answer(f, *error));
    answer(f, rpc_error(f.msg.id, kRpcInternalError, "no MCP server reachable"));
}

void ask_all(Federation& f) {
    const std::size_t before = f.ops.size();
    for (std::size_t i : main_conf(f.r)->state->targets.federated_for(f.ctx->auth.user->group)) {
        start_op(f, i, f.msg.method, f.msg.params);
    }
    if (f.ops.size() == before) return answer(f, rpc_error(f.msg.id, kRpcInternalError, "no MCP server reachable"));
    when_settled(f, asked_all);
}

void call_owner(Federation& f, const RouteSpec& route, const ToolRoute& owner) {
    std::string params = route.list->rename ? with_name(f.msg.params, owner.name, route.in_ref) : f.msg.params;
    start_op(f, owner.backend, f.msg.method, std::move(params));
    when_settled(f, called);
}

void listed(Federation& f) {
    const ListSpec* list = list_of(f.listing);
    MergedTools merged = merge_list(listed_pages(f, list->method), list->array, list->key, list->rename);
    const bool some = any_answer(f, *list);
    if (some) remember(f.ctx, *list, merged);
    RouteSpec route{};
    if (!route_of(f.msg, route)) {   // the caller asked for the list
        if (!some) return answer(f, rpc_error(f.msg.id, kRpcInternalError, "no MCP server reachable"));
        return answer(f, rpc_result(f.msg.id, "{\"" + std::string(list->array) + "\":" + merged.tools_json + "}"));
    }
    auto it = merged.routes.find(f.msg.route_key);
    if (it != merged.routes.end()) return call_owner(f, route, it->second);
    if (route.ask_all && some) return ask_all(f);
    if (!some) {
        return answer(f, rpc_error(f.msg.id, kRpcInternalError,
                                   "no MCP server reachable for \"" + log_value(f.msg.route_key) + "\""));
    }
    const char* what = route.list == &kTools ? "Unknown tool: " : route.list == &kPrompts ? "Unknown prompt: "
                                                                                           : "Unknown resource: ";
    answer(f, rpc_error(f.msg.id, kRpcInvalidParams, what + log_value(f.msg.route_key)));
}

void list_all(Federation& f, const ListSpec& list) {
    f.listing = list.method;
    for (std::size_t i : main_conf(f.r)->state->targets.federated_for(f.ctx->auth.user->group)) {
        start_op(f, i, std::string(list.method), "{}");
    }
    when_settled(f, listed);
}

ngx_int_t federate(ngx_http_request_t* r, RequestCtx* ctx, const McpEndpoint& ep, RpcMessage m) {
    RouteSpec route{};
    const ListSpec* list = list_of(m.method);
    const bool routed = route_of(m, route);
    if (routed && m.route_key.empty()) {
        return send_rpc(r, NGX_HTTP_OK,
                        rpc_error(m.id, kRpcInvalidParams,
                                  m.method + (route.in_ref ? " needs params.ref" : route.list == &kResources
                                                                                       ? " needs params.uri"
                                                                                       : " needs params.name")));
    }
    ctx->federation.reset(new Federation(r, ctx, &ep));
    Federation& f = *ctx->federation;
    f.msg = std::move(m);
    r->main->count++;   // held until respond() finalizes it
    if (!routed) {
        list_all(f, *list);
        return NGX_DONE;
    }
    // A worker that listed the group's entries lately knows the owner.
    if (const ToolCache::Entry* cache = cached(ctx, *route.list)) {
        auto it = cache->routes.find(f.msg.route_key);
        const auto& all = main_conf(r)->state->targets.all();
        if (it != cache->routes.end() && it->second.backend < all.size() &&
            all[it->second.backend].open_to(ctx->auth.user->group)) {
            const ToolRoute owner = it->second;
            call_owner(f, route, owner);
            return NGX_DONE;
        }
    }
    list_all(f, *route.list);
    return NGX_DONE;
}

bool federated_method(const RpcMessage& m) {
    RouteSpec route{};
    return list_of(m.method) != nullptr || route_of(m, route);
}

}  // namespace

ngx_int_t mcp_handler(ngx_http_request_t* r, RequestCtx* ctx) {
    auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module));
    if (lcf->mcp == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    const McpEndpoint& ep = *lcf->mcp;
    ctx->page.own_response = true;
    RpcMessage m = parse_rpc(ctx->in.body);
    if (m.kind == RpcMessage::Kind::Invalid) {
        return send_rpc(r, NGX_HTTP_BAD_REQUEST, rpc_error(m.id, m.error_code, m.error));
    }
    if (m.method != "initialize") {
        if (!session_valid(r, ctx, ep)) {
            return send_rpc(r, NGX_HTTP_NOT_FOUND, rpc_error(m.id, kRpcSessionNotFound, "Session not found"));
        }
        std::string version = header_value(r->headers_in.headers, "mcp-protocol-version");
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
    if (federated_method(m)) return federate(r, ctx, ep, std::move(m));
    return send_rpc(r, NGX_HTTP_OK, rpc_error(m.id, kRpcMethodNotFound, "Method not found: " + log_value(m.method)));
}

}  // namespace llmgw
