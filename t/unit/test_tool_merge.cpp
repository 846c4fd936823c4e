// The federated tools/list: unique names, own names kept where unique.
#include <gtest/gtest.h>

#include "core/mcp/tool_merge.h"

using namespace llmgw;

namespace {
ServerTools server(std::size_t i, const char* name, std::string page) {
    ServerTools s;
    s.backend = i;
    s.server = name;
    s.pages.push_back(std::move(page));
    return s;
}
}  // namespace

TEST(ToolMerge, UniqueNamesKept) {
    MergedTools m = merge_tools({server(0, "alpha", R"({"tools":[{"name":"echo","inputSchema":{"type":"object"}}]})"),
                                 server(1, "beta", R"({"tools":[{"name":"add"}]})")});
    EXPECT_EQ(m.tools_json, R"([{"name":"echo","inputSchema":{"type":"object"}},{"name":"add"}])");
    ASSERT_EQ(m.routes.size(), 2u);
    EXPECT_EQ(m.routes["echo"].backend, 0u);
    EXPECT_EQ(m.routes["add"].backend, 1u);
    EXPECT_EQ(m.routes["add"].name, "add");
}

TEST(ToolMerge, CollisionsPrefixedBoth) {
    MergedTools m = merge_tools({server(0, "alpha", R"({"tools":[{"name":"echo"},{"name":"only"}]})"),
                                 server(1, "beta", R"({"tools":[{"name":"echo"}]})")});
    EXPECT_EQ(m.tools_json, R"([{"name":"alpha__echo"},{"name":"only"},{"name":"beta__echo"}])");
    EXPECT_EQ(m.routes["alpha__echo"].name, "echo");
    EXPECT_EQ(m.routes["beta__echo"].backend, 1u);
    EXPECT_EQ(m.routes.count("echo"), 0u);
}

TEST(ToolMerge, PrefixedNameMeetingAKeptName) {
    // gamma's own tool is literally called alpha__echo: it is prefixed in turn.
    MergedTools m = merge_tools({server(0, "alpha", R"({"tools":[{"name":"echo"}]})"),
                                 server(1, "beta", R"({"tools":[{"name":"echo"}]})"),
                                 server(2, "gamma", R"({"tools":[{"name":"alpha__echo"}]})")});
    EXPECT_EQ(m.routes.size(), 3u);
    EXPECT_EQ(m.routes["alpha__echo"].backend, 0u);
    EXPECT_EQ(m.routes["gamma__alpha__echo"].backend, 2u);
    EXPECT_EQ(m.routes["gamma__alpha__echo"].name, "alpha__echo");
}

TEST(ToolMerge, PagesDuplicatesAndJunk) {
    ServerTools a = server(0, "alpha", R"({"tools":[{"name":"one"},{"name":"one"},{"noname":1},{"name":5},"x",{"name":""}]})");
    a.pages.push_back(R"({"tools":[{"name":"two"}]})");
    a.pages.push_back("not json");
    a.pages.push_back(R"({"tools":{}})");
    MergedTools m = merge_tools({a});
    EXPECT_EQ(m.tools_json, R"([{"name":"one"},{"name":"two"}])");
    EXPECT_EQ(m.skipped, 5u);
    EXPECT_EQ(merge_tools({}).tools_json, "[]");
}

TEST(ToolMerge, NextCursor) {
    EXPECT_EQ(next_cursor(R"({"tools":[],"nextCursor":"abc"})"), "abc");
    EXPECT_EQ(next_cursor(R"({"tools":[]})"), "");
    EXPECT_EQ(next_cursor(R"({"nextCursor":5})"), "");
    EXPECT_EQ(next_cursor("junk"), "");
}

TEST(ToolMerge, PromptsRenamedResourcesFirstOwner) {
    MergedTools p = merge_list({server(0, "a", R"({"prompts":[{"name":"greet"}]})"),
                                server(1, "b", R"({"prompts":[{"name":"greet"},{"name":"solo"}]})")},
                               "prompts", "name", true);
    EXPECT_EQ(p.tools_json, R"([{"name":"a__greet"},{"name":"b__greet"},{"name":"solo"}])");
    MergedTools r = merge_list({server(0, "a", R"({"resources":[{"uri":"t://x","name":"x"}]})"),
                                server(1, "b", R"({"resources":[{"uri":"t://x","name":"other"},{"uri":"t://y","name":"y"}]})")},
                               "resources", "uri", false);
    EXPECT_EQ(r.tools_json, R"([{"uri":"t://x","name":"x"},{"uri":"t://y","name":"y"}])");
    EXPECT_EQ(r.routes["t://x"].backend, 0u);
    EXPECT_EQ(r.routes["t://y"].backend, 1u);
    EXPECT_EQ(r.skipped, 1u);
}

// Found by fuzz_mcp: server names may hold "__" themselves, so two renamed
// tools could meet: server "b" with a tool "a__c" and server "b__a" with a
// tool "c" were both named "b__a__c", the list held that name twice and
// its route went to one server only (the other's tool unreachable, a call
// meant for it answered by the other). Both are renamed again.
TEST(ToolMerge, RenamedNamesMeetingEachOther) {
    MergedTools m = merge_tools({server(0, "a__b", R"({"tools":[{"name":"a__c"},{"name":"c"}]})"),
                                 server(1, "b", R"({"tools":[{"name":"a__c"}]})"),
                                 server(2, "b__a", R"({"tools":[{"name":"c"}]})")});
    EXPECT_EQ(m.tools_json,
              R"([{"name":"a__b__a__c"},{"name":"a__b__c"},{"name":"b__b__a__c"},{"name":"b__a__b__a__c"}])");
    ASSERT_EQ(m.routes.size(), 4u);
    EXPECT_EQ(m.routes["b__b__a__c"].backend, 1u);
    EXPECT_EQ(m.routes["b__b__a__c"].name, "a__c");
    EXPECT_EQ(m.routes["b__a__b__a__c"].backend, 2u);
    EXPECT_EQ(m.routes["b__a__b__a__c"].name, "c");
    EXPECT_EQ(m.routes.count("b__a__c"), 0u);
    EXPECT_EQ(m.skipped, 0u);
}

// Names built of names: every name listed once, each routing to the server
// that listed it (the renaming ends however the names nest).
TEST(ToolMerge, NestedRenamesStayUnique) {
    MergedTools m = merge_tools({server(0, "s", R"({"tools":[{"name":"x"},{"name":"s__x"},{"name":"t__x"}]})"),
                                 server(1, "t", R"({"tools":[{"name":"x"},{"name":"s__x"}]})"),
                                 server(2, "s__t", R"({"tools":[{"name":"x"},{"name":"_x"}]})"),
                                 server(3, "t__s", R"({"tools":[{"name":"s__t__x"}]})")});
    // every name in the list routes to the one server and tool it names
    std::string json = m.tools_json;
    for (const auto& [name, route] : m.routes) {
        EXPECT_NE(json.find("\"" + name + "\""), std::string::npos) << name;
    }
    std::size_t listed = 0;
    for (std::size_t at = json.find("\"name\""); at != std::string::npos; at = json.find("\"name\"", at + 1)) ++listed;
    EXPECT_EQ(listed, m.routes.size());
    EXPECT_EQ(listed, 8u);
    EXPECT_EQ(m.skipped, 0u);
}
