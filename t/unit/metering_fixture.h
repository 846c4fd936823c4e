// Shared by the metering unit tests: a caller's scopes (user "alice" in
// group "eng", and the total), a map standing in for the store, and a price.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/metering/limits.h"
#include "core/metering/pricing.h"

namespace llmgw {
namespace test {

inline std::vector<Scope> caller_scopes(const Limits& user, const Limits& group) {
    return {Scope{"user", "alice", &user}, Scope{"group", "eng", &group}, Scope{"total", "all", nullptr}};
}

// 2 micro-USD per input token, 10 per output token.
inline Price price_2_10() {
    Price p;
    p.input_micros_per_mtok = 2'000'000;
    p.output_micros_per_mtok = 10'000'000;
    return p;
}

struct MapKv : KvTxn {
    std::map<std::string, std::int64_t> m;
    std::int64_t get(const std::string& k) override {
        const auto it = m.find(k);
        return it == m.end() ? 0 : it->second;
    }
    bool incr(const std::string& k, std::int64_t d, std::int64_t) override {
        m[k] += d;
        return true;
    }
};

}  // namespace test
}  // namespace llmgw
