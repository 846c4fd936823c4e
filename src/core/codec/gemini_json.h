// JSON helpers shared by the Gemini translation files (not for the shell):
// a bounded, iterative parse and a writer whose strings always come out as
// valid UTF-8 and which copies a parsed value without recursion.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "core/json/read.h"

namespace llmgw {
namespace gemini {

// Documents nested deeper than this are invalid.
constexpr int kMaxDepth = 256;

// Parses s into doc (iterative parser, full precision numbers). false when
// s is not one JSON document or nests deeper than kMaxDepth.
bool parse_json(std::string_view s, rapidjson::Document& doc);
// The same into this thread's scratch document (core/json/scratch.h), valid
// until the next scratch parse; nullptr when s is not JSON or too deep.
const rapidjson::Document* parse_json_scratch(std::string_view s);

// core/json/read.h's accessors: a string's bytes, a member (null reads as
// absent, as OpenAI reads it).
using json::get;
using json::sv;

// Compact JSON output. Strings are written as valid UTF-8 (invalid bytes
// become U+FFFD).
class JsonOut {
public:
    JsonOut() : w_(buf_) {}
    JsonOut& begin_object() { w_.StartObject(); return *this; }
    JsonOut& end_object() { w_.EndObject(); return *this; }
    JsonOut& begin_array() { w_.StartArray(); return *this; }
    JsonOut& end_array() { w_.EndArray(); return *this; }
    JsonOut& key(std::string_view k) { string(k, true); return *this; }
    JsonOut& str(std::string_view v) { string(v, false); return *this; }
    JsonOut& i64(std::int64_t v) { w_.Int64(v); return *this; }
    JsonOut& real(double v) { w_.Double(v); return *this; }   // v finite
    JsonOut& raw(std::string_view json) {   // one complete JSON value
        w_.RawValue(json.data(), json.size(), rapidjson::kObjectType);
        return *this;
    }
    // A number as the caller wrote it (integer kept integer).
    JsonOut& number(const rapidjson::Value& v);
    // A whole value, iteratively (any depth).
    JsonOut& copy(const rapidjson::Value& v);
    std::string take() const { return std::string(buf_.GetString(), buf_.GetSize()); }

private:
    void string(std::string_view s, bool is_key);
    rapidjson::StringBuffer buf_;
    rapidjson::Writer<rapidjson::StringBuffer> w_;
};

// Compact JSON of v (any depth).
std::string to_json(const rapidjson::Value& v);

// The end of a translation that threw (out of memory): out emptied, err
// said; false.
bool translation_failed(std::string& out, std::string& err, const char* why) noexcept;
inline constexpr const char kCannotTranslate[] = "request cannot be translated for Gemini";

}  // namespace gemini
}  // namespace llmgw
