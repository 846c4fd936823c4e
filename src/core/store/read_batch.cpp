// Reading counters from a RESP2 store (see read_batch.h).
#include "core/store/read_batch.h"

#include <cstdlib>
#include <map>

#include "core/metering/keys.h"

namespace llmgw {

ReadBatch read_batch(const std::vector<std::string>& keys, std::size_t chunk) {
    ReadBatch b;
    if (chunk == 0) chunk = 1;
    b.at.resize(keys.size());
    constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    std::size_t mget = kNone;                     // the MGET being filled
    std::map<std::string, std::size_t> hmget;    // hash -> the HMGET being filled
    std::string hash, field;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        if (reserved_hash_field(keys[i], hash, field)) {
            auto it = hmget.find(hash);
            if (it == hmget.end() || b.commands[it->second].size() - 2 >= chunk) {
                b.commands.push_back({"HMGET", hash});
                it = hmget.insert_or_assign(hash, b.commands.size() - 1).first;
            }
            std::vector<std::string>& cmd = b.commands[it->second];
            cmd.push_back(field);
            b.at[i] = {it->second, cmd.size() - 3};
            continue;
        }
        if (mget == kNone || b.commands[mget].size() - 1 >= chunk) {
            b.commands.push_back({"MGET"});
            mget = b.commands.size() - 1;
        }
        b.commands[mget].push_back(keys[i]);
        b.at[i] = {mget, b.commands[mget].size() - 2};
    }
    return b;
}

bool read_values(const ReadBatch& batch, const std::vector<RespValue>& replies, std::vector<std::int64_t>& values,
                 std::string& err) {
    try {
        values.clear();
        if (replies.size() != batch.commands.size()) {
            err = "short reply to a counter read";
            return false;
        }
        for (std::size_t c = 0; c < replies.size(); ++c) {
            const std::vector<std::string>& cmd = batch.commands[c];
            const std::size_t want = cmd.size() - (cmd[0] == "MGET" ? 1 : 2);
            if (replies[c].type != RespValue::Type::Array || replies[c].elements.size() != want) {
                err = "unexpected reply to " + cmd[0];
                return false;
            }
        }
        values.reserve(batch.at.size());
        for (const auto& [c, e] : batch.at) {
            const RespValue& el = replies[c].elements[e];
            if (el.type == RespValue::Type::Nil) {
                values.push_back(0);
            } else if (el.type == RespValue::Type::Integer) {
                values.push_back(el.integer);
            } else if (el.type == RespValue::Type::String) {
                values.push_back(std::strtoll(el.str.c_str(), nullptr, 10));
            } else {
                err = "unexpected element in " + batch.commands[c][0] + " reply";
                values.clear();
                return false;
            }
        }
        return true;
    } catch (...) {
        err = "out of memory reading counters";
        values.clear();
        return false;
    }
}

}  // namespace llmgw
