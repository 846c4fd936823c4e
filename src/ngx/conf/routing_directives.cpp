// llm_gateway_retry_backoff, llm_gateway_breaker and llm_gateway_cancel_drain.
#include "ngx/conf/conf_util.h"
#include "ngx/conf/directives.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"

namespace llmgw {
namespace {

char* retry_backoff(ngx_conf_t* cf, MainConf* mcf) {
    if (mcf->backoff_base != NGX_CONF_UNSET_MSEC) return const_cast<char*>("is duplicate");
    ngx_msec_t base = 0, max = 0;
    if (!conf_time(conf_arg(cf, 1), base) || !conf_time(conf_arg(cf, 2), max)) {
        return conf_error(cf, "llm_gateway_retry_backoff takes two times, the base and the maximum (e.g. 250ms 2s)");
    }
    if (base < 1 || max < base || max > 60000) {
        return conf_error(cf, "llm_gateway_retry_backoff needs 1ms <= base <= max <= 60s");
    }
    mcf->backoff_base = base;
    mcf->backoff_max = max;
    return NGX_CONF_OK;
}

char* breaker(ngx_conf_t* cf, MainConf* mcf) {
    if (mcf->breaker_failures != NGX_CONF_UNSET) return const_cast<char*>("is duplicate");
    if (cf->args->nelts == 2 && conf_arg(cf, 1) == "off") {
        mcf->breaker_failures = 0;
        return NGX_CONF_OK;
    }
    ngx_int_t failures = 5;
    ngx_msec_t open = 30000;
    for (ngx_uint_t i = 1; i < cf->args->nelts; ++i) {
        std::string_view a = conf_arg(cf, i);
        if (a.rfind("failures=", 0) == 0) {
            std::string_view v = a.substr(9);
            ngx_int_t n = ngx_atoi(reinterpret_cast<u_char*>(const_cast<char*>(v.data())), v.size());
            if (n < 1 || n > 1000) return conf_error(cf, "llm_gateway_breaker failures= must be a number from 1 to 1000");
            failures = n;
        } else if (a.rfind("open=", 0) == 0) {
            if (!conf_time(a.substr(5), open) || open < 1000 || open > 3600000) {
                return conf_error(cf, "llm_gateway_breaker open= must be a time from 1s to 1h");
            }
        } else {
            return conf_error(cf, "invalid parameter \"" + std::string(a.substr(0, a.find('='))) +
                                      "\" of llm_gateway_breaker: use failures=N open=time, or off");
        }
    }
    mcf->breaker_failures = failures;
    mcf->breaker_open = open;
    return NGX_CONF_OK;
}

// off | <time> [<size>]: how long, and how many bytes, a provider's answer is
// still read after its client went away, for its real usage.
char* cancel_drain(ngx_conf_t* cf, MainConf* mcf) {
    if (mcf->drain_time != NGX_CONF_UNSET_MSEC) return const_cast<char*>("is duplicate");
    if (cf->args->nelts == 2 && conf_arg(cf, 1) == "off") {
        mcf->drain_time = 0;
        mcf->drain_size = 0;
        return NGX_CONF_OK;
    }
    ngx_msec_t t = 0;
    if (!conf_time(conf_arg(cf, 1), t) || t < 1 || t > 600000) {
        return conf_error(cf, "llm_gateway_cancel_drain takes off, or a time from 1ms to 10m and an optional size "
                              "(e.g. 30s 1m)");
    }
    size_t size = 1024 * 1024;
    if (cf->args->nelts == 3) {
        ngx_str_t v = static_cast<ngx_str_t*>(cf->args->elts)[2];
        ssize_t n = ngx_parse_size(&v);
        if (n == NGX_ERROR || n < 1) {
            return conf_error(cf, "llm_gateway_cancel_drain size must be a size of at least 1 byte (e.g. 512k, 1m)");
        }
        size = static_cast<size_t>(n);
    }
    mcf->drain_time = t;
    mcf->drain_size = size;
    return NGX_CONF_OK;
}

}  // namespace

char* set_cancel_drain(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, cancel_drain, static_cast<MainConf*>(conf));
}

char* set_retry_backoff(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, retry_backoff, static_cast<MainConf*>(conf));
}

char* set_breaker(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, breaker, static_cast<MainConf*>(conf));
}

// llm_gateway_stats [user_model=on|off] [latency=on|off];
char* set_stats(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    auto* mcf = static_cast<MainConf*>(conf);
    if (mcf->stat_user_model != NGX_CONF_UNSET || mcf->stat_latency != NGX_CONF_UNSET) return const_cast<char*>("is duplicate");
    mcf->stat_user_model = 0;
    mcf->stat_latency = 0;
    for (ngx_uint_t i = 1; i < cf->args->nelts; ++i) {
        const std::string_view a = conf_arg(cf, i);
        ngx_flag_t* slot = nullptr;
        std::string_view v;
        if (a.rfind("user_model=", 0) == 0) {
            slot = &mcf->stat_user_model;
            v = a.substr(11);
        } else if (a.rfind("latency=", 0) == 0) {
            slot = &mcf->stat_latency;
            v = a.substr(8);
        }
        if (slot == nullptr || (v != "on" && v != "off")) {
            return conf_error(cf, "invalid parameter \"" + std::string(a) +
                                      "\" of llm_gateway_stats: use user_model=on|off and latency=on|off");
        }
        *slot = v == "on";
    }
    return NGX_CONF_OK;
}

}  // namespace llmgw
