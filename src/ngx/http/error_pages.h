// The main request's output filter in gateway locations: the allowance
// headers, and nginx's own error pages replaced by the error envelope.
#pragma once
#include "ngx/ngx_incl.h"

namespace llmgw {

// Registers the filter (from init_filters, above the subrequests' filter).
ngx_int_t init_error_pages(ngx_conf_t* cf);

}  // namespace llmgw
