// Directive setters. Each parses its arguments into the core configuration
// model and reports what is wrong with the directive's file and line.
#include <cstdlib>
#include <cstring>

#include "ngx/conf/directives.h"

#include "core/config/secret.h"
#include "ngx/conf/conf_util.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/store/store.h"
#include "ngx/ngx_incl.h"

namespace llmgw {
namespace {

std::string where(ngx_conf_t* cf) { return conf_where(cf); }
std::string_view arg(ngx_conf_t* cf, ngx_uint_t i) { return conf_arg(cf, i); }

bool resolve(ngx_conf_t* cf, std::string_view directive, std::string_view ref, std::string& value, char** rv) {
    SecretResult res = resolve_secret(ref);
    if (!res.ok) {
        *rv = conf_error(cf, std::string(directive) + ": " + res.error);
        return false;
    }
    value = std::move(res.value);
    return true;
}

// Parses limit parameters (requests_per_minute=..., costPerDayUSD=...).
bool try_limit(ngx_conf_t* cf, Limits& limits, const Param& p, char** rv) {
    std::string err = set_limit(limits, p.name, p.value);
    if (err.empty()) return true;
    if (err.rfind("unknown limit", 0) == 0) return false;
    *rv = conf_error(cf, err);
    return true;
}

char* guarded(ngx_conf_t* cf, char* (*fn)(ngx_conf_t*, GatewayState*), void* conf) {
    return guarded_setter(cf, fn, static_cast<MainConf*>(conf)->state);
}

char* provider(ngx_conf_t* cf, GatewayState* st) {
    ProviderConf p;
    p.name = std::string(arg(cf, 1));
    p.where = where(cf);
    bool have_type = false;
    for (ngx_uint_t i = 2; i < cf->args->nelts; ++i) {
        Param prm = split_param(arg(cf, i));
        if (prm.name == "type" && prm.has_eq) {
            if (!parse_provider_type(prm.value, p.type)) {
                return conf_error(cf, "unknown provider type \"" + std::string(prm.value) +
                                          "\": use openai, anthropic or gemini");
            }
            have_type = true;
        } else if (prm.name == "location" && prm.has_eq) {
            p.location = std::string(prm.value);
        } else if (prm.name == "key" && prm.has_eq) {
            char* rv = nullptr;
            if (!resolve(cf, "llm_gateway_provider", prm.value, p.key, &rv)) return rv;
            p.key_ref = describe_secret_ref(prm.value);
            // The key goes into a request header: a CR, LF or NUL in it would
            // split or end that header (the reference is named, never the value).
            for (char c : p.key) {
                const auto u = static_cast<unsigned char>(c);
                if (u < 0x20 || u == 0x7f) {
                    return conf_error(cf, "llm_gateway_provider \"" + p.name + "\": its key (" + p.key_ref +
                                              ") holds a control byte (CR, LF, NUL, another below 0x20 or DEL); a key "
                                              "is sent in a request header and may hold none");
                }
            }
        } else if (prm.name == "models" && prm.has_eq) {
            p.models = split_list(prm.value);
        } else if (prm.name == "groups" && prm.has_eq) {
            p.groups = split_list(prm.value);
            p.restricted = true;
            if (p.groups.empty()) {
                return conf_error(cf, "groups= of llm_gateway_provider \"" + p.name +
                                          "\" must name at least one group (omit it to open the provider to all)");
            }
        } else if (prm.name == "default" && !prm.has_eq) {
            p.is_default = true;
        } else if (prm.name == "discover" && prm.has_eq) {
            ngx_msec_t ms = 0;
            if (!conf_time(prm.value, ms) || ms < 10000) {
                return conf_error(cf, "discover= of llm_gateway_provider \"" + p.name +
                                          "\" must be a time of at least 10s (e.g. discover=10m)");
            }
            p.discover_ms = ms;
        } else if ((prm.name == "discover_max_page" || prm.name == "discover_max_total") && prm.has_eq) {
            std::size_t size = 0;
            if (!conf_size(prm.value, size) || size < 1024 || size > 256u * 1024 * 1024) {
                return conf_error(cf, std::string(prm.name) + "= of llm_gateway_provider \"" + p.name +
                                          "\" must be a size from 1k to 256m (e.g. " + std::string(prm.name) + "=4m)");
            }
            (prm.name == "discover_max_page" ? p.discover_bounds.max_page : p.discover_bounds.max_total) = size;
        } else if (prm.name == "discover_timeout" && prm.has_eq) {
            ngx_msec_t ms = 0;
            if (!conf_time(prm.value, ms) || ms < 1000 || ms > 50000) {
                return conf_error(cf, "discover_timeout= of llm_gateway_provider \"" + p.name +
                                          "\" must be a time from 1s to 50s (e.g. discover_timeout=30s)");
            }
            p.discover_timeout_ms = ms;
        } else if (prm.name == "retries" && prm.has_eq) {
            const ngx_int_t n = ngx_atoi(reinterpret_cast<u_char*>(const_cast<char*>(prm.value.data())), prm.value.size());
            if (n < 0 || n > 10) {
                return conf_error(cf, "retries= of llm_gateway_provider \"" + p.name + "\" must be a number from 0 to 10");
            }
            p.resilience.retries = n;
        } else if (prm.name == "retry_backoff" && prm.has_eq) {
            const std::size_t comma = prm.value.find(',');
            ngx_msec_t base = 0, max = 0;
            if (comma == std::string_view::npos || !conf_time(prm.value.substr(0, comma), base) ||
                !conf_time(prm.value.substr(comma + 1), max) || base < 1 || max < base || max > 60000) {
                return conf_error(cf, "retry_backoff= of llm_gateway_provider \"" + p.name +
                                          "\" must be two times, base,max, with 1ms <= base <= max <= 60s "
                                          "(e.g. retry_backoff=100ms,1s)");
            }
            p.resilience.backoff_base_ms = base;
            p.resilience.backoff_max_ms = max;
        } else if (prm.name == "breaker" && prm.has_eq && prm.value == "off") {
            p.resilience.breaker_failures = 0;
        } else if (prm.name == "breaker_failures" && prm.has_eq) {
            const ngx_int_t n = ngx_atoi(reinterpret_cast<u_char*>(const_cast<char*>(prm.value.data())), prm.value.size());
            if (n < 1 || n > 1000) {
                return conf_error(cf, "breaker_failures= of llm_gateway_provider \"" + p.name +
                                          "\" must be a number from 1 to 1000 (breaker=off turns it off)");
            }
            p.resilience.breaker_failures = n;
        } else if (prm.name == "breaker_open" && prm.has_eq) {
            ngx_msec_t ms = 0;
            if (!conf_time(prm.value, ms) || ms < 1000 || ms > 3600000) {
                return conf_error(cf, "breaker_open= of llm_gateway_provider \"" + p.name +
                                          "\" must be a time from 1s to 1h (e.g. breaker_open=30s)");
            }
            p.resilience.breaker_open_ms = ms;
        } else {
            return conf_error(cf, "invalid parameter \"" + param_name(arg(cf, i)) + "\" of llm_gateway_provider");
        }
    }
    if (p.resilience.breaker_failures == 0 && p.resilience.breaker_open_ms >= 0) {
        return conf_error(cf, "llm_gateway_provider \"" + p.name + "\": breaker=off and breaker_open= contradict");
    }
    if (!have_type) return conf_error(cf, "llm_gateway_provider \"" + p.name + "\" needs type=openai, type=anthropic or type=gemini");
    std::string err = st->config.add_provider(std::move(p));
    return err.empty() ? NGX_CONF_OK : conf_error(cf, err);
}

char* group(ngx_conf_t* cf, GatewayState* st) {
    GroupConf g;
    g.name = std::string(arg(cf, 1));
    g.where = where(cf);
    for (ngx_uint_t i = 2; i < cf->args->nelts; ++i) {
        Param prm = split_param(arg(cf, i));
        char* rv = nullptr;
        if (prm.has_eq && try_limit(cf, g.limits, prm, &rv)) {
            if (rv) return rv;
            continue;
        }
        return conf_error(cf, "invalid parameter \"" + param_name(arg(cf, i)) + "\" of llm_gateway_group");
    }
    std::string err = st->config.inline_directory().add_group(std::move(g));
    return err.empty() ? NGX_CONF_OK : conf_error(cf, err);
}

char* user(ngx_conf_t* cf, GatewayState* st) {
    UserConf u;
    u.name = std::string(arg(cf, 1));
    u.where = where(cf);
    bool have_key = false;
    for (ngx_uint_t i = 2; i < cf->args->nelts; ++i) {
        Param prm = split_param(arg(cf, i));
        char* rv = nullptr;
        if (prm.name == "key" && prm.has_eq) {
            std::string key;
            if (!resolve(cf, "llm_gateway_user", prm.value, key, &rv)) return rv;
            u.key_digest = sha256(key);
            u.key_source = describe_secret_ref(prm.value);
            have_key = true;
        } else if (prm.name == "key_sha256" && prm.has_eq) {
            if (!from_hex(prm.value, u.key_digest)) {
                return conf_error(cf, "key_sha256 of user \"" + u.name + "\" must be 64 hex digits");
            }
            u.key_source = "sha256";
            have_key = true;
        } else if (prm.name == "group" && prm.has_eq) {
            u.group = std::string(prm.value);
        } else if (prm.name == "admin" && !prm.has_eq) {
            u.admin = true;
        } else if (prm.has_eq && try_limit(cf, u.limits, prm, &rv)) {
            if (rv) return rv;
        } else {
            return conf_error(cf, "invalid parameter \"" + param_name(arg(cf, i)) + "\" of llm_gateway_user");
        }
    }
    if (!have_key) return conf_error(cf, "llm_gateway_user \"" + u.name + "\" needs key= or key_sha256=");
    std::string err = st->config.inline_directory().add_user(std::move(u));
    return err.empty() ? NGX_CONF_OK : conf_error(cf, err);
}

char* alias(ngx_conf_t* cf, GatewayState* st) {
    AliasConf a;
    a.name = std::string(arg(cf, 1));
    a.target = std::string(arg(cf, 2));
    for (ngx_uint_t i = 3; i < cf->args->nelts; ++i) a.fallbacks.emplace_back(arg(cf, i));
    a.where = where(cf);
    std::string err = st->config.add_alias(std::move(a));
    return err.empty() ? NGX_CONF_OK : conf_error(cf, err);
}

}  // namespace

char* set_mode(ngx_conf_t* cf, void* conf, LocMode mode) {
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->mode != NGX_CONF_UNSET_UINT) {
        return lcf->mode == mode ? const_cast<char*>("is duplicate")
                                 : conf_error(cf, "llm_gateway, llm_gateway_admin, llm_gateway_passthrough, "
                                                  "llm_gateway_metrics, llm_gateway_mcp and llm_gateway_target_proxy "
                                                  "cannot share a location");
    }
    auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    if (mode == kModePassthrough || mode == kModeMcpProxy || mode == kModeAgentProxy) {
        // The provider's (target's) name is the path segment after the location's prefix.
        bool regex = false;
#if (NGX_PCRE)
        regex = clcf->regex != nullptr;
#endif
        if (regex || clcf->named || clcf->exact_match || clcf->name.len == 0) {
            return conf_error(cf, mode == kModePassthrough
                                      ? "llm_gateway_passthrough needs a prefix location, "
                                        "e.g. location /passthrough/ { llm_gateway_passthrough; }"
                                      : "llm_gateway_target_proxy needs a prefix location, "
                                        "e.g. location /mcp/ { llm_gateway_target_proxy mcp; }");
        }
        lcf->prefix = clcf->name;
    }
    lcf->mode = mode;
    auto* mcf = static_cast<MainConf*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_gateway_module));
    if (mode == kModePassthrough) mcf->state->has_passthrough = true;
    if (mode == kModeMetrics) mcf->state->has_metrics = true;
    return NGX_CONF_OK;
}

namespace {

char* zone(ngx_conf_t* cf, MainConf* mcf) {
    if (mcf->zone != nullptr) return const_cast<char*>("is duplicate");
    std::string_view v = arg(cf, 1);
    auto colon = v.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
        return conf_error(cf, "llm_gateway_zone takes name:size, e.g. llm_gateway:10m");
    }
    ngx_str_t size_str = pstr(cf->pool, v.substr(colon + 1));
    ssize_t size = ngx_parse_size(&size_str);
    if (size == NGX_ERROR || size < static_cast<ssize_t>(8 * ngx_pagesize)) {
        return conf_error(cf, "llm_gateway_zone \"" + std::string(v) + "\": size must be at least " +
                                  std::to_string(8 * ngx_pagesize / 1024) + "k");
    }
    ngx_str_t name = pstr(cf->pool, v.substr(0, colon));
    mcf->zone = add_shm_zone(cf, &name, static_cast<size_t>(size));
    return mcf->zone ? NGX_CONF_OK : static_cast<char*>(NGX_CONF_ERROR);
}

char* price(ngx_conf_t* cf, GatewayState* st) {
    std::string model(arg(cf, 1));
    if (model.find('/') == std::string::npos) {
        return conf_error(cf, "llm_gateway_price needs the canonical <provider>/<model>, not \"" + model + "\"");
    }
    st->config.add_price_ref(model, where(cf));
    bool have_in = false, have_out = false, is_free = false;
    double in = 0, out = 0;
    for (ngx_uint_t i = 2; i < cf->args->nelts; ++i) {
        Param prm = split_param(arg(cf, i));
        if (prm.name == "free" && !prm.has_eq) {
            is_free = true;
            continue;
        }
        if ((prm.name == "input" || prm.name == "output") && prm.has_eq) {
            Limits probe;   // reuse the cost parser: finite, >= 0
            std::string err = set_limit(probe, "cost_per_day", prm.value);
            if (!err.empty()) {
                return conf_error(cf, "invalid " + std::string(prm.name) + " price \"" + std::string(prm.value) +
                                          "\" of " + model + ": must be a finite number >= 0 (USD per million tokens)");
            }
            (prm.name == "input" ? in : out) = std::strtod(std::string(prm.value).c_str(), nullptr);
            (prm.name == "input" ? have_in : have_out) = true;
            continue;
        }
        return conf_error(cf, "invalid parameter \"" + param_name(arg(cf, i)) + "\" of llm_gateway_price");
    }
    if (is_free) {
        st->prices.set_free(model);
        if (!have_in && !have_out) return NGX_CONF_OK;
    }
    if (!have_in || !have_out) return conf_error(cf, "llm_gateway_price " + model + " needs input= and output= (or free)");
    std::string err = st->prices.set_override(model, in, out);
    return err.empty() ? NGX_CONF_OK : conf_error(cf, err);
}

char* users_file(ngx_conf_t* cf, MainConf* mcf) {
    if (!mcf->state->users_file.empty()) return const_cast<char*>("is duplicate");
    ngx_str_t path = pstr(cf->pool, arg(cf, 1));
    if (path.data == nullptr || ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    mcf->state->users_file.assign(reinterpret_cast<char*>(path.data), path.len);
    mcf->state->users_file_where = where(cf);
    for (ngx_uint_t i = 2; i < cf->args->nelts; ++i) {
        Param prm = split_param(arg(cf, i));
        if (prm.name == "interval" && prm.has_eq) {
            ngx_msec_t ms = 0;
            if (!conf_time(prm.value, ms) || ms == 0) {
                return conf_error(cf, "invalid interval \"" + std::string(prm.value) + "\" of llm_gateway_users_file");
            }
            mcf->users_file_interval = ms;
            continue;
        }
        return conf_error(cf, "invalid parameter \"" + param_name(arg(cf, i)) + "\" of llm_gateway_users_file");
    }
    return NGX_CONF_OK;
}

}  // namespace

char* set_zone(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, zone, static_cast<MainConf*>(conf));
}
char* set_price(ngx_conf_t* cf, ngx_command_t*, void* conf) { return guarded(cf, price, conf); }
char* set_users_file(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, users_file, static_cast<MainConf*>(conf));
}

char* set_provider(ngx_conf_t* cf, ngx_command_t*, void* conf) { return guarded(cf, provider, conf); }
char* set_group(ngx_conf_t* cf, ngx_command_t*, void* conf) { return guarded(cf, group, conf); }
char* set_user(ngx_conf_t* cf, ngx_command_t*, void* conf) { return guarded(cf, user, conf); }
char* set_alias(ngx_conf_t* cf, ngx_command_t*, void* conf) { return guarded(cf, alias, conf); }
char* set_api(ngx_conf_t* cf, ngx_command_t*, void* conf) { return set_mode(cf, conf, kModeApi); }
char* set_admin(ngx_conf_t* cf, ngx_command_t*, void* conf) { return set_mode(cf, conf, kModeAdmin); }
char* set_passthrough(ngx_conf_t* cf, ngx_command_t*, void* conf) { return set_mode(cf, conf, kModePassthrough); }

// llm_gateway_metrics [allow=cidr[,cidr...]] [model_label=on|off];
char* set_metrics(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    char* rv = set_mode(cf, conf, kModeMetrics);
    if (rv != NGX_CONF_OK) return rv;
    auto* lcf = static_cast<LocConf*>(conf);
    auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    if (clcf->named || clcf->name.len == 0 || clcf->name.data[0] != '/') {
        return conf_error(cf, "llm_gateway_metrics needs a location whose path begins with /, e.g. location = /metrics");
    }
    for (ngx_uint_t i = 1; i < cf->args->nelts; ++i) {
        Param prm = split_param(arg(cf, i));
        if (prm.name == "allow" && prm.has_eq) {
            lcf->metrics_allow = ngx_array_create(cf->pool, 4, sizeof(ngx_cidr_t));
            if (lcf->metrics_allow == nullptr) return static_cast<char*>(NGX_CONF_ERROR);
            for (const std::string& c : split_list(prm.value)) {
                auto* cidr = static_cast<ngx_cidr_t*>(ngx_array_push(lcf->metrics_allow));
                ngx_str_t v = pstr(cf->pool, c);
                if (cidr == nullptr || v.data == nullptr) return static_cast<char*>(NGX_CONF_ERROR);
                ngx_int_t rc = ngx_ptocidr(&v, cidr);
                if (rc == NGX_ERROR) {
                    return conf_error(cf, "allow= of llm_gateway_metrics: \"" + c + "\" is not an address or CIDR block");
                }
            }
            if (lcf->metrics_allow->nelts == 0) return conf_error(cf, "allow= of llm_gateway_metrics needs a CIDR block");
        } else if (prm.name == "model_label" && prm.has_eq && (prm.value == "on" || prm.value == "off")) {
            lcf->metrics_model_label = prm.value == "on";
        } else {
            return conf_error(cf, "invalid parameter \"" + param_name(arg(cf, i)) + "\" of llm_gateway_metrics");
        }
    }
    return NGX_CONF_OK;
}

}  // namespace llmgw
