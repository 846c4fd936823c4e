// The llm_gateway_* directives' handlers (the command table is in
// ngx/module.cpp).
#pragma once
#include "ngx/ngx_incl.h"

namespace llmgw {

// directives.cpp
char* set_provider(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_user(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_group(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_alias(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_api(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_admin(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_passthrough(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_metrics(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_zone(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);   // conf: MainConf
char* set_price(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_users_file(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
// store_directives.cpp
char* set_store(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_replica(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_instance(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
// routing_directives.cpp
char* set_retry_backoff(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_breaker(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_cancel_drain(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_stats(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
// budget_directives.cpp
char* set_budget_mode(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
// target_directives.cpp
char* set_mcp_server(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_agent(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_mcp(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_target_proxy(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_public_url(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
// llm_gateway_cache (conf/cache_directive.cpp); its zones are checked once
// the http block is read (false: logged).
char* set_cache(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
bool check_cache_zones(ngx_conf_t* cf);

}  // namespace llmgw
