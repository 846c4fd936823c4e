// libFuzzer target: what a store (or something posing as one) answers. The
// RESP reader in both shapes (the counter commands' default, and a cluster's
// topology), and each reply read as CLUSTER SLOTS and as a MOVED / ASK
// redirect: a malformed reply must be refused, never read past its bounds.
#include <cstdint>
#include <string>
#include <vector>

#include "core/store/cluster.h"
#include "core/store/resp.h"

using namespace llmgw;

namespace {

void read_all(const std::uint8_t* data, std::size_t size, RespShape shape) {
    RespReader r(64 * 1024, shape);
    if (!r.feed(reinterpret_cast<const char*>(data), size)) return;
    for (int i = 0; i < 64; ++i) {
        RespValue v;
        std::string err;
        const RespReader::Result res = r.next(v, err);
        if (res == RespReader::Result::Error && err.empty()) __builtin_trap();
        if (res != RespReader::Result::Reply) return;
        std::vector<SlotRange> ranges;
        std::string why;
        if (!parse_cluster_slots(v, ClusterAddress{"127.0.0.1", 7000}, ranges, why)) {
            if (why.empty()) __builtin_trap();
        } else {
            SlotMap map;
            map.assign(ranges);
            for (const SlotRange& s : ranges) {
                if (s.first > s.last || s.last >= kClusterSlots || map.node_of(s.first) == nullptr) __builtin_trap();
            }
        }
        Redirect red;
        if (parse_redirect(v, red) && (red.slot >= kClusterSlots || red.to.port < 1 || red.to.port > 65535)) {
            __builtin_trap();
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    read_all(data, size, RespShape());
    read_all(data, size, kRespTopologyShape);
    return 0;
}
