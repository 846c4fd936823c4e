// The admission script and the store command builders (see admit_script.h).
#include "core/store/admit_script.h"

#include "core/metering/reservation.h"

#include <openssl/evp.h>

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
const char kScript[] = R"LUA(-- llmgw admission v1: KEYS/ARGV layout in src/core/store/admit_script.h
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
-- the reserved counters of every check, in one MGET (a key of another type
-- reads as none)
local rsv, rn = {}, 0
do
  local pa, pk, idx = a, k, {}
  for i = 1, nchecks do
    local nk, nr = tonumber(ARGV[pa]), tonumber(ARGV[pa + 3])
    for j = nk - nr, nk - 1 do idx[#idx + 1] = KEYS[pk + j] end
    pa = pa + 4; pk = pk + nk
  end
  if #idx > 0 then rsv = redis.call('MGET', unpack(idx)) end
end
local rejected = nil
-- every check's sum before this request, as text (negative as 0): the
-- reply carries them for the remaining-allowance headers
local used = {}
for i = 1, nchecks do
  local nkeys = tonumber(ARGV[a])
  local limit, add = ARGV[a + 1], ARGV[a + 2]
  local nrsv = tonumber(ARGV[a + 3])
  a = a + 4
  local sh, sl = 0, 0
  local vals = {}
  for j = 1, nkeys - nrsv do vals[j] = redis.call('GET', KEYS[k + j - 1]) end
  for j = 1, nrsv do rn = rn + 1; vals[nkeys - nrsv + j] = rsv[rn] end
  for j = 1, nkeys do
    local v = vals[j]
    if v then
      if string.len(v) > 20 or not string.match(v, '^%-?%d+$') then
        return redis.error_reply('llmgw: counter is not an integer: ' .. KEYS[k + j - 1])
      end
      local h, l = split(v)
      sh = sh + h; sl = sl + l
    end
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
-- the reservations: added when admitted, a new counter given its TTL
local nres = tonumber(ARGV[a]); a = a + 1
local first_res, first_res_arg = k, a
k = k + nres; a = a + 2 * nres
-- optional op guard: one more key (the op key) and one more argument (its
-- TTL); the op is claimed before any write, so a cancelled op never runs
if #ARGV > a - 1 then
  local mark = 'a'
  if rejected then mark = 'r' end
  if not redis.call('SET', KEYS[k], mark, 'NX', 'EX', ARGV[#ARGV]) then return {2} end
end
if rejected then
  first_admit, first_arg = first_reject, first_reject_arg
  nadmit = nreject
else
  for i = 0, nres - 1 do
    local key, d = KEYS[first_res + i], ARGV[first_res_arg + 2 * i]
    local n = tonumber(d)
    -- INCRBY answers the delta itself only for a new counter (a reserved
    -- counter is deleted when it reaches 0): then it gets its TTL. Past
    -- 2^53 that comparison is not exact, and PTTL says instead.
    local created = redis.call('INCRBY', key, d) == n
    if n >= 9007199254740992 then created = redis.call('PTTL', key) == -1 end
    if created then redis.call('EXPIRE', key, ARGV[first_res_arg + 2 * i + 1]) end
  end
end
for i = 0, nadmit - 1 do
  -- a delta of 0 (a reservation of nothing) writes nothing
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
const char kAccountScript[] = R"LUA(-- llm_gateway accounting v3
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
-- one call while other reservations remain; a counter that reaches 0 (or
-- that had expired, and so comes back negative) is deleted at once
for i = 1, nrel do
  if redis.call('DECRBY', KEYS[k], ARGV[a]) <= 0 then redis.call('DEL', KEYS[k]) end
  k = k + 1; a = a + 1
end
redis.call('SET', op, choices, 'EX', opttl)
return n
)LUA";

// Cancels an op of the two scripts above whose call failed without a
// reply: a tombstone when the op has not run (it never will), or the
// undoing of its increments when it has (the op key says which keys it
// used). Counters that have expired since are left alone.
const char kCancelScript[] = R"LUA(-- llm_gateway cancel v1
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

// EVALSHA sha / EVAL source, the key count, the keys, the arguments (both
// moved out of).
static std::vector<std::string> script_command(bool by_sha, const std::string& sha, const std::string& source,
                                               std::vector<std::string>& keys, std::vector<std::string>& args) {
    std::vector<std::string> cmd;
    cmd.reserve(3 + keys.size() + args.size());
    cmd.push_back(by_sha ? "EVALSHA" : "EVAL");
    cmd.push_back(by_sha ? sha : source);
    cmd.push_back(std::to_string(keys.size()));
    for (std::string& k : keys) cmd.push_back(std::move(k));
    for (std::string& a : args) cmd.push_back(std::move(a));
    return cmd;
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

std::vector<std::string> account_command_bounded(const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                                                 std::int64_t max_ids, std::int64_t ids_ttl, const std::string& op_key,
                                                 std::int64_t op_ttl, bool by_sha, const std::vector<Incr>& releases) {
    std::vector<std::string> cmd;
    try {
        std::vector<std::string> keys{kStatsIdsKey, op_key};
        std::vector<std::string> args{"b", std::to_string(max_ids), std::to_string(ids_ttl), std::to_string(op_ttl),
                                      std::to_string(plain.size())};
        for (const Incr& in : plain) {
            keys.push_back(in.key);
            args.push_back(std::to_string(in.delta));
            args.push_back(std::to_string(in.ttl));
        }
        args.push_back(std::to_string(groups.size()));
        for (const BoundedIncrs& g : groups) {
            if (g.incrs.size() != g.overflow_keys.size()) return {};
            args.push_back(g.member);
            args.push_back(std::to_string(g.incrs.size()));
            for (const Incr& in : g.incrs) {
                keys.push_back(in.key);
                args.push_back(std::to_string(in.delta));
                args.push_back(std::to_string(in.ttl));
            }
            keys.insert(keys.end(), g.overflow_keys.begin(), g.overflow_keys.end());
        }
        if (!releases.empty()) {
            args.push_back(std::to_string(releases.size()));
            for (const Incr& in : releases) {
                keys.push_back(in.key);
                args.push_back(std::to_string(in.delta));
            }
        }
        cmd = script_command(by_sha, by_sha ? account_script_sha1() : std::string(), account_script_source(), keys,
                             args);
    } catch (...) {
        cmd.clear();
    }
    return cmd;
}

std::vector<std::string> admit_command_op(const AdmissionPlan& plan, const std::string& op_key, std::int64_t op_ttl,
                                          bool by_sha) {
    std::vector<std::string> cmd = admit_command(plan, by_sha);
    try {
        if (cmd.size() < 3) return {};
        const std::size_t nkeys = std::stoul(cmd[2]);
        cmd[2] = std::to_string(nkeys + 1);
        cmd.insert(cmd.begin() + 3 + static_cast<std::ptrdiff_t>(nkeys), op_key);
        cmd.push_back(std::to_string(op_ttl));
    } catch (...) {
        cmd.clear();
    }
    return cmd;
}

const std::string& cancel_script_source() {
    static const std::string source(kCancelScript);
    return source;
}

std::vector<std::string> cancel_admit_command(const AdmissionPlan& plan, const std::string& op_key,
                                              std::int64_t op_ttl) {
    std::vector<std::string> keys{op_key};
    std::vector<std::string> args{std::to_string(op_ttl), "adm"};
    try {
        for (const std::vector<Incr>* incrs : {&plan.admit, &plan.reject}) {
            args.push_back(std::to_string(incrs->size()));
            for (const Incr& in : *incrs) {
                keys.push_back(in.key);
                args.push_back(std::to_string(in.delta));
            }
        }
        return script_command(false, std::string(), cancel_script_source(), keys, args);
    } catch (...) {
        return {};
    }
}

std::vector<std::string> cancel_account_command(const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                                                const std::string& op_key, std::int64_t op_ttl) {
    try {
        std::vector<std::string> keys{op_key};
        std::vector<std::string> args{std::to_string(op_ttl), "acc", std::to_string(plain.size())};
        for (const Incr& in : plain) {
            keys.push_back(in.key);
            args.push_back(std::to_string(in.delta));
        }
        args.push_back(std::to_string(groups.size()));
        for (const BoundedIncrs& g : groups) {
            args.push_back(std::to_string(g.incrs.size()));
            for (const Incr& in : g.incrs) {
                keys.push_back(in.key);
                args.push_back(std::to_string(in.delta));
            }
            keys.insert(keys.end(), g.overflow_keys.begin(), g.overflow_keys.end());
        }
        return script_command(false, std::string(), cancel_script_source(), keys, args);
    } catch (...) {
        return {};
    }
}

const std::string& admit_script_source() {
    static const std::string source = std::string(kScript) + kBump + kScriptTail;
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

std::vector<std::string> admit_script_args(const AdmissionPlan& plan, std::vector<std::string>& keys) {
    std::vector<std::string> args;
    keys.clear();
    try {
        args.push_back(std::to_string(plan.checks.size()));
        for (const Check& c : plan.checks) {
            args.push_back(std::to_string(c.keys.size()));
            args.push_back(std::to_string(c.limit));
            args.push_back(c.add > 0 ? std::to_string(c.add) : std::string("0"));
            args.push_back(c.reserves ? std::to_string(kReserveSlots) : std::string("0"));
            keys.insert(keys.end(), c.keys.begin(), c.keys.end());
        }
        // The reservation increments go in their own section (written only
        // when admitted, cheaper than the counters' saturating bump), and
        // only those that reserve something.
        std::vector<bool> reserving(plan.admit.size(), false);
        for (const AdmissionPlan::Reserve& r : plan.reserve) {
            if (r.admit_index < reserving.size()) reserving[r.admit_index] = true;
        }
        std::size_t nadmit = 0;
        for (std::size_t i = 0; i < plan.admit.size(); ++i) nadmit += reserving[i] ? 0 : 1;
        args.push_back(std::to_string(nadmit));
        for (std::size_t i = 0; i < plan.admit.size(); ++i) {
            if (reserving[i]) continue;
            args.push_back(std::to_string(plan.admit[i].delta));
            args.push_back(std::to_string(plan.admit[i].ttl));
            keys.push_back(plan.admit[i].key);
        }
        args.push_back(std::to_string(plan.reject.size()));
        for (const Incr& in : plan.reject) {
            args.push_back(std::to_string(in.delta));
            args.push_back(std::to_string(in.ttl));
            keys.push_back(in.key);
        }
        std::size_t nres = 0;
        for (std::size_t i = 0; i < plan.admit.size(); ++i) nres += reserving[i] && plan.admit[i].delta > 0 ? 1 : 0;
        args.push_back(std::to_string(nres));
        for (std::size_t i = 0; i < plan.admit.size(); ++i) {
            if (!reserving[i] || plan.admit[i].delta <= 0) continue;
            args.push_back(std::to_string(plan.admit[i].delta));
            args.push_back(std::to_string(plan.admit[i].ttl));
            keys.push_back(plan.admit[i].key);
        }
    } catch (...) {
        keys.clear();
        args.clear();
    }
    return args;
}

std::vector<std::string> admit_command(const AdmissionPlan& plan, bool by_sha) {
    std::vector<std::string> cmd;
    try {
        std::vector<std::string> keys;
        std::vector<std::string> args = admit_script_args(plan, keys);
        if (args.empty()) return cmd;
        cmd = script_command(by_sha, by_sha ? admit_script_sha1() : std::string(), admit_script_source(), keys, args);
    } catch (...) {
        cmd.clear();
    }
    return cmd;
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
