// The model ranking: query rules, the one batch of keys, ranking semantics.
#include <gtest/gtest.h>

#include "core/admin/model_ranking.h"

namespace llmgw {
namespace {

RankingQuery q_of(std::string_view metric, std::string_view span, std::string_view detail, std::string_view prefix = "",
                  std::string_view limit = "", std::string_view offset = "") {
    RankingQuery q;
    std::string err;
    EXPECT_TRUE(parse_ranking_query(metric, "day", span, limit, offset, prefix, detail, q, err)) << err;
    return q;
}

TEST(ModelRanking, QueryRules) {
    RankingQuery q;
    std::string err;
    EXPECT_TRUE(parse_ranking_query("", "", "", "", "", "", "", q, err));
    EXPECT_EQ(q.metric, "req");
    EXPECT_EQ(q.window, Window::Day);
    EXPECT_EQ(q.span, 1);
    EXPECT_EQ(q.limit, 20u);
    struct Bad {
        const char *metric, *window, *span, *limit, *offset, *detail, *err;
    } bad[] = {
        {"rej", "", "", "", "", "", "metric must be req, tokin, tokout or cost"},
        {"", "min", "", "", "", "", "window must be hour, day or month"},
        {"", "", "36", "", "", "", "span must be an integer from 1 to 35 for window day"},
        {"", "", "0", "", "", "", "span must be an integer from 1 to 35 for window day"},
        {"", "", "", "0", "", "", "limit must be an integer from 1 to 1000"},
        {"", "", "", "1001", "", "", "limit must be an integer from 1 to 1000"},
        {"", "", "", "", "-1", "", "offset must be an integer from 0 to 1000000"},
        {"", "", "", "", "", "yes", "detail must be 1 or 0"},
    };
    for (const Bad& b : bad) {
        RankingQuery r;
        std::string e;
        EXPECT_FALSE(parse_ranking_query(b.metric, b.window, b.span, b.limit, b.offset, "", b.detail, r, e));
        EXPECT_EQ(e, b.err);
    }
}

TEST(ModelRanking, RanksSumsFiltersAndPages) {
    std::vector<CatalogModel> cat = {{"a/x", false}, {"a/y", false}, {"b/z", true}, {"a/w", false}};
    RankingQuery q = q_of("req", "2", "");
    std::vector<const CatalogModel*> models;
    std::vector<std::string> keys;
    std::string err;
    ASSERT_TRUE(ranking_keys(q, cat, 1767225600, models, keys, err));
    ASSERT_EQ(keys.size(), 8u);
    EXPECT_EQ(keys[0], "llmgw:model:a/x:req:day:20251231");
    EXPECT_EQ(keys[1], "llmgw:model:a/x:req:day:20260101");
    // a/x 1+2, a/y 0, b/z 5+0, a/w 3+0
    EXPECT_EQ(render_ranking(q, models, {1, 2, 0, 0, 5, 0, 3, 0}),
              R"({"metric":"req","window":"day","span":2,"total":3,"models":[{"model":"b/z","value":5},)"
              R"({"model":"a/w","value":3},{"model":"a/x","value":3}]})");
    RankingQuery paged = q_of("req", "2", "", "a/", "1", "1");
    ASSERT_TRUE(ranking_keys(paged, cat, 1767225600, models, keys, err));
    EXPECT_EQ(models.size(), 3u);   // the prefix filters before the limit
    EXPECT_EQ(render_ranking(paged, models, {1, 2, 0, 0, 3, 0}),
              R"({"metric":"req","window":"day","span":2,"total":2,"models":[{"model":"a/x","value":3}]})");
}

TEST(ModelRanking, DetailListsAFreeModelWithTrafficAtValueZero) {
    std::vector<CatalogModel> cat = {{"a/paid", false}, {"b/free", true}, {"c/idle", false}};
    RankingQuery q = q_of("cost", "1", "1");
    std::vector<const CatalogModel*> models;
    std::vector<std::string> keys;
    std::string err;
    ASSERT_TRUE(ranking_keys(q, cat, 1767225600, models, keys, err));
    ASSERT_EQ(keys.size(), 12u);   // 3 models x 4 metrics x 1 bucket
    EXPECT_EQ(keys[3], "llmgw:model:a/paid:cost:day:20260101");
    EXPECT_EQ(render_ranking(q, models, {2, 20, 10, 9, 1, 5, 5, 0, 0, 0, 0, 0}),
              R"({"metric":"cost","window":"day","span":1,"total":2,"models":[)"
              R"({"model":"a/paid","value":9,"requests":2,"tokensIn":20,"tokensOut":10,"costMicroUsd":9,"free":false},)"
              R"({"model":"b/free","value":0,"requests":1,"tokensIn":5,"tokensOut":5,"costMicroUsd":0,"free":true}]})");
    RankingQuery plain = q_of("cost", "1", "");
    ASSERT_TRUE(ranking_keys(plain, cat, 1767225600, models, keys, err));
    EXPECT_EQ(render_ranking(plain, models, {9, 0, 0}), R"({"metric":"cost","window":"day","span":1,"total":1,"models":[{"model":"a/paid","value":9}]})");
}

TEST(ModelRanking, TheKeyCap) {
    std::vector<CatalogModel> cat(1000);
    for (std::size_t i = 0; i < cat.size(); ++i) cat[i].id = "p/m" + std::to_string(i);
    RankingQuery q = q_of("req", "35", "1");
    std::vector<const CatalogModel*> models;
    std::vector<std::string> keys;
    std::string err;
    EXPECT_FALSE(ranking_keys(q, cat, 0, models, keys, err));
    EXPECT_EQ(err, "the ranking would read 140000 keys, over the 64000 an admin read may take: narrow it with prefix or span");
    EXPECT_TRUE(keys.empty());
    RankingQuery ok = q_of("req", "16", "");
    EXPECT_TRUE(ranking_keys(ok, cat, 0, models, keys, err));
    EXPECT_EQ(keys.size(), 16000u);
}

}  // namespace
}  // namespace llmgw
