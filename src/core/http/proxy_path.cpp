// The proxy routes' paths: see proxy_path.h.
#include "core/http/proxy_path.h"

namespace llmgw {

void split_proxy_uri(std::string_view uri, std::size_t prefix_len, std::string_view& name, std::string_view& path) {
    std::string_view rest = uri.size() >= prefix_len ? uri.substr(prefix_len) : std::string_view();
    if (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
    const std::size_t slash = rest.find('/');
    name = rest.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
}

const char* proxy_path_problem(std::string_view path) {
    if (path.empty() || path[0] != '/') return "a path below the provider's base is required";
    if (path.size() > 1 && path[1] == '/') return "the path must not begin with //";
    const std::string_view first = path.substr(1, path.find('/', 1) == std::string_view::npos ? std::string_view::npos
                                                                                            : path.find('/', 1) - 1);
    if (path.find("://") != std::string_view::npos || first.find(':') != std::string_view::npos) {
        return "the path must not hold a URL";
    }
    for (char c : path) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) return "the path must not hold control characters";
        if (c == '\\' || c == '?' || c == '#') return "the path must not hold '\\', '?' or '#' (encoded or not)";
    }
    std::size_t i = 1;
    while (i <= path.size()) {
        std::size_t j = path.find('/', i);
        if (j == std::string_view::npos) j = path.size();
        std::string_view seg = path.substr(i, j - i);
        if (seg == "." || seg == "..") return "the path must not hold . or .. segments";
        i = j + 1;
    }
    return "";
}

}  // namespace llmgw
