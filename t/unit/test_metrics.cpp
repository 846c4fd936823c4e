// The Prometheus exposition, its escaping, the rejection table, the metrics document.
#include <gtest/gtest.h>

#include <memory>

#include "core/metering/keys.h"
#include "core/metrics/exposition.h"
#include "core/metrics/gateway_metrics.h"
#include "core/metrics/rejections.h"

namespace llmgw {
namespace {

TEST(Exposition, EscapingIsValidUtf8AndInjective) {
    EXPECT_EQ(escape_label_value("plain"), "plain");
    EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\\\\\c\\nd");
    EXPECT_EQ(escape_label_value("caf\xc3\xa9"), "caf\xc3\xa9");
    EXPECT_EQ(escape_label_value("bad\xff"), "bad\\\\xFF");
    EXPECT_EQ(escape_label_value("\xe2\x82"), "\\\\xE2\\\\x82");         // a cut sequence
    EXPECT_EQ(escape_label_value("\xed\xa0\x80"), "\\\\xED\\\\xA0\\\\x80");   // a surrogate
    // A literal "\xFF" text and the byte 0xFF differ after escaping.
    EXPECT_NE(escape_label_value("\\xFF"), escape_label_value("\xff"));
}

TEST(Exposition, FamiliesGroupedNoDuplicateSeries) {
    Exposition x;
    x.family("a_total", "counter", "A.");
    x.family("b", "gauge", "B.");
    x.family("a_total", "counter", "again");   // declared once
    EXPECT_TRUE(x.sample("b", {{"k", "1"}}, 0.5));
    EXPECT_TRUE(x.sample("a_total", {{"k", "x\"y"}}, std::int64_t{3}));
    EXPECT_TRUE(x.sample("a_total", {}, std::int64_t{4}));
    EXPECT_FALSE(x.sample("a_total", {{"k", "x\"y"}}, std::int64_t{9}));   // the same series
    EXPECT_FALSE(x.sample("undeclared", {}, std::int64_t{1}));
    EXPECT_EQ(x.text(),
              "# HELP a_total A.\n# TYPE a_total counter\na_total{k=\"x\\\"y\"} 3\na_total 4\n"
              "# HELP b B.\n# TYPE b gauge\nb{k=\"1\"} 0.5\n");
}

TEST(RejectionTable, CountsForgetsAndStartsAGenerationPastTheCap) {
    auto t = std::make_unique<RejectionTable>();
    t->clear();
    t->add("user", "alice");
    t->add("user", "alice");
    t->add("group", "eng");
    auto l = t->list();
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(l[0].id, "alice");
    EXPECT_EQ(l[0].count, 2);
    t->forget("user", "alice");
    ASSERT_EQ(t->list().size(), 1u);
    EXPECT_EQ(t->list()[0].kind, "group");
    for (std::size_t i = 0; i < RejectionTable::kCapacity - 1; ++i) t->add("user", "u" + std::to_string(i));
    EXPECT_EQ(t->list().size(), RejectionTable::kCapacity);
    EXPECT_EQ(t->generation, 0u);
    t->add("user", "one-more");
    EXPECT_EQ(t->generation, 1u);
    ASSERT_EQ(t->list().size(), 1u);
    EXPECT_EQ(t->list()[0].id, "one-more");
    t->add("user", std::string(1000, 'x'));   // cut, still counted
    EXPECT_EQ(t->list().size(), 2u);
}

TEST(GatewayMetrics, StoreBackedSeriesOmittedWhenTheStoreWasNotRead) {
    GatewayConfig cfg;
    ProviderConf p;
    p.name = "oai";
    p.location = "/_llm/oai";
    ASSERT_EQ(cfg.add_provider(p), "");
    Directory dir;
    UserConf u;
    u.name = "al\"ice";
    u.limits.requests_per_day = 10;
    ASSERT_EQ(dir.add_user(u), "");
    MetricsInput in;
    in.replica = "r1";
    in.directory = &dir;
    in.config = &cfg;
    in.store_shared = true;
    in.store_up = false;
    in.health = {{"oai", true, "open"}};
    in.rejections = {{"user", "al\"ice", 4}};
    const std::string down = render_metrics(in);
    EXPECT_EQ(down.find("llmgateway_requests_total{"), std::string::npos);
    EXPECT_NE(down.find("# TYPE llmgateway_requests_total counter\n"), std::string::npos);
    EXPECT_NE(down.find("llmgateway_provider_health{provider=\"oai\"} 0\n"), std::string::npos);
    EXPECT_NE(down.find("llmgateway_rate_limit_rejections_total{scope_kind=\"user\",scope=\"al\\\"ice\"} 4\n"), std::string::npos);
    EXPECT_NE(down.find("llmgateway_limit_store_up{replica=\"r1\"} 0\n"), std::string::npos);

    in.store_read = true;
    in.store_up = true;
    const auto keys = metrics_keys(dir, cfg, {}, 1767225600);
    // users (1) + groups (default, implicit) + total, kUsageSlots each, then 2 per provider
    in.values.assign(keys.size(), 0);
    in.values[kUsageReqDay] = 5;
    in.values[kUsageInMonth] = 100;
    in.values[keys.size() - 2] = 7;
    const std::string up = render_metrics(in);
    EXPECT_NE(up.find("llmgateway_requests_total{scope_kind=\"user\",scope=\"al\\\"ice\"} 5\n"), std::string::npos) << up;
    EXPECT_NE(up.find("llmgateway_tokens_total{scope_kind=\"user\",scope=\"al\\\"ice\",direction=\"in\"} 100\n"), std::string::npos);
    EXPECT_NE(up.find("llmgateway_budget_consumed_ratio{scope_kind=\"user\",scope=\"al\\\"ice\",limit=\"requestsPerDay\"} 0.5\n"), std::string::npos);
    EXPECT_NE(up.find("llmgateway_provider_attempts_total{provider=\"oai\"} 7\n"), std::string::npos);
    EXPECT_NE(up.find("llmgateway_limit_store_up{replica=\"r1\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace llmgw
