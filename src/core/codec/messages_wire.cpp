// Anthropic Messages request -> OpenAI chat request, and Anthropic's error
// envelope. The response writer is in messages_writer.cpp.
#include "core/codec/messages_wire.h"

#include <exception>
#include <string>
#include <vector>

#include "core/codec/json_copy.h"
#include "core/codec/openai.h"
#include "core/json/envelope.h"
#include "core/json/read.h"
#include "core/json/writer.h"

namespace llmgw {

namespace {

using rapidjson::Value;

constexpr int kMaxDepth = 256;

using json::get;   // null reads as absent
using json::sv;

// A caller-supplied name fit for an error sentence: quoted, at most 64
// bytes (cut at a character boundary), valid UTF-8, no control characters,
// secrets scrubbed.
std::string quoted(std::string_view name) {
    constexpr std::size_t kMax = 64;
    std::string s = to_valid_utf8(name);
    if (s.size() > kMax) {
        std::size_t cut = kMax;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
        s.resize(cut);
        s += "...";
    }
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    return "\"" + scrub_secrets(s) + "\"";
}

std::string at(std::string_view base, std::size_t i) { return std::string(base) + "[" + std::to_string(i) + "]"; }

// The block's type: nullptr when the block is not an object with a string type.
const Value* block_type(const Value& b) {
    if (!b.IsObject()) return nullptr;
    const Value* t = get(b, "type");
    return t && t->IsString() ? t : nullptr;
}

class Translator {
public:
    Translator(const Value& req, std::string& err) : req_(req), err_(err) {}

    bool run(std::string_view model, std::string& body);

private:
    bool fail(std::string s) {
        err_ = std::move(s);
        return false;
    }
    // A content block's type, or nullptr (failed) when the block is not an
    // object with a string type; a text block's text, or nullptr (failed).
    const Value* typed_block(const Value& b, const std::string& path) {
        const Value* t = block_type(b);
        if (!t) fail(path + " must be an object with a string type");
        return t;
    }
    const Value* block_text(const Value& b, const std::string& path) {
        const Value* s = get(b, "text");
        if (s && s->IsString()) return s;
        fail(path + ".text must be a string");
        return nullptr;
    }

    bool check_top();
    bool write_system();
    bool write_messages();
    bool write_user(const Value& content, const std::string& path);
    bool write_assistant(const Value& content, const std::string& path);
    bool tool_result(const Value& block, const std::string& path);
    bool user_part(const Value& block, const std::string& path);
    bool write_tools();
    void write_tool_choice();

    const Value& req_;
    std::string& err_;
    JsonWriter w_;
    // Validated top-level members (nullptr: absent).
    const Value* max_tokens_ = nullptr;
    const Value* system_ = nullptr;
    const Value* messages_ = nullptr;
    const Value* tools_ = nullptr;
    const Value* tool_choice_ = nullptr;
    const Value* stop_ = nullptr;
    const Value* temperature_ = nullptr;
    const Value* top_p_ = nullptr;
    const Value* user_ = nullptr;
    bool stream_ = false;
    bool has_tools_ = false;
};

bool Translator::check_top() {
    if (!req_.IsObject()) return fail("request body must be a JSON object");
    for (const char* refused : {"top_k", "container", "mcp_servers"})
        if (get(req_, refused)) return fail(std::string(refused) + " is not supported for this model");
    if (const Value* t = get(req_, "thinking")) {
        if (!t->IsObject()) return fail("thinking must be an object");
        const Value* type = get(*t, "type");
        if (!type || !type->IsString() || sv(*type) != "disabled")
            return fail("thinking is not supported for this model; only {\"type\":\"disabled\"} is accepted");
    }

    max_tokens_ = get(req_, "max_tokens");
    if (!max_tokens_) return fail("max_tokens is required");
    if (!max_tokens_->IsInt64() || max_tokens_->GetInt64() <= 0)
        return fail("max_tokens must be a positive integer");

    system_ = get(req_, "system");
    if (system_ && !system_->IsString() && !system_->IsArray())
        return fail("system must be a string or an array of text blocks");

    messages_ = get(req_, "messages");
    if (!messages_) return fail("messages is required");
    if (!messages_->IsArray()) return fail("messages must be an array");
    if (messages_->Empty()) return fail("messages must not be empty");

    if ((stop_ = get(req_, "stop_sequences"))) {
        if (!stop_->IsArray()) return fail("stop_sequences must be an array of strings");
        for (const auto& s : stop_->GetArray())
            if (!s.IsString()) return fail("stop_sequences must be an array of strings");
    }
    if ((temperature_ = get(req_, "temperature")) && !temperature_->IsNumber())
        return fail("temperature must be a number");
    if ((top_p_ = get(req_, "top_p")) && !top_p_->IsNumber()) return fail("top_p must be a number");
    if (const Value* md = get(req_, "metadata")) {
        if (!md->IsObject()) return fail("metadata must be an object");
        if ((user_ = get(*md, "user_id")) && !user_->IsString()) return fail("metadata.user_id must be a string");
    }
    if (const Value* s = get(req_, "stream")) {
        if (!s->IsBool()) return fail("stream must be a boolean");
        stream_ = s->GetBool();
    }

    if ((tools_ = get(req_, "tools")) && !tools_->IsArray()) return fail("tools must be an array");
    has_tools_ = tools_ && !tools_->Empty();
    if ((tool_choice_ = get(req_, "tool_choice"))) {
        if (!tool_choice_->IsObject()) return fail("tool_choice must be an object");
        const Value* type = get(*tool_choice_, "type");
        const std::string_view t = type && type->IsString() ? sv(*type) : std::string_view();
        if (t != "auto" && t != "any" && t != "tool" && t != "none")
            return fail("tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\"");
        if (t == "tool") {
            const Value* name = get(*tool_choice_, "name");
            if (!name || !name->IsString()) return fail("tool_choice.name must be a string");
        }
        const Value* dp = get(*tool_choice_, "disable_parallel_tool_use");
        if (dp && !dp->IsBool()) return fail("tool_choice.disable_parallel_tool_use must be a boolean");
    }
    return true;
}

bool Translator::write_system() {
    if (!system_) return true;
    std::string text;
    if (system_->IsString()) {
        text.assign(sv(*system_));
    } else {
        std::size_t i = 0;
        for (const auto& b : system_->GetArray()) {
            const Value* type = b.IsObject() ? get(b, "type") : nullptr;
            const Value* t = b.IsObject() ? get(b, "text") : nullptr;
            if (!type || !type->IsString() || sv(*type) != "text" || !t || !t->IsString())
                return fail(at("system", i) + " must be a text block with a string text");
            if (i++ > 0) text += "\n\n";
            text.append(sv(*t));
        }
    }
    if (text.empty()) return true;
    w_.begin_object().field("role", "system").field("content", text).end_object();
    return true;
}

bool Translator::write_messages() {
    std::size_t i = 0;
    for (const auto& m : messages_->GetArray()) {
        const std::string path = at("messages", i++);
        if (!m.IsObject()) return fail(path + " must be an object");
        const Value* role = get(m, "role");
        if (!role || !role->IsString() || (sv(*role) != "user" && sv(*role) != "assistant"))
            return fail(path + ".role must be \"user\" or \"assistant\"");
        const Value* content = get(m, "content");
        if (!content || (!content->IsString() && !content->IsArray()))
            return fail(path + ".content must be a string or an array of content blocks");
        const bool ok = sv(*role) == "user" ? write_user(*content, path) : write_assistant(*content, path);
        if (!ok) return false;
    }
    return true;
}

bool Translator::tool_result(const Value& b, const std::string& path) {
    const Value* id = get(b, "tool_use_id");
    if (!id || !id->IsString()) return fail(path + ".tool_use_id must be a string");
    const Value* is_error = get(b, "is_error");
    if (is_error && !is_error->IsBool()) return fail(path + ".is_error must be a boolean");
    std::string text;
    if (is_error && is_error->GetBool()) text = "Error: ";
    if (const Value* c = get(b, "content")) {
        if (c->IsString()) {
            text.append(sv(*c));
        } else if (c->IsArray()) {
            std::size_t k = 0;
            for (const auto& inner : c->GetArray()) {
                const std::string ipath = at(path + ".content", k);
                const Value* t = typed_block(inner, ipath);
                if (!t) return false;
                if (sv(*t) == "image") return fail(ipath + ": images in tool_result are not supported for this model");
                if (sv(*t) != "text")
                    return fail(ipath + ": content block type " + quoted(sv(*t)) + " is not supported in tool_result");
                const Value* s = block_text(inner, ipath);
                if (!s) return false;
                if (k++ > 0) text += "\n\n";
                text.append(sv(*s));
            }
        } else {
            return fail(path + ".content must be a string or an array of text blocks");
        }
    }
    w_.begin_object().field("role", "tool").field("tool_call_id", sv(*id)).field("content", text).end_object();
    return true;
}

// One text or image block of a user message as an OpenAI content part.
bool Translator::user_part(const Value& b, const std::string& path) {
    const std::string_view type = sv(*block_type(b));
    if (type == "text") {
        w_.begin_object().field("type", "text").field("text", sv(*get(b, "text"))).end_object();
        return true;
    }
    const Value& src = *get(b, "source");
    const std::string_view st = sv(*get(src, "type"));
    std::string url;
    if (st == "base64") {
        const std::string_view mt = sv(*get(src, "media_type")), data = sv(*get(src, "data"));
        url.reserve(5 + mt.size() + 8 + data.size());
        url.append("data:").append(mt).append(";base64,").append(data);
    } else {
        url.assign(sv(*get(src, "url")));
    }
    w_.begin_object().field("type", "image_url").key("image_url").begin_object().field("url", url).end_object();
    w_.end_object();
    (void)path;
    return true;
}

bool Translator::write_user(const Value& content, const std::string& path) {
    if (content.IsString()) {
        w_.begin_object().field("role", "user").field("content", sv(content)).end_object();
        return true;
    }
    // Pass 1: check every block, write the tool messages (they must follow
    // the assistant's tool calls directly).
    std::size_t parts = 0, texts = 0, j = 0;
    const Value* only_text = nullptr;
    for (const auto& b : content.GetArray()) {
        const std::string bpath = at(path + ".content", j++);
        const Value* t = typed_block(b, bpath);
        if (!t) return false;
        const std::string_view type = sv(*t);
        if (type == "text") {
            const Value* s = block_text(b, bpath);
            if (!s) return false;
            ++parts, ++texts;
            only_text = s;
        } else if (type == "image") {
            const Value* src = get(b, "source");
            if (!src || !src->IsObject()) return fail(bpath + ".source must be an object");
            const Value* st = get(*src, "type");
            const std::string_view stv = st && st->IsString() ? sv(*st) : std::string_view();
            if (stv == "base64") {
                const Value* mt = get(*src, "media_type");
                if (!mt || !mt->IsString()) return fail(bpath + ".source.media_type must be a string");
                const Value* d = get(*src, "data");
                if (!d || !d->IsString()) return fail(bpath + ".source.data must be a string");
            } else if (stv == "url") {
                const Value* u = get(*src, "url");
                if (!u || !u->IsString()) return fail(bpath + ".source.url must be a string");
            } else {
                return fail(bpath + ".source.type must be \"base64\" or \"url\"");
            }
            ++parts;
        } else if (type == "tool_result") {
            if (!tool_result(b, bpath)) return false;
        } else if (type == "tool_use") {
            return fail(bpath + ": tool_use blocks belong in assistant messages");
        } else {
            return fail(bpath + ": content block type " + quoted(type) + " is not supported for this model");
        }
    }
    if (content.Empty()) {
        w_.begin_object().field("role", "user").field("content", "").end_object();
        return true;
    }
    if (parts == 0) return true;  // tool results only
    w_.begin_object().field("role", "user").key("content");
    if (parts == 1 && texts == 1) {
        w_.str(sv(*only_text));
    } else {
        w_.begin_array();
        j = 0;
        for (const auto& b : content.GetArray()) {
            const std::string_view type = sv(*block_type(b));
            if (type == "text" || type == "image")
                if (!user_part(b, at(path + ".content", j))) return false;
            ++j;
        }
        w_.end_array();
    }
    w_.end_object();
    return true;
}

bool Translator::write_assistant(const Value& content, const std::string& path) {
    if (content.IsString()) {
        w_.begin_object().field("role", "assistant").field("content", sv(content)).end_object();
        return true;
    }
    std::string text;
    std::size_t texts = 0, calls = 0, j = 0;
    for (const auto& b : content.GetArray()) {
        const std::string bpath = at(path + ".content", j++);
        const Value* t = typed_block(b, bpath);
        if (!t) return false;
        const std::string_view type = sv(*t);
        if (type == "text") {
            const Value* s = block_text(b, bpath);
            if (!s) return false;
            if (texts++ > 0) text += "\n\n";
            text.append(sv(*s));
        } else if (type == "tool_use") {
            const Value* id = get(b, "id");
            if (!id || !id->IsString()) return fail(bpath + ".id must be a string");
            const Value* name = get(b, "name");
            if (!name || !name->IsString()) return fail(bpath + ".name must be a string");
            const Value* input = get(b, "input");
            if (input && !input->IsObject()) return fail(bpath + ".input must be an object");
            if (input && !json_depth_at_most(*input, kMaxDepth)) return fail(bpath + ".input is nested too deeply");
            ++calls;
        } else if (type == "thinking" || type == "redacted_thinking") {
            // dropped: an OpenAI-type provider cannot take them back
        } else if (type == "tool_result") {
            return fail(bpath + ": tool_result blocks belong in user messages");
        } else if (type == "image") {
            return fail(bpath + ": image blocks are not supported in assistant messages");
        } else {
            return fail(bpath + ": content block type " + quoted(type) + " is not supported for this model");
        }
    }
    w_.begin_object().field("role", "assistant").key("content");
    if (texts > 0 || calls == 0) w_.str(text);
    else w_.null();
    if (calls > 0) {
        w_.key("tool_calls").begin_array();
        for (const auto& b : content.GetArray()) {
            if (sv(*block_type(b)) != "tool_use") continue;
            const Value* input = get(b, "input");
            w_.begin_object().field("id", sv(*get(b, "id"))).field("type", "function");
            w_.key("function").begin_object().field("name", sv(*get(b, "name")));
            w_.field("arguments", input ? json_compact(*input) : std::string("{}"));
            w_.end_object().end_object();
        }
        w_.end_array();
    }
    w_.end_object();
    return true;
}

bool Translator::write_tools() {
    w_.key("tools").begin_array();
    std::size_t i = 0;
    for (const auto& t : tools_->GetArray()) {
        const std::string path = at("tools", i++);
        if (!t.IsObject()) return fail(path + " must be an object");
        if (const Value* type = get(t, "type")) {
            if (!type->IsString()) return fail(path + ".type must be a string");
            if (sv(*type) != "custom")
                return fail(path + ": tool type " + quoted(sv(*type)) + " is not supported for this model");
        }
        const Value* name = get(t, "name");
        if (!name || !name->IsString()) return fail(path + ".name must be a string");
        const Value* desc = get(t, "description");
        if (desc && !desc->IsString()) return fail(path + ".description must be a string");
        const Value* schema = get(t, "input_schema");
        if (!schema || !schema->IsObject()) return fail(path + ".input_schema must be an object");
        if (!json_depth_at_most(*schema, kMaxDepth)) return fail(path + ".input_schema is nested too deeply");
        w_.begin_object().field("type", "function").key("function").begin_object().field("name", sv(*name));
        if (desc) w_.field("description", sv(*desc));
        w_.key("parameters");
        json_copy(w_, *schema);
        w_.end_object().end_object();
    }
    w_.end_array();
    return true;
}

void Translator::write_tool_choice() {
    if (!tool_choice_) return;
    const std::string_view t = sv(*get(*tool_choice_, "type"));
    w_.key("tool_choice");
    if (t == "auto") w_.str("auto");
    else if (t == "any") w_.str("required");
    else if (t == "none") w_.str("none");
    else
        w_.begin_object().field("type", "function").key("function").begin_object()
            .field("name", sv(*get(*tool_choice_, "name"))).end_object().end_object();
    const Value* dp = get(*tool_choice_, "disable_parallel_tool_use");
    if (dp && dp->GetBool()) w_.field("parallel_tool_calls", false);
}

bool Translator::run(std::string_view model, std::string& body) {
    if (!check_top()) return false;
    w_.begin_object().field("model", model).key("messages").begin_array();
    if (!write_system() || !write_messages()) return false;
    w_.end_array();
    w_.field("max_tokens", max_tokens_->GetInt64());
    if (temperature_) json_copy(w_.key("temperature"), *temperature_);
    if (top_p_) json_copy(w_.key("top_p"), *top_p_);
    if (stop_ && !stop_->Empty()) json_copy(w_.key("stop"), *stop_);
    if (has_tools_) {
        if (!write_tools()) return false;
        write_tool_choice();
    }
    if (user_) w_.field("user", sv(*user_));
    if (stream_) {
        w_.field("stream", true).key("stream_options").begin_object().field("include_usage", true).end_object();
    }
    w_.end_object();
    body = w_.take();
    return true;
}

}  // namespace

bool openai_request_from_anthropic(const Value& req, std::string_view model, std::string& body, std::string& err) {
    try {
        Translator t(req, err);
        return t.run(model, body);
    } catch (const std::exception&) {
        try {
            err = "request body cannot be processed";
        } catch (...) {
        }
        return false;
    }
}

}  // namespace llmgw
