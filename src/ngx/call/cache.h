// The response cache in the shell (docs/cache.md): a provider call whose
// answer may come from nginx's proxy_cache gets a key
// ($llm_gateway_cache_key) and a zone ($llm_gateway_cache) its provider
// location's proxy_cache reads; a miss being stored is read with
// buffering on (nginx stores only buffered answers) and kept out of the
// cache when it calls a tool; a hit's bill goes to the cache's counters.
// What is cacheable and the key itself are decided in core/cache/.
#pragma once
#include "core/metering/accounting.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

class Call;

// Call::start, with the subrequest's body built: the call's key when the
// request may be cached (decided once per request: llm_gateway_cache where
// it runs, its route, group, Cache-Control and temperature).
bool cache_prepare(ngx_http_request_t* r, Call& call, ngx_chain_t* body);
// Call::on_header: nginx's cache status of the subrequest; a miss nginx
// will store is read buffered, and watched for tool calls.
void cache_on_header(Call& call, ngx_http_request_t* sr);
// Call::on_body: the answer's bytes as they are stored.
void cache_on_bytes(Call& call, std::string_view bytes);
// What the cache did for the call (for its bill and the breaker).
CacheUse cache_use(const Call& call);

// $llm_gateway_cache, $llm_gateway_cache_key, $llm_gateway_cache_status.
ngx_int_t add_cache_variables(ngx_conf_t* cf);

}  // namespace llmgw
