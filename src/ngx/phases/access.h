// The access phase: route, key, body, then limit admission.
#pragma once
#include "ngx/ngx_incl.h"

namespace llmgw {

ngx_int_t access_handler(ngx_http_request_t* r);

}  // namespace llmgw
