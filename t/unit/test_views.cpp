// The JSON documents rendered from plain data: exact bytes, field order.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/admin/views.h"
#include "core/metering/keys.h"

namespace llmgw {
namespace {

TEST(Views, ModelsEmptyConfig) {
    GatewayConfig cfg;
    EXPECT_EQ(render_models(cfg), R"({"object":"list","data":[]})");
}

TEST(Views, ModelsOfProvidersClosedToTheGroupAreLeftOut) {
    GatewayConfig cfg;
    ProviderConf open, closed;
    open.name = "a";
    open.location = "/_llm/a";
    open.models = {"m1"};
    closed.name = "b";
    closed.location = "/_llm/b";
    closed.models = {"m2"};
    closed.restricted = true;
    closed.groups = {"vip"};
    ASSERT_EQ(cfg.add_provider(open), "");
    ASSERT_EQ(cfg.add_provider(closed), "");
    AliasConf al;
    al.name = "fast";
    al.target = "b/m2";
    ASSERT_EQ(cfg.add_alias(al), "");
    const std::string others = render_models(cfg, {{"d1"}, {"d2"}}, "default");
    EXPECT_NE(others.find(R"("id":"a/m1")"), std::string::npos);
    EXPECT_NE(others.find(R"("id":"a/d1")"), std::string::npos);
    EXPECT_EQ(others.find("b/"), std::string::npos);
    EXPECT_EQ(others.find(R"("id":"fast")"), std::string::npos);
    const std::string vip = render_models(cfg, {{"d1"}, {"d2"}}, "vip");
    EXPECT_NE(vip.find(R"("id":"b/m2")"), std::string::npos);
    EXPECT_NE(vip.find(R"("id":"b/d2")"), std::string::npos);
    EXPECT_NE(vip.find(R"("id":"fast")"), std::string::npos);
}

TEST(Views, UsageOfAnEmptyDirectory) {
    Directory dir;
    std::vector<std::int64_t> v(kUsageSlots, 0);
    v[kUsageReqDay] = 3;
    v[kUsageSeen] = 1795780800;
    EXPECT_EQ(render_usage(dir, 1795780800, v, "r\"1"),
              R"({"time":"2026-11-27T12:00:00Z","replica":"r\"1","users":[],"groups":[],"total":)"
              R"({"kind":"total","name":"all","requestsPerMinute":0,"requestsPerDay":3,"tokensInPerDay":0,)"
              R"("tokensOutPerDay":0,"tokensInPerMonth":0,"tokensOutPerMonth":0,"costPerDayMicroUsd":0,)"
              R"("costPerMonthMicroUsd":0,"rejectionsPerDay":0,"lastSeen":"2026-11-27T12:00:00Z","limits":{}}})");
}

// The response cache's counters: a "cache" object last in each entry, a day
// and a month window each, the hit rate null without a lookup.
TEST(Views, UsageCacheObject) {
    Directory dir;
    UserConf u;
    u.name = "al";
    u.group = "eng";
    ASSERT_EQ(dir.add_user(u), "");
    dir.close();
    std::vector<std::int64_t> v(3 * kUsageSlots, 0);
    std::vector<std::int64_t> cache(3 * kUsageCacheSlots, 0);
    // al: today 2 hits and 1 miss, this month 3 and 1; eng: none; total: a miss only.
    const std::int64_t al[kUsageCacheSlots] = {2, 1, 30, 12, 3, 1, 45, 18};
    std::copy(al, al + kUsageCacheSlots, cache.begin());
    cache[2 * kUsageCacheSlots + kCacheMissesDay] = 1;
    cache[2 * kUsageCacheSlots + kCacheMissesMonth] = 1;
    const std::string out = render_usage(dir, 1795780800, v, "r", {}, cache);
    EXPECT_NE(out.find(R"("lastSeen":null,"limits":{},"cache":{)"
                       R"("day":{"hits":2,"misses":1,"hitTokensIn":30,"hitTokensOut":12,"hitRate":0.6666666666666666},)"
                       R"("month":{"hits":3,"misses":1,"hitTokensIn":45,"hitTokensOut":18,"hitRate":0.75}}})"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(R"({"kind":"group","name":"eng",)"), std::string::npos);
    EXPECT_NE(out.find(R"("limits":{},"cache":{)"
                       R"("day":{"hits":0,"misses":0,"hitTokensIn":0,"hitTokensOut":0,"hitRate":null},)"
                       R"("month":{"hits":0,"misses":0,"hitTokensIn":0,"hitTokensOut":0,"hitRate":null}}}],"total")"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(R"("total":{"kind":"total","name":"all",)"), std::string::npos);
    const std::string total = out.substr(out.find(R"("total":{)"));
    EXPECT_EQ(total.substr(total.find(R"("cache")")),
              R"("cache":{"day":{"hits":0,"misses":1,"hitTokensIn":0,"hitTokensOut":0,"hitRate":0.0},)"
              R"("month":{"hits":0,"misses":1,"hitTokensIn":0,"hitTokensOut":0,"hitRate":0.0}}}})");
    // All hits: 1.0.
    cache[kCacheMissesDay] = 0;
    EXPECT_NE(render_usage(dir, 1795780800, v, "r", {}, cache).find(R"("hitTokensOut":12,"hitRate":1.0})"),
              std::string::npos);
    // Not read (another size): no cache object; the other fields as before.
    const std::string without = render_usage(dir, 1795780800, v, "r", {}, std::vector<std::int64_t>(5, 1));
    EXPECT_EQ(without.find("cache"), std::string::npos);
    EXPECT_EQ(without, render_usage(dir, 1795780800, v, "r"));
}

TEST(Views, UsageCacheKeys) {
    std::vector<std::string> keys;
    append_usage_cache_keys("user", "al", 1795780800, keys);   // 2026-11-27T12:00:00Z
    EXPECT_EQ(keys, (std::vector<std::string>{
                        "llmgw:user:al:chit:day:20261127", "llmgw:user:al:cmiss:day:20261127",
                        "llmgw:user:al:chitin:day:20261127", "llmgw:user:al:chitout:day:20261127",
                        "llmgw:user:al:chit:month:202611", "llmgw:user:al:cmiss:month:202611",
                        "llmgw:user:al:chitin:month:202611", "llmgw:user:al:chitout:month:202611"}));
    ASSERT_EQ(keys.size(), static_cast<std::size_t>(kUsageCacheSlots));
}

TEST(Views, UsageShortValuesReadAsZero) {
    Directory dir;
    std::string out = render_usage(dir, 0, {}, "r");
    EXPECT_NE(out.find(R"("time":null)"), std::string::npos);
    EXPECT_NE(out.find(R"("lastSeen":null)"), std::string::npos);
}

TEST(Views, OverviewShmStore) {
    OverviewInput in;
    in.replica = "r1";
    in.builtin_price_date = "2026-01-01";
    in.priced_models = 4;
    EXPECT_EQ(render_overview(in),
              R"({"replica":"r1","providers":[],"groups":[],"users":0,"store":{"type":"shm","up":true},)"
              R"("pricing":{"builtinDate":"2026-01-01","models":4,"allowUnpriced":false},)"
              R"("cache":{"discoveredModels":[]},"features":{"usersFile":false,"sharedStore":false,"passthrough":false,"metrics":false,"breaker":false,"retries":0,"discovery":false},"warnings":[]})");
}

TEST(Views, OverviewRedisStore) {
    OverviewInput in;
    in.replica = "r1";
    in.instance = "blue";
    in.store.shared = true;
    in.store.url = "redis://127.0.0.1:6379/0";
    in.store.up = false;
    in.store.has_error = true;
    in.store.last_error = "cannot connect";
    in.store.last_error_time = 1795780800;
    in.store.telemetry_dropped = 2;
    in.users_file = true;
    EXPECT_EQ(render_overview(in),
              R"({"replica":"r1","instance":"blue","providers":[],"groups":[],"users":0,)"
              R"("store":{"type":"redis","url":"redis://127.0.0.1:6379/0","up":false,"failOpen":true,)"
              R"("lastError":"cannot connect","lastErrorTime":"2026-11-27T12:00:00Z","telemetryDropped":2},)"
              R"("pricing":{"builtinDate":"","models":0,"allowUnpriced":false},)"
              R"("cache":{"discoveredModels":[]},"features":{"usersFile":true,"sharedStore":true,"passthrough":false,"metrics":false,"breaker":false,"retries":0,"discovery":false},"warnings":[]})");
    in.store.has_error = false;
    std::string out = render_overview(in);
    EXPECT_NE(out.find(R"("lastError":null,"lastErrorTime":null,"telemetryDropped":2)"), std::string::npos);
}

}  // namespace
}  // namespace llmgw
