// ACCESS phase: route, method, authentication, the request body, model
// resolution (and, with the metering issue, admission). A request that fails
// here is answered with the gateway's error envelope and never reaches the
// content handler; one that passes carries everything the content handler
// needs in its RequestCtx.
#include "ngx/phases/access.h"

#include "core/codec/codec.h"
#include "core/json/envelope.h"
#include "core/log/log_escape.h"
#include "ngx/admission/admission.h"
#include "ngx/call/accounting.h"
#include "ngx/http/auth.h"
#include "ngx/http/body.h"
#include "ngx/http/proxy_paths.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/phases/routes.h"
#include "ngx/request/ctx.h"
#include "ngx/request/route.h"

namespace llmgw {
namespace {

ngx_int_t reject_method(ngx_http_request_t* r, const char* allow) {
    if (add_header(r, "Allow", allow) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    std::string msg = "method " + std::string(sv(r->method_name)) + " is not allowed here; use " + allow;
    return reject(r, NGX_HTTP_NOT_ALLOWED, msg, "invalid_request_error", "method_not_allowed");
}

void log_auth_failure(ngx_http_request_t* r, const char* why) {
    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "llm_gateway: authentication failed (%s): method=%s path=%s client=%V", why,
                  log_value(sv(r->method_name)).c_str(), log_value(sv(r->uri)).c_str(), &r->connection->addr_text);
}

void body_ready(ngx_http_request_t* r);

ngx_int_t admitted_or_admit(ngx_http_request_t* r, RequestCtx* ctx, const RouteRow& row) {
    if (row.metered) return admit_request(r, ctx);
    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "llm_gateway: route not metered: no admission");
    ctx->phase = RequestCtx::Phase::Admitted;
    return NGX_DECLINED;
}

// The model names a target the caller may use (the 404 hides providers
// closed to the caller's group).
ngx_int_t resolve(ngx_http_request_t* r, RequestCtx* ctx, std::string_view model) {
    std::string err;
    if (!main_conf(r)->state->config.resolve_model(model, ctx->in.resolved, err)) {
        return reject(r, NGX_HTTP_NOT_FOUND, err, "invalid_request_error", "model_not_found");
    }
    if (!restrict_to_group(ctx->in.resolved, ctx->auth.user->group)) {
        return reject(r, NGX_HTTP_NOT_FOUND,
                      "The model `" + std::string(model) + "` does not exist or you do not have access to it.",
                      "invalid_request_error", "model_not_found");
    }
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm_gateway: model \"%s\" resolved to \"%s\" (%uz failover targets, group \"%s\")",
                   log_value(model).c_str(), log_value(ctx->in.resolved.canonical).c_str(),
                   ctx->in.resolved.targets.size(), log_value(ctx->auth.user->group).c_str());
    // 501 before admission: a route no target's provider type serves
    // (docs/media.md) is not counted as a request.
    for (const Target& t : ctx->in.resolved.targets) {
        if (codec_serves(ctx->route->codec, t.provider->type)) return NGX_OK;
    }
    const ProviderConf& p = *ctx->in.resolved.provider;
    return reject(r, NGX_HTTP_NOT_IMPLEMENTED,
                  "provider \"" + log_value(p.name) + "\" (type " + std::string(provider_type_name(p.type)) +
                      ") does not serve /v1/" + ctx->route->name,
                  "invalid_request_error", "unsupported_endpoint");
}

// transcription: the three 400s of a multipart body, each with its own message.
ngx_int_t read_form(ngx_http_request_t* r, RequestCtx* ctx) {
    ctx->in.form = scan_form_data(ctx->in.body, ctx->in.form_boundary);
    switch (ctx->in.form.status) {
    case FormStatus::Ok: break;
    case FormStatus::Malformed:
        return reject(r, NGX_HTTP_BAD_REQUEST, "malformed multipart body", "invalid_request_error", "invalid_multipart");
    case FormStatus::NoModel:
        return reject(r, NGX_HTTP_BAD_REQUEST, "model is required", "invalid_request_error", "missing_model");
    case FormStatus::DuplicateModel:
        return reject(r, NGX_HTTP_BAD_REQUEST, "duplicate model field", "invalid_request_error", "duplicate_model");
    }
    if (ctx->in.form.model_truncated) {
        return reject(r, NGX_HTTP_NOT_FOUND, "the model field is longer than any model id", "invalid_request_error",
                      "model_not_found");
    }
    return resolve(r, ctx, ctx->in.form.model);
}

ngx_int_t after_body(ngx_http_request_t* r, RequestCtx* ctx) {
    if (!read_body_view(r, ctx)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, ngx_errno, "llm_gateway: cannot read the buffered request body");
        return reject(r, NGX_HTTP_INTERNAL_SERVER_ERROR, "the request body could not be read", "server_error", "");
    }
    const RouteRow& row = *ctx->route;
    ngx_int_t rc = NGX_OK;
    switch (row.body) {
    case BodyRule::Json: {
        std::string err;
        ctx->in.doc = RequestDoc::parse(ctx->in.body, err);
        if (!ctx->in.doc) return reject(r, NGX_HTTP_BAD_REQUEST, err, "invalid_request_error", "invalid_request");
        rc = resolve(r, ctx, ctx->in.doc->info().model);
        break;
    }
    case BodyRule::Multipart:
        rc = read_form(r, ctx);
        break;
    case BodyRule::Raw:   // relayed as it is; the target was chosen from the path
    case BodyRule::Rpc:   // read by the content phase
    case BodyRule::None:
        break;
    }
    if (rc != NGX_OK) return rc;
    return admitted_or_admit(r, ctx, row);
}

void body_ready(ngx_http_request_t* r) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr) {
        r->main->count--;
        return;
    }
    if (!ctx->waiting_body) {
        // Called from inside ngx_http_read_client_request_body: the access
        // handler continues by itself.
        r->main->count--;
        ctx->phase = RequestCtx::Phase::BodyRead;
        return;
    }
    ctx->waiting_body = false;
    ctx->phase = RequestCtx::Phase::BodyRead;
    ngx_http_core_run_phases(r);
}

// llm_gateway_metrics allow=: the client's address is in one of the blocks.
bool scrape_allowed(ngx_http_request_t* r, const LocConf* lcf) {
    if (lcf->metrics_allow == nullptr) return false;
    return ngx_cidr_match(r->connection->sockaddr, lcf->metrics_allow) == NGX_OK;
}

ngx_int_t authenticate(ngx_http_request_t* r, RequestCtx* ctx, LocConf* lcf) {
    auto* mcf = static_cast<MainConf*>(ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module));
    ctx->auth.directory = mcf->state->directory;
    std::string_view key = presented_key(r);
    if (key.empty()) {
        log_auth_failure(r, "no key");
        return reject(r, NGX_HTTP_UNAUTHORIZED,
                      "You didn't provide an API key. Send it as Authorization: Bearer <key> or x-api-key.",
                      "invalid_request_error", "missing_api_key");
    }
    ctx->auth.user = ctx->auth.directory->find_by_key(key);
    if (ctx->auth.user == nullptr) {
        log_auth_failure(r, "unknown key");
        return reject(r, NGX_HTTP_UNAUTHORIZED, "Incorrect API key provided.", "invalid_request_error",
                      "invalid_api_key");
    }
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "llm_gateway: authenticated user=\"%s\" route=\"%s\"",
                  log_value(ctx->auth.user->name).c_str(), ctx->route->name);
    if ((lcf->mode == kModeAdmin || lcf->mode == kModeMetrics) && !ctx->auth.user->admin) {
        return reject(r, NGX_HTTP_FORBIDDEN, "this key is not an admin key", "permission_error", "admin_required");
    }
    return NGX_OK;
}

ngx_int_t start(ngx_http_request_t* r, RequestCtx* ctx, LocConf* lcf) {
    const RouteRow* row = find_route(lcf->mode, sv(r->uri));
    if (row == nullptr) {
        return reject(r, NGX_HTTP_NOT_FOUND, "Unknown request URL: " + std::string(sv(r->uri)),
                      "invalid_request_error", "unknown_url");
    }
    ctx->route = row;
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "llm_gateway: route \"%s\" for \"%s\"", row->name,
                   log_value(sv(r->uri)).c_str());
    if ((r->method & row->methods) == 0) return reject_method(r, row->allow);
    // The admin HTML shell needs no key; nor does a scrape from an allowed address.
    if (!row->authenticated || (lcf->mode == kModeMetrics && scrape_allowed(r, lcf))) {
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "llm_gateway: no key needed here");
        ctx->phase = RequestCtx::Phase::Admitted;
        return NGX_DECLINED;
    }

    ngx_int_t rc = authenticate(r, ctx, lcf);
    if (rc != NGX_OK) return rc;
    ctx->auth.is_admin_traffic = row->mode == kModeAdmin || row->mode == kModeMetrics;
    if (row->body == BodyRule::None) return admitted_or_admit(r, ctx, *row);
    // What can be refused before the body is read, is.
    if (row->body == BodyRule::Multipart) {
        ngx_table_elt_t* ct = r->headers_in.content_type;
        ctx->in.form_boundary = ct ? form_data_boundary(sv(ct->value)) : std::string();
        if (ctx->in.form_boundary.empty()) {
            return reject(r, NGX_HTTP_BAD_REQUEST,
                          "malformed multipart body: the Content-Type must be multipart/form-data with a boundary",
                          "invalid_request_error", "invalid_content_type");
        }
    }
    if (row->body == BodyRule::Raw) {
        rc = lcf->mode == kModePassthrough ? route_passthrough(r, ctx, lcf) : route_target(r, ctx, lcf);
        if (rc != NGX_OK) return rc;
    }

    ctx->phase = RequestCtx::Phase::ReadingBody;
    rc = ngx_http_read_client_request_body(r, body_ready);
    if (rc == NGX_ERROR || rc >= NGX_HTTP_SPECIAL_RESPONSE) return rc;
    if (rc == NGX_AGAIN) {
        // Hold no extra reference while waiting: a read error finalizes the
        // request itself and must be able to free it.
        r->main->count--;
        ctx->waiting_body = true;
        return NGX_DONE;
    }
    return after_body(r, ctx);
}

ngx_int_t access(ngx_http_request_t* r, LocConf* lcf) {
    RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr) {
        ctx = create_ctx(r);
        if (ctx == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    // Its calls, and what they leave to count or release (also on a context
    // the error-page filter made before an internal redirect brought the
    // request here).
    if (ctx->on_end == nullptr) ctx->on_end = end_metered_request;
    switch (ctx->phase) {
    case RequestCtx::Phase::Start:
        return start(r, ctx, lcf);
    case RequestCtx::Phase::ReadingBody:
        return NGX_DONE;
    case RequestCtx::Phase::BodyRead:
        return after_body(r, ctx);
    case RequestCtx::Phase::Admitting:
        return ctx->store_pending ? NGX_DONE : finish_admission(r, ctx);
    default:
        return NGX_DECLINED;   // admitted already (e.g. after an internal redirect)
    }
}

}  // namespace

ngx_int_t access_handler(ngx_http_request_t* r) {
    if (r != r->main) return NGX_DECLINED;
    auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module));
    if (lcf->mode == kModeNone) return NGX_DECLINED;
    try {
        return access(r, lcf);
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: access phase failed: %s", log_text(e.what()).c_str());
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
}

}  // namespace llmgw
