// The module's nginx variables, for log_format, map and other modules
// (docs/variables.md): who called, which route, which model and provider
// answered, what was counted and why admission refused. Each is read from
// the request's context; "not found" (logged as "-") when the request did
// not get that far. A text value holds no control byte: CR, LF, NUL, the
// others below 0x20, DEL and the backslash are written \xHH, so that a
// model or user name a caller or a users file chose cannot split a header
// (add_header X-Model $llm_gateway_model) or a log line.
#include <cinttypes>

#include "ngx/request/route.h"
#include "ngx/http/variables.h"

#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {
namespace {

enum Field : uintptr_t {
    kUser, kGroup, kRoute, kModel, kProvider, kTokensIn, kTokensOut, kCost, kAttempts, kRejectKind,
};

bool needs_escape(unsigned char c) { return c < 0x20 || c == 0x7f || c == '\\'; }

ngx_int_t set_text(ngx_http_request_t* r, ngx_http_variable_value_t* v, std::string_view s) {
    if (s.empty()) {
        v->not_found = 1;
        return NGX_OK;
    }
    std::size_t len = s.size();
    for (char c : s) len += needs_escape(static_cast<unsigned char>(c)) ? 3 : 0;
    auto* p = static_cast<u_char*>(ngx_pnalloc(r->pool, len));
    if (p == nullptr) return NGX_ERROR;
    static const char kHex[] = "0123456789ABCDEF";
    u_char* q = p;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (!needs_escape(c)) {
            *q++ = c;
            continue;
        }
        *q++ = '\\';
        *q++ = 'x';
        *q++ = static_cast<u_char>(kHex[c >> 4]);
        *q++ = static_cast<u_char>(kHex[c & 0xf]);
    }
    v->data = p;
    v->len = len;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;
    return NGX_OK;
}

ngx_int_t set_number(ngx_http_request_t* r, ngx_http_variable_value_t* v, std::int64_t n) {
    if (n < 0) {
        v->not_found = 1;
        return NGX_OK;
    }
    auto* p = static_cast<u_char*>(ngx_pnalloc(r->pool, NGX_INT64_LEN));
    if (p == nullptr) return NGX_ERROR;
    v->data = p;
    v->len = ngx_sprintf(p, "%L", static_cast<long long>(n)) - p;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;
    return NGX_OK;
}

// The provider that answered (counted by accounting), else the resolved one.
const ProviderConf* provider_of(const RequestCtx& ctx) {
    if (ctx.billed.provider != nullptr) return ctx.billed.provider;
    return ctx.in.resolved.provider;
}

ngx_int_t get(ngx_http_request_t* r, ngx_http_variable_value_t* v, uintptr_t data) {
    const RequestCtx* ctx = get_ctx(r);
    if (ctx == nullptr) {
        v->not_found = 1;
        return NGX_OK;
    }
    switch (static_cast<Field>(data)) {
    case kUser: return set_text(r, v, ctx->auth.user ? std::string_view(ctx->auth.user->name) : std::string_view());
    case kGroup: return set_text(r, v, ctx->auth.user ? std::string_view(ctx->auth.user->group) : std::string_view());
    case kRoute:
        if (ctx->route == nullptr) return set_text(r, v, {});
        return set_text(r, v, ctx->route->event_route ? ctx->route->event_route : ctx->route->name);
    case kModel:
        return set_text(r, v, !ctx->billed.model.empty() ? std::string_view(ctx->billed.model)
                                                           : std::string_view(ctx->in.resolved.canonical));
    case kProvider: {
        const ProviderConf* p = provider_of(*ctx);
        return set_text(r, v, p ? std::string_view(p->name) : std::string_view());
    }
    case kTokensIn: return set_number(r, v, ctx->billed.in);
    case kTokensOut: return set_number(r, v, ctx->billed.out);
    case kCost: return set_number(r, v, ctx->billed.cost);
    case kAttempts:
        return ctx->route && ctx->route->codec != CodecKind::None ? set_number(r, v, static_cast<std::int64_t>(ctx->attempts.calls.size()))
                                                                   : set_text(r, v, {});
    case kRejectKind: return set_text(r, v, ctx->admission.reject_kind ? ctx->admission.reject_kind : "");
    }
    v->not_found = 1;
    return NGX_OK;
}

ngx_int_t get_variable(ngx_http_request_t* r, ngx_http_variable_value_t* v, uintptr_t data) {
    try {
        return get(r, v, data);
    } catch (const std::exception&) {
        return NGX_ERROR;
    }
}

struct VarDef {
    const char* name;
    Field field;
};

const VarDef kVars[] = {
    {"llm_gateway_user", kUser},           {"llm_gateway_group", kGroup},
    {"llm_gateway_route", kRoute},         {"llm_gateway_model", kModel},
    {"llm_gateway_provider", kProvider},   {"llm_gateway_tokens_in", kTokensIn},
    {"llm_gateway_tokens_out", kTokensOut}, {"llm_gateway_cost_micro_usd", kCost},
    {"llm_gateway_attempts", kAttempts},   {"llm_gateway_reject_kind", kRejectKind},
};

}  // namespace

ngx_int_t add_variables(ngx_conf_t* cf) {
    for (const VarDef& d : kVars) {
        ngx_str_t name;
        name.data = reinterpret_cast<u_char*>(const_cast<char*>(d.name));
        name.len = ngx_strlen(d.name);
        ngx_http_variable_t* var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);
        if (var == nullptr) return NGX_ERROR;
        var->get_handler = get_variable;
        var->data = static_cast<uintptr_t>(d.field);
    }
    return NGX_OK;
}

}  // namespace llmgw
