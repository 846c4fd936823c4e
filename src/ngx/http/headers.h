// Small helpers over nginx header lists.
#pragma once
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

}  // namespace llmgw
