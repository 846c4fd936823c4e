// The cancel script and its commands (see cancel_script.h).
#include "core/store/cancel_script.h"

#include "core/store/script_parts.h"

#include <stdexcept>

namespace llmgw {

namespace {

// Cancels an op of the admission or accounting script whose call failed without a
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

}  // namespace

const std::string& cancel_script_source() {
    static const std::string source(kCancelScript);
    return source;
}

std::string cancel_admit_command(const AdmissionPlan& plan, const ReserveAmounts& amounts, std::string_view op_key,
                                 std::int64_t op_ttl, const LeaseTicket* lease) {
    return written([&](RespWriter& w) {
        // The counters, then the reservations (in their scope's hash) that
        // the admission wrote (not those taken from a lease; a grant beside
        // one lapses).
        const std::vector<Release> rel = admission_releases(plan, amounts, lease);
        const std::size_t nrel = rel.size();
        const std::size_t nkeys = 1 + plan.admit.size() + plan.reject.size() + nrel;
        const std::size_t nargs = 5 + plan.admit.size() + plan.reject.size() + 2 * nrel;
        write_script_head(w, nargs, false, std::string(), cancel_script_source(), nkeys);
        w.arg(op_key);
        for (const Incr& in : plan.admit) w.arg(in.key);
        for (const Incr& in : plan.reject) w.arg(in.key);
        write_release_keys(w, rel);
        w.arg(op_ttl);
        w.arg(std::string_view("adm"));
        w.arg(static_cast<std::int64_t>(plan.admit.size()));
        for (const Incr& in : plan.admit) w.arg(in.delta);
        w.arg(static_cast<std::int64_t>(plan.reject.size()));
        for (const Incr& in : plan.reject) w.arg(in.delta);
        write_release_args(w, rel);
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

}  // namespace llmgw
