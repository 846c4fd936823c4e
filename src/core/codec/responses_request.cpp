// Responses API request -> OpenAI chat request (the pivot of the Anthropic
// and Gemini request builders). Every error names the Responses parameter
// (input[2].content[0].file_id, tools[1], text.format), never the chat one.
#include <exception>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "core/codec/json_copy.h"
#include "core/codec/openai.h"
#include "core/codec/responses_wire.h"
#include "core/json/envelope.h"
#include "core/json/read.h"
#include "core/json/writer.h"

namespace llmgw {
namespace {

namespace rj = rapidjson;
using json::get;
using json::sv;

constexpr int kMaxDepth = 256;

std::string at(std::string_view base, std::size_t i) { return std::string(base) + "[" + std::to_string(i) + "]"; }

// A caller-supplied name fit for an error sentence (quoted, short, printable).
std::string quoted(std::string_view name) {
    std::string s = to_valid_utf8(name.substr(0, 64));
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    return "\"" + scrub_secrets(s) + "\"";
}

struct Call {
    std::string id, name, arguments;
};

class Translator {
public:
    Translator(const rj::Value& req, ProviderType target, std::string& err)
        : req_(req), target_(provider_type_name(target)), anthropic_(target == ProviderType::Anthropic), err_(err) {}

    bool run(std::string_view model, std::string& body) {
        if (!req_.IsObject()) return fail("the request body must be a JSON object");
        if (!refusals()) return false;
        w_.begin_object().field("model", model).key("messages").begin_array();
        if (!instructions() || !input()) return false;
        flush_assistant();
        w_.end_array();
        if (messages_ == 0) return fail("input must hold at least one message");
        if (const rj::Value* v = get(req_, "max_output_tokens")) {
            if (!v->IsInt64() || v->GetInt64() < 1) return fail("max_output_tokens must be a positive integer");
            w_.field("max_completion_tokens", v->GetInt64());
        }
        for (const char* n : {"temperature", "top_p"}) {
            if (const rj::Value* v = get(req_, n)) {
                if (!v->IsNumber()) return fail(std::string(n) + " must be a number");
                json_copy(w_.key(n), *v);
            }
        }
        if (!tools() || !text_format() || !reasoning()) return false;
        if (const rj::Value* u = get(req_, "user")) {
            if (!u->IsString()) return fail("user must be a string");
            w_.field("user", sv(*u));
        }
        if (const rj::Value* s = get(req_, "stream")) {
            if (!s->IsBool()) return fail("stream must be a boolean");
            if (s->GetBool())
                w_.field("stream", true).key("stream_options").begin_object().field("include_usage", true).end_object();
        }
        w_.end_object();
        body = w_.take();
        return true;
    }

private:
    bool fail(std::string s) {
        err_ = std::move(s);
        return false;
    }
    std::string not_for_target(std::string_view what) const {
        return std::string(what) + " is not supported for " + std::string(target_) + " providers";
    }

    // What needs OpenAI's server-side state or built-in machinery.
    bool refusals() {
        const std::string state = " (it needs the provider's stored responses: use an OpenAI-type provider)";
        for (const char* n : {"previous_response_id", "conversation", "prompt"})
            if (get(req_, n) != nullptr) return fail(not_for_target(n) + state);
        for (const char* n : {"store", "background"}) {
            if (const rj::Value* v = get(req_, n)) {
                if (!v->IsBool()) return fail(std::string(n) + " must be a boolean");
                if (v->GetBool()) return fail(not_for_target(std::string(n) + ": true") + state);
            }
        }
        for (const char* n : {"top_logprobs", "max_tool_calls"})
            if (get(req_, n) != nullptr) return fail(not_for_target(n));
        return true;
    }

    bool instructions() {
        const rj::Value* v = get(req_, "instructions");
        if (v == nullptr) return true;
        if (!v->IsString()) return fail("instructions must be a string");
        if (v->GetStringLength() == 0) return true;
        w_.begin_object().field("role", "system").field("content", sv(*v)).end_object();
        return true;
    }

    bool input() {
        const rj::Value* in = get(req_, "input");
        if (in == nullptr) return fail("input is required");
        if (in->IsString()) {
            user_text(sv(*in));
            return true;
        }
        if (!in->IsArray()) return fail("input must be a string or an array of items");
        std::size_t i = 0;
        for (const auto& item : in->GetArray()) {
            if (!one_item(item, at("input", i++))) return false;
        }
        return true;
    }

    void user_text(std::string_view text) {
        flush_assistant();
        w_.begin_object().field("role", "user").field("content", text).end_object();
        ++messages_;
    }

    bool one_item(const rj::Value& item, const std::string& path) {
        if (!item.IsObject()) return fail(path + " must be an object");
        const rj::Value* t = get(item, "type");
        if (t != nullptr && !t->IsString()) return fail(path + ".type must be a string");
        const std::string_view type = t != nullptr ? sv(*t) : std::string_view("message");
        if (type == "message") return message(item, path);
        if (type == "function_call") return function_call(item, path);
        if (type == "function_call_output") return function_output(item, path);
        if (type == "reasoning") return true;   // the provider's own thinking cannot go back to another provider
        if (type == "item_reference")
            return fail(path + ": " + not_for_target("item_reference") +
                        " (it needs the provider's stored items: use an OpenAI-type provider)");
        return fail(path + ": " + not_for_target("item type " + quoted(type)));
    }

    bool message(const rj::Value& item, const std::string& path) {
        const rj::Value* role = json::get_str(item, "role");
        const std::string_view r = role != nullptr ? sv(*role) : std::string_view();
        if (r != "user" && r != "assistant" && r != "system" && r != "developer")
            return fail(path + ".role must be \"user\", \"assistant\", \"system\" or \"developer\"");
        const rj::Value* content = get(item, "content");
        if (content == nullptr || (!content->IsString() && !content->IsArray()))
            return fail(path + ".content must be a string or an array of content parts");
        if (r == "assistant") return assistant(*content, path);
        flush_assistant();
        const bool system = r != "user";
        if (content->IsString()) {
            w_.begin_object().field("role", system ? "system" : "user").field("content", sv(*content)).end_object();
            ++messages_;
            return true;
        }
        // Check every part first: the message is written only when all are good.
        std::size_t j = 0;
        for (const auto& p : content->GetArray()) {
            const std::string ppath = at(path + ".content", j++);
            const rj::Value* pt = json::get_str(p, "type");
            if (pt == nullptr) return fail(ppath + " must be an object with a string type");
            const std::string_view type = sv(*pt);
            if (type == "input_text") {
                if (json::get_str(p, "text") == nullptr) return fail(ppath + ".text must be a string");
            } else if (type == "input_image" && !system) {
                if (get(p, "file_id") != nullptr)
                    return fail(ppath + ".file_id: " + not_for_target("a file id") + "; send image_url");
                if (json::get_str(p, "image_url") == nullptr) return fail(ppath + ".image_url must be a string");
                const rj::Value* detail = get(p, "detail");
                if (detail != nullptr && !detail->IsString()) return fail(ppath + ".detail must be a string");
            } else if (type == "input_image") {
                return fail(ppath + ": images are not supported in " + std::string(r) + " messages");
            } else {
                return fail(ppath + ": " + not_for_target("content part type " + quoted(type)));
            }
        }
        w_.begin_object().field("role", system ? "system" : "user").key("content");
        if (system) {   // text only: one string
            std::string text;
            for (const auto& p : content->GetArray()) {
                if (!text.empty()) text += "\n\n";
                text.append(sv(*get(p, "text")));
            }
            w_.str(text);
        } else {
            w_.begin_array();
            for (const auto& p : content->GetArray()) {
                if (sv(*get(p, "type")) == "input_text") {
                    w_.begin_object().field("type", "text").field("text", sv(*get(p, "text"))).end_object();
                    continue;
                }
                w_.begin_object().field("type", "image_url").key("image_url").begin_object();
                w_.field("url", sv(*get(p, "image_url")));
                if (const rj::Value* d = get(p, "detail")) w_.field("detail", sv(*d));
                w_.end_object().end_object();
            }
            w_.end_array();
        }
        w_.end_object();
        ++messages_;
        return true;
    }

    bool assistant(const rj::Value& content, const std::string& path) {
        flush_assistant();
        pending_ = true;
        if (content.IsString()) {
            pending_text_.assign(sv(content));
            pending_has_text_ = true;
            return true;
        }
        std::size_t j = 0;
        for (const auto& p : content.GetArray()) {
            const std::string ppath = at(path + ".content", j++);
            const rj::Value* pt = json::get_str(p, "type");
            if (pt == nullptr) return fail(ppath + " must be an object with a string type");
            const std::string_view type = sv(*pt);
            const char* field = type == "output_text" || type == "input_text" ? "text"
                                : type == "refusal"                           ? "refusal"
                                                                              : nullptr;
            if (field == nullptr) return fail(ppath + ": " + not_for_target("content part type " + quoted(type)));
            const rj::Value* s = json::get_str(p, field);
            if (s == nullptr) return fail(ppath + "." + field + " must be a string");
            if (pending_has_text_) pending_text_ += "\n\n";
            pending_text_.append(sv(*s));
            pending_has_text_ = true;
        }
        return true;
    }

    bool function_call(const rj::Value& item, const std::string& path) {
        const rj::Value* id = json::get_str(item, "call_id");
        if (id == nullptr) return fail(path + ".call_id must be a string");
        const rj::Value* name = json::get_str(item, "name");
        if (name == nullptr) return fail(path + ".name must be a string");
        Call c{std::string(sv(*id)), std::string(sv(*name)), "{}"};
        if (const rj::Value* a = get(item, "arguments")) {
            if (!a->IsString()) return fail(path + ".arguments must be a string");
            if (a->GetStringLength() > 0) {
                rj::Document d;
                d.Parse<rj::kParseIterativeFlag>(a->GetString(), a->GetStringLength());
                if (d.HasParseError() || !d.IsObject() || !json_depth_at_most(d, kMaxDepth))
                    return fail(path + ".arguments must be the JSON text of an object");
                c.arguments.assign(sv(*a));
            }
        }
        if (!pending_) pending_ = true;
        calls_.push_back(std::move(c));
        return true;
    }

    bool function_output(const rj::Value& item, const std::string& path) {
        const rj::Value* id = json::get_str(item, "call_id");
        if (id == nullptr) return fail(path + ".call_id must be a string");
        const rj::Value* output = get(item, "output");
        std::string text;
        if (output == nullptr || output->IsString()) {
            if (output != nullptr) text.assign(sv(*output));
        } else if (output->IsArray()) {
            std::size_t j = 0;
            for (const auto& p : output->GetArray()) {
                const std::string ppath = at(path + ".output", j++);
                const rj::Value* pt = json::get_str(p, "type");
                if (pt == nullptr || sv(*pt) != "input_text")
                    return fail(ppath + ": " + not_for_target("a function output part other than input_text"));
                const rj::Value* s = json::get_str(p, "text");
                if (s == nullptr) return fail(ppath + ".text must be a string");
                if (!text.empty()) text += "\n\n";
                text.append(sv(*s));
            }
        } else {
            return fail(path + ".output must be a string or an array of input_text parts");
        }
        flush_assistant();
        w_.begin_object().field("role", "tool").field("tool_call_id", sv(*id)).field("content", text).end_object();
        ++messages_;
        return true;
    }

    // The assistant turn gathered so far: its text and the calls that followed it.
    void flush_assistant() {
        if (!pending_) return;
        w_.begin_object().field("role", "assistant").key("content");
        if (pending_has_text_ || calls_.empty()) w_.str(pending_text_);
        else w_.null();
        if (!calls_.empty()) {
            w_.key("tool_calls").begin_array();
            for (const Call& c : calls_) {
                w_.begin_object().field("id", c.id).field("type", "function").key("function").begin_object();
                w_.field("name", c.name).field("arguments", c.arguments).end_object().end_object();
            }
            w_.end_array();
        }
        w_.end_object();
        ++messages_;
        pending_ = pending_has_text_ = false;
        pending_text_.clear();
        calls_.clear();
    }

    bool tools() {
        const rj::Value* ts = get(req_, "tools");
        const rj::Value* choice = get(req_, "tool_choice");
        if (ts != nullptr && !ts->IsArray()) return fail("tools must be an array");
        if (ts != nullptr && !ts->Empty()) {
            w_.key("tools").begin_array();
            std::size_t i = 0;
            for (const auto& t : ts->GetArray()) {
                const std::string path = at("tools", i++);
                const rj::Value* type = json::get_str(t, "type");
                if (type == nullptr) return fail(path + " must be an object with a string type");
                if (sv(*type) != "function")
                    return fail(path + ": " + not_for_target("the built-in tool " + quoted(sv(*type))) +
                                " (function tools only; built-in tools need an OpenAI-type provider)");
                const rj::Value* name = json::get_str(t, "name");
                if (name == nullptr) return fail(path + ".name must be a string");
                const rj::Value* desc = get(t, "description");
                if (desc != nullptr && !desc->IsString()) return fail(path + ".description must be a string");
                const rj::Value* params = get(t, "parameters");
                if (params != nullptr && !params->IsObject()) return fail(path + ".parameters must be an object");
                if (params != nullptr && !json_depth_at_most(*params, kMaxDepth))
                    return fail(path + ".parameters is nested too deeply");
                w_.begin_object().field("type", "function").key("function").begin_object().field("name", sv(*name));
                if (desc != nullptr) w_.field("description", sv(*desc));
                if (params != nullptr) json_copy(w_.key("parameters"), *params);
                w_.end_object().end_object();
            }
            w_.end_array();
        }
        if (choice != nullptr) {
            if (choice->IsString()) {
                const std::string_view c = sv(*choice);
                if (c != "auto" && c != "none" && c != "required")
                    return fail("tool_choice must be \"auto\", \"none\", \"required\" or a function");
                w_.field("tool_choice", c);
            } else if (choice->IsObject()) {
                const rj::Value* type = json::get_str(*choice, "type");
                if (type == nullptr) return fail("tool_choice.type must be a string");
                if (sv(*type) != "function")
                    return fail(not_for_target("tool_choice type " + quoted(sv(*type))));
                const rj::Value* name = json::get_str(*choice, "name");
                if (name == nullptr) return fail("tool_choice.name must be a string");
                w_.key("tool_choice").begin_object().field("type", "function").key("function").begin_object();
                w_.field("name", sv(*name)).end_object().end_object();
            } else {
                return fail("tool_choice must be a string or an object");
            }
        }
        if (const rj::Value* p = get(req_, "parallel_tool_calls")) {
            if (!p->IsBool()) return fail("parallel_tool_calls must be a boolean");
            w_.field("parallel_tool_calls", p->GetBool());
        }
        return true;
    }

    bool text_format() {
        const rj::Value* text = get(req_, "text");
        if (text == nullptr) return true;
        if (!text->IsObject()) return fail("text must be an object");
        const rj::Value* f = get(*text, "format");
        if (f == nullptr) return true;
        const rj::Value* type = f->IsObject() ? json::get_str(*f, "type") : nullptr;
        if (type == nullptr) return fail("text.format.type must be a string");
        const std::string_view t = sv(*type);
        if (t == "text") return true;
        if (t != "json_object" && t != "json_schema")
            return fail("text.format.type must be \"text\", \"json_object\" or \"json_schema\"");
        if (anthropic_) return fail(not_for_target("text.format " + quoted(t)));
        if (t == "json_object") {
            w_.key("response_format").begin_object().field("type", "json_object").end_object();
            return true;
        }
        const rj::Value* name = json::get_str(*f, "name");
        if (name == nullptr) return fail("text.format.name must be a string");
        const rj::Value* schema = get(*f, "schema");
        if (schema == nullptr || !schema->IsObject()) return fail("text.format.schema must be an object");
        if (!json_depth_at_most(*schema, kMaxDepth)) return fail("text.format.schema is nested too deeply");
        const rj::Value* strict = get(*f, "strict");
        if (strict != nullptr && !strict->IsBool()) return fail("text.format.strict must be a boolean");
        w_.key("response_format").begin_object().field("type", "json_schema").key("json_schema").begin_object();
        w_.field("name", sv(*name));
        json_copy(w_.key("schema"), *schema);
        if (strict != nullptr) w_.field("strict", strict->GetBool());
        w_.end_object().end_object();
        return true;
    }

    bool reasoning() {
        const rj::Value* r = get(req_, "reasoning");
        if (r == nullptr) return true;
        if (!r->IsObject()) return fail("reasoning must be an object");
        const rj::Value* e = get(*r, "effort");
        if (e == nullptr) return true;
        const std::string_view v = e->IsString() ? sv(*e) : std::string_view();
        if (v != "none" && v != "minimal" && v != "low" && v != "medium" && v != "high")
            return fail("reasoning.effort must be \"none\", \"minimal\", \"low\", \"medium\" or \"high\"");
        w_.field("reasoning_effort", v);
        return true;
    }

    const rj::Value& req_;
    std::string_view target_;
    bool anthropic_;
    std::string& err_;
    JsonWriter w_;
    std::size_t messages_ = 0;
    bool pending_ = false, pending_has_text_ = false;
    std::string pending_text_;
    std::vector<Call> calls_;
};

}  // namespace

bool chat_request_from_responses(const rj::Value& req, std::string_view model, ProviderType target,
                                 std::string& body, std::string& err) {
    try {
        Translator t(req, target, err);
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
