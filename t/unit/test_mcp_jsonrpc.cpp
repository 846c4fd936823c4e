// JSON-RPC messages of /mcp: parsing the caller's message (malformed input
// included), the gateway's answers, and backend replies in JSON and SSE.
#include <gtest/gtest.h>

#include "core/mcp/jsonrpc.h"

using namespace llmgw;

TEST(McpRpc, Request) {
    RpcMessage m = parse_rpc(R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}})");
    ASSERT_EQ(m.kind, RpcMessage::Kind::Request);
    EXPECT_EQ(m.id, "7");
    EXPECT_EQ(m.method, "tools/call");
    EXPECT_EQ(m.route_key, "echo");
    EXPECT_EQ(m.params, R"({"name":"echo","arguments":{"text":"hi"}})");
}

TEST(McpRpc, StringIdAndInitialize) {
    RpcMessage m = parse_rpc(R"({"jsonrpc":"2.0","id":"a\"b","method":"initialize","params":{"protocolVersion":"2025-06-18"}})");
    ASSERT_EQ(m.kind, RpcMessage::Kind::Request);
    EXPECT_EQ(m.id, R"("a\"b")");
    EXPECT_EQ(m.protocol_version, "2025-06-18");
}

TEST(McpRpc, RouteKeys) {
    EXPECT_EQ(parse_rpc(R"({"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p1"}})").route_key, "p1");
    EXPECT_EQ(parse_rpc(R"({"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://a"}})").route_key, "test://a");
    RpcMessage c = parse_rpc(R"({"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"t://{id}"}}})");
    EXPECT_EQ(c.ref_type, "ref/resource");
    EXPECT_EQ(c.route_key, "t://{id}");
    c = parse_rpc(R"({"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"}}})");
    EXPECT_EQ(c.route_key, "p");
    EXPECT_EQ(parse_rpc(R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}})").route_key, "");
}

TEST(McpRpc, NotificationAndResponse) {
    EXPECT_EQ(parse_rpc(R"({"jsonrpc":"2.0","method":"notifications/initialized"})").kind, RpcMessage::Kind::Notification);
    EXPECT_EQ(parse_rpc(R"({"jsonrpc":"2.0","id":1,"result":{}})").kind, RpcMessage::Kind::Response);
}

TEST(McpRpc, Malformed) {
    struct Case { const char* body; int code; };
    const Case cases[] = {
        {"", kRpcParseError},
        {"{", kRpcParseError},
        {R"({"jsonrpc":"2.0","id":1,"method":"ping"} x)", kRpcParseError},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", kRpcParseError},
        {"[]", kRpcInvalidRequest},
        {R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", kRpcInvalidRequest},
        {"42", kRpcInvalidRequest},
        {R"({"id":1,"method":"ping"})", kRpcInvalidRequest},
        {R"({"jsonrpc":"1.0","id":1,"method":"ping"})", kRpcInvalidRequest},
        {R"({"jsonrpc":"2.0","id":1})", kRpcInvalidRequest},
        {R"({"jsonrpc":"2.0","id":1,"method":5})", kRpcInvalidRequest},
        {R"({"jsonrpc":"2.0","id":1,"method":""})", kRpcInvalidRequest},
        {R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})", kRpcInvalidRequest},
        {R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})", kRpcInvalidRequest},
        {R"({"jsonrpc":"2.0","id":1,"method":"ping","params":[1]})", kRpcInvalidRequest},
    };
    for (const Case& c : cases) {
        RpcMessage m = parse_rpc(c.body);
        EXPECT_EQ(m.kind, RpcMessage::Kind::Invalid) << c.body;
        EXPECT_EQ(m.error_code, c.code) << c.body;
        EXPECT_FALSE(m.error.empty());
    }
    // Deep nesting is refused before parsing, huge ids are not echoed.
    std::string deep = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":)" + std::string(100, '[') +
                       std::string(100, ']') + "}}";
    EXPECT_EQ(parse_rpc(deep).error_code, kRpcInvalidRequest);
    RpcMessage big = parse_rpc(R"({"jsonrpc":"2.0","id":")" + std::string(1000, 'x') + R"(","method":"ping"})");
    EXPECT_EQ(big.kind, RpcMessage::Kind::Invalid);
    EXPECT_EQ(big.id, "null");
}

TEST(McpRpc, Answers) {
    EXPECT_EQ(rpc_result("1", "{}"), R"({"jsonrpc":"2.0","id":1,"result":{}})");
    EXPECT_EQ(rpc_error("null", kRpcInternalError, "no MCP server reachable"),
              R"({"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"no MCP server reachable"}})");
    EXPECT_EQ(rpc_request("\"g1\"", "tools/list", ""), R"({"jsonrpc":"2.0","id":"g1","method":"tools/list","params":{}})");
    EXPECT_EQ(rpc_notification("notifications/initialized"), R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
    EXPECT_EQ(with_name(R"({"name":"alpha__echo","arguments":{"x":1}})", "echo"), R"({"name":"echo","arguments":{"x":1}})");
    EXPECT_EQ(with_name("[1]", "echo"), "");
    EXPECT_EQ(with_name(R"({"ref":{"type":"ref/prompt","name":"a__p"},"argument":{}})", "p", true),
              R"({"ref":{"type":"ref/prompt","name":"p"},"argument":{}})");
    EXPECT_EQ(with_name(R"({"ref":5})", "p", true), "");
}

TEST(McpRpc, BackendReplyJson) {
    BackendReply r = read_backend_reply("application/json", R"({"jsonrpc":"2.0","id":"g1","result":{"tools":[]}})", "\"g1\"");
    EXPECT_EQ(r.kind, BackendReply::Kind::Result);
    EXPECT_EQ(r.json, R"({"tools":[]})");
    r = read_backend_reply("application/json; charset=utf-8", R"({"jsonrpc":"2.0","id":"g1","error":{"code":-32000,"message":"x"}})", "\"g1\"");
    EXPECT_EQ(r.kind, BackendReply::Kind::Error);
    EXPECT_EQ(r.json, R"({"code":-32000,"message":"x"})");
    // Neither result nor error, another id, not JSON, another type: failures.
    EXPECT_EQ(read_backend_reply("application/json", R"({"jsonrpc":"2.0","id":"g1"})", "\"g1\"").kind, BackendReply::Kind::Neither);
    EXPECT_EQ(read_backend_reply("application/json", R"({"jsonrpc":"2.0","id":"g2","result":{}})", "\"g1\"").kind, BackendReply::Kind::Neither);
    EXPECT_EQ(read_backend_reply("application/json", R"({"jsonrpc":"2.0","id":"g1","result":{})", "\"g1\"").kind, BackendReply::Kind::Neither);
    EXPECT_EQ(read_backend_reply("text/html", R"({"jsonrpc":"2.0","id":"g1","result":{}})", "\"g1\"").kind, BackendReply::Kind::Neither);
    EXPECT_EQ(read_backend_reply("application/json", "", "\"g1\"").kind, BackendReply::Kind::Neither);
    EXPECT_EQ(read_backend_reply("application/json", R"({"jsonrpc":"2.0","id":"g1","result":5})", "\"g1\"").kind, BackendReply::Kind::Neither);
}

// A reply answers a request only with its id's type and value: the string
// "7" does not answer the request 7, nor 7 the request "7".
TEST(McpRpc, BackendReplyIdIsTyped) {
    const auto kind = [](std::string_view body, std::string_view want) {
        return read_backend_reply("application/json", body, want).kind;
    };
    const std::string_view str7 = R"({"jsonrpc":"2.0","id":"7","result":{}})";
    const std::string_view num7 = R"({"jsonrpc":"2.0","id":7,"result":{}})";
    EXPECT_EQ(kind(num7, "7"), BackendReply::Kind::Result);
    EXPECT_EQ(kind(str7, "7"), BackendReply::Kind::Neither);
    EXPECT_EQ(kind(str7, "\"7\""), BackendReply::Kind::Result);
    EXPECT_EQ(kind(num7, "\"7\""), BackendReply::Kind::Neither);
    BackendReply r = read_backend_reply("application/json", str7, "7");
    EXPECT_EQ(r.why, "the reply answers another request");
    // Numbers that are not integers are no ids; equal strings however written are.
    EXPECT_EQ(kind(R"({"jsonrpc":"2.0","id":7.0,"result":{}})", "7"), BackendReply::Kind::Neither);
    EXPECT_EQ(kind(R"({"jsonrpc":"2.0","id":7e0,"result":{}})", "7"), BackendReply::Kind::Neither);
    EXPECT_EQ(kind(R"({"jsonrpc":"2.0","id":"g\u0031","result":{}})", "\"g1\""), BackendReply::Kind::Result);
    EXPECT_EQ(kind(R"({"jsonrpc":"2.0","id":"g1","result":{}})", "\"g\\u0031\""), BackendReply::Kind::Result);
    EXPECT_EQ(kind(R"({"jsonrpc":"2.0","id":18446744073709551615,"result":{}})", "18446744073709551615"),
              BackendReply::Kind::Result);
    EXPECT_EQ(kind(R"({"jsonrpc":"2.0","id":-7,"result":{}})", "7"), BackendReply::Kind::Neither);
    EXPECT_EQ(kind(R"({"jsonrpc":"2.0","id":null,"result":{}})", "null"), BackendReply::Kind::Neither);
    EXPECT_EQ(kind(R"({"jsonrpc":"2.0","id":["7"],"result":{}})", "7"), BackendReply::Kind::Neither);
    // In a stream, the event with the string id is skipped; the one with the number answers.
    BackendReply s = read_backend_reply("text/event-stream",
                                        "data: {\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{\"n\":1}}\n\n"
                                        "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"n\":2}}\n\n",
                                        "7");
    ASSERT_EQ(s.kind, BackendReply::Kind::Result) << s.why;
    EXPECT_EQ(s.json, R"({"n":2})");
}

TEST(McpRpc, BackendReplySse) {
    // Notifications before the response are skipped; CRLF line ends; a last event without its blank line.
    std::string sse = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\n"
                      ": comment\n\nid: 5\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"g1\",\n"
                      "data: \"result\":{\"content\":[]}}";
    BackendReply r = read_backend_reply("text/event-stream", sse, "\"g1\"");
    ASSERT_EQ(r.kind, BackendReply::Kind::Result) << r.why;
    EXPECT_EQ(r.json, R"({"content":[]})");
    EXPECT_EQ(read_backend_reply("text/event-stream", "data: not json\n\n", "\"g1\"").kind, BackendReply::Kind::Neither);
    EXPECT_EQ(read_backend_reply("text/event-stream", "", "\"g1\"").kind, BackendReply::Kind::Neither);
}

TEST(McpRpc, ProtocolAllowlist) {
    EXPECT_EQ(negotiate_protocol("2025-06-18"), "2025-06-18");
    EXPECT_EQ(negotiate_protocol("2024-11-05"), "2024-11-05");
    EXPECT_EQ(negotiate_protocol("2025-11-25"), "2025-11-25");
    EXPECT_EQ(negotiate_protocol("2099-01-01"), "2025-11-25");
    EXPECT_EQ(negotiate_protocol(""), "2025-11-25");
    EXPECT_EQ(negotiate_protocol("2024-10-07"), "2025-11-25");
    EXPECT_TRUE(known_protocol("2025-03-26"));
    EXPECT_FALSE(known_protocol("2025-03-26 "));
}
