// What the store's scripts (admit_script, account_script, cancel_script)
// share: the saturating increment's Lua, a call's head, a held
// reservation's hashes and fields as arguments, the SHA1 of a source.
// Internal to core/store.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/metering/lease.h"
#include "core/metering/limits.h"
#include "core/metering/reservation.h"
#include "core/metering/windows.h"
#include "core/store/resp.h"

namespace llmgw {

// The saturating increment of both counter scripts: an increment that would
// pass INT64_MAX (INCRBY refuses it) sets the counter to the bound instead,
// keeping its TTL. A counter gets its TTL when INCRBY answers the increment
// itself, i.e. it created the counter (or found it at 0, when setting the
// TTL again only lengthens the life of a bucket that is read by its key):
// one command per counter instead of INCRBY and PTTL. With it, the Lua of
// window quads (below): window_ttls(a) reads the windows' TTLs from ARGV[a]
// on (their count, then each) and returns them with the next argument's
// index; bump_quad(k, delta, ttl) bumps the quad of counters from KEYS[k]
// on; bump_quads(k, a, nq, ttl) bumps nq quads from KEYS[k] on with their
// deltas from ARGV[a] on. Each returns an error reply, or nil.
extern const char kBumpLua[];

// A slot's field in its scope's hash, as one argument.
void write_reserved_field(RespWriter& w, char tag, std::int64_t slot);
// Reserved counters given back (core/metering/lease.h Release), as the
// accounting and cancel scripts take them: their hashes among the KEYS;
// ARGV their number, then per release its field and minus the amount.
void write_release_keys(RespWriter& w, const std::vector<Release>& releases);
void write_release_args(RespWriter& w, const std::vector<Release>& releases);
// A script call's head: EVALSHA sha1 or EVAL source, then the key count.
void write_script_head(RespWriter& w, std::size_t nargs, bool by_sha, const std::string& sha,
                       const std::string& source, std::size_t nkeys);
// Counters in window quads: kWindowCount consecutive keys (one counter's
// buckets of every window, in window order) share a delta, and a quad's
// i-th key has the i-th window's TTL. A script takes such a section as one
// delta per quad, the windows' TTLs once per call: a key costs a quarter
// of an argument instead of two (Redis turns every argument into a string
// of its own, twice: most of a script call's cost after its commands).
struct WindowTtls {
    std::int64_t ttl[kWindowCount] = {};
    bool known = false;
};
// Checks that incrs are in quads whose TTLs agree with t (taking them from
// the first quad when t has none yet); false when they are not.
bool add_quads(WindowTtls& t, const std::vector<Incr>& incrs);
// ARGV: the window count, then each window's TTL (0 when none is known).
void write_window_ttls(RespWriter& w, const WindowTtls& t);
// ARGV: the number of quads, then the delta of each.
void write_quad_deltas(RespWriter& w, const std::vector<Incr>& incrs);
inline std::size_t quad_args(const std::vector<Incr>& incrs) { return 1 + incrs.size() / kWindowCount; }

// SHA1 of a script's source, 40 lowercase hex digits; "" when the digest
// could not be computed.
std::string sha1_hex(const std::string& s) noexcept;

// The SHA1 of the script whose source Source() returns, computed once ("" when
// it could not be): what EVALSHA names.
template <const std::string& (*Source)()>
const std::string& script_sha1() {
    static const std::string sha = sha1_hex(Source());
    return sha;
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

}  // namespace llmgw
