// ACCESS phase: route, method, authentication, the request body, model
// resolution (and, with the metering issue, admission). A request that fails
// here is answered with the gateway's error envelope and never reaches the
// content handler; one that passes carries everything the content handler
// needs in its RequestCtx.
#include "core/json/envelope.h"
#include "ngx/http/routes.h"
#include "ngx/module.h"

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

// Reads the buffered body (memory and, for large bodies, the temp file).
bool collect_body(ngx_http_request_t* r, std::string& out) {
    if (r->request_body == nullptr) return true;
    for (ngx_chain_t* cl = r->request_body->bufs; cl; cl = cl->next) {
        ngx_buf_t* b = cl->buf;
        if (b->in_file) {
            off_t size = b->file_last - b->file_pos;
            std::size_t at = out.size();
            out.resize(at + static_cast<std::size_t>(size));
            ssize_t n = ngx_read_file(b->file, reinterpret_cast<u_char*>(&out[at]), static_cast<size_t>(size),
                                      b->file_pos);
            if (n != static_cast<ssize_t>(size)) return false;
        } else {
            out.append(reinterpret_cast<const char*>(b->pos), static_cast<std::size_t>(b->last - b->pos));
        }
    }
    return true;
}

void body_ready(ngx_http_request_t* r);

ngx_int_t admitted_or_admit(ngx_http_request_t* r, RequestCtx* ctx, const RouteRow& row) {
    if (row.metered) return admit_request(r, ctx);
    ctx->phase = RequestCtx::Phase::Admitted;
    return NGX_DECLINED;
}

ngx_int_t after_body(ngx_http_request_t* r, RequestCtx* ctx) {
    if (!collect_body(r, ctx->body)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, ngx_errno, "llm_gateway: cannot read the buffered request body");
        return reject(r, NGX_HTTP_INTERNAL_SERVER_ERROR, "the request body could not be read", "server_error", "");
    }
    const RouteRow& row = *ctx->route;
    if (row.body != BodyRule::Json) {
        // A body rule with no reader yet: a table error, never a request's.
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "llm_gateway: route \"%s\" has no body reader",
                      row.name);
        return reject(r, NGX_HTTP_INTERNAL_SERVER_ERROR, "the request body could not be read", "server_error", "");
    }
    std::string err;
    ctx->doc = RequestDoc::parse(ctx->body, err);
    if (!ctx->doc) return reject(r, NGX_HTTP_BAD_REQUEST, err, "invalid_request_error", "invalid_request");

    auto* mcf = static_cast<MainConf*>(ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module));
    if (!mcf->state->config.resolve_model(ctx->doc->info().model, ctx->resolved, err)) {
        return reject(r, NGX_HTTP_NOT_FOUND, err, "invalid_request_error", "model_not_found");
    }
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

ngx_int_t authenticate(ngx_http_request_t* r, RequestCtx* ctx, LocConf* lcf) {
    auto* mcf = static_cast<MainConf*>(ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module));
    ctx->directory = mcf->state->directory;
    std::string_view key = presented_key(r);
    if (key.empty()) {
        log_auth_failure(r, "no key");
        return reject(r, NGX_HTTP_UNAUTHORIZED,
                      "You didn't provide an API key. Send it as Authorization: Bearer <key> or x-api-key.",
                      "invalid_request_error", "missing_api_key");
    }
    ctx->user = ctx->directory->find_by_key(key);
    if (ctx->user == nullptr) {
        log_auth_failure(r, "unknown key");
        return reject(r, NGX_HTTP_UNAUTHORIZED, "Incorrect API key provided.", "invalid_request_error",
                      "invalid_api_key");
    }
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "llm_gateway: authenticated user=\"%s\" route=\"%s\"",
                  log_value(ctx->user->name).c_str(), ctx->route->name);
    if (lcf->mode == kModeAdmin && !ctx->user->admin) {
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
    if ((r->method & row->methods) == 0) return reject_method(r, row->allow);
    if (!row->authenticated) {   // e.g. the admin HTML shell
        ctx->phase = RequestCtx::Phase::Admitted;
        return NGX_DECLINED;
    }

    ngx_int_t rc = authenticate(r, ctx, lcf);
    if (rc != NGX_OK) return rc;
    ctx->is_admin_traffic = row->mode == kModeAdmin;
    if (row->body == BodyRule::None) return admitted_or_admit(r, ctx, *row);

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
