// Reading a parsed RapidJSON value (no nginx): the accessors the answer
// readers, the request translations and the model lists share. Callers
// bring them in with `using json::sv;` and the like.
#pragma once
#include <cstdint>
#include <string_view>

#include <rapidjson/document.h>

namespace llmgw {
namespace json {

// A string value's bytes; v must be a string.
inline std::string_view sv(const rapidjson::Value& v) { return std::string_view(v.GetString(), v.GetStringLength()); }

// The member's value; nullptr when o is not an object, or the member is
// absent or null (null reads as absent).
inline const rapidjson::Value* get(const rapidjson::Value& o, const char* name) {
    if (!o.IsObject()) return nullptr;
    auto it = o.FindMember(name);
    if (it == o.MemberEnd() || it->value.IsNull()) return nullptr;
    return &it->value;
}

// The member's value when it is a string; nullptr otherwise (absent, null,
// another type).
inline const rapidjson::Value* get_str(const rapidjson::Value& o, const char* name) {
    const rapidjson::Value* v = get(o, name);
    return v != nullptr && v->IsString() ? v : nullptr;
}

// A count: a non-negative integer that fits int64; -1 when v is absent
// (nullptr) or not one.
inline std::int64_t count(const rapidjson::Value* v) {
    if (v == nullptr || !v->IsInt64() || v->GetInt64() < 0) return -1;
    return v->GetInt64();
}

}  // namespace json
}  // namespace llmgw
