// The module definition: directive table, module context, configuration
// create/merge and postconfiguration. Handlers live in their own files.
#include "core/log/log_escape.h"
#include "core/metering/reservation.h"
#include "core/metering/keys.h"
#include "ngx/call/cache.h"
#include "ngx/call/call.h"
#include "ngx/call/health.h"
#include "ngx/call/relay.h"
#include "ngx/conf/directives.h"
#include "ngx/conf/users_reload.h"
#include "ngx/discovery/model_cache.h"
#include "ngx/events/feed.h"
#include "ngx/http/variables.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/phases/access.h"
#include "ngx/phases/content.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

void* create_main_conf(ngx_conf_t* cf);
char* init_main_conf(ngx_conf_t* cf, void* conf);
void* create_loc_conf(ngx_conf_t* cf);
char* merge_loc_conf(ngx_conf_t* cf, void* parent, void* child);
ngx_int_t postconfiguration(ngx_conf_t* cf);
ngx_int_t init_process(ngx_cycle_t* cycle);
void exit_process(ngx_cycle_t* cycle);

// llm_gateway_max_tokens_per_request: at least 1.
ngx_conf_num_bounds_t kMaxTokensBounds = {ngx_conf_check_num_bounds, 1, -1};
// llm_gateway_retries: 0..10.
ngx_conf_num_bounds_t kRetriesBounds = {ngx_conf_check_num_bounds, 0, 10};

ngx_command_t commands[] = {
    {ngx_string("llm_gateway_provider"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, set_provider,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_group"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, set_group, NGX_HTTP_MAIN_CONF_OFFSET,
     0, nullptr},
    {ngx_string("llm_gateway_user"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, set_user, NGX_HTTP_MAIN_CONF_OFFSET, 0,
     nullptr},
    {ngx_string("llm_gateway_alias"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, set_alias, NGX_HTTP_MAIN_CONF_OFFSET,
     0, nullptr},
    {ngx_string("llm_gateway_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, set_zone, NGX_HTTP_MAIN_CONF_OFFSET, 0,
     nullptr},
    {ngx_string("llm_gateway_price"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, set_price, NGX_HTTP_MAIN_CONF_OFFSET, 0,
     nullptr},
    {ngx_string("llm_gateway_allow_unpriced"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG, ngx_conf_set_flag_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(MainConf, allow_unpriced), nullptr},
    {ngx_string("llm_gateway_ratelimit_headers"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG, ngx_conf_set_flag_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(MainConf, ratelimit_headers), nullptr},
    {ngx_string("llm_gateway_budget_mode"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, set_budget_mode,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_stream_cutoff"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG, ngx_conf_set_flag_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(MainConf, stream_cutoff), nullptr},
    {ngx_string("llm_gateway_max_tokens_per_request"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_num_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(MainConf, max_tokens_per_request), &kMaxTokensBounds},
    {ngx_string("llm_gateway_retries"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_num_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(MainConf, retries), &kRetriesBounds},
    {ngx_string("llm_gateway_retry_backoff"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE2, set_retry_backoff,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_stats"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, set_stats, NGX_HTTP_MAIN_CONF_OFFSET, 0,
     nullptr},
    {ngx_string("llm_gateway_cancel_drain"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE12, set_cancel_drain,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_breaker"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE12, set_breaker, NGX_HTTP_MAIN_CONF_OFFSET,
     0, nullptr},
    {ngx_string("llm_gateway_users_file"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE12, set_users_file,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_store"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, set_store, NGX_HTTP_MAIN_CONF_OFFSET, 0,
     nullptr},
    {ngx_string("llm_gateway_replica"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, set_replica, NGX_HTTP_MAIN_CONF_OFFSET,
     0, nullptr},
    {ngx_string("llm_gateway_instance"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, set_instance,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, set_api, NGX_HTTP_LOC_CONF_OFFSET, 0,
     nullptr},
    {ngx_string("llm_gateway_admin"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, set_admin, NGX_HTTP_LOC_CONF_OFFSET, 0,
     nullptr},
    {ngx_string("llm_gateway_passthrough"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, set_passthrough,
     NGX_HTTP_LOC_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_metrics"), NGX_HTTP_LOC_CONF | NGX_CONF_ANY, set_metrics, NGX_HTTP_LOC_CONF_OFFSET, 0,
     nullptr},
    {ngx_string("llm_gateway_mcp_server"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, set_mcp_server,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_agent"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, set_agent, NGX_HTTP_MAIN_CONF_OFFSET, 0,
     nullptr},
    {ngx_string("llm_gateway_mcp"), NGX_HTTP_LOC_CONF | NGX_CONF_ANY, set_mcp, NGX_HTTP_LOC_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_target_proxy"), NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1, set_target_proxy,
     NGX_HTTP_LOC_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_public_url"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     set_public_url, NGX_HTTP_LOC_CONF_OFFSET, offsetof(LocConf, public_url), nullptr},
    {ngx_string("llm_gateway_cache"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_1MORE,
     set_cache, NGX_HTTP_LOC_CONF_OFFSET, 0, nullptr},
    {ngx_string("llm_gateway_max_body_size"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_off_slot, NGX_HTTP_LOC_CONF_OFFSET, offsetof(LocConf, max_body_size), nullptr},
    ngx_null_command};

ngx_int_t preconfiguration(ngx_conf_t* cf) {
    if (add_variables(cf) != NGX_OK) return NGX_ERROR;
    return add_cache_variables(cf);
}

// Every credential the gateway sends upstream on its own: the providers'
// keys and the targets' (their subrequests' view of them).
void collect_secrets(GatewayState& st) {
    for (const auto& p : st.config.providers()) st.secrets.add(p.key);
    for (const auto& t : st.targets.all()) st.secrets.add(t.upstream.key);
}

// What the configuration allows but an operator would want to know:
// logged at warn when the configuration is built, and kept for the admin
// overview.
void collect_warnings(ngx_conf_t* cf, MainConf* mcf) {
    GatewayState& st = *mcf->state;
    st.warnings.clear();
    bool budget = false;
    for (const auto& u : st.directory->users()) budget = budget || u.limits.has_cost_budget();
    for (const auto& g : st.directory->groups()) budget = budget || g.limits.has_cost_budget();
    for (const auto& p : st.config.providers()) {
        if (p.key.empty()) {
            st.warnings.push_back("provider \"" + p.name + "\" (" + p.where + ") has no key=: its calls carry no credential");
        } else if (p.key.size() < kMinRedactedSecret) {
            st.warnings.push_back("provider \"" + p.name + "\" (" + p.where + ") has a key shorter than " +
                                  std::to_string(kMinRedactedSecret) + " bytes: it is not redacted from relayed answers");
        }
        if (!budget || mcf->allow_unpriced) continue;
        for (const auto& m : p.models) {
            if (st.prices.find(p.name, provider_type_name(p.type), m) != nullptr) continue;
            st.warnings.push_back("model \"" + p.name + "/" + m + "\" (" + p.where +
                                  ") has no price: under a cost budget, token-billed requests for it are refused (402)");
        }
    }
    if (!st.users_file_warning.empty()) st.warnings.push_back(st.users_file_warning);
    for (const auto& ep : st.mcp_endpoints) {
        if (!ep->own_key) {
            st.warnings.push_back("llm_gateway_mcp has no session_key=: MCP sessions hold on this replica only, "
                                  "until the next reload");
            break;
        }
    }
    for (const auto& w : st.warnings) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0, "llm_gateway: %s", log_text(w).c_str());
    }
}

ngx_http_module_t module_ctx = {
    preconfiguration,   // preconfiguration
    postconfiguration,  // postconfiguration
    create_main_conf,   // create main configuration
    init_main_conf,     // init main configuration
    nullptr,            // create server configuration
    nullptr,            // merge server configuration
    create_loc_conf,    // create location configuration
    merge_loc_conf,     // merge location configuration
};

void destroy_state(void* data) {
    static_cast<GatewayState*>(data)->~GatewayState();
}

void* create_main_conf(ngx_conf_t* cf) {
    set_key_layout(KeyLayout::Plain);   // llm_gateway_store cluster=on sets the cluster's
    auto* mcf = static_cast<MainConf*>(ngx_pcalloc(cf->pool, sizeof(MainConf)));
    if (mcf == nullptr) return nullptr;
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(cf->pool, sizeof(GatewayState));
    if (cln == nullptr) return nullptr;
    try {
        mcf->state = new (cln->data) GatewayState();
    } catch (...) {
        return nullptr;
    }
    cln->handler = destroy_state;
    mcf->allow_unpriced = NGX_CONF_UNSET;
    mcf->ratelimit_headers = NGX_CONF_UNSET;
    mcf->reserve_ttl = NGX_CONF_UNSET;
    mcf->reserve_output = NGX_CONF_UNSET;
    mcf->stream_cutoff = NGX_CONF_UNSET;
    mcf->stat_user_model = NGX_CONF_UNSET;
    mcf->stat_latency = NGX_CONF_UNSET;
    mcf->users_file_interval = NGX_CONF_UNSET_MSEC;
    mcf->max_tokens_per_request = NGX_CONF_UNSET;
    mcf->retries = NGX_CONF_UNSET;
    mcf->drain_time = NGX_CONF_UNSET_MSEC;
    mcf->drain_size = NGX_CONF_UNSET_SIZE;
    mcf->backoff_base = NGX_CONF_UNSET_MSEC;
    mcf->backoff_max = NGX_CONF_UNSET_MSEC;
    mcf->breaker_failures = NGX_CONF_UNSET;
    mcf->breaker_open = NGX_CONF_UNSET_MSEC;
    return mcf;
}

char* init_main_conf(ngx_conf_t* cf, void* conf) {
    auto* mcf = static_cast<MainConf*>(conf);
    try {
        std::string err = mcf->state->config.finalize();
        if (!err.empty()) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "%s", err.c_str());
            return static_cast<char*>(NGX_CONF_ERROR);
        }
        mcf->state->directory = std::make_shared<Directory>(mcf->state->config.inline_directory());
        collect_secrets(*mcf->state);
        if (!mcf->state->users_file.empty()) {
            err = load_users_file_at_start(*mcf->state);
            if (!err.empty()) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "llm_gateway_users_file \"%s\" %s in %s",
                              log_value(mcf->state->users_file).c_str(), log_text(err).c_str(),
                              mcf->state->users_file_where.c_str());
                return static_cast<char*>(NGX_CONF_ERROR);
            }
        }
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "llm_gateway: %s", log_text(e.what()).c_str());
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (mcf->state->replica.empty()) {
        mcf->state->replica.assign(reinterpret_cast<char*>(cf->cycle->hostname.data), cf->cycle->hostname.len);
    }
    ngx_conf_init_value(mcf->allow_unpriced, 0);
    ngx_conf_init_value(mcf->ratelimit_headers, 0);
    ngx_conf_init_value(mcf->reserve_ttl, 0);
    ngx_conf_init_value(mcf->reserve_output, kDefaultReserveOutputTokens);
    ngx_conf_init_value(mcf->stream_cutoff, 0);
    ngx_conf_init_value(mcf->stat_user_model, 0);
    ngx_conf_init_value(mcf->stat_latency, 0);
    ngx_conf_init_msec_value(mcf->users_file_interval, 5000);
    ngx_conf_init_value(mcf->max_tokens_per_request, kDefaultMaxTokensPerRequest);
    ngx_conf_init_value(mcf->retries, 1);
    ngx_conf_init_msec_value(mcf->drain_time, 30000);
    ngx_conf_init_size_value(mcf->drain_size, 1024 * 1024);
    ngx_conf_init_msec_value(mcf->backoff_base, 250);
    ngx_conf_init_msec_value(mcf->backoff_max, 2000);
    ngx_conf_init_value(mcf->breaker_failures, 5);
    ngx_conf_init_msec_value(mcf->breaker_open, 30000);
    if (!mcf->state->config.providers().empty()) {
        mcf->health_zone = add_health_zone(cf, mcf->state->config.providers().size());
        if (mcf->health_zone == nullptr) return static_cast<char*>(NGX_CONF_ERROR);
        std::size_t discovering = 0;
        for (const auto& p : mcf->state->config.providers()) discovering += p.discover_ms > 0 ? 1 : 0;
        if (discovering > 0) {
            mcf->models_zone = add_model_cache_zone(cf, mcf->state->config.providers().size(), discovering);
            if (mcf->models_zone == nullptr) return static_cast<char*>(NGX_CONF_ERROR);
        }
    }
    collect_warnings(cf, mcf);
    mcf->events_zone = add_events_zone(cf);
    if (mcf->events_zone == nullptr) return static_cast<char*>(NGX_CONF_ERROR);
    if (mcf->zone == nullptr) {
        ngx_str_t name = ngx_string("llm_gateway");
        mcf->zone = add_shm_zone(cf, &name, 10 * 1024 * 1024);
        if (mcf->zone == nullptr) return static_cast<char*>(NGX_CONF_ERROR);
    }
    return NGX_CONF_OK;
}

void* create_loc_conf(ngx_conf_t* cf) {
    auto* lcf = static_cast<LocConf*>(ngx_pcalloc(cf->pool, sizeof(LocConf)));
    if (lcf == nullptr) return nullptr;
    lcf->mode = NGX_CONF_UNSET_UINT;
    lcf->max_body_size = NGX_CONF_UNSET;
    lcf->public_url = static_cast<ngx_http_complex_value_t*>(NGX_CONF_UNSET_PTR);
    lcf->cache = static_cast<const CacheSettings*>(NGX_CONF_UNSET_PTR);
    return lcf;
}

char* merge_loc_conf(ngx_conf_t* cf, void* parent, void* child) {
    auto* prev = static_cast<LocConf*>(parent);
    auto* conf = static_cast<LocConf*>(child);
    // The endpoint a location serves is its own, never inherited.
    if (conf->mode == NGX_CONF_UNSET_UINT) conf->mode = kModeNone;
    ngx_conf_merge_off_value(conf->max_body_size, prev->max_body_size, 10 * 1024 * 1024);
    ngx_conf_merge_ptr_value(conf->public_url, prev->public_url, nullptr);
    ngx_conf_merge_ptr_value(conf->cache, prev->cache, nullptr);

    if (conf->mode != kModeNone) {
        // In a gateway location the body bound is llm_gateway_max_body_size:
        // nginx enforces it while reading, and the error filter turns its
        // 413 into the gateway's envelope. The core module merged first.
        auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
        clcf->client_max_body_size = conf->max_body_size;
        clcf->handler = content_handler;   // the location's content: the route's handler
    }
    return NGX_CONF_OK;
}

ngx_int_t postconfiguration(ngx_conf_t* cf) {
    auto* cmcf = static_cast<ngx_http_core_main_conf_t*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module));
    // nginx runs a phase's handlers last-registered first; putting ours at
    // the front of the array makes it run after allow/deny, auth_basic and
    // auth_request, so a request they refuse is never counted.
    ngx_array_t& handlers = cmcf->phases[NGX_HTTP_ACCESS_PHASE].handlers;
    if (ngx_array_push(&handlers) == nullptr) return NGX_ERROR;
    auto* h = static_cast<ngx_http_handler_pt*>(handlers.elts);
    ngx_memmove(h + 1, h, (handlers.nelts - 1) * sizeof(ngx_http_handler_pt));
    h[0] = access_handler;
    auto* pre = static_cast<ngx_http_handler_pt*>(ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers));
    if (pre == nullptr) return NGX_ERROR;
    *pre = subrequest_precontent;
    if (!check_cache_zones(cf)) return NGX_ERROR;
    return init_filters(cf);
}

void exit_process(ngx_cycle_t* cycle) {
    try {
        stop_worker();   // closes the store connection before nginx checks for open sockets
    } catch (...) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "llm_gateway: closing the store failed");
    }
}

ngx_int_t init_process(ngx_cycle_t* cycle) {
    try {
        if (start_worker(cycle) != NGX_OK) return NGX_ERROR;
        Worker* w = worker();
        return w ? init_users_file(cycle, *w) : NGX_OK;
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "llm_gateway: worker init failed: %s", log_text(e.what()).c_str());
        return NGX_ERROR;
    }
}

}  // namespace
}  // namespace llmgw

ngx_module_t ngx_http_llm_gateway_module = {
    NGX_MODULE_V1,
    &llmgw::module_ctx,  // module context
    llmgw::commands,     // module directives
    NGX_HTTP_MODULE,     // module type
    nullptr,             // init master
    nullptr,             // init module
    llmgw::init_process, // init process
    nullptr,             // init thread
    nullptr,             // exit thread
    llmgw::exit_process, // exit process
    nullptr,             // exit master
    NGX_MODULE_V1_PADDING};
