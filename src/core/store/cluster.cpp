// Redis Cluster's addressing (see cluster.h).
#include "core/store/cluster.h"

#include <algorithm>
#include <charconv>

namespace llmgw {

std::uint16_t crc16_xmodem(std::string_view bytes) {
    std::uint16_t crc = 0;
    for (unsigned char b : bytes) {
        crc = static_cast<std::uint16_t>(crc ^ (static_cast<std::uint16_t>(b) << 8));
        for (int i = 0; i < 8; ++i) {
            crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                      : static_cast<std::uint16_t>(crc << 1);
        }
    }
    return crc;
}

std::uint16_t key_slot(std::string_view key) {
    const std::size_t open = key.find('{');
    if (open != std::string_view::npos) {
        const std::size_t close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
    }
    return static_cast<std::uint16_t>(crc16_xmodem(key) % kClusterSlots);
}

namespace {

using T = RespValue::Type;

bool valid_host(std::string_view h) {
    if (h.size() > 255) return false;
    for (unsigned char c : h) {
        if (c <= 0x20 || c == 0x7f) return false;
    }
    return true;
}

bool to_port(std::string_view s, int& port) {
    int v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 1 || v > 65535) return false;
    port = v;
    return true;
}

bool slot_of(const RespValue& v, std::uint16_t& out) {
    if (v.type != T::Integer || v.integer < 0 || v.integer >= kClusterSlots) return false;
    out = static_cast<std::uint16_t>(v.integer);
    return true;
}

}  // namespace

bool parse_cluster_slots(const RespValue& reply, const ClusterAddress& answered_by, std::vector<SlotRange>& out,
                         std::string& err) {
    try {
        if (reply.type == T::Error) {
            err = "the store refused CLUSTER SLOTS: " + reply.str.substr(0, 200);
            return false;
        }
        if (reply.type != T::Array) {
            err = "unexpected reply to CLUSTER SLOTS (want an array of slot ranges)";
            return false;
        }
        std::vector<SlotRange> ranges;
        ranges.reserve(reply.elements.size());
        for (const RespValue& e : reply.elements) {
            SlotRange r;
            if (e.type != T::Array || e.elements.size() < 3 || !slot_of(e.elements[0], r.first) ||
                !slot_of(e.elements[1], r.last) || r.first > r.last) {
                err = "CLUSTER SLOTS: a range is not {first, last, master...} with 0 <= first <= last <= 16383";
                return false;
            }
            const RespValue& m = e.elements[2];
            if (m.type != T::Array || m.elements.size() < 2 || m.elements[0].type != T::String ||
                m.elements[1].type != T::Integer || m.elements[1].integer < 1 || m.elements[1].integer > 65535 ||
                !valid_host(m.elements[0].str)) {
                err = "CLUSTER SLOTS: a master is not {host, port 1..65535, ...}";
                return false;
            }
            r.master.host = m.elements[0].str.empty() ? answered_by.host : m.elements[0].str;
            r.master.port = static_cast<int>(m.elements[1].integer);
            ranges.push_back(std::move(r));
        }
        std::sort(ranges.begin(), ranges.end(),
                  [](const SlotRange& a, const SlotRange& b) { return a.first < b.first; });
        for (std::size_t i = 1; i < ranges.size(); ++i) {
            if (ranges[i].first <= ranges[i - 1].last) {
                err = "CLUSTER SLOTS: slot ranges overlap (" + std::to_string(ranges[i].first) + ")";
                return false;
            }
        }
        out = std::move(ranges);
        return true;
    } catch (...) {
        err = "out of memory reading CLUSTER SLOTS";
        return false;
    }
}

bool parse_redirect(const RespValue& reply, Redirect& out) {
    if (reply.type != T::Error) return false;
    const std::string_view s = reply.str;
    Redirect r;
    std::string_view rest;
    if (s.compare(0, 6, "MOVED ") == 0) {
        rest = s.substr(6);
    } else if (s.compare(0, 4, "ASK ") == 0) {
        r.ask = true;
        rest = s.substr(4);
    } else {
        return false;
    }
    const std::size_t sp = rest.find(' ');
    if (sp == std::string_view::npos) return false;
    int slot = 0;
    const std::string_view slot_text = rest.substr(0, sp);
    const auto rs = std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot);
    if (rs.ec != std::errc() || rs.ptr != slot_text.data() + slot_text.size() || slot < 0 || slot >= kClusterSlots) {
        return false;
    }
    const std::string_view addr = rest.substr(sp + 1);
    const std::size_t colon = addr.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    const std::string_view host = addr.substr(0, colon);
    if (!valid_host(host) || !to_port(addr.substr(colon + 1), r.to.port)) return false;
    try {
        r.to.host.assign(host);
    } catch (...) {
        return false;
    }
    r.slot = static_cast<std::uint16_t>(slot);
    out = std::move(r);
    return true;
}

std::size_t SlotMap::index_of(const ClusterAddress& a) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i] == a) return i;
    }
    nodes_.push_back(a);
    return nodes_.size() - 1;
}

void SlotMap::assign(const std::vector<SlotRange>& ranges) {
    nodes_.clear();
    std::fill(owner_.begin(), owner_.end(), -1);
    for (const SlotRange& r : ranges) {
        const auto i = static_cast<std::int32_t>(index_of(r.master));
        for (std::uint32_t s = r.first; s <= r.last && s < kClusterSlots; ++s) owner_[s] = i;
    }
}

void SlotMap::moved(const Redirect& r) {
    if (r.ask || r.slot >= kClusterSlots) return;
    owner_[r.slot] = static_cast<std::int32_t>(index_of(r.to));
}

const ClusterAddress* SlotMap::node_of(std::uint16_t slot) const {
    if (slot >= kClusterSlots || owner_[slot] < 0) return nullptr;
    return &nodes_[static_cast<std::size_t>(owner_[slot])];
}

}  // namespace llmgw
