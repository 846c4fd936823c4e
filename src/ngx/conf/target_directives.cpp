// Tool servers and agents: llm_gateway_mcp_server, llm_gateway_agent (http
// level), llm_gateway_mcp (the federated endpoint's location) and
// llm_gateway_target_proxy (a per-target proxy location).
#include <openssl/rand.h>

#include "core/config/secret.h"
#include "core/targets/agent_card.h"
#include "ngx/conf/conf_util.h"
#include "ngx/http/respond.h"
#include "ngx/conf/directives.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"

namespace llmgw {

char* set_mode(ngx_conf_t* cf, void* conf, LocMode mode);   // directives.cpp

namespace {

char* target(ngx_conf_t* cf, GatewayState* st, TargetKind kind) {
    const char* directive = kind == TargetKind::Mcp ? "llm_gateway_mcp_server" : "llm_gateway_agent";
    TargetConf t;
    t.kind = kind;
    t.name = std::string(conf_arg(cf, 1));
    t.where = conf_where(cf);
    for (ngx_uint_t i = 2; i < cf->args->nelts; ++i) {
        Param prm = split_param(conf_arg(cf, i));
        if (prm.name == "location" && prm.has_eq) {
            t.location = std::string(prm.value);
        } else if (prm.name == "url" && prm.has_eq) {
            t.url = std::string(prm.value);
        } else if (prm.name == "groups" && prm.has_eq) {
            t.restricted = true;   // "groups=" with no group: closed to every group
            t.groups = split_list(prm.value);
        } else if (prm.name == "card" && prm.has_eq && kind == TargetKind::Agent) {
            t.card_path = std::string(prm.value);
        } else {
            return conf_error(cf, "invalid parameter \"" + param_name(conf_arg(cf, i)) + "\" of " + directive);
        }
    }
    std::string err = st->targets.add(std::move(t));
    return err.empty() ? NGX_CONF_OK : conf_error(cf, err);
}

char* mcp_server(ngx_conf_t* cf, GatewayState* st) { return target(cf, st, TargetKind::Mcp); }
char* agent(ngx_conf_t* cf, GatewayState* st) { return target(cf, st, TargetKind::Agent); }

// llm_gateway_mcp [session_key=secret] [list_timeout=time] [call_timeout=time] [session_ttl=time]
//                 [max_response=size] [max_total=size];
char* mcp_endpoint(ngx_conf_t* cf, LocConf* lcf) {
    auto* mcf = static_cast<MainConf*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_gateway_module));
    auto ep = std::make_unique<McpEndpoint>();
    std::string key;
    for (ngx_uint_t i = 1; i < cf->args->nelts; ++i) {
        Param prm = split_param(conf_arg(cf, i));
        ngx_msec_t* time = prm.name == "list_timeout"  ? &ep->list_timeout
                           : prm.name == "call_timeout" ? &ep->call_timeout
                           : prm.name == "session_ttl"  ? &ep->session_ttl
                                                        : nullptr;
        if (time != nullptr && prm.has_eq) {
            if (!conf_time(prm.value, *time) || *time < 100 || *time > 86400000u * 30) {
                return conf_error(cf, std::string(prm.name) + "= of llm_gateway_mcp must be a time from 100ms to 30d");
            }
        } else if ((prm.name == "max_response" || prm.name == "max_total") && prm.has_eq) {
            std::size_t& size = prm.name == "max_response" ? ep->max_response : ep->max_total;
            if (!conf_size(prm.value, size) || size < 1024 || size > 256u * 1024 * 1024) {
                return conf_error(cf, std::string(prm.name) + "= of llm_gateway_mcp must be a size from 1k to 256m");
            }
        } else if (prm.name == "session_key" && prm.has_eq) {
            SecretResult res = resolve_secret(prm.value);
            if (!res.ok) return conf_error(cf, "llm_gateway_mcp: " + res.error);
            if (res.value.size() < 16) {
                return conf_error(cf, "session_key= of llm_gateway_mcp must be at least 16 bytes long");
            }
            key = std::move(res.value);
            ep->key_ref = describe_secret_ref(prm.value);
            ep->own_key = true;
        } else {
            return conf_error(cf, "invalid parameter \"" + param_name(conf_arg(cf, i)) + "\" of llm_gateway_mcp");
        }
    }
    if (key.empty()) {
        // Without a configured key, sessions hold on every worker of this
        // configuration only (not across replicas or reloads).
        unsigned char raw[32];
        if (RAND_bytes(raw, sizeof raw) != 1) return conf_error(cf, "llm_gateway_mcp: no randomness for a session key");
        key.assign(reinterpret_cast<char*>(raw), sizeof raw);
        ep->key_ref = "generated";
    }
    ep->sealer = std::make_unique<SessionSealer>(key);
    lcf->mcp = ep.get();
    mcf->state->mcp_endpoints.push_back(std::move(ep));
    return NGX_CONF_OK;
}

// llm_gateway_target_proxy mcp|agent;
char* target_proxy(ngx_conf_t* cf, LocConf* lcf) {
    std::string_view kind = conf_arg(cf, 1);
    if (kind != "mcp" && kind != "agent") {
        return conf_error(cf, "llm_gateway_target_proxy takes mcp or agent, not \"" + std::string(kind) + "\"");
    }
    return set_mode(cf, lcf, kind == "mcp" ? kModeMcpProxy : kModeAgentProxy);
}

char* mcp_location(ngx_conf_t* cf, LocConf* lcf) {
    char* rv = set_mode(cf, lcf, kModeMcp);
    if (rv != NGX_CONF_OK) return rv;
    return mcp_endpoint(cf, lcf);
}

}  // namespace

char* set_mcp_server(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, mcp_server, static_cast<MainConf*>(conf)->state);
}
char* set_agent(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, agent, static_cast<MainConf*>(conf)->state);
}
char* set_mcp(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, mcp_location, static_cast<LocConf*>(conf));
}
char* set_target_proxy(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, target_proxy, static_cast<LocConf*>(conf));
}

// llm_gateway_public_url: a value with variables is checked per request
// (an invalid one falls back to the connection's scheme and Host); one
// without is checked now.
char* set_public_url(ngx_conf_t* cf, ngx_command_t* cmd, void* conf) {
    char* rv = ngx_http_set_complex_value_slot(cf, cmd, conf);
    if (rv != NGX_CONF_OK) return rv;
    const ngx_http_complex_value_t* cv = static_cast<LocConf*>(conf)->public_url;
    if (cv->lengths != nullptr) return NGX_CONF_OK;
    try {
        std::string base, err;
        if (!public_base(sv(cv->value), base, err)) return conf_error(cf, "llm_gateway_public_url: " + err);
    } catch (...) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    return NGX_CONF_OK;
}

}  // namespace llmgw
