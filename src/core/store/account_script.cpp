// The accounting script and its command (see account_script.h).
#include "core/store/account_script.h"

#include "core/metering/keys.h"
#include "core/store/script_parts.h"

namespace llmgw {

namespace {

// KEYS[1]: the set of statistics ids; in the cluster layout, a call with no
// statistics group (another slot's) names its op key there instead, since
// every key a cluster script names must be in the call's slot.
std::string_view ids_key(bool groups, std::string_view op_key) {
    return key_layout() == KeyLayout::Plain || groups ? stats_ids_key() : op_key;
}

// The accounting batch with its op guard as one script call: this head,
// kBumpLua, then the body below (the layout in account_script.h). An
// increment that would pass INT64_MAX (INCRBY refuses it: "increment or
// decrement would overflow") sets the counter to INT64_MAX instead,
// keeping its TTL, like the shared-memory store and the admission script.
const char kAccountScript[] = R"LUA(-- llm_gateway accounting v7
)LUA";

const char kAccountScriptTail[] = R"LUA(local ids, op, maxids, idsttl, opttl = KEYS[1], KEYS[2], tonumber(ARGV[1]), ARGV[2], ARGV[3]
if not redis.call('SET', op, 'w', 'NX', 'EX', opttl) then return -1 end
local choices = 'w'
local k, a, n = 3, 4, 0
-- the windows' TTLs; the counters come in quads, one delta per quad
local TTL
TTL, a = window_ttls(a)
local W = #TTL
local nplain = tonumber(ARGV[a]); a = a + 1
local e = bump_quads(k, a, nplain, TTL)
if e then return e end
k = k + nplain * W; a = a + nplain; n = n + nplain * W
local ngroups = tonumber(ARGV[a]); a = a + 1
for g = 1, ngroups do
  local member, nq = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  local cnt = nq * W
  local off = cnt
  if redis.call('SISMEMBER', ids, member) == 1 then
    off = 0
  elseif redis.call('SCARD', ids) < maxids then
    redis.call('SADD', ids, member)
    if redis.call('PTTL', ids) == -1 then redis.call('EXPIRE', ids, idsttl) end
    off = 0
  end
  if off == 0 then choices = choices .. '0' else choices = choices .. '1' end
  e = bump_quads(k + off, a, nq, TTL)
  if e then return e end
  a = a + nq; n = n + cnt
  k = k + 2 * cnt
end
local nrel = tonumber(ARGV[a] or '0') or 0
a = a + 1
-- the releases: KEYS the scope's hash, ARGV field, -amount; a field that
-- had lapsed (or a hash that had expired) comes back negative and is
-- deleted at once (a field at 0 stays until its slot lapses)
for i = 1, nrel do
  if redis.call('HINCRBY', KEYS[k], ARGV[a], ARGV[a + 1]) < 0 then redis.call('HDEL', KEYS[k], ARGV[a]) end
  k = k + 1; a = a + 2
end
redis.call('SET', op, choices, 'EX', opttl)
return n
)LUA";

}  // namespace

const std::string& account_script_source() {
    static const std::string source = std::string(kAccountScript) + kBumpLua + kAccountScriptTail;
    return source;
}

const std::string& account_script_sha1() { return script_sha1<account_script_source>(); }

bool append_account_command(std::string& out, const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                            std::int64_t max_ids, std::int64_t ids_ttl, std::string_view op_key, std::int64_t op_ttl,
                            bool by_sha, const std::vector<Release>& releases) {
    const std::size_t nrel = releases.size();
    WindowTtls ttls;
    if (!add_quads(ttls, plain)) return false;
    std::size_t nkeys = 2 + plain.size() + nrel,
                nargs = 4 + 1 + kWindowCount + quad_args(plain) + (nrel > 0 ? 1 + 2 * nrel : 0);
    for (const BoundedIncrs& g : groups) {
        if (g.incrs.size() != g.overflow_keys.size() || !add_quads(ttls, g.incrs)) return false;
        nkeys += 2 * g.incrs.size();
        nargs += 1 + quad_args(g.incrs);
    }
    const std::size_t mark = out.size();
    try {
        RespWriter w(out);
        write_script_head(w, nargs, by_sha, account_script_sha1(), account_script_source(),
                          nkeys);
        w.arg(ids_key(!groups.empty(), op_key));
        w.arg(op_key);
        for (const Incr& in : plain) w.arg(in.key);
        for (const BoundedIncrs& g : groups) {
            for (const Incr& in : g.incrs) w.arg(in.key);
            for (const std::string& k : g.overflow_keys) w.arg(k);
        }
        write_release_keys(w, releases);
        w.arg(max_ids);
        w.arg(ids_ttl);
        w.arg(op_ttl);
        write_window_ttls(w, ttls);
        write_quad_deltas(w, plain);
        w.arg(static_cast<std::int64_t>(groups.size()));
        for (const BoundedIncrs& g : groups) {
            w.arg(g.member);
            write_quad_deltas(w, g.incrs);
        }
        if (nrel > 0) write_release_args(w, releases);
        return true;
    } catch (...) {
        out.resize(mark);
        return false;
    }
}

void append_account_incrs(AccountIncrs& out, const std::vector<ScopeDelta>& deltas, std::time_t now) {
    const WindowStamps at(now, false);   // the windows' buckets, once for the deltas
    out.plain.reserve(out.plain.size() + deltas.size() * 3 * kWindowCount);
    std::vector<Incr> over;
    for (const ScopeDelta& d : deltas) {
        if (!d.any()) continue;
        if (d.overflow_id.empty()) {
            append_incrs(d, at, out.plain);
            continue;
        }
        BoundedIncrs g;
        g.member.assign(d.kind).append(":").append(d.id);
        append_incrs(d, at, g.incrs);
        ScopeDelta o = d;
        o.id = d.overflow_id;
        over.clear();
        append_incrs(o, at, over);
        g.overflow_keys.reserve(over.size());
        for (Incr& i : over) g.overflow_keys.push_back(std::move(i.key));
        out.groups.push_back(std::move(g));
    }
}

namespace {

// The quads of one delta's metrics (zero deltas skipped), in metric order.
template <typename F>
void each_quad(const ScopeDelta& d, F f) {
    for (int m = 0; m < kMetricCount; ++m) {
        if (d.delta[m] != 0) f(static_cast<Metric>(m), d.delta[m]);
    }
}

void write_quad_keys(RespWriter& w, const WindowStamps& at, std::string_view kind, std::string_view id, Metric m) {
    const std::string_view metric = metric_name(m);
    for (int i = 0; i < kWindowCount; ++i) {
        const Window win = static_cast<Window>(i);
        put_counter_key(w.arg_space(counter_key_size(kind, id, metric, win, at.buckets[i])), kind, id, metric, win,
                        at.buckets[i]);
    }
}

}  // namespace

bool append_account_deltas(std::string& out, const std::vector<StampedDeltas>& batch, std::int64_t max_ids,
                           std::int64_t ids_ttl, std::string_view op_key, std::int64_t op_ttl, bool by_sha,
                           const std::vector<Release>& releases) {
    const std::size_t nrel = releases.size();
    std::size_t nplain = 0, ngroups = 0, nbounded = 0;   // quads
    WindowTtls ttls;
    for (const StampedDeltas& s : batch) {
        for (int i = 0; i < kWindowCount; ++i) {
            if (ttls.known && ttls.ttl[i] != s.at->ttls[i]) return false;
            ttls.ttl[i] = s.at->ttls[i];
        }
        ttls.known = true;
        for (const ScopeDelta& d : *s.deltas) {
            const std::size_t q = d.metrics();
            if (q == 0) continue;
            if (d.overflow_id.empty()) {
                nplain += q;
            } else {
                ++ngroups;
                nbounded += q;
            }
        }
    }
    const std::size_t nkeys = 2 + kWindowCount * (nplain + 2 * nbounded) + nrel;
    const std::size_t nargs = 4 + 1 + kWindowCount + (1 + nplain) + ngroups * 2 + nbounded + (nrel > 0 ? 1 + 2 * nrel : 0);
    const std::size_t mark = out.size();
    try {
        RespWriter w(out);
        std::string key;
        write_script_head(w, nargs, by_sha, account_script_sha1(), account_script_source(), nkeys);
        w.arg(ids_key(ngroups > 0, op_key));
        w.arg(op_key);
        for (const StampedDeltas& s : batch) {
            for (const ScopeDelta& d : *s.deltas) {
                if (!d.overflow_id.empty()) continue;
                each_quad(d, [&](Metric m, std::int64_t) { write_quad_keys(w, *s.at, d.kind, d.id, m); });
            }
        }
        for (const StampedDeltas& s : batch) {
            for (const ScopeDelta& d : *s.deltas) {
                if (d.overflow_id.empty()) continue;
                each_quad(d, [&](Metric m, std::int64_t) { write_quad_keys(w, *s.at, d.kind, d.id, m); });
                each_quad(d, [&](Metric m, std::int64_t) { write_quad_keys(w, *s.at, d.kind, d.overflow_id, m); });
            }
        }
        write_release_keys(w, releases);
        w.arg(max_ids);
        w.arg(ids_ttl);
        w.arg(op_ttl);
        write_window_ttls(w, ttls);
        w.arg(static_cast<std::int64_t>(nplain));
        for (const StampedDeltas& s : batch) {
            for (const ScopeDelta& d : *s.deltas) {
                if (d.overflow_id.empty()) each_quad(d, [&w](Metric, std::int64_t v) { w.arg(v); });
            }
        }
        w.arg(static_cast<std::int64_t>(ngroups));
        for (const StampedDeltas& s : batch) {
            for (const ScopeDelta& d : *s.deltas) {
                const std::size_t q = d.metrics();
                if (d.overflow_id.empty() || q == 0) continue;
                key.assign(d.kind).append(":").append(d.id);
                w.arg(key);
                w.arg(static_cast<std::int64_t>(q));
                each_quad(d, [&w](Metric, std::int64_t v) { w.arg(v); });
            }
        }
        if (nrel > 0) write_release_args(w, releases);
        return true;
    } catch (...) {
        out.resize(mark);
        return false;
    }
}

std::string account_command(const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                            std::int64_t max_ids, std::int64_t ids_ttl, std::string_view op_key, std::int64_t op_ttl,
                            bool by_sha, const std::vector<Release>& releases) {
    std::string out;
    if (!append_account_command(out, plain, groups, max_ids, ids_ttl, op_key, op_ttl, by_sha, releases)) return {};
    return out;
}

}  // namespace llmgw
