// libFuzzer target: what /mcp reads from callers and backends, on arbitrary
// bytes. The first byte picks the reader: the caller's JSON-RPC message, a
// backend reply (JSON or SSE), the federated tool merge of two servers, an
// agent card rewrite, or a session id. Invariants checked: a parsed message's
// id and params are JSON the answers can embed; every merged name routes to
// one of the servers; no session id opens unless it was sealed.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "core/mcp/jsonrpc.h"
#include "core/mcp/session_token.h"
#include "core/mcp/tool_merge.h"
#include "core/targets/agent_card.h"

using namespace llmgw;

namespace {
bool is_json(const std::string& s) {
    rapidjson::Document d;
    d.Parse(s.data(), s.size());
    return !d.HasParseError();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string in(reinterpret_cast<const char*>(data + 1), size - 1);
    switch (data[0] % 5) {
    case 0: {
        RpcMessage m = parse_rpc(in);
        if (!is_json(m.id) || !is_json(m.params)) std::abort();
        if (!is_json(rpc_error(m.id, kRpcInvalidRequest, m.error))) std::abort();
        if (m.kind == RpcMessage::Kind::Request && !is_json(rpc_request(m.id, m.method, m.params))) std::abort();
        break;
    }
    case 1: {
        BackendReply r = read_backend_reply(data[0] & 8 ? "text/event-stream" : "application/json", in, "\"gw-1\"");
        if (r.kind != BackendReply::Kind::Neither && !is_json(r.json)) std::abort();
        break;
    }
    case 2: {
        const std::size_t cut = in.size() / 2;
        ServerTools a{0, "a", {in.substr(0, cut)}}, b{1, "b", {in.substr(cut)}};
        MergedTools m = merge_tools({a, b});
        if (!is_json(m.tools_json)) std::abort();
        for (const auto& [name, route] : m.routes) {
            if (name.empty() || route.backend > 1) std::abort();
        }
        break;
    }
    case 3: {
        std::string out, err;
        if (rewrite_agent_card(in, "/base", "http://gw/a2a/x", out, err) && !is_json(out)) std::abort();
        break;
    }
    default: {
        McpSession s;
        if (SessionSealer("fuzz-session-key-0123456789").open(in, s)) std::abort();
        break;
    }
    }
    return 0;
}
