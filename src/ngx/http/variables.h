// $llm_gateway_user, $llm_gateway_model, ... (from preconfiguration).
#pragma once
#include "ngx/ngx_incl.h"

namespace llmgw {

ngx_int_t add_variables(ngx_conf_t* cf);

}  // namespace llmgw
