#include "core/codec/gemini_json.h"
#include "core/json/scratch.h"

#include <cmath>
#include <vector>

#include "core/json/envelope.h"
#include "core/json/text_checks.h"

namespace llmgw {
namespace gemini {

namespace rj = rapidjson;

const rj::Document* parse_json_scratch(std::string_view s) {
    if (!json_text_depth_at_most(s, kMaxDepth)) return nullptr;
    const rj::Document& d = json_scratch().parse(s, true);
    return d.HasParseError() ? nullptr : &d;
}

bool parse_json(std::string_view s, rj::Document& doc) {
    return json_text_depth_at_most(s, kMaxDepth) && parse_full_precision(doc, s);
}

void JsonOut::string(std::string_view s, bool is_key) {
    std::string fixed;
    if (!is_valid_utf8(s)) {
        fixed = to_valid_utf8(s);
        s = fixed;
    }
    const auto len = static_cast<rj::SizeType>(s.size());
    if (is_key) {
        w_.Key(s.data(), len, true);
    } else {
        w_.String(s.data(), len, true);
    }
}

JsonOut& JsonOut::number(const rj::Value& v) {
    if (v.IsInt64()) {
        w_.Int64(v.GetInt64());
    } else if (v.IsUint64()) {
        w_.Uint64(v.GetUint64());
    } else if (v.IsNumber() && std::isfinite(v.GetDouble())) {
        w_.Double(v.GetDouble());
    } else {
        w_.Null();
    }
    return *this;
}

JsonOut& JsonOut::copy(const rj::Value& root) {
    struct Frame {
        const rj::Value* v;
        rj::SizeType i;
    };
    std::vector<Frame> stack;
    const rj::Value* cur = &root;
    for (;;) {
        if (cur != nullptr) {
            if (cur->IsObject()) {
                w_.StartObject();
                stack.push_back(Frame{cur, 0});
            } else if (cur->IsArray()) {
                w_.StartArray();
                stack.push_back(Frame{cur, 0});
            } else if (cur->IsString()) {
                str(sv(*cur));
            } else if (cur->IsNumber()) {
                number(*cur);
            } else if (cur->IsBool()) {
                w_.Bool(cur->GetBool());
            } else {
                w_.Null();
            }
            cur = nullptr;
        }
        if (stack.empty()) break;
        Frame& f = stack.back();
        if (f.v->IsObject()) {
            if (f.i < f.v->MemberCount()) {
                const auto m = f.v->MemberBegin() + f.i++;
                key(sv(m->name));
                cur = &m->value;
            } else {
                w_.EndObject();
                stack.pop_back();
            }
        } else {
            if (f.i < f.v->Size()) {
                cur = &(*f.v)[f.i++];
            } else {
                w_.EndArray();
                stack.pop_back();
            }
        }
    }
    return *this;
}

std::string to_json(const rj::Value& v) {
    JsonOut o;
    o.copy(v);
    return o.take();
}

bool translation_failed(std::string& out, std::string& err, const char* why) noexcept {
    try {
        out.clear();
        err = why;
    } catch (...) {
    }
    return false;
}

}  // namespace gemini
}  // namespace llmgw
