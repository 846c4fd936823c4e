// Discovery: list paths, page parsing per provider type, the page walk, and
// the listing rule of /v1/models.
#include <gtest/gtest.h>

#include "core/admin/views.h"
#include "core/discovery/model_list.h"

using namespace llmgw;

TEST(ModelList, Paths) {
    EXPECT_EQ(model_list_path(ProviderType::OpenAI, ""), "/models");
    EXPECT_EQ(model_list_path(ProviderType::OpenAI, "gpt b/c"), "/models?after=gpt%20b%2Fc");
    EXPECT_EQ(model_list_path(ProviderType::Anthropic, ""), "/v1/models?limit=1000");
    EXPECT_EQ(model_list_path(ProviderType::Anthropic, "claude-x"), "/v1/models?limit=1000&after_id=claude-x");
    EXPECT_EQ(model_list_path(ProviderType::Gemini, "a+b=&c"), "/v1beta/models?pageSize=1000&pageToken=a%2Bb%3D%26c");
}

TEST(ModelList, Pages) {
    ModelPage p;
    std::string err;
    ASSERT_TRUE(parse_model_page(ProviderType::OpenAI, R"({"data":[{"id":"a"},{"id":"b"}],"has_more":true})", p, err));
    EXPECT_EQ(p.ids, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(p.next, "b");   // no last_id: the last data id
    p = ModelPage();
    ASSERT_TRUE(parse_model_page(ProviderType::Anthropic, R"({"data":[{"id":"c"}],"has_more":true,"last_id":"c"})", p, err));
    EXPECT_EQ(p.next, "c");
    p = ModelPage();
    ASSERT_TRUE(parse_model_page(ProviderType::Anthropic, R"({"data":[],"has_more":false})", p, err));
    EXPECT_EQ(p.next, "");
    p = ModelPage();
    ASSERT_TRUE(parse_model_page(ProviderType::Gemini,
                                 "{\"models\":[{\"name\":\"models/g1\"},{\"name\":\"tunedModels/t\"},{\"name\":5},"
                                 "{\"name\":\"models/bad\\u0001\"},{\"name\":\"models/\xff\"}],\"nextPageToken\":\"x\"}",
                                 p, err));
    EXPECT_EQ(p.ids, (std::vector<std::string>{"g1", "tunedModels/t"}));
    EXPECT_EQ(p.skipped, 3u);
    EXPECT_EQ(p.next, "x");
    p = ModelPage();
    ASSERT_TRUE(parse_model_page(ProviderType::Gemini, "{}", p, err));   // an empty last page
    EXPECT_TRUE(p.ids.empty());
    p = ModelPage();
    ASSERT_TRUE(parse_model_page(ProviderType::OpenAI, R"({"data":[{"id":")" + std::string(300, 'x') + R"("}]})", p, err));
    EXPECT_EQ(p.skipped, 1u);
}

TEST(ModelList, MalformedPages) {
    const std::pair<ProviderType, const char*> bad[] = {
        {ProviderType::OpenAI, ""},
        {ProviderType::OpenAI, "{"},
        {ProviderType::OpenAI, "[]"},
        {ProviderType::OpenAI, R"({"data":{}})"},
        {ProviderType::OpenAI, R"({"object":"list"})"},
        {ProviderType::OpenAI, R"({"data":[],"has_more":"yes"})"},
        {ProviderType::Anthropic, R"({"data":[],"has_more":true})"},
        {ProviderType::Gemini, R"({"models":"x"})"},
        {ProviderType::Gemini, R"({"models":[],"nextPageToken":5})"},
    };
    for (const auto& [t, body] : bad) {
        ModelPage p;
        std::string err;
        EXPECT_FALSE(parse_model_page(t, body, p, err)) << body;
        EXPECT_FALSE(err.empty());
    }
}

TEST(ModelList, WalkStopsOnRepeatsAndBounds) {
    ModelWalk w(ProviderType::Gemini);
    std::string err;
    EXPECT_EQ(w.next_path(), "/v1beta/models?pageSize=1000");
    ASSERT_TRUE(w.feed(R"({"models":[{"name":"models/a"}],"nextPageToken":"t1"})", err));
    EXPECT_FALSE(w.done());
    EXPECT_EQ(w.next_path(), "/v1beta/models?pageSize=1000&pageToken=t1");
    ASSERT_TRUE(w.feed(R"({"models":[{"name":"models/b"}],"nextPageToken":"t1"})", err));
    EXPECT_TRUE(w.done());
    EXPECT_TRUE(w.truncated());
    EXPECT_EQ(w.ids(), (std::vector<std::string>{"a", "b"}));

    ModelWalk many(ProviderType::OpenAI);
    for (std::size_t i = 0; !many.done(); ++i) {
        ASSERT_LT(i, kDiscoveryMaxPages + 1);
        ASSERT_TRUE(many.feed(R"({"data":[{"id":"m)" + std::to_string(i) + R"("}],"has_more":true})", err));
    }
    EXPECT_EQ(many.pages(), kDiscoveryMaxPages);
    EXPECT_TRUE(many.truncated());

    ModelWalk bad(ProviderType::Anthropic);
    EXPECT_FALSE(bad.feed("nope", err));
}

// The walk's byte bounds: each page's limit is the page bound or what is
// left of the total; a page past it fails the walk, naming the bound.
TEST(ModelList, WalkByteBounds) {
    auto page = [](int i, std::size_t pad) {
        return R"({"data":[{"id":"m)" + std::to_string(i) + R"(","pad":")" + std::string(pad, 'x') +
               R"("}],"has_more":true})";
    };
    std::string err;
    ModelWalk w(ProviderType::OpenAI, WalkBounds{100, 250});
    EXPECT_EQ(w.next_page_limit(), 100u);
    const std::string p1 = page(1, 40);
    ASSERT_LE(p1.size(), 100u);
    ASSERT_TRUE(w.feed(p1, err)) << err;
    EXPECT_EQ(w.bytes(), p1.size());
    EXPECT_EQ(w.next_page_limit(), 100u);
    ASSERT_TRUE(w.feed(page(2, 40), err)) << err;
    EXPECT_EQ(w.next_page_limit(), 250u - 2 * p1.size());   // the total binds now
    EXPECT_FALSE(w.feed(page(3, 40), err));
    EXPECT_EQ(err, "the pages are larger together than discover_max_total (250 bytes) at page 3");
    w.overflow(err);
    EXPECT_EQ(err, "the pages are larger together than discover_max_total (250 bytes) at page 3");
    EXPECT_EQ(w.pages(), 2u);

    ModelWalk big(ProviderType::OpenAI, WalkBounds{100, 1000});
    EXPECT_FALSE(big.feed(page(1, 100), err));
    EXPECT_EQ(err, "page 1 is larger than discover_max_page (100 bytes)");
    EXPECT_EQ(big.bytes(), 0u);
    big.overflow(err);
    EXPECT_EQ(err, "page 1 is larger than discover_max_page (100 bytes)");

    // The defaults: 4 MiB a page, 16 MiB in all.
    ModelWalk d(ProviderType::Gemini);
    EXPECT_EQ(d.next_page_limit(), kDiscoveryMaxPageBytes);
    EXPECT_EQ(kDiscoveryMaxPageBytes, 4u << 20);
    EXPECT_EQ(kDiscoveryMaxTotalBytes, 16u << 20);
    // A total exactly used up: the next page may have no byte.
    ModelWalk exact(ProviderType::OpenAI, WalkBounds{100, p1.size()});
    ASSERT_TRUE(exact.feed(p1, err)) << err;
    EXPECT_EQ(exact.next_page_limit(), 0u);
}

TEST(ModelList, ListingRule) {
    GatewayConfig c;
    ProviderConf a;
    a.name = "vllm";
    a.location = "/_llm/v";
    a.models = {"m1"};
    ProviderConf g;
    g.name = "gem";
    g.type = ProviderType::Gemini;
    g.location = "/_llm/g";
    c.add_provider(a);
    c.add_provider(g);
    c.add_alias({"fast", "vllm/m1", "x:1", {}});
    ASSERT_EQ(c.finalize(), "");
    std::string out = render_models(c, {{"m1", "meta-llama/Llama-3", "m2"}, {"gemini-a", "meta-llama/Llama-3"}});
    EXPECT_EQ(out,
              R"({"object":"list","data":[)"
              R"({"id":"vllm/m1","object":"model","created":0,"owned_by":"vllm"},)"
              R"({"id":"fast","object":"model","created":0,"owned_by":"vllm"},)"
              R"({"id":"meta-llama/Llama-3","object":"model","created":0,"owned_by":"meta-llama"},)"
              R"({"id":"vllm/m2","object":"model","created":0,"owned_by":"vllm"},)"
              R"({"id":"gem/gemini-a","object":"model","created":0,"owned_by":"gem"}]})");
}
