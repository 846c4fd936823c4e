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
    dir.close();
    MetricsInput in;
    in.replica = "r1";
    in.directory = &dir;
    in.config = &cfg;
    in.store_shared = true;
    in.store_up = false;
    in.health = {{"oai", true, "open"}};
    in.rejections = {{"user", "al\"ice", 4}};
    in.cache = true;
    const std::string down = render_metrics(in);
    EXPECT_EQ(down.find("llmgateway_requests_total{"), std::string::npos);
    EXPECT_NE(down.find("# TYPE llmgateway_requests_total counter\n"), std::string::npos);
    EXPECT_NE(down.find("llmgateway_provider_health{provider=\"oai\"} 0\n"), std::string::npos);
    EXPECT_NE(down.find("llmgateway_rate_limit_rejections_total{scope_kind=\"user\",scope=\"al\\\"ice\"} 4\n"), std::string::npos);
    EXPECT_NE(down.find("llmgateway_limit_store_up{replica=\"r1\"} 0\n"), std::string::npos);

    in.store_read = true;
    in.store_up = true;
    const auto keys = metrics_keys(dir, cfg, {}, 1767225600, true);
    // users (1) + groups (default, implicit) + total, kUsageSlots each, then 2 per provider,
    // then the cache's 4 per scope
    ASSERT_EQ(keys.size(), 3 * kUsageSlots + 2 + 3 * 4);
    in.values.assign(keys.size(), 0);
    in.values[kUsageReqDay] = 5;
    in.values[kUsageInMonth] = 100;
    in.values[3 * kUsageSlots] = 7;
    const std::string up = render_metrics(in);
    EXPECT_NE(up.find("llmgateway_requests_total{scope_kind=\"user\",scope=\"al\\\"ice\"} 5\n"), std::string::npos) << up;
    EXPECT_NE(up.find("llmgateway_tokens_total{scope_kind=\"user\",scope=\"al\\\"ice\",direction=\"in\"} 100\n"), std::string::npos);
    EXPECT_NE(up.find("llmgateway_budget_consumed_ratio{scope_kind=\"user\",scope=\"al\\\"ice\",limit=\"requestsPerDay\"} 0.5\n"), std::string::npos);
    EXPECT_NE(up.find("llmgateway_provider_attempts_total{provider=\"oai\"} 7\n"), std::string::npos);
    EXPECT_NE(up.find("llmgateway_limit_store_up{replica=\"r1\"} 1\n"), std::string::npos);
    // No cache series while the store was not read; the families are declared.
    EXPECT_EQ(down.find("llmgateway_cache_requests_total{"), std::string::npos);
    EXPECT_EQ(down.find("llmgateway_cache_tokens_total{"), std::string::npos);
    EXPECT_NE(down.find("# TYPE llmgateway_cache_requests_total counter\n"), std::string::npos);
    EXPECT_NE(down.find("# TYPE llmgateway_cache_tokens_total counter\n"), std::string::npos);
    // A read of another size (a batch without the cache's keys) is no read.
    in.values.resize(keys.size() - 4);
    EXPECT_EQ(render_metrics(in).find("llmgateway_requests_total{"), std::string::npos);
}

// The response cache's counters this month: per scope always (zeros too, as
// the other scope counters), per model only with model_label.
TEST(GatewayMetrics, CacheFamiliesPerScopeAndPerModel) {
    GatewayConfig cfg;
    ProviderConf p;
    p.name = "oai";
    p.location = "/_llm/oai";
    p.models = {"gpt-4o-mini"};
    ASSERT_EQ(cfg.add_provider(p), "");
    Directory dir;
    UserConf u;
    u.name = "al\"ice";
    u.group = "eng";
    ASSERT_EQ(dir.add_user(u), "");
    dir.close();
    const std::vector<std::string> models = {"oai/gpt-4o-mini"};
    const auto keys = metrics_keys(dir, cfg, models, 1767225600, true);   // 2026-01-01
    // 3 scopes (alice, eng, total), 1 provider, 1 model; then the cache's keys.
    const std::size_t cache_at = 3 * kUsageSlots + 2 + 4;
    ASSERT_EQ(keys.size(), cache_at + 4 * 4);
    EXPECT_EQ(keys[cache_at], "llmgw:user:al\"ice:chit:month:202601");
    EXPECT_EQ(keys[cache_at + 1], "llmgw:user:al\"ice:cmiss:month:202601");
    EXPECT_EQ(keys[cache_at + 2], "llmgw:user:al\"ice:chitin:month:202601");
    EXPECT_EQ(keys[cache_at + 3], "llmgw:user:al\"ice:chitout:month:202601");
    EXPECT_EQ(keys[cache_at + 4], "llmgw:group:eng:chit:month:202601");
    EXPECT_EQ(keys[cache_at + 8], "llmgw:total:all:chit:month:202601");
    EXPECT_EQ(keys[cache_at + 12], "llmgw:model:oai/gpt-4o-mini:chit:month:202601");
    EXPECT_EQ(keys[cache_at + 15], "llmgw:model:oai/gpt-4o-mini:chitout:month:202601");

    MetricsInput in;
    in.replica = "r1";
    in.directory = &dir;
    in.config = &cfg;
    in.models = models;
    in.cache = true;
    in.store_read = true;
    in.values.assign(keys.size(), 0);
    const std::int64_t alice[] = {3, 1, 40, 12}, total[] = {5, 2, 70, 20}, model[] = {4, 2, 60, 18};
    for (int k = 0; k < 4; ++k) {
        in.values[cache_at + k] = alice[k];
        in.values[cache_at + 8 + k] = total[k];
        in.values[cache_at + 12 + k] = model[k];
    }
    in.values[3 * kUsageSlots + 2] = 9;   // the model's requests: the older families keep their places
    const std::string text = render_metrics(in);
    EXPECT_NE(text.find(
                  "# HELP llmgateway_cache_requests_total Requests answered from the response cache (hit) or that it "
                  "missed (miss) per scope in the current UTC month (resets at the month's start).\n"
                  "# TYPE llmgateway_cache_requests_total counter\n"
                  "llmgateway_cache_requests_total{scope_kind=\"user\",scope=\"al\\\"ice\",result=\"hit\"} 3\n"
                  "llmgateway_cache_requests_total{scope_kind=\"user\",scope=\"al\\\"ice\",result=\"miss\"} 1\n"
                  "llmgateway_cache_requests_total{scope_kind=\"group\",scope=\"eng\",result=\"hit\"} 0\n"
                  "llmgateway_cache_requests_total{scope_kind=\"group\",scope=\"eng\",result=\"miss\"} 0\n"
                  "llmgateway_cache_requests_total{scope_kind=\"total\",scope=\"all\",result=\"hit\"} 5\n"
                  "llmgateway_cache_requests_total{scope_kind=\"total\",scope=\"all\",result=\"miss\"} 2\n"
                  "# HELP llmgateway_cache_tokens_total Tokens of the answers served from the response cache per scope "
                  "and direction in the current UTC month (resets at the month's start).\n"
                  "# TYPE llmgateway_cache_tokens_total counter\n"
                  "llmgateway_cache_tokens_total{scope_kind=\"user\",scope=\"al\\\"ice\",direction=\"in\"} 40\n"
                  "llmgateway_cache_tokens_total{scope_kind=\"user\",scope=\"al\\\"ice\",direction=\"out\"} 12\n"
                  "llmgateway_cache_tokens_total{scope_kind=\"group\",scope=\"eng\",direction=\"in\"} 0\n"
                  "llmgateway_cache_tokens_total{scope_kind=\"group\",scope=\"eng\",direction=\"out\"} 0\n"
                  "llmgateway_cache_tokens_total{scope_kind=\"total\",scope=\"all\",direction=\"in\"} 70\n"
                  "llmgateway_cache_tokens_total{scope_kind=\"total\",scope=\"all\",direction=\"out\"} 20\n"
                  "# HELP llmgateway_budget_consumed_ratio "),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("llmgateway_model_requests_total{provider=\"oai\",model=\"gpt-4o-mini\"} 9\n"), std::string::npos);
    EXPECT_NE(text.find(
                  "# HELP llmgateway_model_cache_requests_total Requests answered from the response cache (hit) or "
                  "that it missed (miss) per provider and model this month.\n"
                  "# TYPE llmgateway_model_cache_requests_total counter\n"
                  "llmgateway_model_cache_requests_total{provider=\"oai\",model=\"gpt-4o-mini\",result=\"hit\"} 4\n"
                  "llmgateway_model_cache_requests_total{provider=\"oai\",model=\"gpt-4o-mini\",result=\"miss\"} 2\n"
                  "# HELP llmgateway_model_cache_tokens_total Tokens served from the response cache per provider, "
                  "model and direction this month.\n"
                  "# TYPE llmgateway_model_cache_tokens_total counter\n"
                  "llmgateway_model_cache_tokens_total{provider=\"oai\",model=\"gpt-4o-mini\",direction=\"in\"} 60\n"
                  "llmgateway_model_cache_tokens_total{provider=\"oai\",model=\"gpt-4o-mini\",direction=\"out\"} 18\n"
                  "# HELP llmgateway_provider_health "),
              std::string::npos)
        << text;

    // Without model_label: the per-model families are not declared at all.
    in.models.clear();
    in.values.assign(metrics_keys(dir, cfg, {}, 1767225600, true).size(), 0);
    const std::string plain = render_metrics(in);
    EXPECT_EQ(plain.find("llmgateway_model_cache"), std::string::npos);
    EXPECT_NE(plain.find("llmgateway_cache_requests_total{scope_kind=\"total\",scope=\"all\",result=\"hit\"} 0\n"),
              std::string::npos);

    // No llm_gateway_cache anywhere: neither the cache's keys nor its families.
    in.cache = false;
    in.models = models;
    const auto bare = metrics_keys(dir, cfg, models, 1767225600, false);
    EXPECT_EQ(bare.size(), cache_at);
    in.values.assign(bare.size(), 1);
    const std::string off = render_metrics(in);
    EXPECT_EQ(off.find("llmgateway_cache_"), std::string::npos);
    EXPECT_EQ(off.find("llmgateway_model_cache_"), std::string::npos);
    EXPECT_NE(off.find("llmgateway_model_requests_total{provider=\"oai\",model=\"gpt-4o-mini\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace llmgw
