// Shared by the unit tests that read store replies: RespValue trees built
// by hand (an integer, a string of a type, an array).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/store/resp.h"

namespace llmgw {
namespace test {

inline RespValue integer(long long v) {
    RespValue r;
    r.type = RespValue::Type::Integer;
    r.integer = v;
    return r;
}

inline RespValue text(RespValue::Type type, std::string s) {
    RespValue r;
    r.type = type;
    r.str = std::move(s);
    return r;
}

inline RespValue array(std::vector<RespValue> e) {
    RespValue r;
    r.type = RespValue::Type::Array;
    r.elements = std::move(e);
    return r;
}

}  // namespace test
}  // namespace llmgw
