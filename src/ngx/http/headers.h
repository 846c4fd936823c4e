// Small helpers over nginx header lists.
#pragma once
#include <string>
#include <string_view>

#include "ngx/ngx_incl.h"

namespace llmgw {

inline bool header_name_is(const ngx_str_t& a, std::string_view b) {
    return a.len == b.size() &&
           ngx_strncasecmp(a.data, reinterpret_cast<u_char*>(const_cast<char*>(b.data())), a.len) == 0;
}

inline bool starts_with_ci(const ngx_str_t& a, std::string_view b) {
    return a.len >= b.size() &&
           ngx_strncasecmp(a.data, reinterpret_cast<u_char*>(const_cast<char*>(b.data())), b.size()) == 0;
}

// Calls f(ngx_table_elt_t&) for every element of the list, in order; stops
// early when f returns false.
template <typename F>
void for_each_header(ngx_list_t& list, F f) {
    for (ngx_list_part_t* part = &list.part; part != nullptr; part = part->next) {
        auto* h = static_cast<ngx_table_elt_t*>(part->elts);
        for (ngx_uint_t i = 0; i < part->nelts; ++i) {
            if (!f(h[i])) return;
        }
    }
}

// The value of the first header called name in the list ("" when none; a
// header whose hash is 0 is one a module removed).
inline std::string header_value(ngx_list_t& list, std::string_view name) {
    std::string value;
    for_each_header(list, [&](const ngx_table_elt_t& h) {
        if (h.hash == 0 || !header_name_is(h.key, name)) return true;
        value.assign(reinterpret_cast<const char*>(h.value.data), h.value.len);
        return false;
    });
    return value;
}

}  // namespace llmgw
