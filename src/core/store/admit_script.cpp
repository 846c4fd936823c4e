// The admission script, its command and its reply (see admit_script.h).
#include "core/store/admit_script.h"

#include "core/metering/keys.h"
#include "core/store/script_parts.h"

#include <utility>

namespace llmgw {

namespace {

// Redis runs Lua 5.1: numbers are doubles and globals are forbidden. Every
// int64 stays decimal text until split into hi * 1e9 + lo (both exact as
// doubles), so sums and comparisons are exact over the whole int64 range.
const char kScript[] = R"LUA(-- llmgw admission v9: KEYS/ARGV layout in src/core/store/admit_script.h
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

// The rest of the admission script, after kBumpLua.
const char kScriptTail[] = R"LUA(local a, k = 1, 1
-- the reservations first: KEYS the scope's hash, ARGV field, delta, ttl,
-- grant (a lease's, core/metering/lease.h: "0" or an amount added to the
-- delta only when every check of that hash and measure passes with it)
local nres = tonumber(ARGV[a]); a = a + 1
local first_res, first_res_arg = k, a
local gx = nil
for i = 0, nres - 1 do
  local ex = ARGV[a + 4 * i + 3]
  if ex ~= '0' then
    gx = gx or {}
    gx[KEYS[k + i] .. string.sub(ARGV[a + 4 * i], 1, 1)] = ex
  end
end
k = k + nres; a = a + 4 * nres
local nchecks = tonumber(ARGV[a]); a = a + 1
-- the reserved counters: a hash per scope, a field per measure and slot
-- ("t<slot>" tokens, "c<slot>" cost, "r<slot>" requests), read once per hash
-- with HGETALL into r = {tokens hi, lo, cost hi, lo, requests hi, lo}
-- summed over the live slots (from oldest
-- on), with r[field] = value for each live field; the fields of slots that
-- have lapsed, and those released to 0 of a slot before the current one
-- (no reservation is made in it any more), are listed in stale (key,
-- field, ...) and deleted below, so a hash holds little more than the
-- current slot's fields
local rsv, stale = {}, nil
local function reserved(key, oldest)
  local r = rsv[key]
  if r then return r end
  r = {0, 0, 0, 0, 0, 0}
  local hv = redis.call('HGETALL', key)
  for j = 1, #hv, 2 do
    local f, v = hv[j], hv[j + 1]
    local m, slot = string.byte(f), tonumber(string.sub(f, 2))
    if (m ~= 116 and m ~= 99 and m ~= 114) or not slot or string.len(v) > 20 or (v ~= '0' and not string.match(v, '^%-?%d+$')) then
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
      if m == 99 then i = 3 elseif m == 114 then i = 5 end
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
-- and the part of each that reserved counters hold ("0" for a check that
-- reads none): what the remaining-allowance headers leave out of leases
local held = {}
-- whether a grant fits, by hash and measure
local grant = {}
-- every check's counters (not the reserved hashes) read with one MGET
local plain = {}
do
  local aa, kk = a, k
  for i = 1, nchecks do
    local nkeys = tonumber(ARGV[aa])
    local np = nkeys
    if ARGV[aa + 3] ~= '0' then np = nkeys - 1 end
    for j = 0, np - 1 do plain[#plain + 1] = KEYS[kk + j] end
    aa = aa + 4; kk = kk + nkeys
  end
end
local vals = {}
if #plain > 0 then vals = redis.call('MGET', unpack(plain)) end
local vi = 0
for i = 1, nchecks do
  local nkeys = tonumber(ARGV[a])
  local limit, add, rv = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  a = a + 4
  local nplain = nkeys
  if rv ~= '0' then nplain = nkeys - 1 end
  local sh, sl = 0, 0
  for j = 1, nplain do
    vi = vi + 1
    local v = vals[vi]
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
    local m, b = 1, string.byte(rv)
    if b == 99 then m = 3 elseif b == 114 then m = 5 end
    sh = sh + r[m]; sl = sl + r[m + 1]
    held[i] = text(norm(r[m], r[m + 1]))
  else
    held[i] = '0'
  end
  local uh, ul = norm(sh, sl)
  used[i] = text(uh, ul)
  local lh, ll = norm(split(limit))
  local g = gx and rv ~= '0' and KEYS[k + nkeys - 1] .. string.sub(rv, 1, 1)
  if g and gx[g] then
    -- the sum as the reply gives it (negative as 0), plus add and the grant
    local gh, gl = uh, ul
    if gh < 0 then gh, gl = 0, 0 end
    local ah, al = split(add)
    local eh, el = split(gx[g])
    local th, tl = norm(gh + ah + eh, gl + al + el)
    grant[g] = grant[g] ~= false and not less(lh, ll, th, tl)
  end
  if not rejected then
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
-- the windows' TTLs; the admit counters come in quads, one delta per quad;
-- the reject counters share one delta and one TTL
local TTL
TTL, a = window_ttls(a)
local W = #TTL
local nadmit = tonumber(ARGV[a]); a = a + 1
local first_admit, first_arg = k, a
k = k + nadmit * W; a = a + nadmit
local nreject, rdelta, rttl = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2]
a = a + 3
local first_reject = k
k = k + nreject
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
  -- a delta of 0 writes nothing
  if rdelta ~= '0' then
    for i = 0, nreject - 1 do
      local e = bump(KEYS[first_reject + i], rdelta, rttl)
      if e then return e end
    end
  end
else
  for i = 0, nres - 1 do
    -- the hash was read above: the first field of a slot moves the hash's
    -- TTL on to that slot's, never back (a replica whose clock lags may
    -- still reserve in the slot before)
    local key, ra = KEYS[first_res + i], first_res_arg + 4 * i
    local f, r = ARGV[ra], rsv[key]
    local d, ex = ARGV[ra + 1], ARGV[ra + 3]
    if ex ~= '0' and grant[key .. string.sub(f, 1, 1)] then
      local dh, dl = split(d)
      local eh, el = split(ex)
      d = text(norm(dh + eh, dl + el))
    end
    redis.call('HINCRBY', key, f, d)
    if not (r and r[f]) then
      if redis.call('TTL', key) < tonumber(ARGV[ra + 2]) then redis.call('EXPIRE', key, ARGV[ra + 2]) end
      if r then r[f] = '0' end
    end
  end
  for q = 0, nadmit - 1 do
    -- a delta of 0 writes nothing
    if ARGV[first_arg + q] ~= '0' then
      local e = bump_quad(first_admit + q * W, ARGV[first_arg + q], TTL)
      if e then return e end
    end
  end
end
local out = {0}
if rejected then out = {1, rejected - 1} end
for i = 1, nchecks do out[#out + 1] = used[i] end
for i = 1, nchecks do out[#out + 1] = held[i] end
return out
)LUA";

}  // namespace

const std::string& admit_script_source() {
    // LIVE: the slots a check sums (core/metering/reservation.h), the
    // current one the last.
    static const std::string source =
        std::string(kScript) + "local LIVE = " + std::to_string(kReserveSlots) + "\n" + kBumpLua + kScriptTail;
    return source;
}

const std::string& admit_script_sha1() { return script_sha1<admit_script_source>(); }

bool append_admit_command(std::string& out, const AdmissionPlan& plan, const ReserveAmounts& amounts, bool by_sha,
                          std::string_view op_key, std::int64_t op_ttl, const LeaseTicket* lease) {
    const bool op = !op_key.empty();
    // A reservation taken from a lease writes nothing, and its checks are
    // written as in the default mode: their counters, no reserved sum.
    auto hit = [lease](std::size_t j) { return lease != nullptr && lease->use(j) == LeaseUse::Hit; };
    auto leased = [&hit](const Check& c) {
        return c.reserves && c.reserve_index >= 0 && hit(static_cast<std::size_t>(c.reserve_index));
    };
    // The reservations written: those with an amount or a grant, but Hits
    // (a lease's grant may come with an amount of 0: a request limit's, or
    // a token or cost limit's in check mode).
    auto each_written = [&](auto f) {
        for (std::size_t j = 0; j < plan.reserve.size(); ++j) {
            const std::int64_t w = reserve_amount(amounts, plan.reserve[j].measure);
            const std::int64_t extra = lease != nullptr ? lease->extra(j) : 0;
            if ((w > 0 || extra > 0) && !hit(j)) f(plan.reserve[j], j, w);
        }
    };
    std::size_t nres = 0;
    each_written([&nres](const Reservation&, std::size_t, std::int64_t) { ++nres; });
    std::size_t nkeys = plan.admit.size() + plan.reject.size() + nres + (op ? 1 : 0);
    for (const Check& c : plan.checks) {
        // A reserving check's reserved counters are its scope's hash.
        if (c.reserves && c.reserved_record.empty()) return false;
        nkeys += c.keys.size() + (c.reserves && !leased(c) ? 1 : 0);
    }
    // The admit counters in window quads, the reject ones alike.
    WindowTtls ttls;
    if (!add_quads(ttls, plan.admit)) return false;
    for (const Incr& in : plan.reject) {
        if (in.delta != plan.reject.front().delta || in.ttl != plan.reject.front().ttl) return false;
    }
    const std::size_t nargs = 1 + 4 * nres + 1 + 4 * plan.checks.size() + 1 + kWindowCount + quad_args(plan.admit) +
                              3 + (op ? 1 : 0);
    const std::size_t mark = out.size();
    try {
        RespWriter w(out);
        write_script_head(w, nargs, by_sha, admit_script_sha1(), admit_script_source(), nkeys);
        // KEYS
        each_written([&w](const Reservation& r, std::size_t, std::int64_t) { w.arg(r.record); });
        for (const Check& c : plan.checks) {
            for (const std::string& k : c.keys) w.arg(k);
            if (c.reserves && !leased(c)) w.arg(c.reserved_record);
        }
        for (const Incr& in : plan.admit) w.arg(in.key);
        for (const Incr& in : plan.reject) w.arg(in.key);
        if (op) w.arg(op_key);
        // ARGV: the reservations (written only when admitted) first, so
        // that the checks know the grants asked.
        w.arg(static_cast<std::int64_t>(nres));
        each_written([&w, lease](const Reservation& r, std::size_t j, std::int64_t amount) {
            write_reserved_field(w, reserved_tag(r.measure), r.slot);
            w.arg(amount);
            w.arg(r.ttl);
            w.arg(lease != nullptr ? lease->extra(j) : 0);
        });
        w.arg(static_cast<std::int64_t>(plan.checks.size()));
        for (const Check& c : plan.checks) {
            const bool reserving = c.reserves && !leased(c);
            w.arg(static_cast<std::int64_t>(c.keys.size() + (reserving ? 1 : 0)));
            w.arg(c.limit);
            const std::int64_t add = reserving ? check_add(c, amounts) : c.add;
            w.arg(add > 0 ? add : 0);
            if (reserving) {
                // The field of the oldest live slot: the check sums that
                // measure's fields from it on.
                write_reserved_field(w, reserved_tag(c.measure), c.reserved_oldest);
            } else {
                w.arg(std::string_view("0"));
            }
        }
        write_window_ttls(w, ttls);
        write_quad_deltas(w, plan.admit);
        w.arg(static_cast<std::int64_t>(plan.reject.size()));
        w.arg(plan.reject.empty() ? 0 : plan.reject.front().delta);
        w.arg(plan.reject.empty() ? 0 : plan.reject.front().ttl);
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
                             std::int64_t op_ttl, bool by_sha, const LeaseTicket* lease) {
    std::string out;
    if (op_key.empty() || !append_admit_command(out, plan, amounts, by_sha, op_key, op_ttl, lease)) return std::string();
    return out;
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

// The sums of a reply after its first `from` elements: one decimal per
// check (n of them) into used, then (v9) as many of what reserved counters
// hold in them into held. false for another count or a sum that is not one.
bool read_sums(const std::vector<RespValue>& e, std::size_t from, std::size_t n, std::vector<std::int64_t>& used,
               std::vector<std::int64_t>& held) {
    if (e.size() != from + n && e.size() != from + 2 * n) return false;
    used.reserve(n);
    for (std::size_t i = from; i < e.size(); ++i) {
        std::int64_t v = 0;
        if (!used_sum(e[i], v)) return false;
        (i < from + n ? used : held).push_back(v);
    }
    return true;
}

}  // namespace

bool append_grant_command(std::string& out, const AdmissionPlan& plan, std::size_t index, std::int64_t extra,
                          bool by_sha) {
    if (index >= plan.reserve.size() || extra <= 0) return false;
    const Reservation& r = plan.reserve[index];
    std::size_t nchecks = 0;
    std::size_t nkeys = 1;
    for (const Check& c : plan.checks) {
        if (c.reserve_index != static_cast<int>(index)) continue;
        if (!c.reserves || c.reserved_record.empty()) return false;
        ++nchecks;
        nkeys += c.keys.size() + 1;
    }
    const std::size_t nargs = 1 + 4 + 1 + 4 * nchecks + 1 + kWindowCount + 1 + 3;
    const std::size_t mark = out.size();
    try {
        RespWriter w(out);
        write_script_head(w, nargs, by_sha, admit_script_sha1(), admit_script_source(), nkeys);
        w.arg(r.record);
        for (const Check& c : plan.checks) {
            if (c.reserve_index != static_cast<int>(index)) continue;
            for (const std::string& k : c.keys) w.arg(k);
            w.arg(c.reserved_record);
        }
        w.arg(static_cast<std::int64_t>(1));
        write_reserved_field(w, reserved_tag(r.measure), r.slot);
        w.arg(static_cast<std::int64_t>(0));
        w.arg(r.ttl);
        w.arg(extra);
        w.arg(static_cast<std::int64_t>(nchecks));
        for (const Check& c : plan.checks) {
            if (c.reserve_index != static_cast<int>(index)) continue;
            w.arg(static_cast<std::int64_t>(c.keys.size() + 1));
            w.arg(c.limit);
            w.arg(static_cast<std::int64_t>(0));
            write_reserved_field(w, reserved_tag(c.measure), c.reserved_oldest);
        }
        write_window_ttls(w, WindowTtls{});
        w.arg(static_cast<std::int64_t>(0));   // no admit quads
        w.arg(static_cast<std::int64_t>(0));   // no reject counters
        w.arg(static_cast<std::int64_t>(0));
        w.arg(static_cast<std::int64_t>(0));
        return true;
    } catch (...) {
        out.resize(mark);
        return false;
    }
}

bool decode_grant_reply(const RespValue& reply, std::size_t nchecks, std::vector<std::int64_t>& used,
                        std::string& err) {
    try {
        using T = RespValue::Type;
        if (reply.type == T::Error) {
            err = "the store failed a lease's grant: " + reply.str.substr(0, 200);
            return false;
        }
        const std::vector<RespValue>& e = reply.elements;
        std::size_t from = 0;
        if (reply.type == T::Array && !e.empty() && e[0].type == T::Integer && e[0].integer == 0) {
            from = 1;
        } else if (reply.type == T::Array && e.size() >= 2 && e[0].type == T::Integer && e[0].integer == 1 &&
                   e[1].type == T::Integer && e[1].integer >= 0 &&
                   static_cast<unsigned long long>(e[1].integer) < nchecks) {
            from = 2;
        }
        std::vector<std::int64_t> sums, held;   // (what reserved counters hold: not needed)
        if (from == 0 || !read_sums(e, from, nchecks, sums, held)) {
            err = "unexpected reply to a lease's grant";
            return false;
        }
        used = std::move(sums);
        return true;
    } catch (...) {
        err = "out of memory reading a lease's grant";
        return false;
    }
}

bool is_noscript_error(const RespValue& reply) {
    return reply.type == RespValue::Type::Error && reply.str.compare(0, 8, "NOSCRIPT") == 0;
}


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
        std::vector<std::int64_t> used, held;
        auto sums = [&](std::size_t from) { return read_sums(e, from, n, used, held); };
        if (reply.type == T::Array && !e.empty() && e[0].type == T::Integer && e[0].integer == 0 && sums(1)) {
            result = AdmissionResult{};
            result.used = std::move(used);
            result.held = std::move(held);
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
            r.held = std::move(held);
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

}  // namespace llmgw
