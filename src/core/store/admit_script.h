// Admission against a RESP2 store (Redis >= 5). No nginx, no I/O: this
// writes the command (core/store/resp.h RespWriter) and decodes the reply.
// The accounting is account_script.h; the cancel of a call that got no
// reply is cancel_script.h.
//
// ---- The admission script ----
// One Lua script runs an AdmissionPlan atomically in the store with exactly
// the semantics of execute_admission (core/limits.cpp):
//   - checks in order, the first breach wins; a check sums its keys (all
//     checks' counters read with one MGET, absent = 0; a key of another
//     type reads as absent there, and fails the INCRBY that writes it); add > 0: breach when sum + add > limit; otherwise breach
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
// A counter that is not an integer (or a key of another type that the
// script writes) makes the script reply an error; increments applied before it stay (Redis scripts
// do not roll back), as with a store that fails half-way.
//
// Encoding (EVALSHA sha numkeys KEYS... ARGV...):
//   KEYS = the reservation keys (each its scope's hash), then the keys of
//          check 0, of check 1, ..., then the admit keys, then the reject
//          keys, each in plan order (a reserving check's last key is its
//          scope's hash, after its counters);
//   ARGV = nreserve, then per reservation (those of plan.reserve with a
//          delta or a grant above 0, and not taken from a lease): field
//          ("t", "c" or "r" and the slot), delta, ttl,
//          grant ("0", or a lease's grant, core/metering/lease.h: the delta
//          grows by it when every check of that hash and measure has
//          sum (as replied) + add + grant <= limit),
//          then nchecks, then per check: nkeys, limit, add ("0" when
//          add <= 0), reserved ("0", or the hash field of its oldest live
//          slot, such as "t11971102": its last key is the hash, and it sums
//          the fields of that measure from that slot on),
//          then the window count W and each window's TTL, then the
//          number of admit quads and each one's delta (the admit counters
//          come in window quads, script_parts.h: a counter's buckets of
//          every window in window order, one delta, the i-th with the i-th
//          window's TTL), then nreject, the reject counters' one delta and
//          one TTL (they share them).
//   A reservation taken from a worker's lease (LeaseUse::Hit) writes
//   nothing in the reservations, and its checks as the default mode does
//   (their counters, add 0, no reserved sum).
//   All numbers are decimal int64 text.
// Reply: {0, used..., held...} admitted; {1, i, used..., held...} rejected
// by check i, 0-based (the index in plan.checks, = AdmissionResult::check_index);
// used: one decimal string per check, the sum of its counters before this
// request (negative as "0"), = AdmissionResult::used; held: one per check,
// the part of that sum its reserved counters hold ("0" for a check that
// reads none), = AdmissionResult::held. (A reply without held, as before
// v9, is read with held empty.)
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
//
// ---- A lease's grant in the background ----
// The same script with one reservation (a delta of 0 and the grant), the
// checks of that reservation (each add 0 and its reserved sum), no admit
// and no reject counters, no op guard: the grant is added when no check is
// breached and each has sum + grant <= limit. Reply as above, with the sums
// of those checks only.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/metering/keys.h"
#include "core/metering/lease.h"
#include "core/metering/limits.h"
#include "core/metering/reservation.h"
#include "core/store/resp.h"

namespace llmgw {

// The Lua source (the exact bytes hashed by SCRIPT LOAD).
const std::string& admit_script_source();
// SHA1 of the source, 40 lowercase hex digits (what SCRIPT LOAD returns).
// "" only if the digest could not be computed (out of memory).
const std::string& admit_script_sha1();

// The admission of plan reserving amounts as one command, written straight
// into out (core/store/resp.h RespWriter): {"EVALSHA", sha1, numkeys,
// KEYS..., ARGV...}, or with by_sha false {"EVAL", source, ...}; with an op
// key, the op guard (admit_command_op below). false (out unchanged) when a
// reserving check has no record, the admit counters are not in window
// quads, the reject counters do not share their delta and TTL, or memory
// ran out.
bool append_admit_command(std::string& out, const AdmissionPlan& plan, const ReserveAmounts& amounts,
                          bool by_sha = true, std::string_view op_key = {}, std::int64_t op_ttl = 0,
                          const LeaseTicket* lease = nullptr);
// The same as a string of its own; "" on failure.
std::string admit_command(const AdmissionPlan& plan, const ReserveAmounts& amounts = {}, bool by_sha = true);

// A lease's grant of extra on reservation index of plan (its checks: those
// with that reserve_index), written into out; false (out unchanged) when
// the index or a check is not usable, or memory ran out.
bool append_grant_command(std::string& out, const AdmissionPlan& plan, std::size_t index, std::int64_t extra,
                          bool by_sha = true);
// Its reply: the sums of the reservation's checks (in plan order) into used;
// false with err a sentence for an error or another shape.
bool decode_grant_reply(const RespValue& reply, std::size_t nchecks, std::vector<std::int64_t>& used,
                        std::string& err);

// True for the store's "NOSCRIPT No matching script..." error reply.
bool is_noscript_error(const RespValue& reply);

// Fills result from the script's reply: {0}, or {1, i} with i a valid index
// into plan.checks (kind, retry_after, message and check_index come from
// that check). Anything else (an error reply, another shape, an index out of
// range) returns false with err a sentence, and result untouched.
bool decode_admit_reply(const RespValue& reply, const AdmissionPlan& plan, AdmissionResult& result,
                        std::string& err);

// admit_command with the op guard (cancel_script.h): the op key appended to
// KEYS, op_ttl to ARGV (a string of its own; "" on failure or without an op
// key). The script claims the op key ('a' admitted, 'r' rejected) before
// any write. Reply {2}: the op was cancelled before it ran.
std::string admit_command_op(const AdmissionPlan& plan, const ReserveAmounts& amounts, std::string_view op_key,
                             std::int64_t op_ttl, bool by_sha = true, const LeaseTicket* lease = nullptr);

}  // namespace llmgw
