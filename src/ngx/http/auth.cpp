// Where a caller's key comes from, and which request headers carry
// credentials (stripped before any provider call).
#include <strings.h>

#include "ngx/http/auth.h"

#include "core/http/ascii.h"
#include "ngx/http/headers.h"
#include "ngx/http/respond.h"
#include "ngx/ngx_incl.h"

namespace llmgw {
// Authorization: Bearer <key> (OpenAI's clients) wins over x-api-key
// (Anthropic's), which wins over x-goog-api-key (Gemini's, for its native
// clients through the passthrough). A key in the query string is never
// taken: it would be written to access logs.
std::string_view presented_key(ngx_http_request_t* r) {
    if (ngx_table_elt_t* a = r->headers_in.authorization) {
        std::string_view v = trim_ows(sv(a->value));
        if (v.size() > 7 && strncasecmp(v.data(), "bearer ", 7) == 0) return trim_ows(v.substr(7));
    }
    std::string_view key, goog;
    for_each_header(r->headers_in.headers, [&](const ngx_table_elt_t& h) {
        if (goog.empty() && header_name_is(h.key, "x-goog-api-key")) goog = trim_ows(sv(h.value));
        if (!header_name_is(h.key, "x-api-key")) return true;
        key = trim_ows(sv(h.value));
        return false;
    });
    return key.empty() ? goog : key;
}

// Every header the gateway accepts as a credential, credentials of other
// provider styles, and upstream organisation headers.
bool is_credential_header(const ngx_table_elt_t& h) {
    static const std::string_view names[] = {
        "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key",
        "openai-organization", "openai-project", "anthropic-api-key",
    };
    for (std::string_view n : names) {
        if (header_name_is(h.key, n)) return true;
    }
    return false;
}

}  // namespace llmgw
