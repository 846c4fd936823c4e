// The content phase: the admitted request's route handler.
#pragma once
#include "ngx/ngx_incl.h"

namespace llmgw {

ngx_int_t content_handler(ngx_http_request_t* r);

}  // namespace llmgw
