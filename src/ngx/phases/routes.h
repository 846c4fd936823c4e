// The route table: one row per endpoint (ngx/request/route.h); adding an
// endpoint is adding its row.
#pragma once
#include <string_view>

#include "ngx/ngx_incl.h"
#include "ngx/request/route.h"

namespace llmgw {

// The row of a location mode and request path; nullptr when none matches.
const RouteRow* find_route(ngx_uint_t mode, std::string_view path);

}  // namespace llmgw
