// The catalog, consumers and configuration documents: exact shapes, no secret.
#include <gtest/gtest.h>

#include "core/admin/config_views.h"

namespace llmgw {
namespace {

struct Fixture {
    GatewayConfig cfg;
    Directory dir;
    PriceTable prices = PriceTable::builtin();
    Fixture() {
        ProviderConf a;
        a.name = "oai";
        a.location = "/_llm/oai";
        a.key = "sk-very-secret-provider-key";
        a.key_ref = "env:OPENAI_API_KEY";
        a.models = {"gpt-4o-mini", "local-x", "gpt-4o"};
        a.where = "nginx.conf:10";
        EXPECT_EQ(cfg.add_provider(a), "");
        ProviderConf b;
        b.name = "vault";
        b.location = "/_llm/vault";
        b.models = {"m"};
        b.restricted = true;
        b.groups = {"vip"};
        EXPECT_EQ(cfg.add_provider(b), "");
        EXPECT_EQ(prices.set_override("oai/gpt-4o", 1.5, 3), "");
        prices.set_free("vault/m");
        GroupConf g;
        g.name = "vip";
        g.limits.requests_per_day = 100;
        EXPECT_EQ(dir.add_group(g), "");
        UserConf u;
        u.name = "alice";
        u.group = "vip";
        u.key_source = "literal";
        u.limits.requests_per_minute = 5;
        u.where = "nginx.conf:20";
        EXPECT_EQ(dir.add_user(u), "");
    }
};

TEST(ConfigViews, CatalogPricesAndSources) {
    Fixture f;
    const std::string c = render_catalog(f.cfg, f.prices, false, "2026-01-01");
    EXPECT_NE(c.find(R"({"id":"oai/gpt-4o-mini","provider":"oai","source":"builtin","inputUsdPerMTok":0.15,)"), std::string::npos) << c;
    EXPECT_NE(c.find(R"({"id":"oai/local-x","provider":"oai","source":"unpriced","inputUsdPerMTok":null,"outputUsdPerMTok":null,"free":false})"), std::string::npos) << c;
    EXPECT_NE(c.find(R"({"id":"oai/gpt-4o","provider":"oai","source":"override","inputUsdPerMTok":1.5,"outputUsdPerMTok":3.0,"free":false})"), std::string::npos) << c;
    EXPECT_NE(c.find(R"("id":"vault/m","provider":"vault","source":"free")"), std::string::npos) << c;
    EXPECT_EQ(c.rfind(R"({"builtinPricesChecked":"2026-01-01","allowUnpriced":false,"models":[)", 0), 0u);
}

TEST(ConfigViews, ConsumersAndConfigCarryNoSecret) {
    Fixture f;
    const std::string u = render_consumers(f.cfg, f.dir);
    EXPECT_NE(u.find(R"({"user":"alice","group":"vip","keySource":"literal","admin":false,"definedIn":"nginx.conf:20",)"
                     R"("limits":{"requestsPerMinute":5},"groupLimits":{"requestsPerDay":100},"providers":["oai","vault"]})"),
              std::string::npos) << u;
    ConfigSettings s;
    s.replica = "r1";
    s.store_url = "redis://:***@10.0.0.1:6379/0";
    s.retries = 1;
    const std::string c = render_config(f.cfg, f.dir, s);
    EXPECT_EQ(c.find("sk-very-secret"), std::string::npos);
    EXPECT_NE(c.find(R"("key":"env:OPENAI_API_KEY")"), std::string::npos) << c;
    EXPECT_NE(c.find(R"("name":"vault","type":"openai","location":"/_llm/vault","key":null,"models":["m"],"default":false,)"
                     R"("discoverSeconds":0,"retries":1,"retryBackoffMs":0,"retryBackoffMaxMs":0,"breaker":null,)"
                     R"("groups":["vip"])"), std::string::npos) << c;
    EXPECT_NE(c.find(R"("groups":null)"), std::string::npos) << c;
    EXPECT_NE(c.find(R"("store":{"type":"redis","url":"redis://:***@10.0.0.1:6379/0","failOpen":true})"), std::string::npos) << c;
    EXPECT_NE(c.find(R"("breaker":null)"), std::string::npos) << c;
}

// A provider's own retries, backoff and breaker (llm_gateway_provider)
// over the http level's: each value it sets, the others inherited.
TEST(ConfigViews, EffectiveResiliencePerProvider) {
    Resilience http;
    http.retries = 1;
    http.backoff_base_ms = 250;
    http.backoff_max_ms = 2000;
    http.breaker_failures = 5;
    http.breaker_open_ms = 30000;
    Resilience own;
    own.retries = 3;
    own.breaker_open_ms = 5000;
    const Resilience r = own.over(http);
    EXPECT_EQ(r.retries, 3);
    EXPECT_EQ(r.backoff_base_ms, 250);
    EXPECT_EQ(r.backoff_max_ms, 2000);
    EXPECT_EQ(r.breaker_failures, 5);
    EXPECT_EQ(r.breaker_open_ms, 5000);
    Resilience off;
    off.retries = 0;
    off.breaker_failures = 0;
    JsonWriter w;
    w.begin_object();
    write_resilience(w, off.over(http));
    w.end_object();
    EXPECT_EQ(w.take(), R"({"retries":0,"retryBackoffMs":250,"retryBackoffMaxMs":2000,"breaker":null})");
    JsonWriter w2;
    w2.begin_object();
    write_resilience(w2, r);
    w2.end_object();
    EXPECT_EQ(w2.take(), R"({"retries":3,"retryBackoffMs":250,"retryBackoffMaxMs":2000,"breaker":{"failures":5,"openMs":5000}})");
}

}  // namespace
}  // namespace llmgw
