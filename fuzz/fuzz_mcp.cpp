// libFuzzer target: what /mcp and the A2A proxy read from callers and
// backends, on arbitrary bytes. The first byte picks the reader: the
// caller's JSON-RPC message, a backend reply (JSON or SSE), the federated
// merge of up to three servers' list pages (tools and prompts renamed on a
// clash, resources and templates first-owner-wins) with their nextCursor,
// an agent card rewrite, or a session id.
//
// What must hold: no crash, no read past a bound; a parsed message's id and
// params are JSON the answers can embed; a merged list is JSON whose every
// entry has a name (uri) that routes to exactly one server, the one that
// listed it, and no two entries share a name; a rewritten card's URLs all
// lie below the gateway's base; no session id opens unless it was sealed.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "core/mcp/jsonrpc.h"
#include "core/mcp/session_token.h"
#include "core/mcp/tool_merge.h"
#include "core/targets/agent_card.h"
#include "fuzz_util.h"

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

namespace rj = rapidjson;

// Server names as configured (^[A-Za-z0-9._-]+$): "__" may be part of one.
constexpr const char* kServers[] = {"a", "b", "a__b", "srv", "b__a", "x_", "_y"};

struct ListKind {
    const char* array;
    const char* key;
    bool rename;
};
constexpr ListKind kLists[] = {
    {"tools", "name", true}, {"prompts", "name", true}, {"resources", "uri", false}, {"resourceTemplates", "uriTemplate", false}};

void check_merge(std::uint8_t choice, std::string_view in) {
    const ListKind& list = kLists[choice % 4];
    const std::size_t nservers = 1 + (choice >> 2) % 3;
    std::vector<ServerTools> servers;
    // pages split at '\x1e' (record separator), servers at '\x1d'
    std::size_t at = 0;
    for (std::size_t s = 0; s < nservers; ++s) {
        ServerTools st;
        st.backend = s;
        st.server = kServers[(choice >> 4 ^ s * 3) % (sizeof(kServers) / sizeof(kServers[0]))];
        if (s > 0 && st.server == servers[0].server) st.server += "2";
        std::size_t end = in.find('\x1d', at);
        if (end == std::string_view::npos || s + 1 == nservers) end = in.size();
        std::string_view part = at <= in.size() ? in.substr(at, end - at) : std::string_view();
        at = end + 1;
        std::size_t p = 0;
        while (p <= part.size()) {
            std::size_t q = part.find('\x1e', p);
            if (q == std::string_view::npos) q = part.size();
            st.pages.emplace_back(part.substr(p, q - p));
            (void)next_cursor(st.pages.back());
            p = q + 1;
        }
        servers.push_back(std::move(st));
    }
    MergedTools m = merge_list(servers, list.array, list.key, list.rename);
    rj::Document d;
    d.Parse(m.tools_json.data(), m.tools_json.size());
    FUZZ_CHECK(!d.HasParseError() && d.IsArray());
    std::set<std::string> names;
    for (const rj::Value& e : d.GetArray()) {
        FUZZ_CHECK(e.IsObject());
        auto it = e.FindMember(list.key);
        FUZZ_CHECK(it != e.MemberEnd() && it->value.IsString());
        const std::string name(it->value.GetString(), it->value.GetStringLength());
        FUZZ_CHECK(names.insert(name).second);   // no two entries share a name
        auto r = m.routes.find(name);
        FUZZ_CHECK(r != m.routes.end() && r->second.backend < nservers && !r->second.name.empty());
        if (name != r->second.name) {   // renamed: "<its server>__...__<own name>"
            const std::string head = servers[r->second.backend].server + "__", tail = "__" + r->second.name;
            FUZZ_CHECK(name.size() >= head.size() + tail.size() - 2 && name.compare(0, head.size(), head) == 0 &&
                       name.compare(name.size() - tail.size(), tail.size(), tail) == 0);
        }
    }
    FUZZ_CHECK(m.routes.size() == names.size());
}

void check_card(std::string_view in) {
    static const std::string base = "http://gw/a2a/x";
    std::string out, err;
    if (!rewrite_agent_card(in, "/base", base, out, err)) {
        FUZZ_CHECK(!err.empty());
        return;
    }
    rj::Document d;
    d.Parse(out.data(), out.size());
    FUZZ_CHECK(!d.HasParseError() && d.IsObject());
    auto below_base = [&](const rj::Value& obj) {
        if (!obj.IsObject()) return;
        auto u = obj.FindMember("url");
        if (u == obj.MemberEnd()) return;
        FUZZ_CHECK(u->value.IsString());
        const std::string_view url(u->value.GetString(), u->value.GetStringLength());
        FUZZ_CHECK(url.compare(0, base.size() + 1, base + "/") == 0);
    };
    below_base(d);
    for (const char* list : {"additionalInterfaces", "supportedInterfaces"}) {
        auto l = d.FindMember(list);
        if (l != d.MemberEnd() && l->value.IsArray()) {
            for (const rj::Value& e : l->value.GetArray()) below_base(e);
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const std::string in(reinterpret_cast<const char*>(data + 2), size - 2);
    switch (data[0] % 5) {
    case 0: {
        RpcMessage m = parse_rpc(in);
        FUZZ_CHECK(is_json(m.id) && is_json(m.params));
        FUZZ_CHECK(is_json(rpc_error(m.id, kRpcInvalidRequest, m.error)));
        if (m.kind == RpcMessage::Kind::Request) {
            FUZZ_CHECK(is_json(rpc_request(m.id, m.method, m.params)));
            FUZZ_CHECK(is_json(rpc_result(m.id, m.params)));
            const std::string renamed = with_name(m.params, "srv__tool", data[1] & 1);
            FUZZ_CHECK(renamed.empty() || is_json(renamed));
        }
        (void)negotiate_protocol(m.protocol_version);
        break;
    }
    case 1: {
        BackendReply r = read_backend_reply(data[1] & 8 ? "text/event-stream" : "application/json", in,
                                            data[1] & 16 ? "7" : "\"gw-1\"");
        if (r.kind != BackendReply::Kind::Neither) {
            FUZZ_CHECK(is_json(r.json));
        } else {
            FUZZ_CHECK(!r.why.empty());
        }
        break;
    }
    case 2: check_merge(data[1], in); break;
    case 3: check_card(in); break;
    default: {
        McpSession s;
        FUZZ_CHECK(!SessionSealer("fuzz-session-key-0123456789").open(in, s));
        break;
    }
    }
    return 0;
}
