// Reading counters from a RESP2 store (no nginx, no I/O): the commands that
// read a list of counter keys and the values from their replies.
//
// Plain counters are read with MGET, at most `chunk` keys a command (a reply
// array over kRespMaxArray elements is refused). Reserved counters
// (core/metering/reservation.h) live as fields of their scope's hash
// (reserved_hash_field, core/metering/keys.h) and are read with one HMGET
// per hash (again at most `chunk` fields a command). The values come back
// in the order of the keys.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/store/resp.h"

namespace llmgw {

struct ReadBatch {
    std::vector<std::vector<std::string>> commands;
    // Per key: the command and the element of its reply holding its value.
    std::vector<std::pair<std::size_t, std::size_t>> at;
};

ReadBatch read_batch(const std::vector<std::string>& keys, std::size_t chunk);

// The values of the batch's keys from the replies to its commands: absent
// (nil) is 0, an integer or a decimal string its value. False, with err
// saying why, when the replies do not match the commands (not an array, a
// wrong count, an element that is neither). Never throws.
bool read_values(const ReadBatch& batch, const std::vector<RespValue>& replies, std::vector<std::int64_t>& values,
                 std::string& err);

}  // namespace llmgw
