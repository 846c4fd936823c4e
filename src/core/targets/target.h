// Tool servers (MCP) and agents (A2A): the targets the gateway proxies per
// target and, for tool servers, federates behind /mcp (no nginx).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/config/gwconfig.h"

namespace llmgw {

enum class TargetKind { Mcp, Agent };

// "mcp" or "agent": the limit scope kind and the targets view's kind.
std::string_view target_kind_name(TargetKind k);

struct TargetConf {
    std::string name;             // validated like a provider name
    TargetKind kind = TargetKind::Mcp;
    std::string location;         // internal location the subrequests go to
    std::string url;              // url=: the backend's address as configured ("" none)
    std::string card_path = "/.well-known/agent-card.json";   // agents: where the card is
    bool restricted = false;      // false: every group may reach it
    std::vector<std::string> groups;   // restricted: the groups that may ([] none)
    std::string where;            // "file:line" of the directive
    // The subrequests' view of the target (name and location; no key, no
    // models): a Call is made to it as to a provider.
    ProviderConf upstream;

    bool open_to(std::string_view group) const;
    // The legacy SSE transport: the URL's path (the location's without a URL)
    // ends in "/sse". Such a tool server is left out of federation.
    bool legacy_sse() const;
    // The URL's path ("" without a URL, or a URL with no path).
    std::string url_path() const;
};

// The URL with userinfo, query and fragment removed ("" stays "").
std::string sanitize_url(std::string_view url);

// The targets of one configuration: names unique per kind.
class TargetTable {
public:
    // "" or a sentence saying what is wrong (naming t.where).
    std::string add(TargetConf t);
    const std::vector<TargetConf>& all() const { return targets_; }
    const TargetConf* find(TargetKind kind, std::string_view name) const;
    // Indices of the tool servers a group may federate (URL order of the
    // configuration; legacy SSE servers left out).
    std::vector<std::size_t> federated_for(std::string_view group) const;

private:
    std::vector<TargetConf> targets_;
};

}  // namespace llmgw
