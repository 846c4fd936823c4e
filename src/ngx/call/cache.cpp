// The response cache's shell: the per-request decision, the call's key, the
// status nginx's cache reports, a stored miss's tool-call watch, and the
// cache's variables.
#include "ngx/call/cache.h"

#include "core/cache/cache_key.h"
#include "core/cache/cache_settings.h"
#include "core/log/log_escape.h"
#include "ngx/call/call.h"
#include "ngx/http/headers.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/request/route.h"

namespace llmgw {
namespace {

bool route_cacheable(const RequestCtx& ctx) {
    if (ctx.route == nullptr) return false;
    switch (ctx.route->codec) {
    case CodecKind::OpenAIChat:
    case CodecKind::OpenAIEmbeddings:
    case CodecKind::AnthropicMessages:
    case CodecKind::OpenAIResponses:
        return true;
    default:
        return false;
    }
}

// The caller's Cache-Control header lines, joined by commas.
std::string cache_control(ngx_http_request_t* r) {
    std::string out;
    for_each_header(r->headers_in.headers, [&](const ngx_table_elt_t& h) {
        if (header_name_is(h.key, "cache-control")) {
            if (!out.empty()) out += ',';
            out.append(reinterpret_cast<const char*>(h.value.data), h.value.len);
        }
        return true;
    });
    return out;
}

void decide(ngx_http_request_t* r, RequestCtx* ctx) {
    CachePart& c = ctx->cache;
    c.decided = true;
    const auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r->main, ngx_http_llm_gateway_module));
    c.settings = lcf != nullptr ? lcf->cache : nullptr;
    if (c.settings == nullptr) {
        c.skip = CacheSkip::Off;
        return;
    }
    CacheAsk a;
    a.route_cacheable = route_cacheable(*ctx);
    a.group = ctx->auth.user != nullptr ? std::string_view(ctx->auth.user->group) : std::string_view();
    const std::string cc = cache_control(r->main);
    a.cache_control = cc;
    a.temperature = ctx->in.doc ? ctx->in.doc->info().temperature : -1;
    c.skip = cache_decision(*c.settings, a);
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "llm_gateway: cache: %s (zone \"%s\")",
                   cache_skip_reason(c.skip).data(), log_value(c.settings->zone).c_str());
}

AnswerWire wire_of(const Call& call) {
    const CodecKind k = call.req->route != nullptr ? call.req->route->codec : CodecKind::None;
    if (k == CodecKind::OpenAIEmbeddings) return AnswerWire::None;
    switch (call.provider->type) {
    case ProviderType::OpenAI: return k == CodecKind::OpenAIResponses ? AnswerWire::Responses : AnswerWire::OpenAIChat;
    case ProviderType::Anthropic: return AnswerWire::Anthropic;
    case ProviderType::Gemini: return AnswerWire::Gemini;
    }
    return AnswerWire::OpenAIChat;
}

const char* status_name(ngx_uint_t s) {
    switch (s) {
    case NGX_HTTP_CACHE_MISS: return "MISS";
    case NGX_HTTP_CACHE_BYPASS: return "BYPASS";
    case NGX_HTTP_CACHE_EXPIRED: return "EXPIRED";
    case NGX_HTTP_CACHE_STALE: return "STALE";
    case NGX_HTTP_CACHE_UPDATING: return "UPDATING";
    case NGX_HTTP_CACHE_REVALIDATED: return "REVALIDATED";
    case NGX_HTTP_CACHE_HIT: return "HIT";
    default: return nullptr;
    }
}

// ----------------------------------------------------------------- variables

enum Var : uintptr_t { kZone, kKey, kStatus };

Call* call_of_subrequest(ngx_http_request_t* r) {
    if (r == r->main) return nullptr;
    auto* sub = static_cast<SubCtx*>(ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module));
    return sub != nullptr ? sub->call : nullptr;
}

ngx_int_t set_value(ngx_http_variable_value_t* v, std::string_view s, ngx_http_request_t* r) {
    auto* p = static_cast<u_char*>(ngx_pnalloc(r->pool, s.size() ? s.size() : 1));
    if (p == nullptr) return NGX_ERROR;
    ngx_memcpy(p, s.data(), s.size());
    v->data = p;
    v->len = s.size();
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;
    return NGX_OK;
}

ngx_int_t get_var(ngx_http_request_t* r, ngx_http_variable_value_t* v, uintptr_t data) {
    try {
        switch (static_cast<Var>(data)) {
        case kZone: {
            // In the provider location's proxy_cache: the zone, or "off"
            // (nginx neither looks up nor stores).
            const Call* c = call_of_subrequest(r);
            if (c == nullptr || !c->cache) return set_value(v, "off", r);
            return set_value(v, c->cache->settings->zone, r);
        }
        case kKey: {
            const Call* c = call_of_subrequest(r);
            if (c == nullptr || !c->cache) break;
            return set_value(v, c->cache->key, r);
        }
        case kStatus: {
            const RequestCtx* ctx = get_ctx(r->main);
            if (ctx == nullptr || !ctx->cache.decided || ctx->cache.skip == CacheSkip::Off) break;
            if (ctx->cache.skip != CacheSkip::None) return set_value(v, "BYPASS", r);
            const Call* c = ctx->attempts.chosen;
            const char* name = c != nullptr && c->cache ? status_name(c->cache->status) : nullptr;
            if (name == nullptr) break;
            return set_value(v, name, r);
        }
        }
    } catch (const std::exception&) {
        return NGX_ERROR;
    }
    v->not_found = 1;
    return NGX_OK;
}

}  // namespace

bool cache_prepare(ngx_http_request_t* r, Call& call, ngx_chain_t* body) {
    RequestCtx* ctx = call.req;
    if (!ctx->cache.decided) decide(r, ctx);
    if (ctx->cache.skip != CacheSkip::None || call.mode != Call::Mode::Relay) return true;
    const CacheSettings& s = *ctx->cache.settings;
    CacheKeyParts p;
    p.provider = call.provider->name;
    p.upstream_model = call.target != nullptr ? call.target->upstream_model : ctx->in.resolved.upstream_model;
    p.method = sv(call.sr->method_name);
    const std::string path = std::string(sv(call.sr->uri)) + "?" + std::string(sv(call.sr->args));
    p.path = path;
    std::string scope;
    if (s.shared_scope) {
        scope = "shared";
    } else if (ctx->auth.user != nullptr && !ctx->auth.user->group.empty()) {
        scope = "group:" + ctx->auth.user->group;
    } else {
        scope = "user:" + (ctx->auth.user != nullptr ? ctx->auth.user->name : std::string());
    }
    p.scope = scope;
    // The headers that shape answers (the codec's and the caller's relayed
    // ones); the provider's key never (it is the same for every call).
    for_each_header(call.sr->headers_in.headers, [&](const ngx_table_elt_t& h) {
        if (cache_keyed_header(sv(h.key)) || header_name_is(h.key, "content-type")) {
            p.headers.emplace_back(sv(h.key), sv(h.value));
        }
        return true;
    });
    for (ngx_chain_t* cl = body; cl != nullptr; cl = cl->next) {
        if (cl->buf->pos != nullptr && cl->buf->last > cl->buf->pos) {
            p.body.emplace_back(reinterpret_cast<const char*>(cl->buf->pos), static_cast<std::size_t>(cl->buf->last - cl->buf->pos));
        }
    }
    auto state = std::make_unique<Call::CacheState>();
    state->key = cache_key(p);
    if (state->key.empty()) return false;
    state->settings = &s;
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "llm_gateway: cache: key %s for provider \"%s\"",
                   state->key.c_str(), log_value(call.provider->name).c_str());
    call.cache = std::move(state);
    return true;
}

void cache_on_header(Call& call, ngx_http_request_t* sr) {
    if (!call.cache || sr->upstream == nullptr) return;
    ngx_http_upstream_t* u = sr->upstream;
    call.cache->status = u->cache_status;
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, sr->connection->log, 0, "llm_gateway: cache: %s%s",
                   status_name(u->cache_status) != nullptr ? status_name(u->cache_status) : "not consulted",
                   u->cacheable && !sr->cached ? " (the answer may be stored)" : "");
    if (sr->cached || !u->cacheable) return;
    // nginx stores only an answer it reads buffered; the provider location
    // may say proxy_buffering off (for streams): this call's is read
    // buffered (nginx looks at the flag after the header filters ran).
    u->buffering = 1;
    if (!call.cache->settings->tool_calls) call.cache->scan = std::make_unique<ToolCallScan>(wire_of(call));
}

void cache_on_bytes(Call& call, std::string_view bytes) {
    if (!call.cache || !call.cache->scan || call.sr == nullptr || call.sr->upstream == nullptr) return;
    call.cache->scan->feed(bytes);
    if (!call.cache->scan->found()) return;
    call.cache->scan.reset();
    if (call.sr->upstream->cacheable) {
        // nginx neither renames its temporary file into the cache nor keeps it.
        call.sr->upstream->cacheable = 0;
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, call.sr->connection->log, 0,
                       "llm_gateway: cache: the answer calls a tool; not stored (tool_calls=off)");
    }
}

CacheUse cache_use(const Call& call) {
    if (!call.cache) return CacheUse::None;
    switch (call.cache->status) {
    case NGX_HTTP_CACHE_HIT:
    case NGX_HTTP_CACHE_STALE:
    case NGX_HTTP_CACHE_UPDATING:
    case NGX_HTTP_CACHE_REVALIDATED:
        return CacheUse::Hit;
    case NGX_HTTP_CACHE_MISS:
    case NGX_HTTP_CACHE_EXPIRED:
        return CacheUse::Miss;
    default:
        return CacheUse::None;
    }
}

ngx_int_t add_cache_variables(ngx_conf_t* cf) {
    static const struct {
        const char* name;
        Var var;
    } vars[] = {{"llm_gateway_cache", kZone}, {"llm_gateway_cache_key", kKey}, {"llm_gateway_cache_status", kStatus}};
    for (const auto& d : vars) {
        ngx_str_t name{ngx_strlen(d.name), reinterpret_cast<u_char*>(const_cast<char*>(d.name))};
        ngx_http_variable_t* var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);
        if (var == nullptr) return NGX_ERROR;
        var->get_handler = get_var;
        var->data = d.var;
    }
    return NGX_OK;
}

}  // namespace llmgw
