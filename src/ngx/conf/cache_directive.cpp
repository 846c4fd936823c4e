// llm_gateway_cache (docs/cache.md): the response cache of the locations
// it is set in (or inherited by); its zone= must be a proxy_cache_path
// keys_zone, checked once the http block is read.
#include <string>
#include <vector>

#include "core/cache/cache_settings.h"
#include "core/log/log_escape.h"
#include "ngx/conf/conf_util.h"
#include "ngx/conf/directives.h"
#include "ngx/main_conf.h"

namespace llmgw {
namespace {

char* cache_directive(ngx_conf_t* cf, LocConf* lcf) {
    if (lcf->cache != NGX_CONF_UNSET_PTR) return const_cast<char*>("is duplicate");
    std::vector<std::string_view> args;
    for (ngx_uint_t i = 1; i < cf->args->nelts; ++i) args.push_back(conf_arg(cf, i));
    auto s = std::make_unique<CacheSettings>();
    std::string err;
    if (!parse_cache_settings(args, *s, err)) return conf_error(cf, "llm_gateway_cache: " + err);
    if (!s->on) {
        lcf->cache = nullptr;
        return NGX_CONF_OK;
    }
    auto* mcf = static_cast<MainConf*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_gateway_module));
    lcf->cache = s.get();
    mcf->state->caches.emplace_back(std::move(s), conf_where(cf));
    return NGX_CONF_OK;
}

}  // namespace

char* set_cache(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, cache_directive, static_cast<LocConf*>(conf));
}

bool check_cache_zones(ngx_conf_t* cf) {
    auto* mcf = static_cast<MainConf*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_gateway_module));
    for (const auto& [settings, where] : mcf->state->caches) {
        bool found = false;
        ngx_list_part_t* part = &cf->cycle->shared_memory.part;
        auto* zones = static_cast<ngx_shm_zone_t*>(part->elts);
        for (ngx_uint_t i = 0;; ++i) {
            if (i >= part->nelts) {
                if (part->next == nullptr) break;
                part = part->next;
                zones = static_cast<ngx_shm_zone_t*>(part->elts);
                i = 0;
            }
            const ngx_str_t& n = zones[i].shm.name;
            if (n.len == settings->zone.size() && ngx_strncmp(n.data, settings->zone.data(), n.len) == 0) found = true;
        }
        if (!found) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "llm_gateway_cache: zone \"%s\" is not a shared memory zone: declare it with "
                               "proxy_cache_path ... keys_zone=%s:<size> (llm_gateway_cache in %s)",
                               log_value(settings->zone).c_str(), log_value(settings->zone).c_str(), where.c_str());
            return false;
        }
    }
    return true;
}

}  // namespace llmgw
