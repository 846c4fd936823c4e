// Admission and accounting against a RESP2 store (Redis >= 5; EXPIRE NX of
// incr_commands needs >= 7.0, see there). No nginx, no I/O: these build
// command argv vectors (send them with resp_command) and decode replies.
//
// ---- The admission script ----
// One Lua script runs an AdmissionPlan atomically in the store with exactly
// the semantics of execute_admission (core/limits.cpp):
//   - checks in order, the first breach wins; a check sums its keys (GET,
//     absent = 0); add > 0: breach when sum + add > limit; otherwise breach
//     when sum >= limit. The arithmetic is exact over int64 (the script
//     splits decimals into 1e9 limbs: no double rounding above 2^53);
//   - no breach: the admit increments; a breach: the reject increments
//     instead, nothing else;
//   - an increment of 0 writes nothing (a reservation of nothing);
//   - an increment is INCRBY key delta, saturating at INT64_MAX/INT64_MIN on
//     overflow like the shared-memory store (keeping the key's TTL); then
//     EXPIRE key ttl when INCRBY answered the delta itself (it created the
//     key, or found it at 0), i.e. a new key's TTL is set once and never
//     pushed back by later increments;
//   - the reserved counters (core/metering/reservation.h) are kept as one
//     hash per scope, reserved_hash_field (core/metering/keys.h): a check
//     that reserves sums its measure's fields of the live slots (HGETALL,
//     once per hash); fields of lapsed slots, and fields at 0 of slots
//     before the current one, are deleted (HDEL) once the op is claimed;
//     a reservation is HINCRBY hash field delta, and EXPIRE hash
//     ttl when the field was not there (the TTL then moves on to the new
//     slot's, so the hash outlives its last live reservation by at most that
//     reservation's lifetime). (One HSET per hash with the sums done in Lua
//     costs Redis more than the HINCRBYs.)
// A counter that is not an integer (or a key of another type) makes the
// script reply an error; increments applied before it stay (Redis scripts
// do not roll back), as with a store that fails half-way.
//
// Encoding (EVALSHA sha numkeys KEYS... ARGV...):
//   KEYS = the keys of check 0, of check 1, ..., then the admit keys, then
//          the reject keys, then the reservation keys, each in plan order;
//          (a reserving check's last key is its scope's hash, after its
//          counters; a reservation's key is its scope's hash);
//   ARGV = nchecks, then per check: nkeys, limit, add ("0" when add <= 0),
//          reserved ("0", or the hash field of its oldest live slot, such
//          as "t11971102": its last key is the hash, and it sums the fields
//          of that measure from that slot on),
//          then nadmit, then per admit increment: delta, ttl,
//          then nreject, then per reject increment: delta, ttl,
//          then nreserve, then per reservation (those of plan.reserve
//          with a delta above 0): field, delta, ttl.
//   All numbers are decimal int64 text.
// Reply: {0, used...} admitted; {1, i, used...} rejected by check i,
// 0-based (the index in plan.checks, = AdmissionResult::check_index); used:
// one decimal string per check, the sum of its counters before this request
// (negative as "0"), = AdmissionResult::used.
//
// Send EVALSHA first; when the reply is a NOSCRIPT error (script cache
// flushed, store restarted, failover), send EVAL with the source, which also
// loads it for the next EVALSHA.
//
// ---- Redis Cluster (not supported) ----
// Keys are "llmgw:<kind>:<id>:<metric>:<window>:<bucket>". For a cluster,
// the scope would become a hash tag, "llmgw:{<kind>:<id>}:<metric>:...", so
// that all counters of one scope share a slot. One admission still spans
// the user, group and total scopes (three slots), and a script may only
// touch keys of one slot, so cluster support would need one script per
// scope (check, then increment) and a compensation step when a later scope
// rejects, i.e. admission would no longer be one atomic step.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/metering/keys.h"
#include "core/metering/limits.h"
#include "core/metering/reservation.h"
#include "core/store/resp.h"

namespace llmgw {

// The Lua source (the exact bytes hashed by SCRIPT LOAD).
const std::string& admit_script_source();
// SHA1 of the source, 40 lowercase hex digits (what SCRIPT LOAD returns).
// "" only if the digest could not be computed (out of memory).
std::string admit_script_sha1();

// The admission of plan reserving amounts as one command, written straight
// into out (core/store/resp.h RespWriter): {"EVALSHA", sha1, numkeys,
// KEYS..., ARGV...}, or with by_sha false {"EVAL", source, ...}; with an op
// key, the op guard ("Ops and cancels" below). false (out unchanged) when a
// reserving check has no record or memory ran out.
bool append_admit_command(std::string& out, const AdmissionPlan& plan, const ReserveAmounts& amounts,
                          bool by_sha = true, std::string_view op_key = {}, std::int64_t op_ttl = 0);
// The same as a string of its own; "" on failure.
std::string admit_command(const AdmissionPlan& plan, const ReserveAmounts& amounts = {}, bool by_sha = true);

// True for the store's "NOSCRIPT No matching script..." error reply.
bool is_noscript_error(const RespValue& reply);

// Fills result from the script's reply: {0}, or {1, i} with i a valid index
// into plan.checks (kind, retry_after, message and check_index come from
// that check). Anything else (an error reply, another shape, an index out of
// range) returns false with err a sentence, and result untouched.
bool decode_admit_reply(const RespValue& reply, const AdmissionPlan& plan, AdmissionResult& result,
                        std::string& err);

// The post-response accounting batch as ONE command: EVALSHA (by_sha) or
// EVAL of the accounting script, KEYS = the counters, ARGV = delta, ttl per
// counter. Each counter is INCRBY'd and, when that created it, given its
// TTL (the rule of the admission script). Reply: Integer, the number of
// counters. Empty on out of memory.
const std::string& account_script_source();
std::string account_script_sha1();
std::vector<std::string> account_command(const std::vector<Incr>& incrs, bool by_sha = true);

// The same script with a bound on distinct statistics ids. plain: counters
// always written. groups: the counters of one caller-named statistics id
// (member "<kind>:<id>", e.g. "model:openai/gpt-4o"), each with its
// overflow key (the same counter of "<provider>/other"). The script keeps
// the known members in the set kStatsIdsKey: a member already in it, or
// added while it holds fewer than max_ids members, gets its own counters;
// any other gets the overflow keys. The set is given ids_ttl seconds when
// created and is not renewed, so it starts afresh after that.
// The call is an op (see "Ops and cancels" below): it first claims op_key
// (SET NX EX op_ttl) and writes nothing when that fails (reply -1); at the
// end the op key records "w" and one character per group, '0' own keys,
// '1' overflow keys.
// releases: a held reservation (core/metering/reservation.h), released in
// the same call: each reserved counter (a field of its scope's hash) is
// HINCRBY'd minus its amount and deleted when that leaves it below 0, so a
// field or hash that had lapsed is not brought back (a field at 0 stays
// until a later slot's admission of the scope deletes it).
// Layout: KEYS = set, op key, plain keys, per group its keys then its
// overflow keys, then the release hashes; ARGV = "b", max_ids, ids_ttl,
// op_ttl, nplain, (delta, ttl) per plain counter, ngroups, per group:
// member, n, (delta, ttl) per counter, then, when something is released,
// nrelease and (field, -amount) per reservation with an amount above 0.
// Reply: Integer, the number of counters written (-1: cancelled before).
// A cancel (below) undoes the increments, not the releases: a reservation
// released twice is at worst released early.
struct BoundedIncrs {
    std::string member;
    std::vector<Incr> incrs;
    std::vector<std::string> overflow_keys;   // one per incr
};
// Written straight into out (false, out unchanged: a group whose overflow
// keys do not match its counters, or out of memory), or as a string of its
// own ("" on failure).
bool append_account_command(std::string& out, const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                            std::int64_t max_ids, std::int64_t ids_ttl, std::string_view op_key, std::int64_t op_ttl,
                            bool by_sha = true, const HeldReservation& releases = {});
std::string account_command_bounded(const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                                    std::int64_t max_ids, std::int64_t ids_ttl, std::string_view op_key,
                                    std::int64_t op_ttl, bool by_sha = true,
                                    const HeldReservation& releases = {});

// ---- Ops and cancels ----
// A call whose reply never came (time-out, connection lost) may still run
// later in the store: Redis runs the commands it has received even when the
// client has gone. Such a call is cancelled: every writing call carries a
// unique op key that the script claims (SET NX) before writing, recording
// what it did ('a' admitted, 'r' rejected, 'w...' accounted). The cancel
// script sets the op key to 'c' (a tombstone: a later run of the call finds
// its key taken and writes nothing) and, when the op had already run,
// undoes its increments (DECRBY of the keys it used that still exist, and
// of an admission's reservations HINCRBY of the fields that still exist).
// Whatever the order in which the store sees the call and its cancel, the
// call ends up counted nowhere in the store, as long as the call arrives
// within op_ttl of the cancel.
//
// admit_command with the op guard: the op key appended to KEYS, op_ttl to
// ARGV (a string of its own; "" on failure or without an op key). Reply
// {2}: the op was cancelled before it ran.
std::string admit_command_op(const AdmissionPlan& plan, const ReserveAmounts& amounts, std::string_view op_key,
                             std::int64_t op_ttl, bool by_sha = true);
// EVAL of the cancel script for an admission op or an accounting op, in
// RESP ("" on failure). Reply: 0 (the op had not run), 1 (its increments
// were undone).
const std::string& cancel_script_source();
std::string cancel_admit_command(const AdmissionPlan& plan, const ReserveAmounts& amounts, std::string_view op_key,
                                 std::int64_t op_ttl);
std::string cancel_account_command(const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                                   std::string_view op_key, std::int64_t op_ttl);

// The post-response accounting batch, pipelined (not atomic, not a script):
// per Incr, in order, two commands, so 2 * incrs.size() replies:
//   INCRBY key delta        -> Integer (the new value)
//   EXPIRE key ttl NX       -> Integer (1 when the TTL was set, 0 when the
//                              key already had one)
// EXPIRE ... NX (Redis >= 7.0) sets the TTL once per key, when the first
// write creates it; later writes never push it back, like the script. On an
// older server NX is a syntax error: pass expire_nx = false to send plain
// EXPIRE key ttl, which refreshes the TTL on every write; that is harmless
// for counters (each key is one window's bucket and every TTL outlives its
// window) but keeps a key up to one TTL after its last write. An INCRBY that
// would overflow int64 replies an error and leaves the counter unchanged.
std::vector<std::vector<std::string>> incr_commands(const std::vector<Incr>& incrs, bool expire_nx = true);

}  // namespace llmgw
