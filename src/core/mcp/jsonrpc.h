// JSON-RPC 2.0 as the federated /mcp endpoint speaks it (no nginx): the
// caller's message, the gateway's answers and requests, and a backend's
// reply read from a JSON or an SSE body.
#pragma once
#include <string>
#include <string_view>

namespace llmgw {

// JSON-RPC error codes used by the endpoint.
inline constexpr int kRpcParseError = -32700;
inline constexpr int kRpcInvalidRequest = -32600;
inline constexpr int kRpcMethodNotFound = -32601;
inline constexpr int kRpcInvalidParams = -32602;
inline constexpr int kRpcInternalError = -32603;
inline constexpr int kRpcSessionNotFound = -32001;   // the SDKs' "session not found"

// One message posted by the caller.
struct RpcMessage {
    enum class Kind { Request, Notification, Response, Invalid };
    Kind kind = Kind::Invalid;
    int error_code = 0;            // Invalid: kRpcParseError or kRpcInvalidRequest
    std::string error;             // Invalid: a sentence for the caller
    std::string id = "null";       // the id as JSON text (a string or a number), "null" when unknown
    std::string method;
    std::string params = "{}";     // the params object as JSON text ("{}" when absent)
    // Read from params where the method has them ("" when absent).
    std::string protocol_version;  // initialize: params.protocolVersion
    // What routes the request to a server: params.name (tools/call,
    // prompts/get), params.uri (resources/read), params.ref.name or
    // params.ref.uri (completion/complete, by ref_type).
    std::string route_key;
    std::string ref_type;          // completion/complete: params.ref.type
};

// Parses a posted body. A batch (an array) is Invalid: the protocol since
// 2025-06-18 has none.
RpcMessage parse_rpc(std::string_view body);

std::string rpc_result(std::string_view id, std::string_view result_json);
std::string rpc_error(std::string_view id, int code, std::string_view message);
std::string rpc_request(std::string_view id, std::string_view method, std::string_view params_json);
std::string rpc_notification(std::string_view method);

// params with "name" (in_ref: "ref.name") replaced: a tool's or prompt's own
// name on its server; "" when params (or its ref) is not an object.
std::string with_name(std::string_view params_json, std::string_view name, bool in_ref = false);

// A backend's reply to one request, from a JSON body or an SSE stream (the
// first response event whose id is want_id, the request's id as JSON text;
// notifications and requests the server interleaves are skipped). Ids match
// with their type: a reply with the string "7" does not answer the request 7.
struct BackendReply {
    enum class Kind { Result, Error, Neither };
    Kind kind = Kind::Neither;
    std::string json;              // Result: the result; Error: the error object
    std::string why;               // Neither: what was wrong (for the log)
};
BackendReply read_backend_reply(std::string_view content_type, std::string_view body, std::string_view want_id);

// initialize: the caller's protocolVersion when it is one the gateway speaks
// (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25), else 2025-11-25.
std::string_view negotiate_protocol(std::string_view asked);
bool known_protocol(std::string_view version);
inline constexpr std::string_view kDefaultProtocol = "2025-11-25";

}  // namespace llmgw
