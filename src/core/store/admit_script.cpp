// The admission script and the store command builders (see admit_script.h).
#include "core/store/admit_script.h"

#include "core/metering/keys.h"
#include "core/metering/reservation.h"

#include <openssl/evp.h>

#include <algorithm>
#include <new>
#include <stdexcept>
#include <utility>

namespace llmgw {

namespace {

// The saturating increment of both counter scripts: an increment that would
// pass INT64_MAX (INCRBY refuses it) sets the counter to the bound instead,
// keeping its TTL. A counter gets its TTL when INCRBY answers the increment
// itself, i.e. it created the counter (or found it at 0, when setting the
// TTL again only lengthens the life of a bucket that is read by its key):
// one command per counter instead of INCRBY and PTTL.
const char kBump[] = R"LUA(local function bump(key, delta, ttl)
  local r = redis.pcall('INCRBY', key, delta)
  if type(r) == 'table' and r.err then
    if not string.find(r.err, 'overflow', 1, true) then return r end
    local pt = redis.call('PTTL', key)
    local sat = '9223372036854775807'
    if string.sub(delta, 1, 1) == '-' then sat = '-9223372036854775808' end
    redis.call('SET', key, sat)
    if pt > 0 then redis.call('PEXPIRE', key, pt) else redis.call('EXPIRE', key, ttl) end
  elseif r == tonumber(delta) then
    redis.call('EXPIRE', key, ttl)
  end
  return nil
end
)LUA";

// Redis runs Lua 5.1: numbers are doubles and globals are forbidden. Every
// int64 stays decimal text until split into hi * 1e9 + lo (both exact as
// doubles), so sums and comparisons are exact over the whole int64 range.
const char kScript[] = R"LUA(-- llmgw admission v3: KEYS/ARGV layout in src/core/store/admit_script.h
local B = 1000000000
local function split(s)
  local neg = string.sub(s, 1, 1) == '-'
  if neg then s = string.sub(s, 2) end
  local n = string.len(s)
  local hi, lo = 0, 0
  if n > 9 then
    hi = tonumber(string.sub(s, 1, n - 9))
    lo = tonumber(string.sub(s, n - 8))
  else
    lo = tonumber(s)
  end
  if neg then return -hi, -lo end
  return hi, lo
end
local function norm(h, l)
  while l < 0 do l = l + B; h = h - 1 end
  while l >= B do l = l - B; h = h + 1 end
  return h, l
end
local function less(h1, l1, h2, l2)
  if h1 ~= h2 then return h1 < h2 end
  return l1 < l2
end
local function text(h, l)
  if h < 0 then return '0' end
  if h == 0 then return string.format('%d', l) end
  return string.format('%d%09d', h, l)
end
)LUA";

// The rest of the admission script, after kBump.
const char kScriptTail[] = R"LUA(local a, k = 1, 1
local nchecks = tonumber(ARGV[a]); a = a + 1
-- the reserved counters: a hash per scope, a field per measure and slot
-- ("t<slot>" tokens, "c<slot>" cost), read once per hash with HGETALL into
-- r = {tokens hi, lo, cost hi, lo} summed over the live slots (from oldest
-- on), with r[field] = value for each live field; the fields of slots that
-- have lapsed, and those released to 0 of a slot before the current one
-- (no reservation is made in it any more), are listed in stale (key,
-- field, ...) and deleted below, so a hash holds little more than the
-- current slot's fields
local rsv, stale = {}, nil
local function reserved(key, oldest)
  local r = rsv[key]
  if r then return r end
  r = {0, 0, 0, 0}
  local hv = redis.call('HGETALL', key)
  for j = 1, #hv, 2 do
    local f, v = hv[j], hv[j + 1]
    local m, slot = string.byte(f), tonumber(string.sub(f, 2))
    if (m ~= 116 and m ~= 99) or not slot or string.len(v) > 20 or (v ~= '0' and not string.match(v, '^%-?%d+$')) then
      return nil, redis.error_reply('llmgw: reserved counter is not an integer: ' .. key .. ' ' .. f)
    end
    if slot < oldest or (v == '0' and slot < oldest + LIVE - 1) then
      stale = stale or {}
      stale[#stale + 1] = key; stale[#stale + 1] = f
    elseif v == '0' then
      r[f] = v
    else
      r[f] = v
      local h, l = split(v)
      local i = 1
      if m == 99 then i = 3 end
      r[i] = r[i] + h; r[i + 1] = r[i + 1] + l
    end
  end
  rsv[key] = r
  return r
end
local rejected = nil
-- every check's sum before this request, as text (negative as 0): the
-- reply carries them for the remaining-allowance headers
local used = {}
for i = 1, nchecks do
  local nkeys = tonumber(ARGV[a])
  local limit, add, rv = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  a = a + 4
  local nplain = nkeys
  if rv ~= '0' then nplain = nkeys - 1 end
  local sh, sl = 0, 0
  for j = 1, nplain do
    local v = redis.call('GET', KEYS[k + j - 1])
    if v then
      if string.len(v) > 20 or not string.match(v, '^%-?%d+$') then
        return redis.error_reply('llmgw: counter is not an integer: ' .. KEYS[k + j - 1])
      end
      local h, l = split(v)
      sh = sh + h; sl = sl + l
    end
  end
  if rv ~= '0' then
    local r, e = reserved(KEYS[k + nkeys - 1], tonumber(string.sub(rv, 2)))
    if not r then return e end
    local m = 1
    if string.byte(rv) == 99 then m = 3 end
    sh = sh + r[m]; sl = sl + r[m + 1]
  end
  local uh, ul = norm(sh, sl)
  used[i] = text(uh, ul)
  if not rejected then
    local lh, ll = norm(split(limit))
    local breach
    if add ~= '0' then
      local ah, al = split(add)
      local th, tl = norm(sh + ah, sl + al)
      breach = less(lh, ll, th, tl)
    else
      breach = not less(uh, ul, lh, ll)
    end
    if breach then rejected = i end
  end
  k = k + nkeys
end
local nadmit = tonumber(ARGV[a]); a = a + 1
local first_admit, first_arg = k, a
k = k + nadmit; a = a + 2 * nadmit
local nreject = tonumber(ARGV[a]); a = a + 1
local first_reject, first_reject_arg = k, a
k = k + nreject; a = a + 2 * nreject
-- the reservations: KEYS the scope's hash, ARGV field, delta, ttl
local nres = tonumber(ARGV[a]); a = a + 1
local first_res, first_res_arg = k, a
k = k + nres; a = a + 3 * nres
-- optional op guard: one more key (the op key) and one more argument (its
-- TTL); the op is claimed before any write, so a cancelled op never runs
if #ARGV > a - 1 then
  local mark = 'a'
  if rejected then mark = 'r' end
  if not redis.call('SET', KEYS[k], mark, 'NX', 'EX', ARGV[#ARGV]) then return {2} end
end
if stale then
  for j = 1, #stale, 2 do redis.call('HDEL', stale[j], stale[j + 1]) end
end
if rejected then
  first_admit, first_arg = first_reject, first_reject_arg
  nadmit = nreject
else
  for i = 0, nres - 1 do
    -- the hash was read above: the first field of a slot moves the hash's
    -- TTL on to that slot's, never back (a replica whose clock lags may
    -- still reserve in the slot before)
    local key, ra = KEYS[first_res + i], first_res_arg + 3 * i
    local f, r = ARGV[ra], rsv[key]
    redis.call('HINCRBY', key, f, ARGV[ra + 1])
    if not (r and r[f]) then
      if redis.call('TTL', key) < tonumber(ARGV[ra + 2]) then redis.call('EXPIRE', key, ARGV[ra + 2]) end
      if r then r[f] = '0' end
    end
  end
end
for i = 0, nadmit - 1 do
  -- a delta of 0 writes nothing
  if ARGV[first_arg + 2 * i] ~= '0' then
    local e = bump(KEYS[first_admit + i], ARGV[first_arg + 2 * i], ARGV[first_arg + 2 * i + 1])
    if e then return e end
  end
end
if rejected then return {1, rejected - 1, unpack(used)} end
return {0, unpack(used)}
)LUA";

// The accounting batch as one script call: INCRBY each key and give a key
// its TTL when it created it (kBump), the same rule as the admission
// script. KEYS: the counters; ARGV: delta, ttl per key.
// An increment that would pass INT64_MAX (INCRBY refuses it: "increment or
// decrement would overflow") sets the counter to INT64_MAX instead, keeping
// its TTL, like the shared-memory store and the admission script.
const char kAccountScript[] = R"LUA(-- llm_gateway accounting v4
)LUA";

const char kAccountScriptTail[] = R"LUA(if ARGV[1] ~= 'b' then
  for i = 1, #KEYS do
    local e = bump(KEYS[i], ARGV[2 * i - 1], ARGV[2 * i])
    if e then return e end
  end
  return #KEYS
end
-- bounded layout with an op guard (account_command_bounded in admit_script.h)
local ids, op, maxids, idsttl, opttl = KEYS[1], KEYS[2], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if not redis.call('SET', op, 'w', 'NX', 'EX', opttl) then return -1 end
local choices = 'w'
local k, a, n = 3, 5, 0
local nplain = tonumber(ARGV[a]); a = a + 1
for i = 1, nplain do
  local e = bump(KEYS[k], ARGV[a], ARGV[a + 1])
  if e then return e end
  k = k + 1; a = a + 2; n = n + 1
end
local ngroups = tonumber(ARGV[a]); a = a + 1
for g = 1, ngroups do
  local member, cnt = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  local off = cnt
  if redis.call('SISMEMBER', ids, member) == 1 then
    off = 0
  elseif redis.call('SCARD', ids) < maxids then
    redis.call('SADD', ids, member)
    if redis.call('PTTL', ids) == -1 then redis.call('EXPIRE', ids, idsttl) end
    off = 0
  end
  if off == 0 then choices = choices .. '0' else choices = choices .. '1' end
  for i = 0, cnt - 1 do
    local e = bump(KEYS[k + off + i], ARGV[a], ARGV[a + 1])
    if e then return e end
    a = a + 2; n = n + 1
  end
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

// Cancels an op of the two scripts above whose call failed without a
// reply: a tombstone when the op has not run (it never will), or the
// undoing of its increments when it has (the op key says which keys it
// used). Counters that have expired since are left alone.
const char kCancelScript[] = R"LUA(-- llm_gateway cancel v2
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], 'c', 'EX', ARGV[1])
if not v or v == 'c' then return 0 end
local function undo(key, delta)
  if redis.call('EXISTS', key) == 1 then redis.call('DECRBY', key, delta) end
end
if ARGV[2] == 'adm' then
  local na = tonumber(ARGV[3])
  local nr = tonumber(ARGV[4 + na])
  if v == 'a' then
    for i = 1, na do undo(KEYS[1 + i], ARGV[3 + i]) end
    -- the reservations: KEYS the scope's hash, ARGV field, -amount (a
    -- field that has lapsed is left alone, one left below 0 deleted)
    local ns, a = tonumber(ARGV[5 + na + nr] or '0'), 6 + na + nr
    for i = 1, ns do
      local key, f = KEYS[1 + na + nr + i], ARGV[a]
      if redis.call('HEXISTS', key, f) == 1 and redis.call('HINCRBY', key, f, ARGV[a + 1]) < 0 then
        redis.call('HDEL', key, f)
      end
      a = a + 2
    end
  elseif v == 'r' then
    for i = 1, nr do undo(KEYS[1 + na + i], ARGV[4 + na + i]) end
  end
  return 1
end
local k, a = 2, 3
local nplain = tonumber(ARGV[a]); a = a + 1
for i = 1, nplain do undo(KEYS[k], ARGV[a]); k = k + 1; a = a + 1 end
local ng = tonumber(ARGV[a]); a = a + 1
for g = 1, ng do
  local n = tonumber(ARGV[a]); a = a + 1
  local off = 0
  if string.sub(v, 1 + g, 1 + g) == '1' then off = n end
  for i = 0, n - 1 do undo(KEYS[k + off + i], ARGV[a + i]) end
  k = k + 2 * n; a = a + n
end
return 1
)LUA";

// The reservations with an amount: how many, and their scopes' hashes as
// KEYS (the admission's reservations, the accounting's and the cancel's
// releases).
std::size_t reserved_count(const std::vector<Reservation>& reserve, const ReserveAmounts& amounts) {
    std::size_t n = 0;
    for_each_reserved(reserve, amounts, [&n](const Reservation&, std::int64_t) { ++n; });
    return n;
}
void write_reserved_records(RespWriter& w, const std::vector<Reservation>& reserve, const ReserveAmounts& amounts) {
    for_each_reserved(reserve, amounts, [&w](const Reservation& r, std::int64_t) { w.arg(r.record); });
}
// A slot's field in its scope's hash, as one argument.
void write_field(RespWriter& w, bool tokens, std::int64_t slot) {
    char field[kReservedFieldMax];
    w.arg(std::string_view(field, static_cast<std::size_t>(put_reserved_field(field, tokens, slot) - field)));
}

// Reservations given back, as the accounting and cancel scripts take them
// (after their hashes among the KEYS): ARGV their number, then per release
// its field and minus the amount.
void write_release_args(RespWriter& w, const std::vector<Reservation>& reserve, const ReserveAmounts& amounts) {
    w.arg(static_cast<std::int64_t>(reserved_count(reserve, amounts)));
    for_each_reserved(reserve, amounts, [&w](const Reservation& r, std::int64_t amount) {
        write_field(w, r.measure == Measure::Tokens, r.slot);
        w.arg(-amount);
    });
}

// A script call's head: EVALSHA sha1 or EVAL source, then the key count.
void write_script_head(RespWriter& w, std::size_t nargs, bool by_sha, const std::string& sha,
                       const std::string& source, std::size_t nkeys) {
    if (by_sha && sha.empty()) throw std::bad_alloc();   // the digest could not be computed
    w.command(3 + nkeys + nargs);
    w.arg(by_sha ? std::string_view("EVALSHA") : std::string_view("EVAL"));
    w.arg(by_sha ? sha : source);
    w.arg(static_cast<std::int64_t>(nkeys));
}

// Runs write(w) into a string of its own; "" when it throws (out of memory,
// an invalid batch).
template <typename F>
std::string written(F write) {
    std::string out;
    try {
        RespWriter w(out);
        write(w);
    } catch (...) {
        return std::string();
    }
    return out;
}

std::string sha1_hex(const std::string& s) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(s.data(), s.size(), md, &len, EVP_sha1(), nullptr) != 1 || len != 20) return std::string();
    static const char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < len; ++i) {
        hex.push_back(kHex[md[i] >> 4]);
        hex.push_back(kHex[md[i] & 15]);
    }
    return hex;
}

}  // namespace

const std::string& account_script_source() {
    static const std::string source = std::string(kAccountScript) + kBump + kAccountScriptTail;
    return source;
}

std::string account_script_sha1() {
    try {
        static const std::string sha = sha1_hex(account_script_source());
        return sha;
    } catch (...) {
        return std::string();
    }
}

std::vector<std::string> account_command(const std::vector<Incr>& incrs, bool by_sha) {
    std::vector<std::string> cmd;
    try {
        cmd.reserve(3 + 3 * incrs.size());
        cmd.push_back(by_sha ? "EVALSHA" : "EVAL");
        cmd.push_back(by_sha ? account_script_sha1() : account_script_source());
        cmd.push_back(std::to_string(incrs.size()));
        for (const Incr& in : incrs) cmd.push_back(in.key);
        for (const Incr& in : incrs) {
            cmd.push_back(std::to_string(in.delta));
            cmd.push_back(std::to_string(in.ttl));
        }
    } catch (...) {
        cmd.clear();
    }
    return cmd;
}

bool append_account_command(std::string& out, const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                            std::int64_t max_ids, std::int64_t ids_ttl, std::string_view op_key, std::int64_t op_ttl,
                            bool by_sha, const HeldReservation& releases) {
    static const std::vector<Reservation> kNone;
    const std::vector<Reservation>& reserve = releases.plan != nullptr ? releases.plan->reserve : kNone;
    const std::size_t nrel = reserved_count(reserve, releases.amounts);
    std::size_t nkeys = 2 + plain.size() + nrel, nargs = 6 + 2 * plain.size() + (nrel > 0 ? 1 + 2 * nrel : 0);
    for (const BoundedIncrs& g : groups) {
        if (g.incrs.size() != g.overflow_keys.size()) return false;
        nkeys += 2 * g.incrs.size();
        nargs += 2 + 2 * g.incrs.size();
    }
    const std::size_t mark = out.size();
    try {
        RespWriter w(out);
        write_script_head(w, nargs, by_sha, by_sha ? account_script_sha1() : std::string(), account_script_source(),
                          nkeys);
        w.arg(std::string_view(kStatsIdsKey));
        w.arg(op_key);
        for (const Incr& in : plain) w.arg(in.key);
        for (const BoundedIncrs& g : groups) {
            for (const Incr& in : g.incrs) w.arg(in.key);
            for (const std::string& k : g.overflow_keys) w.arg(k);
        }
        write_reserved_records(w, reserve, releases.amounts);
        w.arg(std::string_view("b"));
        w.arg(max_ids);
        w.arg(ids_ttl);
        w.arg(op_ttl);
        w.arg(static_cast<std::int64_t>(plain.size()));
        for (const Incr& in : plain) {
            w.arg(in.delta);
            w.arg(in.ttl);
        }
        w.arg(static_cast<std::int64_t>(groups.size()));
        for (const BoundedIncrs& g : groups) {
            w.arg(g.member);
            w.arg(static_cast<std::int64_t>(g.incrs.size()));
            for (const Incr& in : g.incrs) {
                w.arg(in.delta);
                w.arg(in.ttl);
            }
        }
        if (nrel > 0) write_release_args(w, reserve, releases.amounts);
        return true;
    } catch (...) {
        out.resize(mark);
        return false;
    }
}

std::string account_command_bounded(const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                                    std::int64_t max_ids, std::int64_t ids_ttl, std::string_view op_key,
                                    std::int64_t op_ttl, bool by_sha, const HeldReservation& releases) {
    std::string out;
    if (!append_account_command(out, plain, groups, max_ids, ids_ttl, op_key, op_ttl, by_sha, releases)) return {};
    return out;
}

const std::string& cancel_script_source() {
    static const std::string source(kCancelScript);
    return source;
}

std::string cancel_admit_command(const AdmissionPlan& plan, const ReserveAmounts& amounts, std::string_view op_key,
                                 std::int64_t op_ttl) {
    return written([&](RespWriter& w) {
        // The counters, then the reservations (in their scope's hash).
        const std::size_t nrel = reserved_count(plan.reserve, amounts);
        const std::size_t nkeys = 1 + plan.admit.size() + plan.reject.size() + nrel;
        const std::size_t nargs = 5 + plan.admit.size() + plan.reject.size() + 2 * nrel;
        write_script_head(w, nargs, false, std::string(), cancel_script_source(), nkeys);
        w.arg(op_key);
        for (const Incr& in : plan.admit) w.arg(in.key);
        for (const Incr& in : plan.reject) w.arg(in.key);
        write_reserved_records(w, plan.reserve, amounts);
        w.arg(op_ttl);
        w.arg(std::string_view("adm"));
        w.arg(static_cast<std::int64_t>(plan.admit.size()));
        for (const Incr& in : plan.admit) w.arg(in.delta);
        w.arg(static_cast<std::int64_t>(plan.reject.size()));
        for (const Incr& in : plan.reject) w.arg(in.delta);
        write_release_args(w, plan.reserve, amounts);
    });
}

std::string cancel_account_command(const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                                   std::string_view op_key, std::int64_t op_ttl) {
    return written([&](RespWriter& w) {
        std::size_t nkeys = 1 + plain.size(), nargs = 4 + plain.size();
        for (const BoundedIncrs& g : groups) {
            if (g.incrs.size() != g.overflow_keys.size()) throw std::invalid_argument("overflow keys");
            nkeys += 2 * g.incrs.size();
            nargs += 1 + g.incrs.size();
        }
        write_script_head(w, nargs, false, std::string(), cancel_script_source(), nkeys);
        w.arg(op_key);
        for (const Incr& in : plain) w.arg(in.key);
        for (const BoundedIncrs& g : groups) {
            for (const Incr& in : g.incrs) w.arg(in.key);
            for (const std::string& k : g.overflow_keys) w.arg(k);
        }
        w.arg(op_ttl);
        w.arg(std::string_view("acc"));
        w.arg(static_cast<std::int64_t>(plain.size()));
        for (const Incr& in : plain) w.arg(in.delta);
        w.arg(static_cast<std::int64_t>(groups.size()));
        for (const BoundedIncrs& g : groups) {
            w.arg(static_cast<std::int64_t>(g.incrs.size()));
            for (const Incr& in : g.incrs) w.arg(in.delta);
        }
    });
}

const std::string& admit_script_source() {
    // LIVE: the slots a check sums (core/metering/reservation.h), the
    // current one the last.
    static const std::string source =
        std::string(kScript) + "local LIVE = " + std::to_string(kReserveSlots) + "\n" + kBump + kScriptTail;
    return source;
}

std::string admit_script_sha1() {
    try {
        static const std::string sha = sha1_hex(admit_script_source());
        return sha;
    } catch (...) {
        return std::string();
    }
}

bool append_admit_command(std::string& out, const AdmissionPlan& plan, const ReserveAmounts& amounts, bool by_sha,
                          std::string_view op_key, std::int64_t op_ttl) {
    const bool op = !op_key.empty();
    const std::size_t nres = reserved_count(plan.reserve, amounts);
    std::size_t nkeys = plan.admit.size() + plan.reject.size() + nres + (op ? 1 : 0);
    for (const Check& c : plan.checks) {
        // A reserving check's reserved counters are its scope's hash.
        if (c.reserves && c.reserved_record.empty()) return false;
        nkeys += c.keys.size() + (c.reserves ? 1 : 0);
    }
    const std::size_t nargs =
        4 + 4 * plan.checks.size() + 2 * (plan.admit.size() + plan.reject.size()) + 3 * nres + (op ? 1 : 0);
    const std::size_t mark = out.size();
    try {
        RespWriter w(out);
        write_script_head(w, nargs, by_sha, by_sha ? admit_script_sha1() : std::string(), admit_script_source(), nkeys);
        // KEYS
        for (const Check& c : plan.checks) {
            for (const std::string& k : c.keys) w.arg(k);
            if (c.reserves) w.arg(c.reserved_record);
        }
        for (const Incr& in : plan.admit) w.arg(in.key);
        for (const Incr& in : plan.reject) w.arg(in.key);
        write_reserved_records(w, plan.reserve, amounts);
        if (op) w.arg(op_key);
        // ARGV
        w.arg(static_cast<std::int64_t>(plan.checks.size()));
        for (const Check& c : plan.checks) {
            w.arg(static_cast<std::int64_t>(c.keys.size() + (c.reserves ? 1 : 0)));
            w.arg(c.limit);
            const std::int64_t add = check_add(c, amounts);
            w.arg(add > 0 ? add : 0);
            if (c.reserves) {
                // The field of the oldest live slot: the check sums that
                // measure's fields from it on.
                write_field(w, c.measure == Measure::Tokens, c.reserved_oldest);
            } else {
                w.arg(std::string_view("0"));
            }
        }
        w.arg(static_cast<std::int64_t>(plan.admit.size()));
        for (const Incr& in : plan.admit) {
            w.arg(in.delta);
            w.arg(in.ttl);
        }
        w.arg(static_cast<std::int64_t>(plan.reject.size()));
        for (const Incr& in : plan.reject) {
            w.arg(in.delta);
            w.arg(in.ttl);
        }
        // The reservations have their own section (written only when
        // admitted, cheaper than the counters' saturating bump), and only
        // those that reserve something.
        w.arg(static_cast<std::int64_t>(nres));
        for_each_reserved(plan.reserve, amounts, [&w](const Reservation& r, std::int64_t amount) {
            write_field(w, r.measure == Measure::Tokens, r.slot);
            w.arg(amount);
            w.arg(r.ttl);
        });
        if (op) w.arg(op_ttl);
        return true;
    } catch (...) {
        out.resize(mark);
        return false;
    }
}

std::string admit_command(const AdmissionPlan& plan, const ReserveAmounts& amounts, bool by_sha) {
    std::string out;
    if (!append_admit_command(out, plan, amounts, by_sha)) return std::string();
    return out;
}

std::string admit_command_op(const AdmissionPlan& plan, const ReserveAmounts& amounts, std::string_view op_key,
                             std::int64_t op_ttl, bool by_sha) {
    std::string out;
    if (op_key.empty() || !append_admit_command(out, plan, amounts, by_sha, op_key, op_ttl)) return std::string();
    return out;
}

bool is_noscript_error(const RespValue& reply) {
    return reply.type == RespValue::Type::Error && reply.str.compare(0, 8, "NOSCRIPT") == 0;
}

namespace {

// One check's sum in the admission reply: the decimal text the script wrote
// (digits only; a sum past INT64_MAX saturates).
bool used_sum(const RespValue& v, std::int64_t& out) {
    if (v.type != RespValue::Type::String || v.str.empty() || v.str.size() > 40) return false;
    std::int64_t x = 0;
    for (char c : v.str) {
        if (c < '0' || c > '9') return false;
        const int d = c - '0';
        x = x > (INT64_MAX - d) / 10 ? INT64_MAX : x * 10 + d;
    }
    out = x;
    return true;
}

}  // namespace

bool decode_admit_reply(const RespValue& reply, const AdmissionPlan& plan, AdmissionResult& result,
                        std::string& err) {
    try {
        using T = RespValue::Type;
        if (reply.type == T::Error) {
            constexpr std::size_t kMax = 200;
            err = "the store failed the admission script: " +
                  (reply.str.size() <= kMax ? reply.str : reply.str.substr(0, kMax) + "...");
            return false;
        }
        const std::vector<RespValue>& e = reply.elements;
        const std::size_t n = plan.checks.size();
        std::vector<std::int64_t> used;
        // The sums after the first `from` elements: one decimal per check.
        auto sums = [&](std::size_t from) {
            if (e.size() != from + n) return false;
            used.reserve(n);
            for (std::size_t i = from; i < e.size(); ++i) {
                std::int64_t v = 0;
                if (!used_sum(e[i], v)) return false;
                used.push_back(v);
            }
            return true;
        };
        if (reply.type == T::Array && !e.empty() && e[0].type == T::Integer && e[0].integer == 0 && sums(1)) {
            result = AdmissionResult{};
            result.used = std::move(used);
            return true;
        }
        if (reply.type == T::Array && e.size() >= 2 && e[0].type == T::Integer && e[0].integer == 1 &&
            e[1].type == T::Integer) {
            if (e[1].integer < 0 || static_cast<unsigned long long>(e[1].integer) >= plan.checks.size()) {
                err = "the admission script named check " + std::to_string(e[1].integer) + " of " +
                      std::to_string(plan.checks.size());
                return false;
            }
            if (!sums(2)) {
                err = "the admission script's sums do not match the plan's " + std::to_string(n) + " checks";
                return false;
            }
            const Check& c = plan.checks[static_cast<std::size_t>(e[1].integer)];
            AdmissionResult r;
            r.admitted = false;
            r.kind = c.kind;
            r.retry_after = c.retry_after;
            r.message = c.message;
            r.check_index = static_cast<int>(e[1].integer);
            r.used = std::move(used);
            result = std::move(r);
            return true;
        }
        err = "unexpected reply to the admission script (want {0, sums...} or {1, check, sums...})";
        return false;
    } catch (...) {
        err.clear();
        return false;
    }
}

std::vector<std::vector<std::string>> incr_commands(const std::vector<Incr>& incrs, bool expire_nx) {
    std::vector<std::vector<std::string>> cmds;
    try {
        cmds.reserve(2 * incrs.size());
        for (const Incr& in : incrs) {
            cmds.push_back({"INCRBY", in.key, std::to_string(in.delta)});
            if (expire_nx) {
                cmds.push_back({"EXPIRE", in.key, std::to_string(in.ttl), "NX"});
            } else {
                cmds.push_back({"EXPIRE", in.key, std::to_string(in.ttl)});
            }
        }
    } catch (...) {
        cmds.clear();
    }
    return cmds;
}

}  // namespace llmgw
