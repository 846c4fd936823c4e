// llm_gateway_users_file: read at start, and again by each worker when it
// changes.
#pragma once
#include <string>

#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"

namespace llmgw {

struct Worker;

ngx_int_t init_users_file(ngx_cycle_t* cycle, Worker& w);
std::string load_users_file_at_start(GatewayState& st);

}  // namespace llmgw
