// The post-response accounting against a RESP2 store: one script call
// writes a response's counters and settles its reservation. No nginx, no
// I/O: this writes the command (core/store/resp.h RespWriter).
//
// Each counter is INCRBY'd and, when that created it (INCRBY answered the
// delta itself), given its TTL, the rule of the admission script
// (admit_script.h); an increment that would pass INT64_MAX sets the counter
// to INT64_MAX, keeping its TTL.
//
// plain: counters always written. groups: the counters of one caller-named
// statistics id (member "<kind>:<id>", e.g. "model:openai/gpt-4o"), each
// with its overflow key (the same counter of "<provider>/other"). The script
// keeps the known members in the set kStatsIdsKey: a member already in it,
// or added while it holds fewer than max_ids members, gets its own counters;
// any other gets the overflow keys. The set is given ids_ttl seconds when
// created and is not renewed, so it starts afresh after that.
// The call is an op (cancel_script.h): it first claims op_key (SET NX EX
// op_ttl) and writes nothing when that fails (reply -1); at the end the op
// key records "w" and one character per group, '0' own keys, '1' overflow
// keys.
// releases: reserved counters given back in the same call (a request's own
// reservations, a worker's lease or part of one: core/metering/lease.h):
// each (a field of its scope's hash) is HINCRBY'd minus its amount and deleted when that leaves it below 0, so a
// field or hash that had lapsed is not brought back (a field at 0 stays
// until a later slot's admission of the scope deletes it).
// The counters of plain and of each group come in window quads
// (script_parts.h: a counter's buckets of every window, in window order,
// one delta; the i-th of a quad has the i-th window's TTL); a command is
// not written for counters that do not.
// Layout (EVALSHA sha numkeys KEYS... ARGV...): KEYS = set, op key, plain
// keys, per group its keys then its overflow keys, then the release hashes;
// ARGV = max_ids, ids_ttl, op_ttl, the window count W and each window's
// TTL, the number of plain quads and each one's delta, ngroups, per group:
// member, its number of quads and each one's delta, then, when something
// is released, nrelease and (field, -amount) per release. All numbers are
// decimal int64 text.
// Reply: Integer, the number of counters written (-1: cancelled before).
// A cancel undoes the increments, not the releases: a reservation released
// twice is at worst released early.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/metering/accounting.h"
#include "core/metering/lease.h"
#include "core/metering/limits.h"

namespace llmgw {

// The Lua source (the exact bytes hashed by SCRIPT LOAD) and its SHA1 ("" only
// when the digest could not be computed).
const std::string& account_script_source();
const std::string& account_script_sha1();

struct BoundedIncrs {
    std::string member;
    std::vector<Incr> incrs;
    std::vector<std::string> overflow_keys;   // one per incr
};

// Written straight into out (false, out unchanged: counters not in window
// quads, a group whose overflow keys do not match its counters, or out of
// memory), or as a string of its
// own ("" on failure). by_sha false: EVAL with the source.
bool append_account_command(std::string& out, const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                            std::int64_t max_ids, std::int64_t ids_ttl, std::string_view op_key, std::int64_t op_ttl,
                            bool by_sha = true, const std::vector<Release>& releases = {});
std::string account_command(const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                            std::int64_t max_ids, std::int64_t ids_ttl, std::string_view op_key, std::int64_t op_ttl,
                            bool by_sha = true, const std::vector<Release>& releases = {});

// Deltas stamped at now as the script's counters (a shared store's, TTLs
// not in-process), appended to out: a delta with an overflow id a bounded
// group (member "<kind>:<id>"), the others plain. What a cancel of the call
// names (cancel_script.h).
struct AccountIncrs {
    std::vector<Incr> plain;
    std::vector<BoundedIncrs> groups;
};
void append_account_incrs(AccountIncrs& out, const std::vector<ScopeDelta>& deltas, std::time_t now);

// The same command from scope deltas, each group of them stamped at its
// moment (a batch's minutes, core/metering/delta_merge.h): a delta with an
// overflow id is a bounded group (member "<kind>:<id>"), the others plain
// counters; each metric of a delta above or below 0 is one quad. The keys
// are written as the command is, through one reused buffer, with no string
// per counter. Written exactly as append_account_command of the Incrs
// append_incrs makes of the same deltas.
struct StampedDeltas {
    const WindowStamps* at;
    const std::vector<ScopeDelta>* deltas;
};
bool append_account_deltas(std::string& out, const std::vector<StampedDeltas>& batch, std::int64_t max_ids,
                           std::int64_t ids_ttl, std::string_view op_key, std::int64_t op_ttl, bool by_sha = true,
                           const std::vector<Release>& releases = {});

}  // namespace llmgw
