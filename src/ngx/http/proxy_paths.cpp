// The proxy routes' paths (access phase). Per-target proxies:
// <prefix>/<target>[/<path>] (docs/mcp.md), the target known and open to the
// caller's group (403 otherwise: the backend sees nothing). Native
// passthrough routing: <prefix>/<provider>/<path>,
// where <prefix> is the location of llm_gateway_passthrough and <path> is
// taken below the provider's base (docs/passthrough.md). The provider must
// exist and be open to the caller's group (else 404, as if it did not
// exist); the path is nginx's normalised URI (percent-decoded, dot segments
// resolved) and is refused when anything in it could leave the base
// (core/http/proxy_path.h).
#include "ngx/http/proxy_paths.h"

#include "core/http/proxy_path.h"
#include "core/log/log_escape.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {
namespace {

// The name after the location's prefix and the path below it.
void name_and_path(ngx_http_request_t* r, const LocConf* lcf, std::string_view& name, std::string_view& path) {
    split_proxy_uri(sv(r->uri), lcf->prefix.len, name, path);
}

std::string shown_name(std::string_view name) {
    return name.size() <= 64 ? std::string(name) : std::string(name.substr(0, 64)) + "...";
}

}  // namespace

ngx_int_t route_passthrough(ngx_http_request_t* r, RequestCtx* ctx, const LocConf* lcf) {
    std::string_view name, path;
    name_and_path(r, lcf, name, path);
    const ProviderConf* p = name.empty() ? nullptr : main_conf(r)->state->config.find_provider(name);
    if (p == nullptr || !p->open_to(ctx->auth.user->group)) {
        return reject(r, NGX_HTTP_NOT_FOUND, "unknown provider \"" + shown_name(name) + "\"", "invalid_request_error",
                      "unknown_provider");
    }
    if (const char* why = proxy_path_problem(path); *why != '\0') {
        return reject(r, NGX_HTTP_BAD_REQUEST, std::string("invalid passthrough path: ") + why,
                      "invalid_request_error", "invalid_path");
    }
    ctx->in.passthrough_path = path;
    Target t;
    t.provider = p;
    static_cast<Target&>(ctx->in.resolved) = t;
    ctx->in.resolved.targets.assign(1, t);
    return NGX_OK;
}

ngx_int_t route_target(ngx_http_request_t* r, RequestCtx* ctx, const LocConf* lcf) {
    std::string_view name, path;
    name_and_path(r, lcf, name, path);
    const TargetKind kind = lcf->mode == kModeMcpProxy ? TargetKind::Mcp : TargetKind::Agent;
    const TargetConf* t = name.empty() ? nullptr : main_conf(r)->state->targets.find(kind, name);
    const char* what = kind == TargetKind::Mcp ? "tool server" : "agent";
    if (t == nullptr) {
        return reject(r, NGX_HTTP_NOT_FOUND, std::string("unknown ") + what + " \"" + shown_name(name) + "\"",
                      "invalid_request_error", "unknown_target");
    }
    if (!t->open_to(ctx->auth.user->group)) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "llm_gateway: user \"%s\" of group \"%s\" refused %s \"%s\"",
                      log_value(ctx->auth.user->name).c_str(), log_value(ctx->auth.user->group).c_str(), what,
                      log_value(t->name).c_str());
        return reject(r, NGX_HTTP_FORBIDDEN,
                      std::string("this key's group may not use the ") + what + " \"" + t->name + "\"",
                      "permission_error", "target_forbidden");
    }
    if (!path.empty()) {   // "" is the target's location itself
        if (const char* why = proxy_path_problem(path); *why != '\0') {
            return reject(r, NGX_HTTP_BAD_REQUEST, std::string("invalid proxy path: ") + why, "invalid_request_error",
                          "invalid_path");
        }
    }
    ctx->in.passthrough_path = path;
    ctx->in.target = t;
    return NGX_OK;
}

}  // namespace llmgw
