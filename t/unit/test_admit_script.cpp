// The admission script: KEYS/ARGV encoding, reply decoding, SHA1, the
// accounting batch; and, when LLMGW_REDIS_PORT names a redis-server on
// 127.0.0.1 (t/30-redis-script.t starts one), the script itself against the
// real store, checked against execute_admission.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/store/account_script.h"
#include "core/store/admit_script.h"
#include "core/store/cancel_script.h"
#include "core/metering/limits.h"
#include "core/metering/reservation.h"
#include "core/store/resp.h"
#include "core/metering/windows.h"
#include "resp_values.h"

using namespace llmgw;
using namespace llmgw::test;
using T = RespValue::Type;

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::time_t kNow = 1795268730;  // 2026-11-21T13:45:30Z


// A plan with three checks over a few keys and the increments of both paths.
AdmissionPlan sample_plan() {
    AdmissionPlan p;
    Check a;
    a.keys = {"k:req:min"};
    a.limit = 50;
    a.add = 1;
    a.kind = ViolationKind::RateLimit;
    a.retry_after = 30;
    a.message = "rate limit exceeded: user \"alice\" requestsPerMinute 50";
    Check b;
    b.keys = {"k:tokin:day", "k:tokout:day"};
    b.limit = 9223372036854775807LL;
    b.add = 0;
    b.kind = ViolationKind::Budget;
    b.retry_after = 36870;
    b.message = "budget exceeded: user \"alice\" tokensPerDay 9223372036854775807";
    Check c;
    c.keys = {};
    c.limit = 1;
    c.add = -4;  // treated as 0 (breach when sum >= limit)
    c.kind = ViolationKind::Budget;
    c.retry_after = 1;
    c.message = "budget exceeded: group \"eng\" costPerMonthUSD 0.000001";
    p.checks = {a, b, c};
    // in window quads (minute, hour, day, month), as the scripts take them
    p.admit = {{"k:req:min", 1, 120},     {"k:req:hour", 1, 172800},   {"k:req:day", 1, 3024000},
               {"k:req:month", 1, 34560000}, {"k:cost:min", -7, 120}, {"k:cost:hour", -7, 172800},
               {"k:cost:day", -7, 3024000}, {"k:cost:month", -7, 34560000}};
    p.reject = {{"k:rej:day", 1, 3024000}};
    return p;
}

// Counters as the scripts take them, in window quads (script_parts.h): each
// of singles becomes its key and three more (key + ":w1".. ":w3") with its
// delta, every window with its TTL.
std::vector<Incr> quads(std::initializer_list<Incr> singles) {
    std::vector<Incr> out;
    for (const Incr& in : singles) {
        out.push_back(in);
        for (const char* w : {":w1", ":w2", ":w3"}) out.push_back(Incr{in.key + w, in.delta, in.ttl});
    }
    return out;
}

// Reads KEYS/ARGV back the way the Lua script does.
struct Decoded {
    struct C {
        std::vector<std::string> keys;
        std::string limit, add, reserved;
    };
    std::vector<C> checks;
    std::vector<Incr> admit, reject, reserve;
    std::vector<std::string> grants;   // per reservation
};

// The admission command (written in RESP) back as its arguments, and its
// KEYS and ARGV apart.
std::vector<std::string> argv_of(const std::string& wire) {
    RespReader reader;
    EXPECT_TRUE(reader.feed(wire.data(), wire.size()));
    RespValue v;
    std::string err;
    EXPECT_EQ(reader.next(v, err), RespReader::Result::Reply) << err;
    std::vector<std::string> out;
    for (const RespValue& e : v.elements) out.push_back(e.str);
    return out;
}
std::vector<std::string> cmd_admit(const AdmissionPlan& p, const ReserveAmounts& a = {}, bool by_sha = true) {
    return argv_of(admit_command(p, a, by_sha));
}
std::vector<std::string> cmd_admit_op(const AdmissionPlan& p, const ReserveAmounts& a, const std::string& op,
                                      std::int64_t ttl, bool by_sha = true) {
    return argv_of(admit_command_op(p, a, op, ttl, by_sha));
}
std::vector<std::string> script_args(const AdmissionPlan& p, const ReserveAmounts& a, std::vector<std::string>& keys) {
    const std::vector<std::string> cmd = cmd_admit(p, a);
    keys.clear();
    if (cmd.size() < 3) return {};
    const auto n = static_cast<std::ptrdiff_t>(std::stoul(cmd[2]));
    keys.assign(cmd.begin() + 3, cmd.begin() + 3 + n);
    return std::vector<std::string>(cmd.begin() + 3 + n, cmd.end());
}

bool decode_args(const std::vector<std::string>& keys, const std::vector<std::string>& argv, Decoded& d) {
    std::size_t a = 0, k = 0;
    auto num = [&](std::size_t& out) {
        if (a >= argv.size()) return false;
        out = std::stoul(argv[a++]);
        return true;
    };
    std::size_t n = 0;
    // the reservations (field, delta, ttl, grant each: the field is left
    // out here, the grant kept)
    if (!num(n) || a + 4 * n > argv.size() || k + n > keys.size()) return false;
    for (std::size_t i = 0; i < n; ++i, a += 4) {
        d.reserve.push_back(Incr{keys[k++], std::stoll(argv[a + 1]), std::stoll(argv[a + 2])});
        d.grants.push_back(argv[a + 3]);
    }
    if (!num(n)) return false;
    for (std::size_t i = 0; i < n; ++i) {
        Decoded::C c;
        std::size_t nk = 0;
        if (!num(nk) || a + 3 > argv.size()) return false;
        c.limit = argv[a++];
        c.add = argv[a++];
        c.reserved = argv[a++];
        for (std::size_t j = 0; j < nk; ++j) {
            if (k >= keys.size()) return false;
            c.keys.push_back(keys[k++]);
        }
        d.checks.push_back(c);
    }
    // the windows' TTLs, the admit quads (a delta each), the reject
    // counters (one delta and TTL for all)
    std::size_t w = 0;
    if (!num(w) || a + w > argv.size()) return false;
    std::vector<std::int64_t> ttl;
    for (std::size_t i = 0; i < w; ++i) ttl.push_back(std::stoll(argv[a++]));
    if (!num(n) || a + n > argv.size() || k + n * w > keys.size()) return false;
    for (std::size_t q = 0; q < n; ++q) {
        const std::int64_t delta = std::stoll(argv[a++]);
        for (std::size_t i = 0; i < w; ++i) d.admit.push_back(Incr{keys[k++], delta, ttl[i]});
    }
    if (!num(n) || a + 2 > argv.size() || k + n > keys.size()) return false;
    for (std::size_t i = 0; i < n; ++i) d.reject.push_back(Incr{keys[k++], std::stoll(argv[a]), std::stoll(argv[a + 1])});
    a += 2;
    return a == argv.size() && k == keys.size();
}

// A reservation's reserved counter (the key of its slot), and the
// reservation of such a key.
std::string slot_key(const Reservation& r) {
    return reserved_key_in(reserved_record_scope(r.record), r.measure == Measure::Tokens, r.slot);
}
Reservation release_of(const std::string& key) {
    std::string_view scope;
    Reservation r;
    bool tokens = false;
    EXPECT_TRUE(split_reserved_key(key, scope, r.slot, tokens)) << key;
    assign_reserved_record_key(r.record, scope);
    r.measure = tokens ? Measure::Tokens : Measure::Cost;
    return r;
}

bool same_incrs(const std::vector<Incr>& a, const std::vector<Incr>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i].key != b[i].key || a[i].delta != b[i].delta || a[i].ttl != b[i].ttl) return false;
    }
    return true;
}

}  // namespace

// ---- encoding ----

TEST(AdmitScript, ArgsRoundTrip) {
    const AdmissionPlan p = sample_plan();
    std::vector<std::string> keys = {"stale"};
    const std::vector<std::string> args = script_args(p, {}, keys);
    EXPECT_EQ(keys, (std::vector<std::string>{"k:req:min", "k:tokin:day", "k:tokout:day", "k:req:min", "k:req:hour",
                                              "k:req:day", "k:req:month", "k:cost:min", "k:cost:hour", "k:cost:day",
                                              "k:cost:month", "k:rej:day"}));
    EXPECT_EQ(args, (std::vector<std::string>{"0", "3", "1", "50", "1", "0", "2", "9223372036854775807", "0", "0", "0",
                                              "1", "0", "0", "4", "120", "172800", "3024000", "34560000", "2", "1",
                                              "-7", "1", "1", "3024000"}));
    Decoded d;
    ASSERT_TRUE(decode_args(keys, args, d));
    ASSERT_EQ(d.checks.size(), p.checks.size());
    for (std::size_t i = 0; i < p.checks.size(); ++i) {
        EXPECT_EQ(d.checks[i].keys, p.checks[i].keys);
        EXPECT_EQ(d.checks[i].limit, std::to_string(p.checks[i].limit));
        EXPECT_EQ(d.checks[i].add, p.checks[i].add > 0 ? std::to_string(p.checks[i].add) : "0");
        EXPECT_EQ(d.checks[i].reserved, "0");
    }
    EXPECT_TRUE(same_incrs(d.admit, p.admit));
    EXPECT_TRUE(same_incrs(d.reject, p.reject));
}

TEST(AdmitScript, ArgsOfARealPlan) {
    Limits user;
    user.requests_per_minute = 50;
    user.tokens_per_day = 1000;
    user.cost_per_month_micros = 2500000;
    Limits group;
    group.requests_per_day = 7;
    const std::vector<Scope> scopes = {{"user", "alice", &user}, {"group", "eng", &group}, {"total", "", nullptr}};
    const AdmissionPlan p = build_admission_plan(scopes, kNow, false);
    std::vector<std::string> keys;
    const std::vector<std::string> args = script_args(p, {}, keys);
    Decoded d;
    ASSERT_TRUE(decode_args(keys, args, d));
    ASSERT_EQ(d.checks.size(), 4u);
    EXPECT_EQ(d.checks[1].keys.size(), 2u);  // tokin + tokout
    EXPECT_EQ(d.checks[1].add, "0");
    EXPECT_EQ(d.checks[0].add, "1");
    EXPECT_EQ(d.checks[2].limit, "2500000");
    EXPECT_TRUE(same_incrs(d.admit, p.admit));
    EXPECT_TRUE(same_incrs(d.reject, p.reject));
    EXPECT_EQ(d.admit.size(), 12u);   // 3 scopes x 4 windows
    EXPECT_EQ(d.reject.size(), 3u);   // rej of user, group, total

    const std::vector<std::string> cmd = cmd_admit(p);
    ASSERT_GE(cmd.size(), 3u);
    EXPECT_EQ(cmd[0], "EVALSHA");
    EXPECT_EQ(cmd[1], admit_script_sha1());
    EXPECT_EQ(cmd[2], std::to_string(keys.size()));
    EXPECT_EQ(std::vector<std::string>(cmd.begin() + 3, cmd.begin() + 3 + static_cast<long>(keys.size())), keys);
    EXPECT_EQ(std::vector<std::string>(cmd.begin() + 3 + static_cast<long>(keys.size()), cmd.end()), args);
    const std::vector<std::string> eval = cmd_admit(p, {}, false);
    EXPECT_EQ(eval[0], "EVAL");
    EXPECT_EQ(eval[1], admit_script_source());
    EXPECT_EQ(std::vector<std::string>(eval.begin() + 2, eval.end()), std::vector<std::string>(cmd.begin() + 2, cmd.end()));
}

TEST(AdmitScript, EmptyPlan) {
    AdmissionPlan p;
    std::vector<std::string> keys;
    EXPECT_EQ(script_args(p, {}, keys),
              (std::vector<std::string>{"0", "0", "4", "0", "0", "0", "0", "0", "0", "0", "0"}));
    EXPECT_TRUE(keys.empty());
    EXPECT_EQ(cmd_admit(p), (std::vector<std::string>{"EVALSHA", admit_script_sha1(), "0", "0", "0", "4", "0", "0",
                                                      "0", "0", "0", "0", "0", "0"}));
}

// The scripts take counters in window quads and the reject counters with
// one delta and TTL: other counters write no command.
TEST(AdmitScript, CountersNotInWindowQuadsAreRefused) {
    AdmissionPlan p = sample_plan();
    ASSERT_NE(admit_command(p), "");
    p.admit.pop_back();                                 // three of a quad
    EXPECT_EQ(admit_command(p), "");
    p = sample_plan();
    p.admit[5].delta = 3;                               // a quad with two deltas
    EXPECT_EQ(admit_command(p), "");
    p = sample_plan();
    p.admit[6].ttl = 60;                                // a day with another TTL
    EXPECT_EQ(admit_command(p), "");
    p = sample_plan();
    p.reject.push_back({"k:rej2:day", 2, 3024000});     // reject counters with two deltas
    EXPECT_EQ(admit_command(p), "");
    const std::vector<Incr> quad = sample_plan().admit;
    std::string out = "waiting";
    EXPECT_TRUE(append_account_command(out, quad, {}, 10, 99, "op:a", 300));
    out = "waiting";
    EXPECT_FALSE(append_account_command(out, {quad.begin(), quad.end() - 1}, {}, 10, 99, "op:a", 300));
    EXPECT_EQ(out, "waiting");
    BoundedIncrs g;
    g.member = "model:m";
    g.incrs = quad;
    g.incrs[4].ttl = 1;                                 // a group's quad with another TTL than plain's
    for (const Incr& in : g.incrs) g.overflow_keys.push_back(in.key + ":o");
    EXPECT_FALSE(append_account_command(out, quad, {g}, 10, 99, "op:a", 300));
    EXPECT_EQ(out, "waiting");
}

// A reserving check must name its scope's record; a plan that does not is
// refused and what was waiting in the buffer stays as it was.
TEST(AdmitScript, AReservingCheckWithoutItsRecordIsRefused) {
    Limits user;
    user.tokens_per_day = 1000;
    AdmissionPlan p = build_admission_plan({{"user", "alice", &user}}, kNow, false, 600);
    std::string out = "waiting";
    ASSERT_TRUE(append_admit_command(out, p, ReserveAmounts{10, 0}, true, "op:1", 300));
    EXPECT_GT(out.size(), 7u);
    p.checks[0].reserved_record.clear();
    out = "waiting";
    EXPECT_FALSE(append_admit_command(out, p, ReserveAmounts{10, 0}, true, "op:1", 300));
    EXPECT_EQ(out, "waiting");
    EXPECT_EQ(admit_command(p), "");
    EXPECT_EQ(admit_command_op(p, {}, "", 300), "");   // and an op needs its key
}

// The accounting and cancel commands as the scripts read them: KEYS, then
// ARGV, with the releases' section only when something is released.
TEST(AdmitScript, AccountingAndCancelLayouts) {
    // one counter in each section, in window quads
    auto quad = [](const std::string& k, std::int64_t delta) {
        return std::vector<Incr>{{k + ":m", delta, 60}, {k + ":h", delta, 70}, {k + ":d", delta, 80},
                                 {k + ":mo", delta, 90}};
    };
    const std::vector<Incr> plain = quad("p", 5);
    BoundedIncrs g;
    g.member = "model:m";
    g.incrs = quad("g", 2);
    g.overflow_keys = {"o:m", "o:h", "o:d", "o:mo"};
    AdmissionPlan held_plan;
    held_plan.reserve.push_back(Reservation{"llmgw:user:a:rsv", Measure::Cost, 12, 600});
    std::vector<Release> rel = admission_releases(held_plan, ReserveAmounts{0, 300});
    const std::string sha = account_script_sha1();
    EXPECT_EQ(argv_of(account_command(plain, {g}, 10, 99, "op:a", 300, true, rel)),
              (std::vector<std::string>{"EVALSHA", sha, "15", kStatsIdsKey, "op:a", "p:m", "p:h", "p:d", "p:mo", "g:m",
                                        "g:h", "g:d", "g:mo", "o:m", "o:h", "o:d", "o:mo", "llmgw:user:a:rsv", "10",
                                        "99", "300", "4", "60", "70", "80", "90", "1", "5", "1", "model:m", "1", "2",
                                        "1", "c12", "-300"}));
    rel = admission_releases(held_plan, ReserveAmounts{300, 0});   // nothing to release: no section
    EXPECT_EQ(argv_of(account_command(plain, {}, 10, 99, "op:a", 300, true, rel)),
              (std::vector<std::string>{"EVALSHA", sha, "6", kStatsIdsKey, "op:a", "p:m", "p:h", "p:d", "p:mo", "10",
                                        "99", "300", "4", "60", "70", "80", "90", "1", "5", "0"}));
    g.overflow_keys.clear();   // a group without its overflow keys
    EXPECT_EQ(account_command(plain, {g}, 10, 99, "op:a", 300), "");
    EXPECT_EQ(cancel_account_command(plain, {g}, "op:a", 300), "");
    g.overflow_keys = {"o:m", "o:h", "o:d", "o:mo"};
    EXPECT_EQ(argv_of(cancel_account_command(plain, {g}, "op:c", 300)),
              (std::vector<std::string>{"EVAL", cancel_script_source(), "13", "op:c", "p:m", "p:h", "p:d", "p:mo",
                                        "g:m", "g:h", "g:d", "g:mo", "o:m", "o:h", "o:d", "o:mo", "300", "acc", "4",
                                        "5", "5", "5", "5", "1", "4", "2", "2", "2", "2"}));
    Limits user;
    user.cost_per_day_micros = 1000;
    const AdmissionPlan p = build_admission_plan({{"user", "a", &user}}, kNow, false, 600);
    const std::vector<std::string> c = argv_of(cancel_admit_command(p, ReserveAmounts{0, 40}, "op:d", 300));
    ASSERT_GE(c.size(), 4u);
    EXPECT_EQ(c[0], "EVAL");
    EXPECT_EQ(c[2], std::to_string(1 + p.admit.size() + p.reject.size() + 1));
    EXPECT_EQ(c[3], "op:d");
    EXPECT_EQ(c[3 + 1 + p.admit.size() + p.reject.size()], "llmgw:user:a:rsv");
    EXPECT_EQ(c[c.size() - 3], "1");                                    // one release:
    EXPECT_EQ(c[c.size() - 2], "c" + std::to_string(reserve_slot(kNow, 600)));   // its field,
    EXPECT_EQ(c.back(), "-40");                                         // minus its amount
}

// ---- replies ----

TEST(AdmitScript, DecodeAdmitted) {
    const AdmissionPlan p = sample_plan();
    AdmissionResult r;
    r.admitted = false;
    r.check_index = 7;
    std::string err;
    ASSERT_TRUE(decode_admit_reply(array({integer(0), text(T::String, "0"), text(T::String, "42"),
                                          text(T::String, "99999999999999999999")}),
                                   p, r, err))
        << err;
    EXPECT_TRUE(r.admitted);
    EXPECT_EQ(r.used, (std::vector<std::int64_t>{0, 42, INT64_MAX}));   // past int64: saturated
    EXPECT_EQ(r.kind, ViolationKind::None);
    EXPECT_EQ(r.check_index, -1);
    EXPECT_EQ(r.retry_after, 0);
    EXPECT_EQ(r.message, "");
}

// v9: the sums, then what reserved counters hold of each.
TEST(AdmitScript, DecodeHeldSums) {
    const AdmissionPlan p = sample_plan();
    AdmissionResult r;
    std::string err;
    ASSERT_TRUE(decode_admit_reply(array({integer(0), text(T::String, "5"), text(T::String, "42"), text(T::String, "7"),
                                          text(T::String, "0"), text(T::String, "40"), text(T::String, "0")}),
                                   p, r, err))
        << err;
    EXPECT_EQ(r.used, (std::vector<std::int64_t>{5, 42, 7}));
    EXPECT_EQ(r.held, (std::vector<std::int64_t>{0, 40, 0}));
    ASSERT_TRUE(decode_admit_reply(array({integer(1), integer(2), text(T::String, "5"), text(T::String, "42"),
                                          text(T::String, "7"), text(T::String, "1"), text(T::String, "2"),
                                          text(T::String, "3")}),
                                   p, r, err));
    EXPECT_EQ(r.check_index, 2);
    EXPECT_EQ(r.held, (std::vector<std::int64_t>{1, 2, 3}));
    EXPECT_FALSE(decode_admit_reply(array({integer(0), text(T::String, "5"), text(T::String, "42"), text(T::String, "7"),
                                           text(T::String, "0"), text(T::String, "x"), text(T::String, "0")}),
                                    p, r, err));
}

TEST(AdmitScript, DecodeRejected) {
    const AdmissionPlan p = sample_plan();
    for (int i = 0; i < 3; ++i) {
        AdmissionResult r;
        std::string err;
        ASSERT_TRUE(decode_admit_reply(array({integer(1), integer(i), text(T::String, "1"), text(T::String, "2"),
                                              text(T::String, "3")}),
                                       p, r, err))
            << err;
        EXPECT_FALSE(r.admitted);
        EXPECT_EQ(r.used, (std::vector<std::int64_t>{1, 2, 3}));
        EXPECT_EQ(r.check_index, i);
        EXPECT_EQ(r.kind, p.checks[static_cast<std::size_t>(i)].kind);
        EXPECT_EQ(r.retry_after, p.checks[static_cast<std::size_t>(i)].retry_after);
        EXPECT_EQ(r.message, p.checks[static_cast<std::size_t>(i)].message);
    }
}

TEST(AdmitScript, DecodeBadReplies) {
    const AdmissionPlan p = sample_plan();
    const std::vector<RespValue> bad = {
        RespValue{},                                    // nil
        integer(0),                                     // not an array
        text(T::String, "0"),
        text(T::Status, "OK"),
        array({}),
        array({integer(2)}),
        array({integer(1)}),                            // rejected without an index
        array({integer(0), integer(0)}),
        array({integer(1), integer(3)}),                // out of range
        array({integer(1), integer(-1)}),
        array({integer(1), integer(1), integer(1)}),
        array({text(T::String, "0")}),
        array({integer(1), text(T::String, "0")}),
        array({text(T::Error, "ERR x")}),
        array({integer(0)}),                            // no sums for three checks
        array({integer(1), integer(0)}),
        array({integer(0), text(T::String, "1"), text(T::String, "2")}),              // one sum short
        array({integer(0), text(T::String, "1"), text(T::String, "2"), text(T::String, "3"), text(T::String, "4")}),
        array({integer(0), text(T::String, "1"), text(T::String, "-2"), text(T::String, "3")}),   // not digits
        array({integer(0), text(T::String, "1"), text(T::String, ""), text(T::String, "3")}),
        array({integer(0), text(T::String, "1"), integer(2), text(T::String, "3")}),
        array({integer(0), text(T::String, "1"), text(T::String, "2x"), text(T::String, "3")}),
        array({integer(0), text(T::String, "1"), text(T::String, std::string(41, '9')), text(T::String, "3")}),
    };
    for (const RespValue& v : bad) {
        AdmissionResult r;
        r.message = "untouched";
        std::string err;
        EXPECT_FALSE(decode_admit_reply(v, p, r, err));
        EXPECT_FALSE(err.empty());
        EXPECT_EQ(r.message, "untouched");
    }
    AdmissionResult r;
    std::string err;
    EXPECT_FALSE(decode_admit_reply(text(T::Error, "WRONGTYPE Operation against a key holding the wrong kind of value"),
                                    p, r, err));
    EXPECT_NE(err.find("WRONGTYPE"), std::string::npos) << err;
    // a plan without checks can only be admitted
    EXPECT_FALSE(decode_admit_reply(array({integer(1), integer(0)}), AdmissionPlan{}, r, err));
}

// A lease's grant in the background: {0, sums...} or {1, i, sums...}, one
// sum per check of its reservation; anything else is a store error whose
// text is bounded.
TEST(AdmitScript, DecodeGrantReplies) {
    std::vector<std::int64_t> used{7};
    std::string err;
    ASSERT_TRUE(decode_grant_reply(array({integer(0), text(T::String, "5"), text(T::String, "99999999999999999999")}),
                                   2, used, err))
        << err;
    EXPECT_EQ(used, (std::vector<std::int64_t>{5, INT64_MAX}));
    ASSERT_TRUE(decode_grant_reply(array({integer(1), integer(1), text(T::String, "0"), text(T::String, "3")}), 2,
                                   used, err));
    EXPECT_EQ(used, (std::vector<std::int64_t>{0, 3}));
    const std::vector<RespValue> bad = {
        RespValue{},
        integer(0),
        text(T::String, "0"),
        array({}),
        array({integer(2)}),                                          // a cancelled op: grants have none
        array({integer(0), text(T::String, "1")}),                    // one sum short
        array({integer(0), text(T::String, "1"), text(T::String, "2"), text(T::String, "3")}),
        array({integer(1), integer(2), text(T::String, "1"), text(T::String, "2")}),   // check out of range
        array({integer(1), integer(-1), text(T::String, "1"), text(T::String, "2")}),
        array({integer(1), text(T::String, "0"), text(T::String, "1"), text(T::String, "2")}),
        array({integer(0), text(T::String, "1"), text(T::String, "-2")}),
        array({integer(0), text(T::String, "1"), integer(2)}),
        array({integer(0), text(T::String, "1"), text(T::String, std::string(41, '9'))}),
        array({integer(0), text(T::String, "\xff\xfe"), text(T::String, "2")}),   // not digits (invalid UTF-8)
        array({integer(0), array({text(T::String, "1")}), text(T::String, "2")}),
    };
    for (const RespValue& v : bad) {
        used = {42};
        err.clear();
        EXPECT_FALSE(decode_grant_reply(v, 2, used, err));
        EXPECT_FALSE(err.empty());
        EXPECT_EQ(used, (std::vector<std::int64_t>{42}));   // untouched
    }
    err.clear();
    EXPECT_FALSE(decode_grant_reply(text(T::Error, "ERR " + std::string(100000, 'x')), 2, used, err));
    EXPECT_LE(err.size(), 300u);   // a huge error text is cut
}

TEST(AdmitScript, NoscriptError) {
    EXPECT_TRUE(is_noscript_error(text(T::Error, "NOSCRIPT No matching script. Please use EVAL.")));
    EXPECT_FALSE(is_noscript_error(text(T::Error, "ERR unknown command")));
    EXPECT_FALSE(is_noscript_error(text(T::Status, "NOSCRIPT")));
    EXPECT_FALSE(is_noscript_error(text(T::Error, "NOSCR")));
    EXPECT_FALSE(is_noscript_error(array({integer(0)})));
}

// ---- the script's identity ----

TEST(AdmitScript, Sha1) {
    const std::string sha = admit_script_sha1();
    ASSERT_EQ(sha.size(), 40u);
    for (char c : sha) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << sha;
    EXPECT_EQ(admit_script_sha1(), sha);
    // independently: SHA1 of the source bytes
    const std::string& src = admit_script_source();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ASSERT_EQ(EVP_Digest(src.data(), src.size(), md, &len, EVP_sha1(), nullptr), 1);
    char hex[41];
    for (unsigned int i = 0; i < len; ++i) std::snprintf(hex + 2 * i, 3, "%02x", md[i]);
    EXPECT_EQ(sha, std::string(hex, 40));
    EXPECT_EQ(&admit_script_source(), &src);
    EXPECT_NE(src.find("redis.call"), std::string::npos);
}

// ======================================================================
// Against a real redis-server: LLMGW_REDIS_PORT=<port> on 127.0.0.1.
// The tests use database 15 and flush it.
// ======================================================================

namespace {

// A blocking client over a plain socket, speaking through RespReader and
// resp_command (so the codec is exercised against the real server too).
class Client {
public:
    ~Client() {
        if (fd_ >= 0) ::close(fd_);
    }
    bool connect(int port, std::string& err) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd_ < 0) {
            err = std::strerror(errno);
            return false;
        }
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(static_cast<std::uint16_t>(port));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
            err = std::string("connect: ") + std::strerror(errno);
            return false;
        }
        return true;
    }
    // Sends all commands at once, then reads one reply per command.
    bool pipeline(const std::vector<std::vector<std::string>>& cmds, std::vector<RespValue>& out, std::string& err) {
        std::string wire;
        for (const auto& c : cmds) wire += resp_command(c);
        std::size_t off = 0;
        while (off < wire.size()) {
            const ssize_t n = ::send(fd_, wire.data() + off, wire.size() - off, MSG_NOSIGNAL);
            if (n <= 0) {
                err = std::string("send: ") + std::strerror(errno);
                return false;
            }
            off += static_cast<std::size_t>(n);
        }
        out.clear();
        while (out.size() < cmds.size()) {
            RespValue v;
            const RespReader::Result r = reader_.next(v, err);
            if (r == RespReader::Result::Error) return false;
            if (r == RespReader::Result::Reply) {
                out.push_back(std::move(v));
                continue;
            }
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 10000) != 1) {
                err = "timed out waiting for redis";
                return false;
            }
            char buf[16384];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) {
                err = "redis closed the connection";
                return false;
            }
            if (!reader_.feed(buf, static_cast<std::size_t>(n))) {
                RespValue ignored;
                reader_.next(ignored, err);
                return false;
            }
        }
        return true;
    }
    // A command already written in RESP.
    RespValue call_wire(const std::string& wire) { return call(argv_of(wire)); }
    RespValue call(const std::vector<std::string>& argv) {
        std::vector<RespValue> out;
        std::string err;
        if (!pipeline({argv}, out, err)) {
            ADD_FAILURE() << argv[0] << ": " << err;
            return text(T::Error, "transport: " + err);
        }
        return out[0];
    }

private:
    int fd_ = -1;
    RespReader reader_;
};

int redis_port() {
    const char* p = std::getenv("LLMGW_REDIS_PORT");
    if (p == nullptr || *p == '\0') return 0;
    return std::atoi(p);
}

// The in-memory reference: execute_admission over a map, incr saturating
// like the shared-memory store.
class RefKv : public KvTxn {
public:
    std::map<std::string, std::int64_t> values;
    std::int64_t get(const std::string& key) override {
        const auto it = values.find(key);
        return it == values.end() ? 0 : it->second;
    }
    bool incr(const std::string& key, std::int64_t delta, std::int64_t) override {
        std::int64_t& v = values[key];
        std::int64_t out = 0;
        v = __builtin_add_overflow(v, delta, &out) ? (delta > 0 ? kMax : kMin) : out;
        return true;
    }
};

class AdmitScriptRedis : public ::testing::Test {
protected:
    void SetUp() override {
        const int port = redis_port();
        if (port == 0) GTEST_SKIP() << "LLMGW_REDIS_PORT is not set (t/30-redis-script.t sets it)";
        std::string err;
        ASSERT_TRUE(c_.connect(port, err)) << err;
        ASSERT_EQ(c_.call({"SELECT", "15"}).type, T::Status);
        ASSERT_EQ(c_.call({"FLUSHDB"}).type, T::Status);
    }

    // EVALSHA, falling back to EVAL on NOSCRIPT, as the module does.
    bool admit(const AdmissionPlan& plan, AdmissionResult& r, std::string& err, bool* used_eval = nullptr,
               const ReserveAmounts& amounts = {}) {
        RespValue v = c_.call(cmd_admit(plan, amounts, true));
        if (used_eval) *used_eval = false;
        if (is_noscript_error(v)) {
            if (used_eval) *used_eval = true;
            v = c_.call(cmd_admit(plan, amounts, false));
        }
        return decode_admit_reply(v, plan, r, err);
    }

    AdmissionResult admit_ok(const AdmissionPlan& plan, const ReserveAmounts& amounts = {}) {
        AdmissionResult r;
        std::string err;
        EXPECT_TRUE(admit(plan, r, err, nullptr, amounts)) << err;
        return r;
    }

    std::int64_t get(const std::string& key) {
        const RespValue v = c_.call({"GET", key});
        if (v.type == T::Nil) return 0;
        EXPECT_EQ(v.type, T::String) << key;
        return std::stoll(v.str);
    }

    long long ttl(const std::string& key) { return c_.call({"TTL", key}).integer; }

    // A reserved counter where Redis keeps it: a field of its scope's hash.
    std::string hash_of(const std::string& reserved) {
        std::string hash, field;
        EXPECT_TRUE(reserved_hash_field(reserved, hash, field)) << reserved;
        return hash;
    }
    bool rexists(const std::string& reserved) {
        std::string hash, field;
        EXPECT_TRUE(reserved_hash_field(reserved, hash, field)) << reserved;
        return c_.call({"HEXISTS", hash, field}).integer == 1;
    }
    std::int64_t rget(const std::string& reserved) {
        std::string hash, field;
        EXPECT_TRUE(reserved_hash_field(reserved, hash, field)) << reserved;
        const RespValue v = c_.call({"HGET", hash, field});
        if (v.type == T::Nil) return 0;
        EXPECT_EQ(v.type, T::String) << reserved;
        return std::stoll(v.str);
    }

    Client c_;
};

std::string key(const char* kind, const char* id, const char* metric, Window w) {
    return counter_key(kind, id, metric, w, bucket(w, kNow));
}

}  // namespace

TEST_F(AdmitScriptRedis, ScriptLoadReturnsOurSha1) {
    const RespValue v = c_.call({"SCRIPT", "LOAD", admit_script_source()});
    ASSERT_EQ(v.type, T::String) << v.str;
    EXPECT_EQ(v.str, admit_script_sha1());
}

TEST_F(AdmitScriptRedis, FiftyOfSixtyAdmittedWithRpm50) {
    Limits user;
    user.requests_per_minute = 50;
    Limits group;  // counted, no limit
    const std::vector<Scope> scopes = {{"user", "alice", &user}, {"group", "eng", &group}, {"total", "", nullptr}};
    const AdmissionPlan plan = build_admission_plan(scopes, kNow, false);
    ASSERT_EQ(plan.checks.size(), 1u);
    int admitted = 0, rejected = 0;
    for (int i = 0; i < 60; ++i) {
        const AdmissionResult r = admit_ok(plan);
        if (r.admitted) {
            ++admitted;
            EXPECT_EQ(rejected, 0) << "admitted after a rejection";
        } else {
            ++rejected;
            EXPECT_EQ(r.check_index, 0);
            EXPECT_EQ(r.kind, ViolationKind::RateLimit);
            EXPECT_EQ(r.retry_after, plan.checks[0].retry_after);
            EXPECT_EQ(r.message, "rate limit exceeded: user \"alice\" requestsPerMinute 50");
        }
    }
    EXPECT_EQ(admitted, 50);
    EXPECT_EQ(rejected, 10);
    const std::pair<const char*, const char*> ids[] = {{"user", "alice"}, {"group", "eng"}, {"total", ""}};
    for (const auto& [kind, id] : ids) {
        for (int w = 0; w < kWindowCount; ++w) {
            const std::string k = key(kind, id, "req", static_cast<Window>(w));
            EXPECT_EQ(get(k), 50) << k;
            const long long t = ttl(k);
            EXPECT_GT(t, ttl_seconds(static_cast<Window>(w)) - 60) << k;
            EXPECT_LE(t, ttl_seconds(static_cast<Window>(w))) << k;
        }
        const std::string rej = key(kind, id, "rej", Window::Day);
        EXPECT_EQ(get(rej), 10) << rej;
        EXPECT_GT(ttl(rej), ttl_seconds(Window::Day) - 60);
    }
}

TEST_F(AdmitScriptRedis, Precedence) {
    // user rpm 1 and group rpm 1: the user's check wins
    Limits u1;
    u1.requests_per_minute = 1;
    Limits g1;
    g1.requests_per_minute = 1;
    const AdmissionPlan p1 =
        build_admission_plan({{"user", "a", &u1}, {"group", "g", &g1}, {"total", "", nullptr}}, kNow, false);
    EXPECT_TRUE(admit_ok(p1).admitted);
    AdmissionResult r = admit_ok(p1);
    EXPECT_FALSE(r.admitted);
    EXPECT_EQ(r.check_index, 0);
    EXPECT_EQ(r.message, "rate limit exceeded: user \"a\" requestsPerMinute 1");

    // within a scope: rpm before rpd; rpd breached first when rpm has room
    Limits u2;
    u2.requests_per_minute = 5;
    u2.requests_per_day = 1;
    const AdmissionPlan p2 = build_admission_plan({{"user", "b", &u2}, {"group", "h", nullptr}}, kNow, false);
    EXPECT_TRUE(admit_ok(p2).admitted);
    r = admit_ok(p2);
    EXPECT_FALSE(r.admitted);
    EXPECT_EQ(r.check_index, 1);
    EXPECT_EQ(r.message, "rate limit exceeded: user \"b\" requestsPerDay 1");

    // group breached while the user has room: the group's check
    Limits u3;
    u3.requests_per_minute = 10;
    Limits g3;
    g3.requests_per_minute = 2;
    const AdmissionPlan p3 = build_admission_plan({{"user", "c", &u3}, {"group", "k", &g3}}, kNow, false);
    EXPECT_TRUE(admit_ok(p3).admitted);
    EXPECT_TRUE(admit_ok(p3).admitted);
    r = admit_ok(p3);
    EXPECT_FALSE(r.admitted);
    EXPECT_EQ(r.check_index, 1);
    EXPECT_EQ(r.message, "rate limit exceeded: group \"k\" requestsPerMinute 2");
    // the rejected request counted nowhere but in rej
    EXPECT_EQ(get(key("user", "c", "req", Window::Min)), 2);
    EXPECT_EQ(get(key("group", "k", "req", Window::Min)), 2);
    EXPECT_EQ(get(key("user", "c", "rej", Window::Day)), 1);
    EXPECT_EQ(get(key("group", "k", "rej", Window::Day)), 1);
}

TEST_F(AdmitScriptRedis, TokenBudgetSumsBothDirections) {
    Limits u;
    u.tokens_per_day = 100;
    const AdmissionPlan p = build_admission_plan({{"user", "t", &u}}, kNow, false);
    ASSERT_EQ(p.checks.size(), 1u);
    ASSERT_EQ(p.checks[0].add, 0);
    c_.call({"SET", key("user", "t", "tokin", Window::Day), "60"});
    c_.call({"SET", key("user", "t", "tokout", Window::Day), "39"});
    EXPECT_TRUE(admit_ok(p).admitted);  // 99 < 100
    c_.call({"SET", key("user", "t", "tokout", Window::Day), "40"});
    const AdmissionResult r = admit_ok(p);  // 100 >= 100
    EXPECT_FALSE(r.admitted);
    EXPECT_EQ(r.kind, ViolationKind::Budget);
    EXPECT_EQ(r.message, "budget exceeded: user \"t\" tokensPerDay 100");
}

TEST_F(AdmitScriptRedis, ExactAbove2Pow53) {
    // 2^53 + 1 is not a double: a double-based script would get these wrong.
    AdmissionPlan p;
    Check c;
    c.keys = {"x:a"};
    c.limit = 9007199254740994LL;  // 2^53 + 2
    c.add = 1;
    p.checks = {c};
    p.admit = quads({{"x:ok", 1, 100}});
    p.reject = {{"x:no", 1, 100}};
    c_.call({"SET", "x:a", "9007199254740993"});  // + 1 = limit: admitted
    EXPECT_TRUE(admit_ok(p).admitted);
    c_.call({"SET", "x:a", "9007199254740994"});  // + 1 > limit: rejected
    EXPECT_FALSE(admit_ok(p).admitted);

    p.checks[0].limit = 9007199254740993LL;
    p.checks[0].add = 0;
    c_.call({"SET", "x:a", "9007199254740992"});  // < limit: admitted
    EXPECT_TRUE(admit_ok(p).admitted);
    c_.call({"SET", "x:a", "9007199254740993"});  // >= limit: rejected
    EXPECT_FALSE(admit_ok(p).admitted);

    // sums beyond int64
    p.checks[0].keys = {"x:a", "x:b"};
    p.checks[0].limit = kMax;
    c_.call({"SET", "x:a", "9223372036854775807"});
    c_.call({"SET", "x:b", "-1"});
    EXPECT_TRUE(admit_ok(p).admitted);   // max - 1 < max
    c_.call({"SET", "x:b", "5"});
    EXPECT_FALSE(admit_ok(p).admitted);  // max + 5 >= max
    c_.call({"SET", "x:a", "-9223372036854775808"});
    c_.call({"SET", "x:b", "-9223372036854775808"});
    EXPECT_TRUE(admit_ok(p).admitted);   // 2 * min < max
    p.checks[0].limit = kMin;
    EXPECT_TRUE(admit_ok(p).admitted);   // 2 * min < min: exact, no wrap-around
    p.checks[0].keys = {"x:a"};
    EXPECT_FALSE(admit_ok(p).admitted);  // min >= min
}

TEST_F(AdmitScriptRedis, SaturationKeepsTtl) {
    AdmissionPlan p;
    p.admit = quads({{"s:up", 5, 1000}, {"s:down", -5, 1000}});
    c_.call({"SET", "s:up", "9223372036854775806", "EX", "100"});
    c_.call({"SET", "s:down", "-9223372036854775807"});
    EXPECT_TRUE(admit_ok(p).admitted);
    EXPECT_EQ(get("s:up"), kMax);
    EXPECT_EQ(get("s:down"), kMin);
    EXPECT_LE(ttl("s:up"), 100);  // kept, not reset to 1000
    EXPECT_GT(ttl("s:up"), 90);
    EXPECT_GT(ttl("s:down"), 990);  // had none: set
}

// A counter gets its TTL from the increment that creates it (INCRBY answers
// the increment itself); later ones leave it. The gateway never writes a
// counter without one, so one found without (written by hand) keeps none.
TEST_F(AdmitScriptRedis, TtlSetWhenTheIncrementCreatesTheCounter) {
    AdmissionPlan p;
    p.admit = quads({{"t:new", 1, 1000}, {"t:nottl", 1, 1000}, {"t:short", 1, 1000}});
    c_.call({"SET", "t:nottl", "7"});
    c_.call({"SET", "t:short", "7", "EX", "50"});
    EXPECT_TRUE(admit_ok(p).admitted);
    EXPECT_GT(ttl("t:new"), 990);
    EXPECT_EQ(ttl("t:nottl"), -1);
    EXPECT_LE(ttl("t:short"), 50);
    // a second increment does not push the TTL back
    c_.call({"EXPIRE", "t:new", "500"});
    EXPECT_TRUE(admit_ok(p).admitted);
    EXPECT_LE(ttl("t:new"), 500);
    EXPECT_EQ(get("t:new"), 2);
    EXPECT_EQ(get("t:nottl"), 9);
}

TEST_F(AdmitScriptRedis, NoscriptFallsBackToEval) {
    ASSERT_EQ(c_.call({"SCRIPT", "FLUSH"}).type, T::Status);
    AdmissionPlan p;
    p.admit = quads({{"n:a", 1, 100}});
    const RespValue v = c_.call(cmd_admit(p, {}, true));
    EXPECT_TRUE(is_noscript_error(v)) << v.str;
    AdmissionResult r;
    std::string err;
    bool used_eval = false;
    ASSERT_TRUE(admit(p, r, err, &used_eval)) << err;
    EXPECT_TRUE(used_eval);
    EXPECT_TRUE(r.admitted);
    // EVAL cached it: EVALSHA works now
    ASSERT_TRUE(admit(p, r, err, &used_eval)) << err;
    EXPECT_FALSE(used_eval);
    EXPECT_EQ(get("n:a"), 2);
}

TEST_F(AdmitScriptRedis, BadCountersAreStoreErrors) {
    AdmissionPlan p;
    Check c;
    c.keys = {"b:k"};
    c.limit = 10;
    c.add = 1;
    p.checks = {c};
    p.admit = quads({{"b:k", 1, 100}});
    c_.call({"HSET", "b:k", "f", "v"});
    AdmissionResult r;
    std::string err;
    EXPECT_FALSE(admit(p, r, err));
    EXPECT_NE(err.find("WRONGTYPE"), std::string::npos) << err;
    c_.call({"DEL", "b:k"});
    c_.call({"SET", "b:k", "12abc"});
    err.clear();
    EXPECT_FALSE(admit(p, r, err));
    EXPECT_NE(err.find("not an integer"), std::string::npos) << err;
}

TEST_F(AdmitScriptRedis, MatchesExecuteAdmission) {
    // Random plans over a small key pool, run both in Redis and through
    // execute_admission; results and every counter must agree.
    std::mt19937_64 rng(20261121);
    const std::vector<std::string> pool = {"d:0", "d:1", "d:2", "d:3", "d:4", "d:5"};
    const std::int64_t big[] = {0,     1,         2,          5,         9007199254740991LL, 9007199254740992LL,
                                9007199254740993LL, 4611686018427387904LL, kMax - 1, kMax, -1, -9007199254740993LL,
                                kMin,  kMin + 1};
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    auto any_value = [&]() -> std::int64_t {
        if (rng() % 3 == 0) return big[pick(sizeof big / sizeof big[0])];
        return static_cast<std::int64_t>(rng() % 25) - 3;
    };
    RefKv ref;
    int admitted = 0, rejected = 0;
    for (int round = 0; round < 400; ++round) {
        if (rng() % 10 == 0) {  // poke a counter directly in both stores
            const std::string& k = pool[pick(pool.size())];
            const std::int64_t v = any_value();
            ref.values[k] = v;
            ASSERT_EQ(c_.call({"SET", k, std::to_string(v)}).type, T::Status);
        }
        AdmissionPlan p;
        const std::size_t nchecks = pick(4);
        for (std::size_t i = 0; i < nchecks; ++i) {
            Check c;
            for (std::size_t j = pick(3); j > 0; --j) c.keys.push_back(pool[pick(pool.size())]);
            c.limit = any_value();
            c.add = static_cast<std::int64_t>(rng() % 4) - 1;  // -1, 0, 1, 2
            c.kind = rng() % 2 ? ViolationKind::RateLimit : ViolationKind::Budget;
            c.retry_after = static_cast<std::int64_t>(i) + 1;
            c.message = "check " + std::to_string(i);
            p.checks.push_back(c);
        }
        // admit counters in quads (four keys, one delta), reject ones with one delta
        for (std::size_t i = pick(3); i > 0; --i) {
            const std::int64_t d = rng() % 8 == 0 ? any_value() : 1;
            for (int w = 0; w < kWindowCount; ++w) p.admit.push_back({pool[pick(pool.size())], d, 1000});
        }
        const std::int64_t rd = rng() % 8 == 0 ? any_value() : 1;
        for (std::size_t i = pick(3); i > 0; --i) p.reject.push_back({pool[pick(pool.size())], rd, 1000});
        AdmissionResult want;
        ASSERT_TRUE(execute_admission(ref, p, want));
        AdmissionResult got;
        std::string err;
        ASSERT_TRUE(admit(p, got, err)) << "round " << round << ": " << err;
        ASSERT_EQ(got.admitted, want.admitted) << "round " << round;
        ASSERT_EQ(got.check_index, want.check_index) << "round " << round;
        EXPECT_EQ(got.kind, want.kind);
        EXPECT_EQ(got.retry_after, want.retry_after);
        EXPECT_EQ(got.message, want.message);
        (got.admitted ? admitted : rejected)++;
        for (const std::string& k : pool) ASSERT_EQ(get(k), ref.get(k)) << "round " << round << " key " << k;
    }
    EXPECT_GT(admitted, 50);
    EXPECT_GT(rejected, 50);
}

TEST_F(AdmitScriptRedis, ReaderRefusesLongAndNestedReplies) {
    // MGET of 1025 keys: one array too many
    std::vector<std::string> mget = {"MGET"};
    for (int i = 0; i < 1025; ++i) mget.push_back("m:" + std::to_string(i));
    std::vector<RespValue> out;
    std::string err;
    {
        Client c;
        ASSERT_TRUE(c.connect(redis_port(), err)) << err;
        std::vector<std::string> ok_mget(mget.begin(), mget.end() - 1);
        ASSERT_TRUE(c.pipeline({ok_mget}, out, err)) << err;
        EXPECT_EQ(out[0].elements.size(), 1024u);
        EXPECT_FALSE(c.pipeline({mget}, out, err));
        EXPECT_EQ(err, "store reply array too long (1025 > 1024)");
    }
    {
        Client c;
        ASSERT_TRUE(c.connect(redis_port(), err)) << err;
        EXPECT_FALSE(c.pipeline({{"EVAL", "return {1, {2}}", "0"}}, out, err));
        EXPECT_EQ(err, "nested array in store reply");
    }
}

// The accounting batch as one script call: every counter incremented, a new
// counter given its TTL, an existing TTL never pushed back.
TEST_F(AdmitScriptRedis, AccountingScriptIncrementsAndSetsTtlOnce) {
    // two counters, a window quad each: every key with its window's TTL
    const std::vector<Incr> incrs{{"acc:a:min", 11, 120},    {"acc:a:hour", 11, 172800}, {"acc:a:day", 11, 3024000},
                                  {"acc:a:month", 11, 34560000}, {"acc:b:min", 7, 120}, {"acc:b:hour", 7, 172800},
                                  {"acc:b:day", 7, 3024000}, {"acc:b:month", 7, 34560000}};
    RespValue v = c_.call_wire(account_command(incrs, {}, 10, 1000, "op:t1", 3600, true));
    if (is_noscript_error(v)) v = c_.call_wire(account_command(incrs, {}, 10, 1000, "op:t1", 3600, false));
    ASSERT_EQ(v.type, RespValue::Type::Integer);
    EXPECT_EQ(v.integer, 8);
    EXPECT_EQ(c_.call({"GET", "acc:a:min"}).str, "11");
    EXPECT_EQ(c_.call({"GET", "acc:a:month"}).str, "11");
    EXPECT_EQ(c_.call({"GET", "acc:b:day"}).str, "7");
    EXPECT_GT(ttl("acc:b:min"), 100);
    EXPECT_LE(ttl("acc:b:min"), 120);
    EXPECT_GT(ttl("acc:b:hour"), 172700);
    EXPECT_LE(ttl("acc:b:hour"), 172800);
    EXPECT_GT(ttl("acc:a:month"), 34559900);
    c_.call({"EXPIRE", "acc:a:hour", "50"});
    v = c_.call_wire(account_command(incrs, {}, 10, 1000, "op:t2", 3600, true));   // loaded now: EVALSHA works
    ASSERT_EQ(v.type, RespValue::Type::Integer);
    EXPECT_EQ(c_.call({"GET", "acc:a:hour"}).str, "22");
    EXPECT_LE(ttl("acc:a:hour"), 50);            // the TTL was kept, not reset to 172800
    EXPECT_EQ(c_.call({"SCRIPT", "LOAD", account_script_source()}).str, account_script_sha1());
}

// ---- ops and cancels: a call that timed out is counted nowhere in the store ----

TEST_F(AdmitScriptRedis, CancelBeforeTheOpRunsLeavesATombstone) {
    Limits user;
    const std::vector<Scope> scopes = {{"user", "alice", &user}, {"total", "", nullptr}};
    const AdmissionPlan plan = build_admission_plan(scopes, kNow, false);
    const ReserveAmounts amounts;   // check mode
    RespValue c = c_.call_wire(cancel_admit_command(plan, amounts, "op:1", 3600));
    ASSERT_EQ(c.type, T::Integer) << c.str;
    EXPECT_EQ(c.integer, 0);
    RespValue v = c_.call(cmd_admit_op(plan, amounts, "op:1", 3600, false));   // the late call
    ASSERT_EQ(v.type, T::Array) << v.str;
    ASSERT_EQ(v.elements.size(), 1u);
    EXPECT_EQ(v.elements[0].integer, 2);
    for (const Incr& in : plan.admit) EXPECT_EQ(get(in.key), 0) << in.key;
    EXPECT_GT(ttl("op:1"), 3500);
}

TEST_F(AdmitScriptRedis, CancelAfterTheOpRanUndoesIt) {
    Limits user;
    user.requests_per_minute = 1;
    const std::vector<Scope> scopes = {{"user", "alice", &user}, {"total", "", nullptr}};
    const AdmissionPlan plan = build_admission_plan(scopes, kNow, false);
    const ReserveAmounts amounts;   // check mode
    RespValue v = c_.call(cmd_admit_op(plan, amounts, "op:a", 3600, false));
    ASSERT_EQ(v.type, T::Array) << v.str;
    EXPECT_EQ(v.elements[0].integer, 0);                                   // admitted
    v = c_.call(cmd_admit_op(plan, amounts, "op:r", 3600, false));
    ASSERT_EQ(v.type, T::Array) << v.str;
    EXPECT_EQ(v.elements[0].integer, 1);                                   // rejected
    for (const Incr& in : plan.admit) EXPECT_EQ(get(in.key), 1) << in.key;
    for (const Incr& in : plan.reject) EXPECT_EQ(get(in.key), 1) << in.key;
    EXPECT_EQ(c_.call_wire(cancel_admit_command(plan, amounts, "op:a", 3600)).integer, 1);
    EXPECT_EQ(c_.call_wire(cancel_admit_command(plan, amounts, "op:r", 3600)).integer, 1);
    for (const Incr& in : plan.admit) EXPECT_EQ(get(in.key), 0) << in.key;
    for (const Incr& in : plan.reject) EXPECT_EQ(get(in.key), 0) << in.key;
    EXPECT_EQ(c_.call_wire(cancel_admit_command(plan, amounts, "op:a", 3600)).integer, 0);   // idempotent
    for (const Incr& in : plan.admit) EXPECT_EQ(get(in.key), 0) << in.key;
    v = c_.call(cmd_admit_op(plan, amounts, "op:a", 3600, false));              // never runs twice
    EXPECT_EQ(v.elements[0].integer, 2);
    for (const Incr& in : plan.admit) EXPECT_EQ(get(in.key), 0) << in.key;
}

TEST_F(AdmitScriptRedis, BoundedAccountingOverflowsAndCancels) {
    const std::vector<Incr> plain = quads({{"p:tok", 11, 120}});
    auto group = [](const std::string& id) {
        BoundedIncrs g;
        g.member = "model:" + id;
        g.incrs = quads({{"m:" + id + ":req", 1, 120}, {"m:" + id + ":tok", 11, 120}});
        for (const Incr& in : quads({{"m:other:req", 1, 120}, {"m:other:tok", 11, 120}})) g.overflow_keys.push_back(in.key);
        return g;
    };
    auto call = [&](const std::vector<BoundedIncrs>& groups, const std::string& op) {
        RespValue v = c_.call_wire(account_command(plain, groups, 2, 1000, op, 3600, true));
        if (is_noscript_error(v)) v = c_.call_wire(account_command(plain, groups, 2, 1000, op, 3600, false));
        return v;
    };
    EXPECT_EQ(call({group("a"), group("b")}, "op:1").integer, 20);        // 4 + 2 x 8 counters
    EXPECT_EQ(call({group("c")}, "op:2").integer, 12);                    // the set is full: overflow
    EXPECT_EQ(call({group("a")}, "op:3").integer, 12);                    // a known id keeps its own
    EXPECT_EQ(get("m:a:req"), 2);
    EXPECT_EQ(get("m:b:req"), 1);
    EXPECT_EQ(get("m:c:req"), 0);
    EXPECT_EQ(get("m:other:req"), 1);
    EXPECT_EQ(get("m:other:tok"), 11);
    EXPECT_EQ(get("p:tok"), 33);
    EXPECT_EQ(c_.call({"SCARD", kStatsIdsKey}).integer, 2);
    EXPECT_GT(ttl(kStatsIdsKey), 900);
    EXPECT_EQ(c_.call_wire(cancel_account_command(plain, {group("c")}, "op:2", 3600)).integer, 1);
    EXPECT_EQ(get("m:other:req"), 0);
    EXPECT_EQ(get("m:other:tok"), 0);
    EXPECT_EQ(get("p:tok"), 22);
    EXPECT_EQ(call({group("c")}, "op:2").integer, -1);                    // cancelled: writes nothing
    EXPECT_EQ(get("p:tok"), 22);
}

TEST_F(AdmitScriptRedis, AccountingSaturatesNearTheMaximum) {
    c_.call({"SET", "sat:a", "9223372036854775805"});
    c_.call({"EXPIRE", "sat:a", "500"});
    const std::vector<Incr> incrs = quads({{"sat:a", 7, 120}, {"sat:b", 7, 120}});
    RespValue v = c_.call_wire(account_command(incrs, {}, 10, 1000, "op:s1", 3600, false));
    ASSERT_EQ(v.type, T::Integer) << v.str;
    EXPECT_EQ(c_.call({"GET", "sat:a"}).str, "9223372036854775807");
    EXPECT_GT(ttl("sat:a"), 400);                                          // its TTL kept
    EXPECT_EQ(get("sat:b"), 7);
    v = c_.call_wire(account_command(incrs, {}, 10, 1000, "op:s2", 3600, false));
    ASSERT_EQ(v.type, T::Integer) << v.str;
    EXPECT_EQ(c_.call({"GET", "sat:a"}).str, "9223372036854775807");
    EXPECT_EQ(get("sat:b"), 14);
}

// Reservations (core/metering/reservation.h): the admission reserves, the
// accounting script settles: the real usage in, the reservation out, in one
// call; a release of a counter that lapsed touches nothing. Redis keeps a
// scope's reserved counters as fields of one hash (reserved_hash_field).
// A lease's grant (core/metering/lease.h) is added only when the checks
// pass with it too, exactly as LeaseBook reckons from the reply; a Hit
// checks the counters alone and writes no reservation.
TEST_F(AdmitScriptRedis, LeaseGrantsFitOrAreLeftOutAndHitsWriteNothing) {
    Limits user;
    user.tokens_per_day = 10000;
    const std::vector<Scope> scopes = {{"user", "alice", &user}, {"total", "all", nullptr}};
    const AdmissionPlan plan = build_admission_plan(scopes, kNow, false, 600);
    ASSERT_EQ(plan.reserve.size(), 1u);
    const std::string reserved = slot_key(plan.reserve[0]);
    const ReserveAmounts w{1000, 0};
    auto run = [&](const LeaseTicket& t) {
        std::string cmd;
        EXPECT_TRUE(append_admit_command(cmd, plan, w, false, {}, 0, &t));
        AdmissionResult r;
        std::string err;
        EXPECT_TRUE(decode_admit_reply(c_.call_wire(cmd), plan, r, err)) << err;
        return r;
    };
    LeaseTicket grant;
    grant.parts.resize(1);
    grant.parts[0].use = LeaseUse::Grant;
    grant.parts[0].extra = 5000;
    AdmissionResult r = run(grant);
    ASSERT_TRUE(r.admitted);
    EXPECT_TRUE(grant_fits(plan.checks[0], r.used[0], 1000, 5000));
    EXPECT_EQ(rget(reserved), 6000);                  // 0 + 1000 + 5000 <= 10000
    r = run(grant);
    ASSERT_TRUE(r.admitted);
    EXPECT_EQ(r.used[0], 6000);
    EXPECT_FALSE(grant_fits(plan.checks[0], r.used[0], 1000, 5000));
    EXPECT_EQ(rget(reserved), 7000);                  // 6000 + 1000 + 5000 > 10000: its own only
    grant.parts[0].extra = 2000;
    r = run(grant);
    ASSERT_TRUE(r.admitted);
    EXPECT_EQ(rget(reserved), 10000);                 // 7000 + 1000 + 2000 == 10000 fits
    // A Hit: the reserved sum is not read, nothing is reserved.
    LeaseTicket hit;
    hit.parts.resize(1);
    hit.parts[0].use = LeaseUse::Hit;
    r = run(hit);
    ASSERT_TRUE(r.admitted);
    EXPECT_EQ(r.used[0], 0);
    EXPECT_EQ(rget(reserved), 10000);
    // Its own reservation no longer fits: refused, nothing written.
    r = run(grant);
    EXPECT_FALSE(r.admitted);
    EXPECT_EQ(rget(reserved), 10000);
    // A Hit once the spent counters reach the limit is refused too.
    for (const std::string& k : plan.checks[0].keys) c_.call({"SET", k, "5000"});
    EXPECT_FALSE(run(hit).admitted);
    // The cancel of an admission takes back what it wrote, not the Hits.
    EXPECT_TRUE(admission_releases(plan, w, &hit).empty());
    ASSERT_EQ(admission_releases(plan, w, &grant).size(), 1u);
    EXPECT_EQ(admission_releases(plan, w, &grant)[0].amount, 1000);
}

TEST_F(AdmitScriptRedis, ReservationsHoldAndSettle) {
    Limits user;
    user.tokens_per_day = 1000;
    const std::vector<Scope> scopes = {{"user", "alice", &user}, {"total", "all", nullptr}};
    AdmissionPlan plan = build_admission_plan(scopes, kNow, false, 600);
    const ReserveAmounts amounts{300, 0};
    int admitted = 0;
    for (int i = 0; i < 5; ++i) admitted += admit_ok(plan, amounts).admitted ? 1 : 0;
    EXPECT_EQ(admitted, 3);                                    // 3 * 300 <= 1000 < 4 * 300
    const std::vector<Release> rel = admission_releases(plan, amounts);
    ASSERT_EQ(plan.reserve.size(), 1u);
    const std::string reserved = slot_key(plan.reserve[0]);
    const std::string hash = hash_of(reserved);
    EXPECT_EQ(hash, "llmgw:user:alice:rsv");
    EXPECT_EQ(rget(reserved), 900);
    EXPECT_EQ(c_.call({"HLEN", hash}).integer, 1);
    EXPECT_GE(ttl(hash), 600);
    EXPECT_LE(ttl(hash), reserve_key_ttl(kNow, 600));
    // One settles: 100 real tokens in, its 300 out.
    const std::vector<Incr> usage = quads({{key("user", "alice", "tokin", Window::Day), 80, 1000},
                                           {key("user", "alice", "tokout", Window::Day), 20, 1000}});
    RespValue v = c_.call_wire(account_command(usage, {}, 10, 1000, "op:r1", 3600, false, rel));
    ASSERT_EQ(v.type, T::Integer) << v.str;
    EXPECT_EQ(rget(reserved), 600);
    EXPECT_EQ(get(key("user", "alice", "tokin", Window::Day)), 80);
    AdmissionResult r = admit_ok(plan, amounts);               // 100 + 600 + 300 <= 1000
    EXPECT_TRUE(r.admitted);
    EXPECT_EQ(r.used[0], 700);
    // The rest settle with no usage: the field stays at 0, the hash keeps
    // its TTL, and the slot's next reservation does not set it again.
    for (int i = 0; i < 3; ++i) c_.call_wire(account_command({}, {}, 10, 1000, "op:z" + std::to_string(i), 3600, false, rel));
    EXPECT_TRUE(rexists(reserved));
    EXPECT_EQ(rget(reserved), 0);
    c_.call({"EXPIRE", hash, "5000"});
    EXPECT_TRUE(admit_ok(plan, amounts).admitted);
    EXPECT_EQ(rget(reserved), 300);
    EXPECT_GT(ttl(hash), 4000);
    EXPECT_LE(ttl(hash), 5000);
    // A late settle: the hash has expired; it is not created negative.
    c_.call({"DEL", hash});
    v = c_.call_wire(account_command(usage, {}, 10, 1000, "op:late", 3600, false, rel));
    ASSERT_EQ(v.type, T::Integer) << v.str;
    EXPECT_EQ(c_.call({"EXISTS", hash}).integer, 0);
    EXPECT_EQ(get(key("user", "alice", "tokin", Window::Day)), 160);
}

// The live slots count, a lapsed slot does not and its field is deleted by
// the scope's next admission; tokens and cost of one scope share its hash; a
// release of a field that lapsed leaves the others alone.
TEST_F(AdmitScriptRedis, ReservedFieldsOfLapsedSlotsAreDeleted) {
    Limits user;
    user.tokens_per_day = 1000;
    user.cost_per_day_micros = 1000;
    const std::vector<Scope> scopes = {{"user", "bob", &user}};
    AdmissionPlan plan = build_admission_plan(scopes, kNow, false, 600);
    const std::int64_t slot = reserve_slot(kNow, 600);
    const std::string tok_live = reserved_key("user", "bob", Measure::Tokens, slot - (kReserveSlots - 1));
    const std::string tok_lapsed = reserved_key("user", "bob", Measure::Tokens, slot - kReserveSlots);
    const std::string cost_live = reserved_key("user", "bob", Measure::Cost, slot - 1);
    const std::string hash = hash_of(tok_live);
    ASSERT_EQ(hash, hash_of(cost_live));
    std::string h, f_live, f_lapsed, f_cost;
    reserved_hash_field(tok_live, h, f_live);
    reserved_hash_field(tok_lapsed, h, f_lapsed);
    reserved_hash_field(cost_live, h, f_cost);
    c_.call({"HSET", hash, f_live, "400", f_lapsed, "500", f_cost, "950"});
    c_.call({"EXPIRE", hash, "100"});
    ReserveAmounts amounts{100, 40};
    AdmissionResult r = admit_ok(plan, amounts);
    ASSERT_EQ(r.used.size(), 2u);
    EXPECT_TRUE(r.admitted);                                   // 950 + 40 <= 1000; 400 + 100 <= 1000
    EXPECT_EQ(r.used[0], 400);                                 // the lapsed 500 not counted
    EXPECT_EQ(r.used[1], 950);
    EXPECT_FALSE(rexists(tok_lapsed));                         // and deleted
    EXPECT_EQ(rget(reserved_key("user", "bob", Measure::Tokens, slot)), 100);
    EXPECT_EQ(rget(reserved_key("user", "bob", Measure::Cost, slot)), 40);
    EXPECT_EQ(c_.call({"HLEN", hash}).integer, 4);
    EXPECT_GT(ttl(hash), 590);                                 // moved on to the new slot's
    amounts = ReserveAmounts{100, 20};
    r = admit_ok(plan, amounts);
    EXPECT_FALSE(r.admitted);                                  // 950 + 40 + 20 > 1000
    EXPECT_EQ(r.check_index, 1);
    // A release of the lapsed field: not brought back; the others stay.
    AdmissionPlan lapsed;
    lapsed.reserve = {release_of(tok_lapsed), release_of(cost_live)};
    const std::vector<Release> rel = admission_releases(lapsed, ReserveAmounts{500, 950});
    RespValue v = c_.call_wire(account_command({}, {}, 10, 1000, "op:l", 3600, false, rel));
    ASSERT_EQ(v.type, T::Integer) << v.str;
    EXPECT_FALSE(rexists(tok_lapsed));
    EXPECT_EQ(rget(cost_live), 0);
    EXPECT_EQ(rget(reserved_key("user", "bob", Measure::Tokens, slot)), 100);
    // A field that is not a number is an error, not a zero.
    c_.call({"HSET", hash, f_live, "lots"});
    v = c_.call(cmd_admit(plan, amounts, false));
    EXPECT_EQ(v.type, T::Error);
    EXPECT_NE(v.str.find("not an integer"), std::string::npos) << v.str;
}

// A field released to 0 in a slot before the current one is deleted by the
// scope's next admission (no reservation is made in it any more); one at 0
// in the current slot, or above 0 in an older one, stays; a new field never
// shortens the hash's TTL.
TEST_F(AdmitScriptRedis, FieldsReleasedToZeroOfEarlierSlotsAreDeleted) {
    Limits user;
    user.tokens_per_day = 1000;
    user.cost_per_day_micros = 1000;
    const AdmissionPlan plan = build_admission_plan({{"user", "dee", &user}}, kNow, false, 600);
    const std::int64_t slot = reserve_slot(kNow, 600);
    const std::string hash = "llmgw:user:dee:rsv";
    auto field = [](bool tokens, std::int64_t s) {
        std::string f;
        assign_reserved_field(f, tokens ? kReservedTokensTag : kReservedCostTag, s);
        return f;
    };
    c_.call({"HSET", hash, field(true, slot - 1), "0", field(false, slot - 2), "7", field(true, slot), "0"});
    c_.call({"EXPIRE", hash, "5000"});
    AdmissionResult r = admit_ok(plan, ReserveAmounts{10, 0});
    EXPECT_TRUE(r.admitted);
    ASSERT_EQ(r.used.size(), 2u);
    EXPECT_EQ(r.used[0], 0);
    EXPECT_EQ(r.used[1], 7);                                   // still held in an older slot
    EXPECT_EQ(c_.call({"HEXISTS", hash, field(true, slot - 1)}).integer, 0);   // released to 0 before: deleted
    EXPECT_EQ(c_.call({"HGET", hash, field(false, slot - 2)}).str, "7");
    EXPECT_EQ(c_.call({"HGET", hash, field(true, slot)}).str, "10");
    EXPECT_GT(ttl(hash), 4000);
    r = admit_ok(plan, ReserveAmounts{0, 5});                  // a new field: the current slot's cost
    EXPECT_TRUE(r.admitted);
    EXPECT_EQ(c_.call({"HGET", hash, field(false, slot)}).str, "5");
    EXPECT_GT(ttl(hash), 4000);                                // not shortened to the slot's
    c_.call({"DEL", hash});
    EXPECT_TRUE(admit_ok(plan, ReserveAmounts{0, 5}).admitted);   // a new hash gets the slot's TTL
    EXPECT_GE(ttl(hash), 600);
    EXPECT_LE(ttl(hash), reserve_key_ttl(kNow, 600));
}

// A reservation made by an op-guarded admission is undone by its cancel,
// like the rest of the admission; a new reserved field gives its hash a TTL once.
TEST_F(AdmitScriptRedis, AReservationIsCancelledWithItsAdmission) {
    Limits user;
    user.cost_per_day_micros = 10000;
    const std::vector<Scope> scopes = {{"user", "alice", &user}};
    AdmissionPlan plan = build_admission_plan(scopes, kNow, false, 600);
    const ReserveAmounts amounts{0, 700};
    const std::string rk = slot_key(plan.reserve.at(0));
    const std::string hash = hash_of(rk);
    RespValue v = c_.call(cmd_admit_op(plan, amounts, "op:res", 3600, false));
    ASSERT_EQ(v.type, T::Array) << v.str;
    EXPECT_EQ(v.elements[0].integer, 0);
    EXPECT_EQ(rget(rk), 700);
    const long long t1 = ttl(hash);
    EXPECT_GT(t1, 600);
    c_.call({"EXPIRE", hash, "5000"});               // a second reservation must not reset it
    v = c_.call(cmd_admit_op(plan, amounts, "op:res2", 3600, false));
    ASSERT_EQ(v.type, T::Array) << v.str;
    EXPECT_EQ(rget(rk), 1400);
    EXPECT_GT(ttl(hash), 4000);
    EXPECT_EQ(c_.call_wire(cancel_admit_command(plan, amounts, "op:res2", 3600)).integer, 1);
    EXPECT_EQ(rget(rk), 700);
    EXPECT_EQ(get(key("user", "alice", "req", Window::Day)), 1);
    // A cancel after the hash expired does not bring it back.
    c_.call({"DEL", hash});
    EXPECT_EQ(c_.call_wire(cancel_admit_command(plan, amounts, "op:res", 3600)).integer, 1);
    EXPECT_EQ(c_.call({"EXISTS", hash}).integer, 0);
    EXPECT_EQ(get(key("user", "alice", "req", Window::Day)), 0);
}

// The accounting command written from a batch's deltas (key-less) is
// byte for byte the command written from the Incrs of the same deltas.
TEST(AdmitScript, AccountingFromDeltasEqualsFromIncrs) {
    ScopeDelta user;
    user.kind = "user";
    user.id = "alice";
    user.delta[kMetricReq] = 3;
    user.delta[kMetricTokIn] = 11;
    user.delta[kMetricCost] = 7;
    ScopeDelta model;
    model.kind = "model";
    model.id = "mock/gpt-4o";
    model.overflow_id = "mock/other";
    model.delta[kMetricTokOut] = 5;
    ScopeDelta empty;
    empty.kind = "group";
    empty.id = "eng";
    ScopeDelta late = user;
    late.delta[kMetricTokIn] = -2;   // a minute before: other buckets
    const std::vector<ScopeDelta> now_deltas = {user, model, empty};
    const std::vector<ScopeDelta> before_deltas = {late};
    const WindowStamps at_now(1795268700, false), at_before(1795268640, false);
    std::vector<Release> rel;
    const std::string rec = "llmgw:user:alice:rsv";
    rel.push_back(Release{rec, Measure::Tokens, 42, 9});

    // The Incr form (what a cancel names).
    AccountIncrs incrs;
    append_account_incrs(incrs, now_deltas, 1795268700);
    append_account_incrs(incrs, before_deltas, 1795268640);
    const std::vector<Incr>& plain = incrs.plain;
    const std::vector<BoundedIncrs>& groups = incrs.groups;
    ASSERT_EQ(plain.size(), 6u * 4u) << "user: req, tokin, cost now and a minute before";
    ASSERT_EQ(groups.size(), 1u);
    EXPECT_EQ(groups[0].member, "model:mock/gpt-4o");
    EXPECT_EQ(groups[0].overflow_keys[0], counter_key("model", "mock/other", "tokout", Window::Min, at_now.buckets[0]));
    for (bool by_sha : {true, false}) {
        std::string a, b;
        ASSERT_TRUE(append_account_command(a, plain, groups, 1000, 3024000, "llmgw:op:1", 300, by_sha, rel));
        ASSERT_TRUE(append_account_deltas(b, {{&at_now, &now_deltas}, {&at_before, &before_deltas}}, 1000, 3024000,
                                          "llmgw:op:1", 300, by_sha, rel));
        EXPECT_EQ(a, b);
    }
    // Nothing but releases (no deltas): the same too.
    std::string a, b;
    ASSERT_TRUE(append_account_command(a, {}, {}, 1000, 3024000, "llmgw:op:2", 300, true, rel));
    ASSERT_TRUE(append_account_deltas(b, {}, 1000, 3024000, "llmgw:op:2", 300, true, rel));
    EXPECT_EQ(a, b);
}

// A plan built for leases (a shared store): every check reads its scope's
// reserved counters of its measure, requests ("r" fields) included, and a
// request that reserves nothing writes nothing there.
TEST_F(AdmitScriptRedis, LeasedPlanChecksSumTheReservedCountersOfEveryMeasure) {
    Limits user;
    user.requests_per_minute = 5;
    user.tokens_per_day = 1000;
    const AdmissionPlan plan = build_admission_plan({{"user", "lee", &user}}, kNow, false, 0, false, 60);
    ASSERT_TRUE(plan.leased);
    ASSERT_EQ(plan.reserve.size(), 2u);   // requests, tokens
    EXPECT_EQ(plan.reserve[0].measure, Measure::Requests);
    const std::string hash = "llmgw:user:lee:rsv";
    AdmissionResult r = admit_ok(plan);
    ASSERT_TRUE(r.admitted) << r.message;
    EXPECT_EQ(r.used, (std::vector<std::int64_t>{0, 0}));
    EXPECT_EQ(c_.call({"EXISTS", hash}).integer, 0);   // nothing reserved
    std::string rf, tf;
    assign_reserved_field(rf, kReservedRequestsTag, plan.reserve[0].slot);
    assign_reserved_field(tf, kReservedTokensTag, plan.reserve[1].slot);
    c_.call({"HSET", hash, rf, "3", tf, "999"});
    r = admit_ok(plan);
    ASSERT_TRUE(r.admitted) << r.message;
    EXPECT_EQ(r.used, (std::vector<std::int64_t>{4, 999}));   // 1 counted + 3 held; 999 held
    EXPECT_EQ(r.held, (std::vector<std::int64_t>{3, 999}));   // what the reserved counters hold of them
    r = admit_ok(plan);
    EXPECT_FALSE(r.admitted);                                // 2 + 3 + 1 > 5
    EXPECT_EQ(r.check_index, 0);
    c_.call({"HSET", hash, tf, "1000"});
    c_.call({"HSET", hash, rf, "0"});
    r = admit_ok(plan);
    EXPECT_FALSE(r.admitted);                                // tokens: 1000 held, not below the limit
    EXPECT_EQ(r.check_index, 1);
}

// A lease's grant in the background: added when every check of its
// reservation has sum + grant <= limit, else nothing; no counter written.
TEST_F(AdmitScriptRedis, BackgroundGrantFitsOrIsLeftOut) {
    Limits user;
    user.requests_per_minute = 100;
    user.requests_per_day = 1000;
    const AdmissionPlan plan = build_admission_plan({{"user", "gus", &user}}, kNow, false, 0, false, 60);
    ASSERT_EQ(plan.reserve.size(), 1u);
    std::string rf;
    assign_reserved_field(rf, kReservedRequestsTag, plan.reserve[0].slot);
    const std::string hash = "llmgw:user:gus:rsv";
    auto grant = [&](std::int64_t extra, std::vector<std::int64_t>& used) {
        std::string cmd;
        EXPECT_TRUE(append_grant_command(cmd, plan, 0, extra, false));
        const RespValue v = c_.call_wire(cmd);
        std::string err;
        EXPECT_TRUE(decode_grant_reply(v, 2, used, err)) << err;
    };
    std::vector<std::int64_t> used;
    grant(60, used);
    EXPECT_EQ(used, (std::vector<std::int64_t>{0, 0}));
    EXPECT_EQ(c_.call({"HGET", hash, rf}).str, "60");
    EXPECT_GT(ttl(hash), 0);
    grant(41, used);                                        // 60 + 41 > 100: left out
    EXPECT_EQ(used, (std::vector<std::int64_t>{60, 60}));
    EXPECT_EQ(c_.call({"HGET", hash, rf}).str, "60");
    grant(40, used);
    EXPECT_EQ(c_.call({"HGET", hash, rf}).str, "100");
    EXPECT_EQ(get(key("user", "gus", "req", Window::Min)), 0);   // no counter written
    grant(1, used);                                         // at the limit: refused, nothing written
    EXPECT_EQ(used, (std::vector<std::int64_t>{100, 100}));
    EXPECT_EQ(c_.call({"HGET", hash, rf}).str, "100");
    std::string err;
    EXPECT_FALSE(decode_grant_reply(RespValue{}, 2, used, err));
    EXPECT_FALSE(err.empty());
}
