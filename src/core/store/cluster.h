// Redis Cluster's addressing, no nginx, no I/O: the slot of a key, the
// topology a node answers (CLUSTER SLOTS), and the redirects (MOVED, ASK)
// that send a command elsewhere. The groundwork of a cluster store
// (docs/scaling.md); the store itself does not use it yet.
//
// A key's slot is CRC16 (XMODEM) of the key modulo 16384, or of its hash
// tag: the bytes between the first '{' and the first '}' after it, when
// there are any. Keys with the same tag share a slot, which is what lets one
// script touch all the counters of one scope ("llmgw:{user:alice}:...").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/resp.h"

namespace llmgw {

constexpr std::uint16_t kClusterSlots = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as Redis Cluster uses.
std::uint16_t crc16_xmodem(std::string_view bytes);
// The slot of key (hash tag rules above).
std::uint16_t key_slot(std::string_view key);

struct ClusterAddress {
    std::string host;   // a name, an IPv4 address, or an IPv6 address without brackets
    int port = 0;       // 1..65535
    bool operator==(const ClusterAddress& o) const { return port == o.port && host == o.host; }
};

// One range of slots and the master that serves it.
struct SlotRange {
    std::uint16_t first = 0;
    std::uint16_t last = 0;   // inclusive
    ClusterAddress master;
};

// The reply to CLUSTER SLOTS (read with kRespTopologyShape): an array of
// {first, last, {host, port, id...}, {replica...}...}. Fills out with one
// range per element, the master being the first node; replicas are not
// kept. false with err a sentence for anything else: not an array, a range
// out of 0..16383 or reversed, ranges that overlap, a node without a host
// (or with one over 255 bytes, or with a control byte) or a port out of
// 1..65535. An empty host means "the node that answered": replaced by
// answered_by.
bool parse_cluster_slots(const RespValue& reply, const ClusterAddress& answered_by, std::vector<SlotRange>& out,
                         std::string& err);

// A redirect: the error reply "MOVED <slot> <host>:<port>" (the slot has a
// new owner: route it there from now on) or "ASK <slot> <host>:<port>" (this
// command only: send ASKING, then the command, to that node). The address
// splits at its last ':' (an IPv6 address keeps its own). false for any
// other reply, or one out of bounds.
struct Redirect {
    bool ask = false;
    std::uint16_t slot = 0;
    ClusterAddress to;
};
bool parse_redirect(const RespValue& reply, Redirect& out);

// Which node serves each slot: the ranges of the last topology read, then
// each MOVED applied to its slot.
class SlotMap {
public:
    // Replaces the map with ranges (parse_cluster_slots's). Slots no range
    // names have no node.
    void assign(const std::vector<SlotRange>& ranges);
    // A MOVED redirect: the slot's node from now on.
    void moved(const Redirect& r);
    // The node of slot; nullptr when none is known.
    const ClusterAddress* node_of(std::uint16_t slot) const;
    // The distinct nodes, in the order first seen.
    const std::vector<ClusterAddress>& nodes() const { return nodes_; }
    bool empty() const { return nodes_.empty(); }

private:
    std::size_t index_of(const ClusterAddress& a);
    std::vector<ClusterAddress> nodes_;
    std::vector<std::int32_t> owner_ = std::vector<std::int32_t>(kClusterSlots, -1);   // index into nodes_, -1 none
};

}  // namespace llmgw
