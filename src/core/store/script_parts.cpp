// What the store's scripts share (see script_parts.h).
#include "core/store/script_parts.h"

#include "core/metering/keys.h"

#include <openssl/evp.h>

#include <new>

namespace llmgw {

const char kBumpLua[] = R"LUA(local function bump(key, delta, ttl)
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
local function window_ttls(a)
  local ttl = {}
  for i = 1, tonumber(ARGV[a]) do ttl[i] = ARGV[a + i] end
  return ttl, a + 1 + #ttl
end
local function bump_quad(k, delta, ttl)
  for i = 1, #ttl do
    local e = bump(KEYS[k + i - 1], delta, ttl[i])
    if e then return e end
  end
  return nil
end
local function bump_quads(k, a, nq, ttl)
  for q = 0, nq - 1 do
    local e = bump_quad(k + q * #ttl, ARGV[a + q], ttl)
    if e then return e end
  end
  return nil
end
)LUA";

void write_reserved_field(RespWriter& w, char tag, std::int64_t slot) {
    char field[kReservedFieldMax];
    w.arg(std::string_view(field, static_cast<std::size_t>(put_reserved_field(field, tag, slot) - field)));
}

void write_release_keys(RespWriter& w, const std::vector<Release>& releases) {
    for (const Release& r : releases) w.arg(r.record);
}

void write_release_args(RespWriter& w, const std::vector<Release>& releases) {
    w.arg(static_cast<std::int64_t>(releases.size()));
    for (const Release& r : releases) {
        write_reserved_field(w, reserved_tag(r.measure), r.slot);
        w.arg(-r.amount);
    }
}

void write_script_head(RespWriter& w, std::size_t nargs, bool by_sha, const std::string& sha,
                       const std::string& source, std::size_t nkeys) {
    if (by_sha && sha.empty()) throw std::bad_alloc();   // the digest could not be computed
    w.command(3 + nkeys + nargs);
    w.arg(by_sha ? std::string_view("EVALSHA") : std::string_view("EVAL"));
    w.arg(by_sha ? sha : source);
    w.arg(static_cast<std::int64_t>(nkeys));
}

bool add_quads(WindowTtls& t, const std::vector<Incr>& incrs) {
    constexpr std::size_t kW = kWindowCount;
    if (incrs.size() % kW != 0) return false;
    if (!incrs.empty() && !t.known) {
        for (std::size_t i = 0; i < kW; ++i) t.ttl[i] = incrs[i].ttl;
        t.known = true;
    }
    for (std::size_t q = 0; q < incrs.size(); q += kW) {
        for (std::size_t i = 0; i < kW; ++i) {
            if (incrs[q + i].delta != incrs[q].delta || incrs[q + i].ttl != t.ttl[i]) return false;
        }
    }
    return true;
}

void write_window_ttls(RespWriter& w, const WindowTtls& t) {
    w.arg(static_cast<std::int64_t>(kWindowCount));
    for (std::int64_t ttl : t.ttl) w.arg(ttl);
}

void write_quad_deltas(RespWriter& w, const std::vector<Incr>& incrs) {
    w.arg(static_cast<std::int64_t>(incrs.size() / kWindowCount));
    for (std::size_t q = 0; q < incrs.size(); q += kWindowCount) w.arg(incrs[q].delta);
}

std::string sha1_hex(const std::string& s) noexcept {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(s.data(), s.size(), md, &len, EVP_sha1(), nullptr) != 1 || len != 20) return std::string();
    static const char kHex[] = "0123456789abcdef";
    try {
        std::string hex;
        for (unsigned int i = 0; i < len; ++i) {
            hex.push_back(kHex[md[i] >> 4]);
            hex.push_back(kHex[md[i] & 15]);
        }
        return hex;
    } catch (...) {
        return std::string();
    }
}

}  // namespace llmgw
