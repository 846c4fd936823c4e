// The one way the gateway writes JSON documents: RapidJSON's Writer behind a
// small interface. Strings always come out as valid UTF-8 (an invalid byte
// sequence becomes U+FFFD, as in the error envelope), so a caller- or
// provider-supplied value can never break a response.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "core/json/envelope.h"

namespace llmgw {

class JsonWriter {
public:
    JsonWriter() : w_(buf_) {}

    JsonWriter& begin_object() { w_.StartObject(); return *this; }
    JsonWriter& end_object() { w_.EndObject(); return *this; }
    JsonWriter& begin_array() { w_.StartArray(); return *this; }
    JsonWriter& end_array() { w_.EndArray(); return *this; }

    JsonWriter& key(std::string_view k) { write_string(k, true); return *this; }
    JsonWriter& str(std::string_view v) { write_string(v, false); return *this; }
    JsonWriter& num(std::int64_t v) { w_.Int64(v); return *this; }
    JsonWriter& real(double v) { w_.Double(v); return *this; }
    JsonWriter& boolean(bool v) { w_.Bool(v); return *this; }
    JsonWriter& null() { w_.Null(); return *this; }
    // A value that is already one valid JSON document (written by a JsonWriter).
    JsonWriter& raw(std::string_view json) {
        w_.RawValue(json.data(), json.size(), rapidjson::kObjectType);
        return *this;
    }
    // A UTC time as "YYYY-MM-DDTHH:MM:SSZ"; null when t <= 0.
    JsonWriter& time(std::int64_t unix_seconds);

    // key + value in one call.
    JsonWriter& field(std::string_view k, std::string_view v) { return key(k).str(v); }
    JsonWriter& field(std::string_view k, const char* v) { return key(k).str(v); }
    JsonWriter& field(std::string_view k, std::int64_t v) { return key(k).num(v); }
    JsonWriter& field(std::string_view k, bool v) { return key(k).boolean(v); }

    // The document; complete once every object and array is closed.
    std::string take() const { return std::string(buf_.GetString(), buf_.GetSize()); }
    bool complete() const { return w_.IsComplete(); }

private:
    void write_string(std::string_view s, bool is_key);

    rapidjson::StringBuffer buf_;
    rapidjson::Writer<rapidjson::StringBuffer> w_;
};

}  // namespace llmgw
