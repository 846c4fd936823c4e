// llm_gateway_budget_mode check | reserve [ttl=time] [output=N]
// (docs/directives.md#llm_gateway_budget_mode, docs/metering.md#reservations).
#include "core/metering/reservation.h"
#include "ngx/conf/conf_util.h"
#include "ngx/conf/directives.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"

namespace llmgw {
namespace {

char* budget_mode(ngx_conf_t* cf, MainConf* mcf) {
    if (mcf->reserve_ttl != NGX_CONF_UNSET) return const_cast<char*>("is duplicate");
    const std::string_view mode = conf_arg(cf, 1);
    if (mode == "check") {
        if (cf->args->nelts > 2) return conf_error(cf, "llm_gateway_budget_mode check takes no parameters");
        mcf->reserve_ttl = 0;
        mcf->reserve_output = kDefaultReserveOutputTokens;
        return NGX_CONF_OK;
    }
    if (mode != "reserve") {
        return conf_error(cf, "llm_gateway_budget_mode takes \"check\" or \"reserve\", not \"" +
                                  std::string(mode.substr(0, 64)) + "\"");
    }
    ngx_msec_t ttl = kDefaultReserveTtl * 1000;
    ngx_int_t output = kDefaultReserveOutputTokens;
    for (ngx_uint_t i = 2; i < cf->args->nelts; ++i) {
        const std::string_view a = conf_arg(cf, i);
        if (a.rfind("ttl=", 0) == 0) {
            if (!conf_time(a.substr(4), ttl) || ttl < 1000 || ttl > 86400000 || ttl % 1000 != 0) {
                return conf_error(cf, "llm_gateway_budget_mode ttl= must be a whole number of seconds from 1s to 1d "
                                      "(e.g. 10m); it must outlive the providers' proxy_read_timeout");
            }
        } else if (a.rfind("output=", 0) == 0) {
            const std::string_view v = a.substr(7);
            output = ngx_atoi(reinterpret_cast<u_char*>(const_cast<char*>(v.data())), v.size());
            if (output < 1 || output > 10000000) {
                return conf_error(cf, "llm_gateway_budget_mode output= must be a number of tokens from 1 to 10000000");
            }
        } else {
            return conf_error(cf, "invalid parameter \"" + std::string(a.substr(0, std::min<std::size_t>(a.find('='), 64))) +
                                      "\" of llm_gateway_budget_mode: use ttl=time output=N");
        }
    }
    mcf->reserve_ttl = static_cast<ngx_int_t>(ttl / 1000);
    mcf->reserve_output = output;
    return NGX_CONF_OK;
}

}  // namespace

char* set_budget_mode(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, budget_mode, static_cast<MainConf*>(conf));
}

}  // namespace llmgw
