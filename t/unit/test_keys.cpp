// Store key shapes, and that the admin usage view reads the keys the writers
// (admission plan, accounting batch) write.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/metering/accounting.h"
#include "core/metering/keys.h"

namespace llmgw {
namespace {

constexpr std::time_t kNoon = 1795780800;   // 2026-11-27 12:00:00 UTC

bool contains(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(Keys, Shapes) {
    EXPECT_EQ(counter_key("user", "bob", "tokin", Window::Day, "20261127"), "llmgw:user:bob:tokin:day:20261127");
    EXPECT_EQ(counter_key("model", "", "req", Window::Min, "202611271200"), "llmgw:model::req:min:202611271200");
    EXPECT_EQ(counter_key("user", "a:b", "cost", Window::Month, ""), "llmgw:user:a:b:cost:month:");
    const std::string long_id(300, 'x');
    EXPECT_EQ(counter_key("group", long_id, "tokout", Window::Hour, "2026112712"),
              "llmgw:group:" + long_id + ":tokout:hour:2026112712");
    EXPECT_EQ(seen_key("group", "eng"), "llmgw:group:eng:seen");
    std::string seen = "a reused buffer longer than the key";
    assign_seen_key(seen, "user", "a:b");
    EXPECT_EQ(seen, "llmgw:user:a:b:seen");
    EXPECT_EQ(scope_prefix("user", "bob"), "llmgw:user:bob:");
    std::string e = "reused";
    assign_entry_key(e, "provmodel", "mock/gpt-4o", Window::Month, "202611");
    EXPECT_EQ(e, "llmgw:provmodel:mock/gpt-4o:month:202611");
    // A longer key first, then a shorter one: the buffer is reused, never a leftover.
    assign_entry_key(e, "group", long_id, Window::Hour, "2026112712");
    EXPECT_EQ(e, "llmgw:group:" + long_id + ":hour:2026112712");
    assign_entry_key(e, "user", "", Window::Min, "");
    EXPECT_EQ(e, "llmgw:user::min:");
}

TEST(Keys, EntryKeyInTwoStepsIsTheSame) {
    const std::string long_id(300, 'x');
    std::string e = "a reused buffer longer than some keys";
    std::string expect;
    for (std::string_view id : {std::string_view("a:b/c"), std::string_view(""), std::string_view(long_id)}) {
        const std::size_t scope = assign_entry_scope(e, "model", id);
        EXPECT_EQ(e, scope_prefix("model", id));
        // Every window after the scope's part, the longest bucket first.
        for (Window w : {Window::Min, Window::Hour, Window::Day, Window::Month}) {
            for (std::string_view b : {std::string_view("202611271200"), std::string_view("2026")}) {
                assign_entry_window(e, scope, w, b);
                assign_entry_key(expect, "model", id, w, b);
                EXPECT_EQ(e, expect);
            }
        }
        assign_entry_window(e, scope, Window::Day, "");
        assign_entry_key(expect, "model", id, Window::Day, "");
        EXPECT_EQ(e, expect);
    }
}

TEST(Keys, SplitCounterKeyIsTheInverse) {
    std::string entry;
    std::string_view metric;
    ASSERT_TRUE(split_counter_key(counter_key("model", "a:b/c", "cost", Window::Hour, "2026112712"), entry, metric));
    EXPECT_EQ(metric, "cost");
    std::string expect;
    assign_entry_key(expect, "model", "a:b/c", Window::Hour, "2026112712");
    EXPECT_EQ(entry, expect);
    EXPECT_FALSE(split_counter_key("llmgw:x", entry, metric));
}

TEST(Keys, UsageKeysInSlotOrder) {
    std::vector<std::string> keys;
    append_usage_keys("user", "alice", kNoon, keys);
    ASSERT_EQ(keys.size(), static_cast<std::size_t>(kUsageSlots));
    EXPECT_EQ(keys[kUsageReqMin], "llmgw:user:alice:req:min:202611271200");
    EXPECT_EQ(keys[kUsageReqDay], "llmgw:user:alice:req:day:20261127");
    EXPECT_EQ(keys[kUsageInDay], "llmgw:user:alice:tokin:day:20261127");
    EXPECT_EQ(keys[kUsageOutDay], "llmgw:user:alice:tokout:day:20261127");
    EXPECT_EQ(keys[kUsageInMonth], "llmgw:user:alice:tokin:month:202611");
    EXPECT_EQ(keys[kUsageOutMonth], "llmgw:user:alice:tokout:month:202611");
    EXPECT_EQ(keys[kUsageCostDay], "llmgw:user:alice:cost:day:20261127");
    EXPECT_EQ(keys[kUsageCostMonth], "llmgw:user:alice:cost:month:202611");
    EXPECT_EQ(keys[kUsageRejDay], "llmgw:user:alice:rej:day:20261127");
    EXPECT_EQ(keys[kUsageSeen], "llmgw:user:alice:seen");
}

// Every minute/day/month counter the writers produce for a scope, of a
// metric the admin shows, is one the admin reads.
TEST(Keys, AdminReadsWhatWritersWrite) {
    std::vector<Scope> scopes{{"user", "alice", nullptr}, {"group", "eng", nullptr}, {"total", "all", nullptr}};
    AccountingInput in;
    in.scopes = scopes;
    in.model = "mock/gpt-4o";
    in.usage.prompt_tokens = 11;
    in.usage.completion_tokens = 7;
    in.cost_micros = 6;
    std::vector<Incr> written = build_accounting(in, kNoon, false);
    AdmissionPlan plan = build_admission_plan(scopes, kNoon, false);
    written.insert(written.end(), plan.admit.begin(), plan.admit.end());
    written.insert(written.end(), plan.reject.begin(), plan.reject.end());

    std::vector<std::string> read;
    for (const Scope& s : scopes) append_usage_keys(s.kind, s.id, kNoon, read);

    std::size_t checked = 0;
    for (const Incr& i : written) {
        if (i.key.rfind("llmgw:model:", 0) == 0) continue;   // not an admin usage scope
        bool shown = (i.key.find(":req:min:") != std::string::npos || i.key.find(":day:") != std::string::npos ||
                      i.key.find(":month:") != std::string::npos) &&
                     i.key.find(":req:month:") == std::string::npos;
        if (!shown) continue;
        EXPECT_TRUE(contains(read, i.key)) << i.key;
        ++checked;
    }
    // user, group, total: req min+day, tokin/tokout/cost day+month, rej day.
    EXPECT_EQ(checked, 3u * 9u);
    EXPECT_TRUE(contains(read, seen_key("user", "alice")));
}

TEST(Keys, ReservedKeysSplitIntoScopeSlotAndMeasure) {
    std::string_view scope;
    std::int64_t slot = -1;
    bool tokens = false;
    const std::string k = reserved_key("user", "a:b", true, 11968458);
    ASSERT_TRUE(split_reserved_key(k, scope, slot, tokens));
    EXPECT_EQ(scope, "llmgw:user:a:b:");
    EXPECT_EQ(slot, 11968458);
    EXPECT_TRUE(tokens);
    const std::string c = reserved_key("group", "eng", false, 7);   // scope views into it
    ASSERT_TRUE(split_reserved_key(c, scope, slot, tokens));
    EXPECT_EQ(scope, "llmgw:group:eng:");
    EXPECT_EQ(slot, 7);
    EXPECT_FALSE(tokens);
    slot = -1;
    for (const char* other : {"llmgw:user:a:tokin:day:20261121", "llmgw:user:a:rtok:rsv:", "llmgw:user:a:rtok:rsv:1x",
                              "rtok:rsv:5", "llmgw:user:a:rtok:rsv:1234567890123456789", "llmgw:user:a:seen", ""}) {
        EXPECT_FALSE(split_reserved_key(other, scope, slot, tokens)) << other;
    }
    EXPECT_EQ(slot, -1);
}

TEST(Keys, ReservedHashField) {
    std::string hash = "x", field = "y";
    ASSERT_TRUE(reserved_hash_field(reserved_key("user", "a:b", true, 11968458), hash, field));
    EXPECT_EQ(hash, "llmgw:user:a:b:rsv");
    EXPECT_EQ(field, "t11968458");
    ASSERT_TRUE(reserved_hash_field(reserved_key("total", "all", false, 7), hash, field));
    EXPECT_EQ(hash, "llmgw:total:all:rsv");
    EXPECT_EQ(field, "c7");
    hash = "x";
    field = "y";
    for (const char* other : {"llmgw:user:a:tokin:day:20261121", "llmgw:user:a:rtok:rsv:", "llmgw:user:a:rsv", "",
                              "llmgw:user:a:rtok:xsv:7", "rsv:7", ":rsv:7", "llmgw:user:a:rdays:rsv:7"}) {
        EXPECT_FALSE(reserved_hash_field(other, hash, field)) << other;
    }
    EXPECT_EQ(hash, "x");
    EXPECT_EQ(field, "y");
    // The same from the scope prefix, and the field alone.
    EXPECT_EQ(reserved_key_in("llmgw:user:a:b:", true, 11968458), reserved_key("user", "a:b", true, 11968458));
    EXPECT_EQ(reserved_key_in("llmgw:total:all:", false, 7), "llmgw:total:all:rcost:rsv:7");
    assign_reserved_field(field, kReservedCostTag, 1234567890123456789LL);
    EXPECT_EQ(field, "c1234567890123456789");
    assign_reserved_field(field, kReservedTokensTag, 0);
    EXPECT_EQ(field, "t0");
    // The record key, built from the scope prefix, and recognised.
    std::string rec = "reused";
    assign_reserved_record_key(rec, scope_prefix("group", "a:b"));
    EXPECT_EQ(rec, "llmgw:group:a:b:rsv");
    EXPECT_TRUE(is_reserved_record_key(rec));
    for (const char* other : {"llmgw:user:a:rtok:rsv:7", "llmgw:user:arsv", "rsv", "llmgw:user:a:seen", ""}) {
        EXPECT_FALSE(is_reserved_record_key(other)) << other;
    }
}

}  // namespace
}  // namespace llmgw
