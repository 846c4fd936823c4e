// Route matching (no nginx): a route is chosen by its location's mode and a
// suffix of the request path (a row without suffixes matches every path of
// its mode); the first matching row wins. A suffix ending in '*' stands for
// one last path segment, not empty: "/admin/ui/*" matches ".../admin/ui/app.js".
#pragma once
#include <cstddef>
#include <string_view>

namespace llmgw {

inline bool path_ends_with(std::string_view path, std::string_view suffix) {
    return !suffix.empty() && path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A suffix, or a folder suffix followed by '*' (one non-empty last segment).
inline bool path_matches(std::string_view path, std::string_view suffix) {
    if (suffix.empty() || suffix.back() != '*') return path_ends_with(path, suffix);
    std::size_t slash = path.rfind('/');
    if (slash == std::string_view::npos || slash + 1 == path.size()) return false;
    return path_ends_with(path.substr(0, slash + 1), suffix.substr(0, suffix.size() - 1));
}

// Row needs `mode` (compared with mode) and `suffixes` (an array of
// string_views; empty ones are unused). nullptr when no row matches.
template <typename Row, std::size_t N>
const Row* match_route(const Row (&rows)[N], unsigned mode, std::string_view path) {
    for (const Row& row : rows) {
        if (static_cast<unsigned>(row.mode) != mode) continue;
        bool any = true;   // a row without suffixes serves every path of its mode
        for (std::string_view s : row.suffixes) {
            if (s.empty()) continue;
            any = false;
            if (path_matches(path, s)) return &row;
        }
        if (any) return &row;
    }
    return nullptr;
}

}  // namespace llmgw
