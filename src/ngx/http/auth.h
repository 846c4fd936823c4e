// The caller's key, and the headers that carry credentials.
#pragma once
#include <string_view>

#include "ngx/ngx_incl.h"

namespace llmgw {

std::string_view presented_key(ngx_http_request_t* r);
bool is_credential_header(const ngx_table_elt_t& h);

}  // namespace llmgw
