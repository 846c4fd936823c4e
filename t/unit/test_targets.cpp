// Targets: validation, access lists, sanitized URLs, the legacy SSE rule and
// the agent card rewrite.
#include <gtest/gtest.h>

#include "core/targets/agent_card.h"
#include "core/targets/target.h"

using namespace llmgw;

namespace {
TargetConf mcp(const char* name, const char* location, const char* url = "") {
    TargetConf t;
    t.name = name;
    t.location = location;
    t.url = url;
    return t;
}
}  // namespace

TEST(Targets, Validation) {
    TargetTable tt;
    EXPECT_EQ(tt.add(mcp("alpha", "/_mcp/alpha", "http://127.0.0.1:1/mcp")), "");
    EXPECT_NE(tt.add(mcp("alpha", "/_mcp/other")).find("defined twice"), std::string::npos);
    EXPECT_NE(tt.add(mcp("bad name", "/x")).find("must match"), std::string::npos);
    EXPECT_NE(tt.add(mcp("..", "/x")).find("must match"), std::string::npos);
    EXPECT_NE(tt.add(mcp("b", "x")).find("location="), std::string::npos);
    EXPECT_NE(tt.add(mcp("b", "/x?y")).find("plain path"), std::string::npos);
    EXPECT_NE(tt.add(mcp("b", "/x", "ftp://h/")).find("url="), std::string::npos);
    TargetConf a = mcp("alpha", "/_a2a/alpha");
    a.kind = TargetKind::Agent;
    EXPECT_EQ(tt.add(a), "");   // names are unique per kind
    a.name = "beta";
    a.card_path = "card.json";
    EXPECT_NE(tt.add(a).find("card="), std::string::npos);
    ASSERT_NE(tt.find(TargetKind::Agent, "alpha"), nullptr);
    EXPECT_EQ(tt.find(TargetKind::Agent, "alpha")->upstream.location, "/_a2a/alpha");
    EXPECT_EQ(tt.find(TargetKind::Mcp, "nope"), nullptr);
}

TEST(Targets, AccessAndFederation) {
    TargetTable tt;
    TargetConf open = mcp("open", "/_mcp/open");
    TargetConf closed = mcp("closed", "/_mcp/closed");
    closed.restricted = true;   // groups= with no group: none may
    TargetConf eng = mcp("eng", "/_mcp/eng");
    eng.restricted = true;
    eng.groups = {"eng"};
    TargetConf legacy = mcp("legacy", "/_mcp/legacy", "http://h:1/legacy/sse/");
    TargetConf legacy_loc = mcp("legacy2", "/_mcp/legacy2/sse");
    TargetConf agent = mcp("agent", "/_a2a/agent");
    agent.kind = TargetKind::Agent;
    for (TargetConf* t : {&open, &closed, &eng, &legacy, &legacy_loc, &agent}) ASSERT_EQ(tt.add(*t), "");
    EXPECT_TRUE(tt.all()[0].open_to("anyone"));
    EXPECT_FALSE(tt.all()[1].open_to("eng"));
    EXPECT_TRUE(tt.all()[2].open_to("eng"));
    EXPECT_FALSE(tt.all()[2].open_to("sales"));
    EXPECT_TRUE(tt.all()[3].legacy_sse());
    EXPECT_TRUE(tt.all()[4].legacy_sse());
    EXPECT_FALSE(tt.all()[0].legacy_sse());
    EXPECT_EQ(tt.federated_for("eng"), (std::vector<std::size_t>{0, 2}));
    EXPECT_EQ(tt.federated_for("sales"), (std::vector<std::size_t>{0}));
}

TEST(Targets, SanitizeUrl) {
    EXPECT_EQ(sanitize_url("https://user:pw@example.com:8443/mcp?token=abc#frag"), "https://example.com:8443/mcp");
    EXPECT_EQ(sanitize_url("http://example.com?x=1"), "http://example.com");
    EXPECT_EQ(sanitize_url("http://a@b@host/p"), "http://host/p");
    EXPECT_EQ(sanitize_url(""), "");
    EXPECT_EQ(mcp("x", "/l", "http://u:p@h:1/a/b?q").url_path(), "/a/b");
}

TEST(AgentCard, Rewrite) {
    std::string out, err;
    const char* card = R"({"name":"echo","url":"http://127.0.0.1:9/a2a/jsonrpc?x=1",)"
                       R"("additionalInterfaces":[{"url":"http://127.0.0.1:9/a2a/jsonrpc","transport":"JSONRPC"},)"
                       R"({"url":"http://127.0.0.1:9/","transport":"HTTP+JSON"}],)"
                       R"("provider":{"url":"https://example.com"}})";
    ASSERT_TRUE(rewrite_agent_card(card, "", "http://gw:8080/a2a/echo", out, err)) << err;
    EXPECT_EQ(out, R"({"name":"echo","url":"http://gw:8080/a2a/echo/a2a/jsonrpc?x=1",)"
                   R"("additionalInterfaces":[{"url":"http://gw:8080/a2a/echo/a2a/jsonrpc","transport":"JSONRPC"},)"
                   R"({"url":"http://gw:8080/a2a/echo/","transport":"HTTP+JSON"}],)"
                   R"("provider":{"url":"https://example.com"}})");
    // A2A 1.0: the endpoints are in supportedInterfaces.
    ASSERT_TRUE(rewrite_agent_card(R"({"supportedInterfaces":[{"url":"http://127.0.0.1:9/a2a/jsonrpc","protocolBinding":"JSONRPC"}]})",
                                   "", "http://gw/a2a/echo", out, err));
    EXPECT_EQ(out, R"({"supportedInterfaces":[{"url":"http://gw/a2a/echo/a2a/jsonrpc","protocolBinding":"JSONRPC"}]})");
    // The agent's configured URL path is not repeated below the gateway's.
    EXPECT_EQ(gateway_url("http://h:1/base/rpc", "/base/", "http://gw/a2a/x"), "http://gw/a2a/x/rpc");
    EXPECT_EQ(gateway_url("http://h:1/base", "/base", "http://gw/a2a/x"), "http://gw/a2a/x/");
    EXPECT_EQ(gateway_url("http://h:1/basement", "/base", "http://gw/a2a/x"), "http://gw/a2a/x/basement");
    EXPECT_EQ(gateway_url("http://h:1", "", "http://gw/a2a/x/"), "http://gw/a2a/x/");
}

TEST(AgentCard, Refused) {
    std::string out, err;
    EXPECT_FALSE(rewrite_agent_card("[1]", "", "http://gw/a2a/x", out, err));
    EXPECT_FALSE(rewrite_agent_card("{", "", "http://gw/a2a/x", out, err));
    EXPECT_FALSE(rewrite_agent_card(R"({"url":5})", "", "http://gw/a2a/x", out, err));
    EXPECT_FALSE(rewrite_agent_card(R"x({"url":"javascript:alert(1)"})x", "", "http://gw/a2a/x", out, err));
    EXPECT_FALSE(rewrite_agent_card("{\"url\":\"http://h/\xff\"}", "", "http://gw/a2a/x", out, err));
    std::string deep = R"({"url":"http://h/","x":)" + std::string(200, '[') + std::string(200, ']') + "}";
    EXPECT_FALSE(rewrite_agent_card(deep, "", "http://gw/a2a/x", out, err));
    EXPECT_TRUE(rewrite_agent_card(R"({"name":"no url"})", "", "http://gw/a2a/x", out, err));
}

#include "core/admin/targets_view.h"

TEST(TargetsView, SortedWithAccessStatesAndCounters) {
    TargetTable tt;
    TargetConf b = mcp("beta", "/_mcp/beta", "https://user:pw@tools.example:8443/mcp?token=t0p");
    b.restricted = true;   // groups= empty: none
    TargetConf a = mcp("alpha", "/_mcp/alpha");
    TargetConf ag = mcp("zed", "/_a2a/zed", "http://127.0.0.1:9/");
    ag.kind = TargetKind::Agent;
    ag.restricted = true;
    ag.groups = {"eng", "ops"};
    ASSERT_EQ(tt.add(b), "");
    ASSERT_EQ(tt.add(a), "");
    ASSERT_EQ(tt.add(ag), "");
    auto order = targets_in_view_order(tt.all());
    std::vector<std::string> keys;
    append_target_keys(order, 1764000000, keys);
    ASSERT_EQ(keys.size(), 12u);
    EXPECT_EQ(keys[0].rfind("llmgw:agent:zed:req:min:", 0), 0u);
    EXPECT_EQ(keys[4].rfind("llmgw:mcp:alpha:req:min:", 0), 0u);
    EXPECT_EQ(keys[11].rfind("llmgw:mcp:beta:req:month:", 0), 0u);
    std::vector<std::int64_t> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    EXPECT_EQ(render_targets(order, v),
              R"({"targets":[)"
              R"({"kind":"agent","name":"zed","url":"http://127.0.0.1:9/","location":"/_a2a/zed","card":"/.well-known/agent-card.json","access":["eng","ops"],"requests":{"min":1,"hour":2,"day":3,"month":4}},)"
              R"({"kind":"mcp","name":"alpha","url":"/_mcp/alpha","location":"/_mcp/alpha","federated":true,"access":null,"requests":{"min":5,"hour":6,"day":7,"month":8}},)"
              R"({"kind":"mcp","name":"beta","url":"https://tools.example:8443/mcp","location":"/_mcp/beta","federated":true,"access":[],"requests":{"min":9,"hour":10,"day":11,"month":12}}]})");
}

// llm_gateway_public_url: an http(s) URL with a host, an optional port and
// path; a trailing '/' dropped; anything else refused with a sentence.
TEST(AgentCard, PublicBase) {
    std::string out, err;
    ASSERT_TRUE(public_base("https://gw.example.com", out, err)) << err;
    EXPECT_EQ(out, "https://gw.example.com");
    ASSERT_TRUE(public_base("https://gw.example.com/llm/", out, err)) << err;
    EXPECT_EQ(out, "https://gw.example.com/llm");
    ASSERT_TRUE(public_base("http://10.0.0.1:8080/", out, err)) << err;
    EXPECT_EQ(out, "http://10.0.0.1:8080");
    ASSERT_TRUE(public_base("https://[::1]:8443", out, err)) << err;
    EXPECT_EQ(out, "https://[::1]:8443");
    for (const char* bad : {"", "ftp://x", "https://", "https://:80", "https://a b", "https://x:port", "https://x:123456",
                            "https://[zz]", "https://x/a?b", "https://x/a#b", "https://user@x", "https://x/a b",
                            "https://x/\x01", "://x", "https://x\xc3\xa9"}) {
        out = "unchanged";
        err.clear();
        EXPECT_FALSE(public_base(bad, out, err)) << bad;
        EXPECT_FALSE(err.empty()) << bad;
        EXPECT_EQ(out, "unchanged") << bad;
    }
    EXPECT_FALSE(public_base("https://x/" + std::string(3000, 'a'), out, err));
    EXPECT_EQ(err, "the public URL is longer than 2048 bytes");
}
