// CONTENT phase: dispatch an admitted request to its endpoint.
#include <cstring>

#include "core/json/envelope.h"
#include "ngx/module.h"

namespace llmgw {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string models_json(const GatewayConfig& cfg) {
    std::string out = "{\"object\":\"list\",\"data\":[";
    bool first = true;
    auto add = [&](std::string_view id, std::string_view owner) {
        if (!first) out += ',';
        first = false;
        out += "{\"id\":\"";
        json_escape_append(out, id);
        out += "\",\"object\":\"model\",\"created\":0,\"owned_by\":\"";
        json_escape_append(out, owner);
        out += "\"}";
    };
    for (const auto& p : cfg.providers()) {
        for (const auto& m : p.models) add(p.name + "/" + m, p.name);
    }
    for (const auto& a : cfg.aliases()) {
        add(a.name, std::string_view(a.target).substr(0, a.target.find('/')));
    }
    out += "]}";
    return out;
}

ngx_int_t content(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr || ctx->phase != RequestCtx::Phase::Admitted) {
        // The access handler did not admit this request (e.g. "satisfy any"
        // let another module grant access first): never serve it.
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm_gateway: request reached the content phase without gateway admission "
                      "(is \"satisfy any\" set in this location?)");
        if (ngx_http_discard_request_body(r) != NGX_OK) r->keepalive = 0;
        return send_error(r, NGX_HTTP_UNAUTHORIZED, "authentication required", "invalid_request_error",
                          "missing_api_key");
    }
    auto* mcf = static_cast<MainConf*>(ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module));
    switch (ctx->route) {
    case Route::Models:
        if (ngx_http_discard_request_body(r) != NGX_OK) r->keepalive = 0;
        return send_json(r, NGX_HTTP_OK, models_json(mcf->state->config));
    case Route::ChatCompletions:
    case Route::Embeddings:
        return start_provider_call(r, ctx);
    case Route::AdminShell:
    case Route::AdminUsage:
    case Route::AdminOverview:
        return admin_handler(r, ctx);
    case Route::None:
        break;
    }
    return send_error(r, NGX_HTTP_NOT_FOUND, "Unknown request URL", "invalid_request_error", "unknown_url");
}

}  // namespace

Route classify(ngx_http_request_t* r, ngx_uint_t mode) {
    std::string_view uri = sv(r->uri);
    if (mode == kModeApi) {
        if (ends_with(uri, "/chat/completions")) return Route::ChatCompletions;
        if (ends_with(uri, "/embeddings")) return Route::Embeddings;
        if (ends_with(uri, "/models")) return Route::Models;
        return Route::None;
    }
    if (mode == kModeAdmin) {
        if (ends_with(uri, "/admin") || ends_with(uri, "/admin/")) return Route::AdminShell;
        if (ends_with(uri, "/admin/api/usage")) return Route::AdminUsage;
        if (ends_with(uri, "/admin/api/overview")) return Route::AdminOverview;
        return Route::None;
    }
    return Route::None;
}

const char* route_name(Route route) {
    switch (route) {
    case Route::ChatCompletions: return "chat/completions";
    case Route::Embeddings: return "embeddings";
    case Route::Models: return "models";
    case Route::AdminShell: return "admin";
    case Route::AdminUsage: return "admin/api/usage";
    case Route::AdminOverview: return "admin/api/overview";
    case Route::None: break;
    }
    return "unknown";
}

ngx_int_t content_handler(ngx_http_request_t* r) {
    try {
        return content(r);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: content phase failed: %s", log_text(e.what()).c_str());
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
}

}  // namespace llmgw
