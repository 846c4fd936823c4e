// The proxy routes' paths (core/http/proxy_path.h): the name and path split
// off the URI, and the check that keeps a passthrough or target path below
// its base.
#include <gtest/gtest.h>

#include <string>

#include "core/http/proxy_path.h"

using namespace llmgw;

TEST(ProxyPath, Split) {
    std::string_view name, path;
    split_proxy_uri("/pt/openai/v1/models", 3, name, path);
    EXPECT_EQ(name, "openai");
    EXPECT_EQ(path, "/v1/models");
    split_proxy_uri("/pt/openai", 3, name, path);
    EXPECT_EQ(name, "openai");
    EXPECT_EQ(path, "");
    split_proxy_uri("/pt/", 3, name, path);
    EXPECT_EQ(name, "");
    EXPECT_EQ(path, "");
    split_proxy_uri("/p", 3, name, path);   // shorter than the prefix
    EXPECT_EQ(name, "");
    EXPECT_EQ(path, "");
    split_proxy_uri("/pt/a//b", 3, name, path);
    EXPECT_EQ(name, "a");
    EXPECT_EQ(path, "//b");
}

TEST(ProxyPath, Accepted) {
    for (const char* p : {"/", "/v1/models", "/v1beta/models/gemini-2.0:generateContent", "/a/b/", "/a/.../b",
                          "/.well-known/x", "/a/..b", "/a%2Fb"}) {
        EXPECT_STREQ(proxy_path_problem(p), "") << p;
    }
}

TEST(ProxyPath, Refused) {
    for (const char* p : {"", "v1/models", "//evil.example/x", "/http://evil", "/a/b://c", "/host:80/x", "/a/./b",
                          "/a/../b", "/..", "/.", "/a/..", "/a\\b", "/a?b", "/a#b", "/a\tb", "/a\x7f"}) {
        EXPECT_STRNE(proxy_path_problem(p), "") << p;
    }
    EXPECT_STRNE(proxy_path_problem(std::string_view("/a\0b", 4)), "");
    EXPECT_STREQ(proxy_path_problem("/a/b:c"), "");   // a ':' after the first segment is no scheme
}
