// The usage history query: its rules, its keys, its document.
#include <gtest/gtest.h>

#include "core/admin/history.h"

namespace llmgw {
namespace {

HistoryQuery parse_ok(std::string_view scope, std::string_view metric, std::string_view window, std::string_view span) {
    HistoryQuery q;
    std::string err;
    EXPECT_TRUE(parse_history_query(scope, metric, window, span, q, err)) << err;
    return q;
}

std::string parse_err(std::string_view scope, std::string_view metric, std::string_view window, std::string_view span) {
    HistoryQuery q;
    std::string err;
    EXPECT_FALSE(parse_history_query(scope, metric, window, span, q, err));
    return err;
}

TEST(History, ScopesMetricsWindowsSpans) {
    HistoryQuery q = parse_ok("user:alice", "req", "", "");
    EXPECT_EQ(q.kind, "user");
    EXPECT_EQ(q.id, "alice");
    EXPECT_EQ(q.window, Window::Day);
    EXPECT_EQ(q.span, 30);
    EXPECT_EQ(parse_ok("total", "cost", "month", "").span, 12);
    EXPECT_EQ(parse_ok("total:all", "tokin", "hour", "").span, 48);
    EXPECT_EQ(parse_ok("model:oai/gpt-4o:mini", "tokout", "day", "35").id, "oai/gpt-4o:mini");
    EXPECT_EQ(parse_ok("group:eng", "req", "month", "13").span, 13);
}

TEST(History, Refusals) {
    EXPECT_EQ(parse_err("", "req", "day", ""), "scope is required: user:<name>, group:<name>, model:<provider>/<model> or total");
    EXPECT_EQ(parse_err("team:x", "req", "day", ""), "scope kind must be user, group, model or total");
    EXPECT_EQ(parse_err("user:", "req", "day", ""), "scope must be <kind>:<id>, e.g. user:alice");
    EXPECT_EQ(parse_err("total:x", "req", "day", ""), "scope total has the id all (scope=total)");
    EXPECT_EQ(parse_err("user:a", "rej", "day", ""), "metric must be req, tokin, tokout or cost");
    EXPECT_EQ(parse_err("user:a", "", "day", ""), "metric must be req, tokin, tokout or cost");
    EXPECT_EQ(parse_err("user:a", "req", "min", ""), "window must be hour, day or month");
    EXPECT_EQ(parse_err("user:a", "req", "week", ""), "window must be hour, day or month");
    EXPECT_EQ(parse_err("user:a", "req", "day", "36"), "span must be an integer from 1 to 35 for window day");
    EXPECT_EQ(parse_err("user:a", "req", "month", "14"), "span must be an integer from 1 to 13 for window month");
    EXPECT_EQ(parse_err("user:a", "req", "hour", "49"), "span must be an integer from 1 to 48 for window hour");
    EXPECT_EQ(parse_err("user:a", "req", "day", "0"), "span must be an integer from 1 to 35 for window day");
    EXPECT_EQ(parse_err("user:a", "req", "day", "-1"), "span must be an integer from 1 to 35 for window day");
    EXPECT_EQ(parse_err("user:a", "req", "day", "3x"), "span must be an integer from 1 to 35 for window day");
    EXPECT_EQ(parse_err("user:a", "req", "day", "99999999999999"), "span must be an integer from 1 to 35 for window day");
}

TEST(History, KeysOldestFirstAcrossMonthsAndYears) {
    HistoryQuery q = parse_ok("user:alice", "req", "month", "3");
    std::vector<std::string> buckets, keys;
    history_keys(q, 1767225600 /* 2026-01-01T00:00:00Z */, buckets, keys);
    EXPECT_EQ(buckets, (std::vector<std::string>{"202511", "202512", "202601"}));
    EXPECT_EQ(keys.front(), "llmgw:user:alice:req:month:202511");
    HistoryQuery d = parse_ok("total", "cost", "day", "2");
    history_keys(d, 1767225600, buckets, keys);
    EXPECT_EQ(buckets, (std::vector<std::string>{"20251231", "20260101"}));
    EXPECT_EQ(keys.back(), "llmgw:total:all:cost:day:20260101");
    EXPECT_EQ(render_history(d, buckets, {5, 7}),
              R"({"scope":"total","metric":"cost","window":"day","span":2,"points":[{"bucket":"20251231","value":5},)"
              R"({"bucket":"20260101","value":7}]})");
}

TEST(History, SeriesAndTotalsReadTheFourMetrics) {
    HistoryQuery q;
    std::string err;
    ASSERT_TRUE(parse_series_query("", "day", "2", q, err)) << err;
    EXPECT_EQ(q.kind, "total");
    std::vector<std::string> buckets, keys;
    series_keys(q, 1767225600, buckets, keys);
    ASSERT_EQ(keys.size(), 8u);
    EXPECT_EQ(keys[0], "llmgw:total:all:req:day:20251231");
    EXPECT_EQ(keys[7], "llmgw:total:all:cost:day:20260101");
    const std::vector<std::int64_t> v = {1, 10, 5, 3, 2, 20, 10, 6};
    EXPECT_EQ(render_series(q, buckets, v),
              R"({"scope":"total","window":"day","span":2,"points":[)"
              R"({"bucket":"20251231","requests":1,"tokensIn":10,"tokensOut":5,"costMicroUsd":3},)"
              R"({"bucket":"20260101","requests":2,"tokensIn":20,"tokensOut":10,"costMicroUsd":6}]})");
    EXPECT_EQ(render_totals(q, buckets, v),
              R"({"scope":"total","window":"day","span":2,"requests":3,"tokensIn":30,"tokensOut":15,"costMicroUsd":9})");
    EXPECT_FALSE(parse_series_query("user:", "day", "", q, err));
    EXPECT_FALSE(parse_series_query("total", "min", "", q, err));
}

}  // namespace
}  // namespace llmgw
