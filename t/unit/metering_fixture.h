// Shared by the metering unit tests: a caller's scopes (user "alice" in
// group "eng", and the total) and a map standing in for the store.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/metering/limits.h"

namespace llmgw {
namespace test {

inline std::vector<Scope> caller_scopes(const Limits& user, const Limits& group) {
    return {Scope{"user", "alice", &user}, Scope{"group", "eng", &group}, Scope{"total", "all", nullptr}};
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
