// Where a caller's key comes from, and which request headers carry
// credentials (stripped before any provider call).
#include <strings.h>

#include "ngx/module.h"

namespace llmgw {
namespace {

bool ieq(const ngx_str_t& a, std::string_view b) {
    return a.len == b.size() && ngx_strncasecmp(a.data, reinterpret_cast<u_char*>(const_cast<char*>(b.data())), a.len) == 0;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

}  // namespace

// Authorization: Bearer <key> wins over x-api-key when both are sent.
std::string_view presented_key(ngx_http_request_t* r) {
    if (ngx_table_elt_t* a = r->headers_in.authorization) {
        std::string_view v = trim(sv(a->value));
        if (v.size() > 7 && strncasecmp(v.data(), "bearer ", 7) == 0) return trim(v.substr(7));
    }
    ngx_list_part_t* part = &r->headers_in.headers.part;
    auto* h = static_cast<ngx_table_elt_t*>(part->elts);
    for (ngx_uint_t i = 0;; ++i) {
        if (i >= part->nelts) {
            if (part->next == nullptr) break;
            part = part->next;
            h = static_cast<ngx_table_elt_t*>(part->elts);
            i = 0;
        }
        if (ieq(h[i].key, "x-api-key")) return trim(sv(h[i].value));
    }
    return {};
}

// Every header the gateway accepts as a credential, credentials of other
// provider styles, and upstream organisation headers.
bool is_credential_header(const ngx_table_elt_t& h) {
    static const std::string_view names[] = {
        "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key",
        "openai-organization", "openai-project", "anthropic-api-key",
    };
    for (std::string_view n : names) {
        if (ieq(h.key, n)) return true;
    }
    return false;
}

}  // namespace llmgw
