// Helpers shared by the directive setters.
#pragma once
#include <string>
#include <string_view>

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

}  // namespace llmgw
