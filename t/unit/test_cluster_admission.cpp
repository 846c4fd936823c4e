// Redis Cluster's side of the core: the hash-tagged key layout
// (core/metering/keys.h KeyLayout::Cluster), an admission plan split by slot
// and its parts' results merged (core/store/cluster_admission.h), the
// rejection counters' command, and an accounting batch split by slot
// (core/store/cluster_batch.h).
#include <gtest/gtest.h>

#include "core/metering/keys.h"
#include "core/metering/limits.h"
#include "core/store/account_script.h"
#include "core/store/cluster.h"
#include "core/store/cluster_admission.h"
#include "core/store/cluster_batch.h"
#include "core/store/resp.h"

using namespace llmgw;

namespace {

constexpr std::time_t kNow = 1764288000;   // 2025-11-28 00:00:00 UTC

// The cluster layout for one test (the layout is the process's).
struct ClusterLayout {
    ClusterLayout() { set_key_layout(KeyLayout::Cluster); }
    ~ClusterLayout() { set_key_layout(KeyLayout::Plain); }
};

Limits limits(std::int64_t rpd, std::int64_t tpd = 0) {
    Limits l;
    l.requests_per_day = rpd;
    l.tokens_per_day = tpd;
    return l;
}

// The arguments of one RESP command (argv), read back.
std::vector<std::string> argv_of(const std::string& wire) {
    RespReader r(kRespDefaultMaxBuffer);
    r.feed(wire.data(), wire.size());
    RespValue v;
    std::string err;
    std::vector<std::string> out;
    if (r.next(v, err) != RespReader::Result::Reply) return out;
    for (const RespValue& e : v.elements) out.push_back(e.str);
    return out;
}

}  // namespace

TEST(ClusterLayout, EveryScopeIsAHashTag) {
    ClusterLayout on;
    EXPECT_EQ(counter_key("user", "alice", "req", Window::Day, "20251128"), "llmgw:{user:alice}:req:day:20251128");
    EXPECT_EQ(counter_key_size("user", "alice", "req", Window::Day, "20251128"),
              counter_key("user", "alice", "req", Window::Day, "20251128").size());
    EXPECT_EQ(counter_key("model", "oai/gpt-4o", "tokin", Window::Min, "202511280000"),
              "llmgw:{stats}:model:oai/gpt-4o:tokin:min:202511280000");
    EXPECT_EQ(counter_key_size("model", "oai/gpt-4o", "tokin", Window::Min, "202511280000"),
              counter_key("model", "oai/gpt-4o", "tokin", Window::Min, "202511280000").size());
    EXPECT_EQ(seen_key("group", "eng"), "llmgw:{group:eng}:seen");
    EXPECT_EQ(scope_prefix("total", "all"), "llmgw:{stats}:total:all:");
    EXPECT_EQ(scope_prefix("prov", "oai"), "llmgw:{stats}:prov:oai:");
    EXPECT_EQ(reserved_record_key("user", "alice"), "llmgw:{user:alice}:rsv");
    EXPECT_EQ(scope_prefix("provmodel", "oai/x"), "llmgw:{stats}:provmodel:oai/x:");
    EXPECT_EQ(stats_ids_key(), "llmgw:{stats}:ids");
    std::string e;
    assign_entry_key(e, "user", "alice", Window::Hour, "2025112800");
    EXPECT_EQ(e, "llmgw:{user:alice}:hour:2025112800");
    // every key of a scope in one slot; the user's and the group's apart
    const std::uint16_t slot = key_slot(scope_prefix("user", "alice"));
    EXPECT_EQ(key_slot(counter_key("user", "alice", "cost", Window::Month, "202511")), slot);
    EXPECT_EQ(key_slot(seen_key("user", "alice")), slot);
    EXPECT_EQ(key_slot(reserved_record_key("user", "alice")), slot);
    EXPECT_NE(key_slot(scope_prefix("group", "eng")), slot);
    EXPECT_EQ(key_slot(counter_key("model", "a/b", "req", Window::Day, "1")), key_slot(stats_ids_key()));
    // an id with braces keeps one slot for its scope
    EXPECT_EQ(key_slot(counter_key("user", "a}b", "req", Window::Day, "1")), key_slot(seen_key("user", "a}b")));
    // the readers of keys still find their parts
    std::string entry;
    std::string_view metric;
    ASSERT_TRUE(split_counter_key("llmgw:{user:alice}:tokout:day:20251128", entry, metric));
    EXPECT_EQ(entry, "llmgw:{user:alice}:day:20251128");
    EXPECT_EQ(metric, "tokout");
    EXPECT_EQ(reserved_record_scope("llmgw:{user:alice}:rsv"), "llmgw:{user:alice}:");
}

TEST(ClusterLayout, OpKeysGoBesideTheirCall) {
    EXPECT_EQ(op_key("1:2"), "llmgw:op:1:2");
    EXPECT_EQ(op_key("1:2", "llmgw:user:alice:req:day:1"), "llmgw:op:1:2");   // plain: no tag
    ClusterLayout on;
    const std::string near = counter_key("user", "alice", "req", Window::Day, "1");
    EXPECT_EQ(op_key("9", near), "llmgw:{user:alice}:op:9");
    EXPECT_EQ(key_slot(op_key("9", near)), key_slot(near));
    EXPECT_EQ(op_key("9", stats_ids_key()), "llmgw:{stats}:op:9");
    EXPECT_EQ(hash_tag("a{b}c"), "b");
    EXPECT_EQ(hash_tag("a{}c{d}"), "");
    EXPECT_EQ(hash_tag("abc"), "");
    EXPECT_EQ(hash_tag("a{bc"), "");
}

TEST(ClusterLayout, PlainIsTheSpecsLayout) {
    EXPECT_EQ(key_layout(), KeyLayout::Plain);
    EXPECT_EQ(counter_key("user", "alice", "req", Window::Day, "20251128"), "llmgw:user:alice:req:day:20251128");
    EXPECT_EQ(stats_ids_key(), "llmgw:stats:ids");
}

// A plan of a limited user and group and the unlimited total: one part per
// slot, every check's keys in its part's slot, reservations renumbered, the
// total's rejection counter in a part that is not sent.
TEST(ClusterAdmission, SplitsAPlanBySlot) {
    ClusterLayout on;
    const Limits u = limits(1000, 5000), g = limits(3);
    const std::vector<Scope> scopes = {{"user", "alice", &u}, {"group", "eng", &g}, {"total", "all", nullptr}};
    const AdmissionPlan plan = build_admission_plan(scopes, kNow, false, 0, true, 60);
    ASSERT_EQ(plan.checks.size(), 3u);
    SplitPlan split;
    std::string err;
    ASSERT_TRUE(split_plan(plan, split, err)) << err;
    ASSERT_EQ(split.parts.size(), 3u);
    const PlanPart& user = split.parts[0];
    EXPECT_EQ(user.slot, key_slot(scope_prefix("user", "alice")));
    EXPECT_EQ(user.checks, (std::vector<std::size_t>{0, 1}));
    ASSERT_EQ(user.plan.reserve.size(), 2u);
    for (const Check& c : user.plan.checks) {
        for (const std::string& k : c.keys) EXPECT_EQ(key_slot(k), user.slot) << k;
        ASSERT_GE(c.reserve_index, 0);
        EXPECT_EQ(user.plan.reserve[static_cast<std::size_t>(c.reserve_index)].record, c.reserved_record);
    }
    for (const Incr& in : user.plan.admit) EXPECT_EQ(key_slot(in.key), user.slot);
    EXPECT_TRUE(user.plan.leased);
    const PlanPart& group = split.parts[1];
    EXPECT_EQ(group.checks, std::vector<std::size_t>{2});
    ASSERT_EQ(group.plan.checks.size(), 1u);
    EXPECT_EQ(group.plan.checks[0].reserve_index, 0);
    EXPECT_EQ(group.reserves, std::vector<std::size_t>{2});
    const PlanPart& total = split.parts[2];
    EXPECT_FALSE(total.sent());
    ASSERT_EQ(total.plan.reject.size(), 1u);
    EXPECT_EQ(total.plan.reject[0].key, counter_key("total", "all", "rej", Window::Day, bucket(Window::Day, kNow)));
    // a ticket's share
    LeaseTicket t;
    t.parts.resize(3);
    t.parts[2].use = LeaseUse::Grant;
    t.parts[2].extra = 7;
    const LeaseTicket gt = part_ticket(t, group);
    ASSERT_EQ(gt.parts.size(), 1u);
    EXPECT_EQ(gt.extra(0), 7);
}

TEST(ClusterAdmission, RefusesACheckAcrossSlots) {
    ClusterLayout on;
    AdmissionPlan plan;
    Check c;
    c.keys = {counter_key("user", "a", "req", Window::Day, "1"), counter_key("group", "g", "req", Window::Day, "1")};
    plan.checks.push_back(c);
    SplitPlan split;
    std::string err;
    EXPECT_FALSE(split_plan(plan, split, err));
    EXPECT_EQ(err, "an admission check's counters are in more than one cluster slot");
    plan.checks[0].keys.clear();
    EXPECT_FALSE(split_plan(plan, split, err));
}

// Admitted when every sent part admits; refused by the plan's first
// refusing check, whatever part answered first; sums put back in plan order.
TEST(ClusterAdmission, MergesThePartsResults) {
    ClusterLayout on;
    const Limits u = limits(10, 500), g = limits(3);
    const std::vector<Scope> scopes = {{"user", "alice", &u}, {"group", "eng", &g}, {"total", "all", nullptr}};
    const AdmissionPlan plan = build_admission_plan(scopes, kNow, false);
    SplitPlan split;
    std::string err;
    ASSERT_TRUE(split_plan(plan, split, err)) << err;
    ASSERT_EQ(split.parts.size(), 3u);
    std::vector<AdmissionResult> r(3);
    r[0].used = {4, 100};
    r[0].held = {0, 0};
    r[1].used = {2};
    r[1].held = {1};
    AdmissionResult m = merge_part_results(plan, split, r);
    EXPECT_TRUE(m.admitted);
    EXPECT_EQ(m.used, (std::vector<std::int64_t>{4, 100, 2}));
    EXPECT_EQ(m.held, (std::vector<std::int64_t>{0, 0, 1}));
    // both refuse: the user's check comes first in the plan
    r[1].admitted = false;
    r[1].check_index = 0;
    r[0].admitted = false;
    r[0].check_index = 1;
    m = merge_part_results(plan, split, r);
    EXPECT_FALSE(m.admitted);
    EXPECT_EQ(m.check_index, 1);
    EXPECT_EQ(m.message, plan.checks[1].message);
    EXPECT_EQ(m.kind, ViolationKind::Budget);
    // only the group refuses
    r[0] = AdmissionResult{};
    r[0].used = {4, 100};
    m = merge_part_results(plan, split, r);
    EXPECT_FALSE(m.admitted);
    EXPECT_EQ(m.check_index, 2);
    EXPECT_EQ(m.retry_after, plan.checks[2].retry_after);
    EXPECT_TRUE(m.held.empty());   // a part without them: not known
}

TEST(ClusterAdmission, RejectCommand) {
    std::string out;
    EXPECT_FALSE(append_reject_command(out, {}));
    EXPECT_TRUE(out.empty());
    ASSERT_TRUE(append_reject_command(out, {Incr{"llmgw:{user:a}:rej:day:1", 1, 3024000}}));
    const std::vector<std::string> a = argv_of(out);
    ASSERT_EQ(a.size(), 6u);
    EXPECT_EQ(a[0], "EVAL");
    EXPECT_NE(a[1].find("INCRBY"), std::string::npos);
    EXPECT_EQ(a[2], "1");
    EXPECT_EQ(a[3], "llmgw:{user:a}:rej:day:1");
    EXPECT_EQ(a[4], "1");
    EXPECT_EQ(a[5], "3024000");
}

// A batch's deltas and releases by slot, each stamp kept; a slot's
// accounting command names only keys of that slot, its op key among them.
TEST(ClusterBatch, SplitsABatchBySlot) {
    ClusterLayout on;
    const WindowStamps at0(kNow, false), at1(kNow + 60, false);
    ScopeDelta user, group, model;
    user.kind = "user";
    user.id = "alice";
    user.delta[kMetricTokIn] = 5;
    group = user;
    group.kind = "group";
    group.id = "eng";
    model = user;
    model.kind = "model";
    model.id = "oai/gpt";
    model.overflow_id = "oai/other";
    const std::vector<ScopeDelta> m0 = {user, group, model}, m1 = {user};
    const std::string rec = reserved_record_key("group", "eng");
    const std::vector<Release> rel = {Release{rec, Measure::Requests, 3, 9}};
    std::vector<std::unique_ptr<SlotBatch>> out;
    split_batch_by_slot({{&at0, &m0}, {&at1, &m1}}, {kNow, kNow + 60}, rel, out);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0]->slot, key_slot(scope_prefix("user", "alice")));
    ASSERT_EQ(out[0]->parts.size(), 2u);
    EXPECT_EQ(out[0]->minutes, (std::vector<std::time_t>{kNow, kNow + 60}));
    EXPECT_EQ(out[0]->parts[1].at, &at1);
    EXPECT_EQ(out[1]->released.size(), 1u);
    EXPECT_EQ(out[2]->slot, key_slot(stats_ids_key()));
    for (const auto& b : out) {
        const std::string op = op_key("x", b->near);
        std::string wire;
        ASSERT_TRUE(append_account_deltas(wire, b->parts, 1000, 3024000, op, 300, true, b->released));
        const std::vector<std::string> a = argv_of(wire);
        const std::size_t nkeys = std::stoul(a[2]);
        for (std::size_t i = 0; i < nkeys; ++i) EXPECT_EQ(key_slot(a[3 + i]), b->slot) << a[3 + i];
        // KEYS[1]: the statistics ids where a group is counted, else the op key
        EXPECT_EQ(a[3], b->slot == key_slot(stats_ids_key()) ? std::string(stats_ids_key()) : op);
    }
}
