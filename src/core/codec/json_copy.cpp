#include "core/codec/json_copy.h"

#include "core/json/scratch.h"

#include <string_view>

namespace llmgw {

bool json_depth_at_most(const rapidjson::Value& v, int max) {
    if (v.IsObject()) {
        if (max <= 0) return false;
        for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m)
            if (!json_depth_at_most(m->value, max - 1)) return false;
    } else if (v.IsArray()) {
        if (max <= 0) return false;
        for (const auto& e : v.GetArray())
            if (!json_depth_at_most(e, max - 1)) return false;
    }
    return true;
}

const rapidjson::Document* parse_scratch_bounded(std::string_view s, int max_depth, std::string& err) {
    const rapidjson::Document* d = parse_scratch_object(s, err);
    if (d != nullptr && !json_depth_at_most(*d, max_depth)) {
        err = "JSON nested too deeply";
        return nullptr;
    }
    return d;
}

void json_copy(JsonWriter& w, const rapidjson::Value& v) {
    switch (v.GetType()) {
    case rapidjson::kNullType: w.null(); break;
    case rapidjson::kFalseType: w.boolean(false); break;
    case rapidjson::kTrueType: w.boolean(true); break;
    case rapidjson::kStringType: w.str(std::string_view(v.GetString(), v.GetStringLength())); break;
    case rapidjson::kNumberType:
        if (v.IsInt64()) w.num(v.GetInt64());
        else w.real(v.GetDouble());
        break;
    case rapidjson::kObjectType:
        w.begin_object();
        for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
            w.key(std::string_view(m->name.GetString(), m->name.GetStringLength()));
            json_copy(w, m->value);
        }
        w.end_object();
        break;
    case rapidjson::kArrayType:
        w.begin_array();
        for (const auto& e : v.GetArray()) json_copy(w, e);
        w.end_array();
        break;
    }
}

std::string json_compact(const rapidjson::Value& v) {
    JsonWriter w;
    json_copy(w, v);
    return w.take();
}

}  // namespace llmgw
