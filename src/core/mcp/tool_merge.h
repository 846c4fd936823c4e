// The federated lists: the tools (prompts, resources, resource templates) of
// several MCP servers as one list (no nginx). Naming rule for tools and
// prompts (docs/mcp.md): an entry keeps its own name when no other server of
// the list has one of that name; entries whose names collide are all named
// "<server>__<name>"; should such a name equal a kept name, that entry is
// prefixed too, until every name is unique. Resources and templates keep
// their URIs: the first server listing a URI owns it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace llmgw {

// One server's tools/list results (each page's result object, as JSON).
struct ServerTools {
    std::size_t backend = 0;       // the caller's index of the server
    std::string server;            // its configured name
    std::vector<std::string> pages;
};

// Where a federated tool name goes: the server and the tool's own name there.
struct ToolRoute {
    std::size_t backend = 0;
    std::string name;
};

struct MergedTools {
    std::string tools_json = "[]";   // the merged "tools" array
    std::unordered_map<std::string, ToolRoute> routes;
    std::size_t skipped = 0;         // entries without a string name, duplicates within a server, over the cap
};

inline constexpr std::size_t kMaxFederatedTools = 10000;

// The entries of the array named `array` of each page, keyed by their string
// member `key`; rename: the naming rule above, else the first owner wins.
MergedTools merge_list(const std::vector<ServerTools>& servers, std::string_view array, std::string_view key,
                       bool rename);
inline MergedTools merge_tools(const std::vector<ServerTools>& servers) {
    return merge_list(servers, "tools", "name", true);
}

// The nextCursor of a tools/list result ("" when none or not a string).
std::string next_cursor(const std::string& result_json);

}  // namespace llmgw
