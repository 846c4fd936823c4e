// The one home of every store key the gateway writes or reads. Writers
// (admission plans, accounting, last-seen stamps), readers (the admin usage
// view) and the shared-memory entries all build their keys here.
//
//   counter    llmgw:<kind>:<id>:<metric>:<window>:<bucket>
//   reserved   llmgw:<kind>:<id>:rtok:rsv:<slot>   (tokens reserved in one slot,
//              llmgw:<kind>:<id>:rcost:rsv:<slot>   cost; core/metering/reservation.h)
//   reserved   llmgw:<kind>:<id>:rsv                (in Redis: the reserved counters of a
//   (Redis)      fields t<slot>, c<slot>, r<slot>     scope as one hash, docs/store.md;
//                                                     r: requests, held by leases only)
//   last seen  llmgw:<kind>:<id>:seen
//   shm entry  llmgw:<kind>:<id>:<window>:<bucket>   (a counter key without its metric)
//   scope      llmgw:<kind>:<id>:                     (prefix of all of the above)
//   op         llmgw:op:<worker-unique id>            (a store call's guard, docs/store.md)
//   stats ids  llmgw:stats:ids                        (the bounded set of statistics ids, Redis)
//
// A Redis Cluster (KeyLayout::Cluster, docs/store.md#redis-cluster) runs a
// script on the keys of one slot only, so there every scope is a hash tag:
//   llmgw:{user:<id>}:<metric>:<window>:<bucket>   (and :seen, :rsv, ...; groups alike)
//   llmgw:{stats}:<kind>:<id>:...      every other scope (total, providers,
//                                      tool servers, agents, and the
//                                      statistics scopes callers name, whose
//                                      ids are bounded in the same slot by)
//   llmgw:{stats}:ids
//   llmgw:{<tag>}:op:<id>              an op beside the keys of its call
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "core/metering/windows.h"

namespace llmgw {

constexpr const char* kStatsIdsKey = "llmgw:stats:ids";

// The layout every function here writes (and the shared-memory entries
// too, which never leave the process). Set once per process from the
// configuration, before any key is made (a worker's start); Plain unless
// the store is a Redis Cluster.
enum class KeyLayout { Plain, Cluster };
void set_key_layout(KeyLayout layout);
KeyLayout key_layout();
// The set of statistics ids in the current layout.
std::string_view stats_ids_key();
// The hash tag of key: the bytes between its first '{' and the first '}'
// after it, when not empty ("" otherwise: the whole key is hashed).
std::string_view hash_tag(std::string_view key);
// The failure feed's shared list (spec "Events"): LPUSH + LTRIM, no TTL.
constexpr const char* kEventsKey = "llmgw:events";

std::string counter_key(std::string_view kind, std::string_view id, std::string_view metric, Window w,
                        std::string_view bucket);
// The same written into out (a reused buffer: no allocation once it is big
// enough).
void counter_key_into(std::string& out, std::string_view kind, std::string_view id, std::string_view metric, Window w,
                      std::string_view bucket);
// Its size, and its bytes at p (room for that size; returns the end): for a
// writer that needs the length first (a RESP bulk string).
std::size_t counter_key_size(std::string_view kind, std::string_view id, std::string_view metric, Window w,
                             std::string_view bucket);
char* put_counter_key(char* p, std::string_view kind, std::string_view id, std::string_view metric, Window w,
                      std::string_view bucket);
std::string seen_key(std::string_view kind, std::string_view id);
// The same written into out (its capacity reused).
void assign_seen_key(std::string& out, std::string_view kind, std::string_view id);
// The reserved counter of a scope's slot; tokens ("rtok") when tokens, else cost ("rcost").
std::string reserved_key(std::string_view kind, std::string_view id, bool tokens, std::int64_t slot);
// The same from the scope's prefix ("llmgw:<kind>:<id>:", scope_prefix).
std::string reserved_key_in(std::string_view scope, bool tokens, std::int64_t slot);
// The parts of a reserved counter's key: its scope prefix ("llmgw:<kind>:<id>:",
// a view into key), slot and measure. False (outputs untouched) for any other key.
bool split_reserved_key(std::string_view key, std::string_view& scope, std::int64_t& slot, bool& tokens);
// Where Redis keeps a reserved counter: the hash of its scope
// ("llmgw:<kind>:<id>:rsv") and its field there ("t<slot>" tokens, "c<slot>"
// cost). False (outputs untouched) for any other key.
// (A third measure lives only in that hash: "r<slot>", requests a worker's
// lease holds, core/metering/lease.h.)
bool reserved_hash_field(std::string_view key, std::string& hash, std::string& field);
// The field of a slot in that hash, written into out.
// The tags of a field: its measure.
constexpr char kReservedTokensTag = 't';
constexpr char kReservedCostTag = 'c';
constexpr char kReservedRequestsTag = 'r';
void assign_reserved_field(std::string& out, char tag, std::int64_t slot);
// The same written at p, which has room for kReservedFieldMax bytes;
// returns the end.
constexpr std::size_t kReservedFieldMax = 24;
char* put_reserved_field(char* p, char tag, std::int64_t slot);
// The key of a scope's reserved counters kept as one record (the Redis hash,
// the shared-memory ring entry): "llmgw:<kind>:<id>:rsv" from the scope
// prefix split_reserved_key gives, written into out (its capacity reused).
void assign_reserved_record_key(std::string& out, std::string_view scope);
// The same from the scope's kind and id.
std::string reserved_record_key(std::string_view kind, std::string_view id);
// Whether key names such a record.
bool is_reserved_record_key(std::string_view key);
// The scope prefix of such a record ("llmgw:<kind>:<id>:", a view into
// record); "" when record is not one.
std::string_view reserved_record_scope(std::string_view record);
std::string scope_prefix(std::string_view kind, std::string_view id);

// The shared-memory entry key of a scope's window, written into out (its
// capacity is reused: this runs for every scope and window of a request).
void assign_entry_key(std::string& out, std::string_view kind, std::string_view id, Window w,
                      std::string_view bucket);
// The same in two steps, for every window of one scope: the scope's part
// ("llmgw:<kind>:<id>:") written once (returns its length), then each
// window's part written after it, over the previous window's.
std::size_t assign_entry_scope(std::string& out, std::string_view kind, std::string_view id);
void assign_entry_window(std::string& out, std::size_t scope_len, Window w, std::string_view bucket);
// Splits a counter key into its entry key and its metric name. The last
// three ':'-separated parts are metric, window and bucket (an id may itself
// contain ':'). False (out untouched) when key has fewer parts.
bool split_counter_key(std::string_view key, std::string& entry, std::string_view& metric);

// The guard key of one store call: "llmgw:op:" + unique, or with near's
// hash tag "llmgw:{<tag>}:op:" + unique (in the slot of near: the keys of
// the call it guards).
std::string op_key(std::string_view unique, std::string_view near = {});

// The keys the admin usage view reads for one scope, in this order.
enum UsageSlot {
    kUsageReqMin, kUsageReqDay, kUsageInDay, kUsageOutDay, kUsageInMonth, kUsageOutMonth,
    kUsageCostDay, kUsageCostMonth, kUsageRejDay, kUsageSeen, kUsageSlots
};
void append_usage_keys(std::string_view kind, std::string_view id, std::time_t now, std::vector<std::string>& out);

// Keys one admin read may take (spec "Limits": admin read cap); a larger
// read is refused, never truncated.
inline constexpr std::size_t kMaxAdminReadKeys = 64000;

}  // namespace llmgw
