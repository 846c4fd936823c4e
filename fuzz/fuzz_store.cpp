// libFuzzer target: what a store (or something posing as one) answers. The
// RESP reader in both shapes (the counter commands' default, and a
// cluster's topology), fed all at once and again in pieces (the replies
// must not depend on how the bytes arrived), and each reply read as every
// reply the gateway decodes: CLUSTER SLOTS, a MOVED / ASK redirect, the
// values of a counter read (MGET/HMGET), an admission script's verdict and a
// lease grant's sums. A malformed reply must be refused with a reason, never
// read past its bounds; what is accepted must be in bounds (slots, ports,
// check indices, as many values as keys).
//
// Input: byte 0 picks how the second feeding is cut; the rest is the bytes.
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "core/metering/limits.h"
#include "core/store/admit_script.h"
#include "core/store/cluster.h"
#include "core/store/read_batch.h"
#include "core/store/resp.h"
#include "fuzz_util.h"

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

// An admission plan of two scopes with every limit set (one check per
// limit and scope), as admit replies are decoded against.
const AdmissionPlan& sample_plan() {
    static const AdmissionPlan plan = [] {
        static Limits l;
        l.requests_per_minute = 5;
        l.requests_per_day = 100;
        l.tokens_per_day = 1000;
        l.tokens_per_month = 10000;
        l.cost_per_day_micros = 1000000;
        l.cost_per_month_micros = 5000000;
        static const std::vector<Scope> scopes{Scope{"user", "alice", &l}, Scope{"group", "eng", &l},
                                               Scope{"total", "all", nullptr}};
        return build_admission_plan(scopes, 1795268730, false, 600, false, 0);
    }();
    return plan;
}

void decode_all(const RespValue& v) {
    std::vector<SlotRange> ranges;
    std::string why;
    if (!parse_cluster_slots(v, ClusterAddress{"127.0.0.1", 7000}, ranges, why)) {
        FUZZ_CHECK(!why.empty());
    } else {
        SlotMap map;
        map.assign(ranges);
        for (const SlotRange& s : ranges) {
            FUZZ_CHECK(s.first <= s.last && s.last < kClusterSlots && map.node_of(s.first) != nullptr);
            FUZZ_CHECK(s.master.port >= 1 && s.master.port <= 65535 && !s.master.host.empty());
        }
    }
    Redirect red;
    if (parse_redirect(v, red)) FUZZ_CHECK(red.slot < kClusterSlots && red.to.port >= 1 && red.to.port <= 65535);

    // a read of three keys, one command (MGET), and of 2000 in chunks: this reply answers the first
    static const ReadBatch one = read_batch({"a", "b", "c"}, 100);
    std::vector<std::int64_t> values;
    std::string err;
    if (read_values(one, {v}, values, err)) {
        FUZZ_CHECK(values.size() == 3);
    } else {
        FUZZ_CHECK(!err.empty());
    }

    const AdmissionPlan& plan = sample_plan();
    AdmissionResult r;
    err.clear();
    if (decode_admit_reply(v, plan, r, err)) {
        FUZZ_CHECK(r.admitted ? r.check_index == -1
                              : r.check_index >= 0 && static_cast<std::size_t>(r.check_index) < plan.checks.size());
        FUZZ_CHECK(r.used.size() == plan.checks.size());
    } else {
        FUZZ_CHECK(!err.empty());
    }
    std::vector<std::int64_t> used;
    err.clear();
    if (decode_grant_reply(v, 2, used, err)) {
        FUZZ_CHECK(used.size() == 2);
    } else {
        FUZZ_CHECK(!err.empty());
    }
    (void)is_noscript_error(v);
}

// The replies (and the error that ended them) of bytes fed as cut.
struct Read {
    std::vector<std::string> replies;   // a digest of each: type and sizes
    bool error = false;
};

std::string digest(const RespValue& v) {
    std::string d = std::to_string(static_cast<int>(v.type)) + ":" + std::to_string(v.integer) + ":" + v.str + "[";
    for (const RespValue& e : v.elements) d += digest(e) + ",";
    return d + "]";
}

Read read_all(std::string_view bytes, RespShape shape, Splitter cut, bool decode) {
    RespReader r(64 * 1024, shape);
    Read out;
    std::size_t i = 0;
    for (;;) {
        RespValue v;
        std::string err;
        const RespReader::Result res = r.next(v, err);
        if (res == RespReader::Result::Error) {
            FUZZ_CHECK(!err.empty());
            out.error = true;
            return out;
        }
        if (res == RespReader::Result::Reply) {
            if (decode) decode_all(v);
            out.replies.push_back(digest(v));
            if (out.replies.size() >= 64) return out;
            continue;
        }
        if (i == bytes.size()) return out;
        const std::size_t n = cut.next(bytes.size() - i);
        if (!r.feed(bytes.data() + i, n)) {
            // refused: next() says why
            RespValue e;
            std::string err;
            FUZZ_CHECK(r.next(e, err) == RespReader::Result::Error && !err.empty());
            out.error = true;
            return out;
        }
        i += n;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    for (RespShape shape : {RespShape(), kRespTopologyShape}) {
        const Read whole = read_all(bytes, shape, Splitter(0, 0), true);
        const Read cut = read_all(bytes, shape, Splitter(1 + data[0] % 3, data[0]), false);
        // the same replies whatever the cuts (an error may come as soon as
        // the bad bytes arrive, so only the replies before it are compared)
        const std::size_t n = std::min(whole.replies.size(), cut.replies.size());
        for (std::size_t k = 0; k < n; ++k) FUZZ_CHECK(whole.replies[k] == cut.replies[k]);
        if (whole.replies.size() < 64 && cut.replies.size() < 64) {
            FUZZ_CHECK(whole.error == cut.error && whole.replies.size() == cut.replies.size());
        }
    }
    return 0;
}
