// Copying a parsed JSON value through JsonWriter (no nginx): used where a
// translation carries a caller's or provider's sub-document across unchanged
// (a tool's input schema, a tool call's arguments). Strings come out as valid
// UTF-8 (JsonWriter's rule); numbers keep their value, except an integer
// above INT64_MAX, which is written as a double.
#pragma once
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "core/json/writer.h"

namespace llmgw {

// Whether v nests no deeper than max levels (a scalar is depth 0, {} is 1).
// Bounded recursion: it never descends more than max + 1 levels.
bool json_depth_at_most(const rapidjson::Value& v, int max);

// s parsed into this thread's scratch document (valid until the next
// parse), when it is a JSON object nesting no deeper than max_depth; else
// nullptr and err says why (parse_scratch_object's reasons, or "JSON nested
// too deeply").
const rapidjson::Document* parse_scratch_bounded(std::string_view s, int max_depth, std::string& err);

// Writes v. The caller checks the depth first (json_depth_at_most).
void json_copy(JsonWriter& w, const rapidjson::Value& v);

// v as one compact JSON document.
std::string json_compact(const rapidjson::Value& v);

}  // namespace llmgw
