#include "core/codec/gemini_wire.h"

#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "core/codec/gemini_json.h"
#include "core/http/percent.h"

namespace llmgw {

namespace {
constexpr const char* kSkipThoughtSignature = "skip_thought_signature_validator";
}  // namespace

namespace rj = rapidjson;
using gemini::JsonOut;
using gemini::get;
using gemini::sv;

namespace {

// ---------------------------------------------------------------- helpers

bool is_str(const rj::Value* v, std::string_view s) { return v != nullptr && v->IsString() && sv(*v) == s; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (std::size_t i = 0; i < prefix.size(); ++i)
        if (lower(s[i]) != prefix[i]) return false;
    return true;
}

std::string idx(const std::string& base, std::size_t i) { return base + "[" + std::to_string(i) + "]"; }

std::string text_part(std::string_view text) {
    JsonOut o;
    o.begin_object().key("text").str(text).end_object();
    return o.take();
}

// The image type Gemini needs for a URL, from the extension of its path; "" unknown.
std::string_view mime_from_url(std::string_view url) {
    const std::size_t scheme = url.find("://");
    std::size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
    std::size_t end = url.find_first_of("?#", start);
    if (end == std::string_view::npos) end = url.size();
    const std::size_t slash = url.find('/', start);
    if (slash == std::string_view::npos || slash >= end) return {};   // no path
    const std::string_view seg = url.substr(slash, end - slash);
    const std::size_t dot = seg.rfind('.');
    if (dot == std::string_view::npos || seg.find('/', dot) != std::string_view::npos) return {};
    std::string ext;
    for (char c : seg.substr(dot + 1)) ext += lower(c);
    if (ext == "png") return "image/png";
    if (ext == "jpg" || ext == "jpeg") return "image/jpeg";
    if (ext == "webp") return "image/webp";
    if (ext == "gif") return "image/gif";
    if (ext == "heic") return "image/heic";
    if (ext == "heif") return "image/heif";
    return {};
}

// ---------------------------------------------------------------- messages

struct Turn {
    std::string role;                  // "user" or "model"
    std::vector<std::string> parts;    // JSON of each part
};

class Translator {
public:
    explicit Translator(std::string& err) : err_(err) {}

    bool messages(const rj::Value& req);
    bool tools(const rj::Value& req, JsonOut& o, bool& any);
    bool tool_choice(const rj::Value& req, JsonOut& o, bool& any);
    bool generation(const rj::Value& req, JsonOut& o, bool& any);

    std::vector<Turn> turns;
    std::vector<std::string> system;   // JSON of the systemInstruction parts

private:
    bool fail(std::string s) {
        err_ = std::move(s);
        return false;
    }
    void add(const char* role, std::vector<std::string>&& parts) {
        if (parts.empty()) return;
        if (turns.empty() || turns.back().role != role) turns.push_back(Turn{role, {}});
        for (auto& p : parts) turns.back().parts.push_back(std::move(p));
    }
    bool texts(const rj::Value* content, const std::string& where, bool assistant, std::vector<std::string>& out);
    bool user_parts(const rj::Value* content, const std::string& where, std::vector<std::string>& out);
    bool image_part(const rj::Value& part, const std::string& where, std::string& out);
    bool assistant_calls(const rj::Value& calls, const std::string& where, std::vector<std::string>& out);
    bool tool_result(const rj::Value& m, const std::string& where, std::vector<std::string>& out);

    std::string& err_;
    std::map<std::string, std::string> call_names_;   // tool call id -> function name
};

// A string, or an array of text parts (assistant: refusal parts too), as text parts.
bool Translator::texts(const rj::Value* content, const std::string& where, bool assistant,
        std::vector<std::string>& out) {
    if (content == nullptr) return true;
    if (content->IsString()) {
        if (content->GetStringLength() > 0) out.push_back(text_part(sv(*content)));
        return true;
    }
    if (!content->IsArray()) return fail(where + " must be a string or an array of text parts");
    for (rj::SizeType j = 0; j < content->Size(); ++j) {
        const rj::Value& p = (*content)[j];
        const rj::Value* type = get(p, "type");
        const char* field = is_str(type, "text") ? "text" : assistant && is_str(type, "refusal") ? "refusal" : nullptr;
        const rj::Value* t = field ? get(p, field) : nullptr;
        if (t == nullptr || !t->IsString()) return fail(idx(where, j) + " must be a text part");
        if (t->GetStringLength() > 0) out.push_back(text_part(sv(*t)));
    }
    return true;
}

bool Translator::image_part(const rj::Value& p, const std::string& where, std::string& out) {
    const rj::Value* iu = get(p, "image_url");
    if (iu == nullptr || !iu->IsObject()) return fail(where + ".image_url must be an object");
    const rj::Value* u = get(*iu, "url");
    if (u == nullptr || !u->IsString()) return fail(where + ".image_url.url must be a string");
    const std::string_view url = sv(*u);
    JsonOut o;
    if (starts_with_nocase(url, "data:")) {
        const std::size_t comma = url.find(',');
        const std::string_view head = url.substr(5, comma == std::string_view::npos ? 0 : comma - 5);
        const std::string_view mime = head.substr(0, head.find(';'));
        constexpr std::string_view kB64 = ";base64";
        if (comma == std::string_view::npos || comma + 1 == url.size() || mime.empty() ||
                mime.find('/') == std::string_view::npos || head.size() < kB64.size() ||
                head.substr(head.size() - kB64.size()) != kB64) {
            return fail(where + ".image_url.url must be a base64 data URL (data:<type>;base64,<data>) or an http(s) URL");
        }
        o.begin_object().key("inlineData").begin_object();
        o.key("mimeType").str(mime).key("data").str(url.substr(comma + 1));
        o.end_object().end_object();
    } else if (starts_with_nocase(url, "http://") || starts_with_nocase(url, "https://")) {
        const std::string_view mime = mime_from_url(url);
        if (mime.empty()) {
            return fail(where + ".image_url.url must end in .png, .jpg, .jpeg, .webp, .gif, .heic or .heif "
                    "(Gemini needs the image type)");
        }
        o.begin_object().key("fileData").begin_object();
        o.key("mimeType").str(mime).key("fileUri").str(url);
        o.end_object().end_object();
    } else {
        return fail(where + ".image_url.url must be a base64 data URL (data:<type>;base64,<data>) or an http(s) URL");
    }
    out = o.take();
    return true;
}

bool Translator::user_parts(const rj::Value* content, const std::string& where, std::vector<std::string>& out) {
    if (content != nullptr && content->IsString()) {
        if (content->GetStringLength() > 0) out.push_back(text_part(sv(*content)));
        return true;
    }
    if (content == nullptr || !content->IsArray())
        return fail(where + " must be a string or an array of content parts");
    for (rj::SizeType j = 0; j < content->Size(); ++j) {
        const rj::Value& p = (*content)[j];
        const std::string at = idx(where, j);
        if (!p.IsObject()) return fail(at + " must be an object");
        const rj::Value* type = get(p, "type");
        if (type == nullptr || !type->IsString()) return fail(at + ".type must be a string");
        if (sv(*type) == "text") {
            const rj::Value* t = get(p, "text");
            if (t == nullptr || !t->IsString()) return fail(at + ".text must be a string");
            if (t->GetStringLength() > 0) out.push_back(text_part(sv(*t)));
        } else if (sv(*type) == "image_url") {
            std::string part;
            if (!image_part(p, at, part)) return false;
            out.push_back(std::move(part));
        } else {
            return fail(at + " has an unsupported type (Gemini takes text and image_url parts)");
        }
    }
    return true;
}

bool Translator::assistant_calls(const rj::Value& calls, const std::string& where, std::vector<std::string>& out) {
    if (!calls.IsArray()) return fail(where + " must be an array");
    for (rj::SizeType k = 0; k < calls.Size(); ++k) {
        const rj::Value& c = calls[k];
        const std::string at = idx(where, k);
        if (!c.IsObject()) return fail(at + " must be an object");
        const rj::Value* type = get(c, "type");
        if (type != nullptr && !is_str(type, "function")) return fail(at + ".type must be \"function\"");
        const rj::Value* id = get(c, "id");
        if (id == nullptr || !id->IsString()) return fail(at + ".id must be a string");
        const rj::Value* fn = get(c, "function");
        if (fn == nullptr || !fn->IsObject()) return fail(at + ".function must be an object");
        const rj::Value* name = get(*fn, "name");
        if (name == nullptr || !name->IsString()) return fail(at + ".function.name must be a string");
        const rj::Value* args = get(*fn, "arguments");
        rj::Document parsed;
        if (args == nullptr || !args->IsString() || !gemini::parse_json(sv(*args), parsed) || !parsed.IsObject())
            return fail(at + ".function.arguments must be a JSON object");
        call_names_[std::string(sv(*id))] = std::string(sv(*name));
        JsonOut o;
        o.begin_object().key("functionCall").begin_object();
        o.key("name").str(sv(*name)).key("args").copy(parsed);
        // Gemini 3 wants the signature it gave with each call back; the
        // OpenAI shape cannot carry it, so the documented placeholder goes.
        o.end_object().key("thoughtSignature").str(kSkipThoughtSignature).end_object();
        out.push_back(o.take());
    }
    return true;
}

bool Translator::tool_result(const rj::Value& m, const std::string& where, std::vector<std::string>& out) {
    const rj::Value* id = get(m, "tool_call_id");
    if (id == nullptr || !id->IsString()) return fail(where + ".tool_call_id must be a string");
    auto name = call_names_.find(std::string(sv(*id)));
    if (name == call_names_.end())
        return fail(where + ".tool_call_id does not match a tool call of an earlier assistant message");
    const rj::Value* content = get(m, "content");
    std::string text;
    if (content != nullptr && content->IsString()) {
        text.assign(sv(*content));
    } else if (content != nullptr) {
        if (!content->IsArray()) return fail(where + ".content must be a string or an array of text parts");
        for (rj::SizeType j = 0; j < content->Size(); ++j) {
            const rj::Value* t = is_str(get((*content)[j], "type"), "text") ? get((*content)[j], "text") : nullptr;
            if (t == nullptr || !t->IsString()) return fail(idx(where + ".content", j) + " must be a text part");
            text.append(sv(*t));
        }
    }
    rj::Document parsed;
    const bool object = gemini::parse_json(text, parsed) && parsed.IsObject();
    JsonOut o;
    o.begin_object().key("functionResponse").begin_object();
    o.key("name").str(name->second).key("response");
    if (object) {
        o.copy(parsed);
    } else {
        o.begin_object().key("content").str(text).end_object();
    }
    o.end_object().end_object();
    out.push_back(o.take());
    return true;
}

bool Translator::messages(const rj::Value& req) {
    const rj::Value* msgs = get(req, "messages");
    if (msgs == nullptr || !msgs->IsArray()) return fail("messages must be an array");
    for (rj::SizeType i = 0; i < msgs->Size(); ++i) {
        const rj::Value& m = (*msgs)[i];
        const std::string at = idx("messages", i);
        if (!m.IsObject()) return fail(at + " must be an object");
        const rj::Value* role = get(m, "role");
        if (role == nullptr || !role->IsString()) return fail(at + ".role must be a string");
        const std::string_view r = sv(*role);
        const rj::Value* content = get(m, "content");
        std::vector<std::string> parts;
        if (r == "system" || r == "developer") {
            if (!texts(content, at + ".content", false, parts)) return false;
            for (auto& p : parts) system.push_back(std::move(p));
        } else if (r == "user") {
            if (!user_parts(content, at + ".content", parts)) return false;
            add("user", std::move(parts));
        } else if (r == "assistant") {
            if (!texts(content, at + ".content", true, parts)) return false;
            if (const rj::Value* calls = get(m, "tool_calls")) {
                if (!assistant_calls(*calls, at + ".tool_calls", parts)) return false;
            }
            add("model", std::move(parts));
        } else if (r == "tool") {
            if (!tool_result(m, at, parts)) return false;
            add("user", std::move(parts));
        } else {
            return fail(at + ".role must be system, developer, user, assistant or tool");
        }
    }
    if (turns.empty()) return fail("messages must hold at least one non-empty user, assistant or tool message");
    return true;
}

// ---------------------------------------------------------------- tools

bool Translator::tools(const rj::Value& req, JsonOut& o, bool& any) {
    const rj::Value* tools = get(req, "tools");
    if (tools == nullptr) return true;
    if (!tools->IsArray()) return fail("tools must be an array");
    JsonOut decl;
    decl.begin_array();
    for (rj::SizeType i = 0; i < tools->Size(); ++i) {
        const rj::Value& t = (*tools)[i];
        const std::string at = idx("tools", i);
        if (!t.IsObject()) return fail(at + " must be an object");
        if (!is_str(get(t, "type"), "function"))
            return fail(at + ".type must be \"function\" (Gemini takes function tools only)");
        const rj::Value* fn = get(t, "function");
        if (fn == nullptr || !fn->IsObject()) return fail(at + ".function must be an object");
        const rj::Value* name = get(*fn, "name");
        if (name == nullptr || !name->IsString()) return fail(at + ".function.name must be a string");
        const rj::Value* desc = get(*fn, "description");
        if (desc != nullptr && !desc->IsString()) return fail(at + ".function.description must be a string");
        const rj::Value* params = get(*fn, "parameters");
        if (params != nullptr && !params->IsObject()) return fail(at + ".function.parameters must be an object");
        decl.begin_object().key("name").str(sv(*name));
        if (desc != nullptr) decl.key("description").str(sv(*desc));
        if (params != nullptr) decl.key("parametersJsonSchema").copy(*params);
        decl.end_object();
    }
    decl.end_array();
    if (tools->Size() == 0) return true;
    any = true;
    o.key("tools").begin_array().begin_object().key("functionDeclarations").raw(decl.take()).end_object().end_array();
    return true;
}

bool Translator::tool_choice(const rj::Value& req, JsonOut& o, bool& any) {
    const rj::Value* tc = get(req, "tool_choice");
    if (tc == nullptr) return true;
    const char* mode = nullptr;
    const rj::Value* name = nullptr;
    if (tc->IsString()) {
        const std::string_view s = sv(*tc);
        mode = s == "auto" ? "AUTO" : s == "none" ? "NONE" : s == "required" ? "ANY" : nullptr;
    } else if (tc->IsObject() && is_str(get(*tc, "type"), "function")) {
        const rj::Value* fn = get(*tc, "function");
        name = fn != nullptr ? get(*fn, "name") : nullptr;
        if (name == nullptr || !name->IsString()) return fail("tool_choice.function.name must be a string");
        mode = "ANY";
    }
    if (mode == nullptr) return fail("tool_choice must be \"auto\", \"none\", \"required\" or a named function");
    any = true;
    o.key("toolConfig").begin_object().key("functionCallingConfig").begin_object().key("mode").str(mode);
    if (name != nullptr) o.key("allowedFunctionNames").begin_array().str(sv(*name)).end_array();
    o.end_object().end_object();
    return true;
}

// ---------------------------------------------------------------- generationConfig

bool Translator::generation(const rj::Value& req, JsonOut& o, bool& any) {
    JsonOut g;
    bool some = false;
    g.begin_object();
    auto number = [&](const char* from, const char* to) {
        const rj::Value* v = get(req, from);
        if (v == nullptr) return true;
        if (!v->IsNumber()) return fail(std::string(from) + " must be a number");
        g.key(to).number(*v);
        some = true;
        return true;
    };
    if (!number("temperature", "temperature") || !number("top_p", "topP")) return false;

    const char* max_name = get(req, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (const rj::Value* v = get(req, max_name)) {
        if (!v->IsInt64() || v->GetInt64() < 1 || v->GetInt64() > INT32_MAX)
            return fail(std::string(max_name) + " must be an integer from 1 to 2147483647");
        g.key("maxOutputTokens").i64(v->GetInt64());
        some = true;
    }
    if (const rj::Value* v = get(req, "stop")) {
        bool ok = v->IsString() || v->IsArray();
        if (v->IsArray())
            for (const auto& s : v->GetArray()) ok = ok && s.IsString();
        if (!ok) return fail("stop must be a string or an array of strings");
        if (v->IsString() || v->Size() > 0) {
            g.key("stopSequences").begin_array();
            if (v->IsString()) {
                g.str(sv(*v));
            } else {
                for (const auto& s : v->GetArray()) g.str(sv(s));
            }
            g.end_array();
            some = true;
        }
    }
    if (!number("presence_penalty", "presencePenalty") || !number("frequency_penalty", "frequencyPenalty"))
        return false;
    if (const rj::Value* v = get(req, "seed")) {
        if (!v->IsInt64() || v->GetInt64() < INT32_MIN || v->GetInt64() > INT32_MAX)
            return fail("seed must be an integer from -2147483648 to 2147483647");
        g.key("seed").i64(v->GetInt64());
        some = true;
    }
    if (const rj::Value* rf = get(req, "response_format")) {
        if (!rf->IsObject()) return fail("response_format must be an object");
        const rj::Value* type = get(*rf, "type");
        if (is_str(type, "json_object")) {
            g.key("responseMimeType").str("application/json");
            some = true;
        } else if (is_str(type, "json_schema")) {
            const rj::Value* js = get(*rf, "json_schema");
            if (js == nullptr || !js->IsObject()) return fail("response_format.json_schema must be an object");
            const rj::Value* schema = get(*js, "schema");
            if (schema != nullptr && !schema->IsObject())
                return fail("response_format.json_schema.schema must be an object");
            g.key("responseMimeType").str("application/json");
            if (schema != nullptr) g.key("responseJsonSchema").copy(*schema);
            some = true;
        } else if (!is_str(type, "text")) {
            return fail("response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
        }
    }
    if (const rj::Value* v = get(req, "reasoning_effort")) {
        const std::string_view e = v->IsString() ? sv(*v) : std::string_view("?");
        const std::int64_t budget = e == "none" || e == "minimal" ? 0 : e == "low" ? 1024 : e == "medium" ? 8192
                : e == "high" ? 24576 : -1;
        if (budget < 0) return fail("reasoning_effort must be none, minimal, low, medium or high");
        g.key("thinkingConfig").begin_object().key("thinkingBudget").i64(budget).end_object();
        some = true;
    }
    g.end_object();
    if (some) {
        any = true;
        o.key("generationConfig").raw(g.take());
    }
    return true;
}

// Parameters Gemini cannot honour: the 400 sentence, or nullptr.
const char* refused(const rj::Value& req) {
    if (const rj::Value* n = get(req, "n")) {
        if (!n->IsInt64() || n->GetInt64() < 1) return "n must be a positive integer";
        if (n->GetInt64() > 1) return "n greater than 1 is not supported by Gemini models";
    }
    if (const rj::Value* v = get(req, "logprobs")) {
        if (!v->IsBool()) return "logprobs must be a boolean";
        if (v->GetBool()) return "logprobs is not supported by Gemini models";
    }
    if (get(req, "top_logprobs")) return "top_logprobs is not supported by Gemini models";
    if (const rj::Value* v = get(req, "logit_bias")) {
        if (!v->IsObject()) return "logit_bias must be an object";
        if (v->MemberCount() > 0) return "logit_bias is not supported by Gemini models";
    }
    if (get(req, "audio")) return "audio is not supported by Gemini models";
    if (const rj::Value* v = get(req, "modalities")) {
        if (!v->IsArray()) return "modalities must be an array of strings";
        for (const auto& m : v->GetArray()) {
            if (!m.IsString()) return "modalities must be an array of strings";
            if (sv(m) == "audio") return "audio in modalities is not supported by Gemini models";
        }
    }
    if (get(req, "prediction")) return "prediction is not supported by Gemini models";
    if (get(req, "functions")) return "functions is not supported by Gemini models (use tools)";
    if (get(req, "function_call")) return "function_call is not supported by Gemini models (use tool_choice)";
    return nullptr;
}

}  // namespace

// ---------------------------------------------------------------- public

std::string gemini_model_path(std::string_view model, std::string_view action) {
    try {
        if (model.empty() || model == "." || model == "..") return std::string();
        if (action != "generateContent" && action != "streamGenerateContent?alt=sse" && action != "embedContent" &&
                action != "batchEmbedContents")
            return std::string();
        std::string p = "/v1beta/models/";
        p += percent_encode(model);
        p += ':';
        p.append(action);
        return p;
    } catch (const std::exception&) {
        return std::string();
    }
}

bool gemini_request_from_openai(const rj::Value& req, std::string& body, std::string& err) {
    try {
        body.clear();
        if (!req.IsObject()) {
            err = "request body must be a JSON object";
            return false;
        }
        if (const char* why = refused(req)) {
            err = why;
            return false;
        }
        Translator t(err);
        if (!t.messages(req)) return false;
        JsonOut o;
        o.begin_object().key("contents").begin_array();
        for (const Turn& turn : t.turns) {
            o.begin_object().key("role").str(turn.role).key("parts").begin_array();
            for (const auto& p : turn.parts) o.raw(p);
            o.end_array().end_object();
        }
        o.end_array();
        if (!t.system.empty()) {
            o.key("systemInstruction").begin_object().key("parts").begin_array();
            for (const auto& p : t.system) o.raw(p);
            o.end_array().end_object();
        }
        bool any = false;
        if (!t.tools(req, o, any) || !t.tool_choice(req, o, any) || !t.generation(req, o, any)) return false;
        o.end_object();
        body = o.take();
        return true;
    } catch (const std::exception&) {
        return gemini::translation_failed(body, err, gemini::kCannotTranslate);
    }
}

}  // namespace llmgw
