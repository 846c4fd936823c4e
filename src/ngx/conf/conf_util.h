// Helpers shared by the directive setters.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "ngx/ngx_incl.h"

namespace llmgw {

// Logs "<msg> in <file>:<line>" (nginx adds the place) and fails the directive.
inline char* conf_error(ngx_conf_t* cf, const std::string& msg) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%s", msg.c_str());
    return static_cast<char*>(NGX_CONF_ERROR);
}

// The i-th word of the directive being parsed.
inline std::string_view conf_arg(ngx_conf_t* cf, ngx_uint_t i) {
    const ngx_str_t& s = static_cast<ngx_str_t*>(cf->args->elts)[i];
    return {reinterpret_cast<const char*>(s.data), s.len};
}

// "file:line" of the directive being parsed, for checks made later.
inline std::string conf_where(ngx_conf_t* cf) {
    std::string w(reinterpret_cast<const char*>(cf->conf_file->file.name.data), cf->conf_file->file.name.len);
    w += ':';
    w += std::to_string(cf->conf_file->line);
    return w;
}

// Runs a directive setter; an exception (out of memory) fails the directive
// instead of crossing into nginx.
template <typename Conf>
char* guarded_setter(ngx_conf_t* cf, char* (*fn)(ngx_conf_t*, Conf*), Conf* conf) {
    try {
        return fn(cf, conf);
    } catch (const std::exception& e) {
        return conf_error(cf, std::string("llm_gateway: ") + e.what());
    }
}


// A time ("250ms", "2s", "10m"); false (out untouched) when it is not one.
inline bool conf_time(std::string_view v, ngx_msec_t& out) {
    ngx_str_t s{v.size(), reinterpret_cast<u_char*>(const_cast<char*>(v.data()))};
    ngx_int_t ms = ngx_parse_time(&s, 0);
    if (ms == NGX_ERROR) return false;
    out = static_cast<ngx_msec_t>(ms);
    return true;
}

// A size ("512k", "4m", "1048576"); false (out untouched) when it is not one.
inline bool conf_size(std::string_view v, std::size_t& out) {
    ngx_str_t s{v.size(), reinterpret_cast<u_char*>(const_cast<char*>(v.data()))};
    ssize_t n = ngx_parse_size(&s);
    if (n == NGX_ERROR || n < 0) return false;
    out = static_cast<std::size_t>(n);
    return true;
}

// "name=value" -> (name, value); a bare word -> (word, "") with has_eq false.
struct Param {
    std::string_view name, value;
    bool has_eq;
};

inline Param split_param(std::string_view a) {
    auto eq = a.find('=');
    if (eq == std::string_view::npos) return {a, {}, false};
    return {a.substr(0, eq), a.substr(eq + 1), true};
}

// A parameter as it may be shown in an error: its name only, since a
// misspelt "key=" would otherwise print the key.
inline std::string param_name(std::string_view a) { return std::string(a.substr(0, a.find('='))); }

// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_list(std::string_view s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= s.size()) {
        auto comma = s.find(',', start);
        if (comma == std::string_view::npos) comma = s.size();
        if (comma > start) out.emplace_back(s.substr(start, comma - start));
        start = comma + 1;
    }
    return out;
}

}  // namespace llmgw
