// Prices: the built-in table, overrides, lookup order, cost arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/metering/pricing.h"

using namespace llmgw;

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

Price price(std::int64_t in, std::int64_t out) {
    Price p;
    p.input_micros_per_mtok = in;
    p.output_micros_per_mtok = out;
    return p;
}

}  // namespace

// ---- cost arithmetic ----

TEST(Cost, ExactAndRounded) {
    const Price mini = price(150000, 600000);  // 0.15 / 0.60 USD per 1M
    EXPECT_EQ(cost_micros(mini, 1000000, 1000000), 750000);
    EXPECT_EQ(cost_micros(mini, 1000, 500), 450);  // 150 + 300
    EXPECT_EQ(cost_micros(mini, 0, 0), 0);
    // 3 tokens * 0.15 = 0.45 micro-USD -> 0; 4 tokens -> 0.6 -> 1.
    EXPECT_EQ(cost_micros(mini, 3, 0), 0);
    EXPECT_EQ(cost_micros(mini, 4, 0), 1);
    // Exactly half rounds up: 1 token at 0.5 USD/M = 0.5 micro-USD.
    EXPECT_EQ(cost_micros(price(500000, 0), 1, 0), 1);
    EXPECT_EQ(cost_micros(price(499999, 0), 1, 0), 0);
    // The total is rounded, not each direction: 0.4 + 0.4 = 0.8 -> 1.
    EXPECT_EQ(cost_micros(price(400000, 400000), 1, 1), 1);
    const Price gpt4o = price(2500000, 10000000);
    EXPECT_EQ(cost_micros(gpt4o, 1234, 567), 8755);  // 3085 + 5670
}

TEST(Cost, FreeAndNegative) {
    Price p = price(2500000, 10000000);
    p.free = true;
    EXPECT_EQ(cost_micros(p, 1000000, 1000000), 0);
    const Price q = price(2500000, 10000000);
    EXPECT_EQ(cost_micros(q, -5, 1000000), 10000000);
    EXPECT_EQ(cost_micros(q, 1000000, -1), 2500000);
    EXPECT_EQ(cost_micros(q, std::numeric_limits<std::int64_t>::min(), -1), 0);
    EXPECT_EQ(cost_micros(price(-1, -1), 100, 100), 0);
}

TEST(Cost, SaturatesOnHugeTokens) {
    const Price p = price(600000000, 600000000);  // o1-pro class
    EXPECT_EQ(cost_micros(p, kMax, kMax), kMax);
    EXPECT_EQ(cost_micros(price(kMax, kMax), kMax, kMax), kMax);
    // Far below saturation: kMax tokens at 1 micro-USD per 1M tokens.
    EXPECT_EQ(cost_micros(price(1, 0), kMax, 0), 9223372036855);  // 9223372036854.775807 rounded
    EXPECT_EQ(cost_micros(price(1000000, 0), kMax, 0), kMax);
}

// ---- the built-in table ----

TEST(Prices, BuiltinDateAndEntries) {
    EXPECT_EQ(PriceTable::builtin_date(), "2026-11-21");
    const PriceTable t = PriceTable::builtin();
    EXPECT_GT(t.size(), 40u);
    for (const char* k :
         {"openai/gpt-4o", "openai/gpt-4o-mini", "openai/gpt-4.1", "openai/gpt-4.1-mini", "openai/gpt-4.1-nano",
          "openai/o1", "openai/o3", "openai/o3-mini", "openai/o4-mini", "openai/gpt-5", "openai/gpt-5-mini",
          "openai/gpt-5-nano", "openai/text-embedding-3-small", "openai/text-embedding-3-large",
          "openai/text-embedding-ada-002", "anthropic/claude-opus-4-1", "anthropic/claude-opus-4",
          "anthropic/claude-sonnet-4-5", "anthropic/claude-sonnet-4", "anthropic/claude-3-7-sonnet",
          "anthropic/claude-3-5-haiku", "anthropic/claude-haiku-4-5", "gemini/gemini-2.5-pro",
          "gemini/gemini-2.5-flash", "gemini/gemini-2.5-flash-lite", "gemini/gemini-2.0-flash",
          "gemini/gemini-2.0-flash-lite", "gemini/text-embedding-004"}) {
        const auto it = t.all().find(k);
        ASSERT_NE(it, t.all().end()) << k;
        EXPECT_EQ(it->second.source, "builtin");
        EXPECT_FALSE(it->second.free);
        EXPECT_GE(it->second.input_micros_per_mtok, 0);
    }
    const Price& mini = t.all().at("openai/gpt-4o-mini");
    EXPECT_EQ(mini.input_micros_per_mtok, 150000);
    EXPECT_EQ(mini.output_micros_per_mtok, 600000);
    const Price& lite = t.all().at("gemini/gemini-2.0-flash-lite");
    EXPECT_EQ(lite.input_micros_per_mtok, 75000);
    EXPECT_EQ(t.all().at("gemini/gemini-1.5-flash-8b").input_micros_per_mtok, 37500);
    EXPECT_EQ(t.all().at("openai/text-embedding-3-small").output_micros_per_mtok, 0);
}

// ---- lookup order ----

TEST(Prices, FindOrder) {
    PriceTable t = PriceTable::builtin();
    // Builtin by provider type.
    const Price* p = t.find("azure-eu", "openai", "gpt-4o");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->input_micros_per_mtok, 2500000);
    EXPECT_EQ(p->source, "builtin");
    // Unknown model, unknown type.
    EXPECT_EQ(t.find("azure-eu", "openai", "my-finetune"), nullptr);
    EXPECT_EQ(t.find("x", "cohere", "gpt-4o"), nullptr);
    EXPECT_EQ(t.find("x", "anthropic", "gpt-4o"), nullptr);

    // An override wins for its provider name only.
    EXPECT_EQ(t.set_override("azure-eu/gpt-4o", 2.0, 9.0), "");
    p = t.find("azure-eu", "openai", "gpt-4o");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->source, "config");
    EXPECT_EQ(p->input_micros_per_mtok, 2000000);
    EXPECT_EQ(p->output_micros_per_mtok, 9000000);
    p = t.find("openai", "openai", "gpt-4o");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->source, "builtin");
    EXPECT_EQ(p->input_micros_per_mtok, 2500000);

    // An override for a provider named like its type does not leak to others.
    EXPECT_EQ(t.set_override("openai/gpt-4o-mini", 1.0, 1.0), "");
    EXPECT_EQ(t.find("openai", "openai", "gpt-4o-mini")->input_micros_per_mtok, 1000000);
    EXPECT_EQ(t.find("other", "openai", "gpt-4o-mini")->input_micros_per_mtok, 150000);

    // An override prices a model the builtin table lacks.
    EXPECT_EQ(t.set_override("local/llama-3-70b", 0.5, 0.7), "");
    p = t.find("local", "openai", "llama-3-70b");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->output_micros_per_mtok, 700000);
    // Overrides are not dated-suffix matched; builtins are.
    EXPECT_EQ(t.find("local", "openai", "llama-3-70b-20240101"), nullptr);
}

TEST(Prices, DatedSuffixStripped) {
    const PriceTable t = PriceTable::builtin();
    const Price* p = t.find("anthropic", "anthropic", "claude-3-5-haiku-20241022");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->input_micros_per_mtok, 800000);
    EXPECT_EQ(p->output_micros_per_mtok, 4000000);
    p = t.find("oai", "openai", "gpt-4o-2024-08-06");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->input_micros_per_mtok, 2500000);
    p = t.find("a", "anthropic", "claude-3-7-sonnet-latest");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->input_micros_per_mtok, 3000000);
    p = t.find("a", "anthropic", "claude-sonnet-4-5-20250929");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->output_micros_per_mtok, 15000000);
    // An exact dated entry beats stripping.
    p = t.find("oai", "openai", "gpt-4o-2024-05-13");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->input_micros_per_mtok, 5000000);
    // Not a date: no stripping.
    EXPECT_EQ(t.find("oai", "openai", "gpt-4o-2024-8-06"), nullptr);
    EXPECT_EQ(t.find("oai", "openai", "gpt-4o-2024080"), nullptr);
    EXPECT_EQ(t.find("oai", "openai", "gpt-4o-2024x08x06"), nullptr);
    EXPECT_EQ(t.find("oai", "openai", "gpt-4o-latestx"), nullptr);
    EXPECT_EQ(t.find("oai", "openai", "-latest"), nullptr);
    EXPECT_EQ(t.find("oai", "openai", "-20240806"), nullptr);
    EXPECT_EQ(t.find("oai", "openai", ""), nullptr);
    // One suffix only.
    EXPECT_EQ(t.find("oai", "openai", "gpt-4o-2024-08-06-latest"), nullptr);
}

TEST(Prices, OverrideValidation) {
    PriceTable t;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    EXPECT_NE(t.set_override("p/m", -0.01, 1), "");
    EXPECT_NE(t.set_override("p/m", 1, -1), "");
    EXPECT_NE(t.set_override("p/m", nan, 1), "");
    EXPECT_NE(t.set_override("p/m", 1, inf), "");
    EXPECT_NE(t.set_override("", 1, 1), "");
    EXPECT_EQ(t.size(), 0u);
    EXPECT_EQ(t.set_override("p/m", 0, 0), "");
    EXPECT_EQ(t.set_override("p/m", 0.075, 0.3), "");
    const Price* p = t.find("p", "openai", "m");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->input_micros_per_mtok, 75000);
    EXPECT_EQ(p->output_micros_per_mtok, 300000);
    EXPECT_EQ(t.set_override("p/m", 1e300, 0), "");
    EXPECT_EQ(t.find("p", "openai", "m")->input_micros_per_mtok, kMax);
}

TEST(Prices, SetFree) {
    PriceTable t = PriceTable::builtin();
    t.set_free("ollama/llama3");
    const Price* p = t.find("ollama", "openai", "llama3");
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(p->free);
    EXPECT_EQ(cost_micros(*p, 1000, 1000), 0);

    // Free and an override, in either order, stay free.
    t.set_free("a/gpt-4o");
    EXPECT_EQ(t.set_override("a/gpt-4o", 1, 1), "");
    EXPECT_TRUE(t.find("a", "openai", "gpt-4o")->free);
    EXPECT_EQ(t.set_override("b/gpt-4o", 1, 1), "");
    t.set_free("b/gpt-4o");
    EXPECT_TRUE(t.find("b", "openai", "gpt-4o")->free);
    EXPECT_EQ(t.find("b", "openai", "gpt-4o")->input_micros_per_mtok, 1000000);

    // A provider named like its type: its builtin model becomes free for it only.
    t.set_free("openai/gpt-4.1");
    EXPECT_TRUE(t.find("openai", "openai", "gpt-4.1")->free);
    EXPECT_FALSE(t.find("azure", "openai", "gpt-4.1")->free);
}
