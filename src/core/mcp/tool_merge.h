// The federated tools/list: the tools of several MCP servers as one list
// (no nginx). Naming rule (docs/mcp.md): a tool keeps its own name when no
// other server of the list has a tool of that name; tools whose names
// collide are all named "<server>__<tool>"; should such a name equal a kept
// name, that tool is prefixed too, until every name is unique.
#pragma once
#include <cstddef>
#include <string>
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

MergedTools merge_tools(const std::vector<ServerTools>& servers);

// The nextCursor of a tools/list result ("" when none or not a string).
std::string next_cursor(const std::string& result_json);

}  // namespace llmgw
