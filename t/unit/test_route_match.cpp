#include <gtest/gtest.h>

#include "core/http/route_match.h"

namespace llmgw {
namespace {

struct Row {
    unsigned mode;
    std::string_view suffixes[2];
    int id;
};

const Row kRows[] = {
    {1, {"/chat/completions"}, 1},
    {1, {"/embeddings"}, 2},
    {1, {"/models"}, 3},
    {2, {"/admin", "/admin/"}, 4},
    {2, {"/admin/api/usage"}, 5},
    {2, {"/admin/ui/*"}, 6},
};

int id_of(unsigned mode, std::string_view path) {
    const Row* r = match_route(kRows, mode, path);
    return r ? r->id : 0;
}

TEST(RouteMatch, SuffixWithinTheLocationMode) {
    EXPECT_EQ(id_of(1, "/v1/chat/completions"), 1);
    EXPECT_EQ(id_of(1, "/gw/v1/embeddings"), 2);
    EXPECT_EQ(id_of(1, "/v1/models"), 3);
    EXPECT_EQ(id_of(2, "/v1/models"), 0);     // another mode's route
    EXPECT_EQ(id_of(1, "/admin"), 0);
    EXPECT_EQ(id_of(2, "/admin"), 4);
    EXPECT_EQ(id_of(2, "/x/admin/"), 4);      // second suffix of the row
    EXPECT_EQ(id_of(2, "/admin/api/usage"), 5);
    EXPECT_EQ(id_of(1, "/v1/chat/completions/"), 0);
    EXPECT_EQ(id_of(1, "/v1/completions"), 0);
    EXPECT_EQ(id_of(0, "/v1/models"), 0);
}

TEST(RouteMatch, EmptySuffixNeverMatches) {
    EXPECT_FALSE(path_ends_with("/a", ""));
    EXPECT_TRUE(path_ends_with("/a/b", "/b"));
    EXPECT_FALSE(path_ends_with("b", "/b"));
}

}  // namespace
}  // namespace llmgw

namespace llmgw {
namespace {

struct AnyRow {
    unsigned mode;
    std::string_view suffixes[2];
    int id;
};

const AnyRow kWithAny[] = {
    {1, {"/models"}, 1},
    {3, {}, 2},   // every path of mode 3
};

TEST(RouteMatch, RowWithoutSuffixesServesEveryPathOfItsMode) {
    EXPECT_EQ(match_route(kWithAny, 3, "/passthrough/openai/files")->id, 2);
    EXPECT_EQ(match_route(kWithAny, 3, "/")->id, 2);
    EXPECT_EQ(match_route(kWithAny, 1, "/v1/other"), nullptr);
}

TEST(RouteMatch, AStarStandsForOneLastSegment) {
    EXPECT_EQ(id_of(2, "/admin/ui/app.js"), 6);
    EXPECT_EQ(id_of(2, "/ops/admin/ui/icon.svg"), 6);
    EXPECT_EQ(id_of(2, "/admin/ui/"), 0);          // the segment is not empty
    EXPECT_EQ(id_of(2, "/admin/ui"), 0);
    EXPECT_EQ(id_of(2, "/admin/ui/x/app.js"), 0);  // one segment, not two
    EXPECT_EQ(id_of(2, "/admin/uix/app.js"), 0);
    EXPECT_EQ(id_of(1, "/admin/ui/app.js"), 0);
    EXPECT_FALSE(path_matches("app.js", "/admin/ui/*"));
    EXPECT_FALSE(path_matches("", "/admin/ui/*"));
    EXPECT_TRUE(path_matches("/admin/ui/a", "/admin/ui/*"));
}

}  // namespace
}  // namespace llmgw
