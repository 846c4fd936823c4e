// OpenAI chat request -> Anthropic Messages request (docs/translation-anthropic.md).
#include "core/codec/anthropic_wire.h"

#include <exception>
#include <vector>

#include <rapidjson/document.h>

#include "core/codec/json_copy.h"
#include "core/json/envelope.h"
#include "core/json/read.h"
#include "core/json/writer.h"

namespace llmgw {
namespace {

namespace rj = rapidjson;

constexpr int kMaxDepth = 256;

using json::get;
using json::sv;

bool is(const rj::Value* v, std::string_view s) { return v != nullptr && v->IsString() && sv(*v) == s; }

// A caller-supplied name echoed in an error sentence: short, printable, valid UTF-8.
std::string echo(std::string_view s) {
    std::string t = to_valid_utf8(s.substr(0, 64));
    for (char& c : t) {
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    }
    return scrub_secrets(t);
}

// One Anthropic content block, already serialized.
using Block = std::string;

struct Message {
    std::string role;            // "user" / "assistant"
    std::vector<Block> blocks;
};

class Translator {
public:
    Translator(const rj::Value& req, std::string_view model, const AnthropicRequestOptions& opt, std::string& err)
        : req_(req), model_(model), opt_(opt), err_(err) {}

    bool run(std::string& body) {
        if (!req_.IsObject()) return fail("the request body must be a JSON object");
        if (!refusals()) return false;
        const rj::Value* msgs = get(req_, "messages");
        if (msgs == nullptr || !msgs->IsArray()) return fail("messages must be an array");
        for (rj::SizeType i = 0; i < msgs->Size(); ++i) {
            if (!message((*msgs)[i], "messages[" + std::to_string(i) + "]")) return false;
        }
        if (messages_.empty()) return fail("messages must hold at least one user, assistant or tool message");
        std::int64_t max_tokens = opt_.default_max_tokens;
        for (const char* name : {"max_tokens", "max_completion_tokens"}) {   // the latter wins
            if (const rj::Value* v = get(req_, name)) {
                if (!v->IsInt64() || v->GetInt64() < 1) return fail(std::string(name) + " must be a positive integer");
                max_tokens = v->GetInt64();
            }
        }
        std::int64_t budget = 0;
        if (const rj::Value* e = get(req_, "reasoning_effort")) {
            if (!e->IsString()) return fail("reasoning_effort must be a string");
            std::string_view s = sv(*e);
            if (s == "low") budget = 1024;
            else if (s == "medium") budget = 4096;
            else if (s == "high") budget = 16384;
            else if (s != "minimal" && s != "none") return fail("reasoning_effort must be none, minimal, low, medium or high");
            if (budget > 0 && max_tokens <= budget) max_tokens = budget + opt_.default_max_tokens;
        }

        JsonWriter w;
        w.begin_object().field("model", model_);
        if (!system_.empty()) w.field("system", system_);
        w.key("messages").begin_array();
        for (const Message& m : messages_) {
            w.begin_object().field("role", m.role).key("content");
            if (m.role == "user" && m.blocks.size() == 1 && m.blocks[0].rfind("T", 0) == 0) {
                w.str(std::string_view(m.blocks[0]).substr(1));   // a lone text block: plain string content
            } else {
                w.begin_array();
                for (const Block& b : m.blocks) raw_block(w, b);
                w.end_array();
            }
            w.end_object();
        }
        w.end_array();
        w.field("max_tokens", max_tokens);
        if (budget > 0) {
            w.key("thinking").begin_object().field("type", "enabled").field("budget_tokens", budget).end_object();
        }
        if (!copy_number(w, "temperature", "temperature") || !copy_number(w, "top_p", "top_p")) return false;
        if (!stop(w)) return false;
        if (!tools(w)) return false;
        if (const rj::Value* u = get(req_, "user")) {
            if (!u->IsString()) return fail("user must be a string");
            w.key("metadata").begin_object().field("user_id", sv(*u)).end_object();
        }
        if (const rj::Value* s = get(req_, "stream")) {
            if (!s->IsBool()) return fail("stream must be a boolean");
            if (s->GetBool()) w.field("stream", true);
        }
        w.end_object();
        body = w.take();
        return true;
    }

private:
    bool fail(std::string s) {
        err_ = std::move(s);
        return false;
    }

    bool refusals() {
        auto refuse = [&](const char* name) { return fail(std::string(name) + " is not supported by anthropic providers"); };
        if (const rj::Value* n = get(req_, "n")) {
            if (!n->IsInt64()) return fail("n must be an integer");
            if (n->GetInt64() != 1) return fail("n greater than 1 is not supported by anthropic providers");
        }
        if (const rj::Value* v = get(req_, "logprobs"); v != nullptr && !(v->IsBool() && !v->GetBool())) return refuse("logprobs");
        if (get(req_, "top_logprobs") != nullptr) return refuse("top_logprobs");
        if (const rj::Value* v = get(req_, "logit_bias"); v != nullptr && !(v->IsObject() && v->MemberCount() == 0))
            return refuse("logit_bias");
        for (const char* p : {"presence_penalty", "frequency_penalty"}) {
            if (const rj::Value* v = get(req_, p); v != nullptr && !(v->IsNumber() && v->GetDouble() == 0)) return refuse(p);
        }
        if (get(req_, "audio") != nullptr) return refuse("audio");
        if (const rj::Value* m = get(req_, "modalities"); m != nullptr && m->IsArray()) {
            for (auto& x : m->GetArray()) {
                if (x.IsString() && sv(x) == "audio") return fail("audio in modalities is not supported by anthropic providers");
            }
        }
        if (get(req_, "prediction") != nullptr) return refuse("prediction");
        if (get(req_, "seed") != nullptr) return refuse("seed");
        if (get(req_, "functions") != nullptr) return fail("functions is not supported by anthropic providers (use tools)");
        if (get(req_, "function_call") != nullptr)
            return fail("function_call is not supported by anthropic providers (use tool_choice)");
        if (const rj::Value* rf = get(req_, "response_format")) {
            const rj::Value* t = get(*rf, "type");
            if (!rf->IsObject() || t == nullptr || !t->IsString()) return fail("response_format.type must be a string");
            if (sv(*t) != "text") return fail("response_format " + echo(sv(*t)) + " is not supported by anthropic providers");
        }
        return true;
    }

    bool copy_number(JsonWriter& w, const char* from, const char* to) {
        const rj::Value* v = get(req_, from);
        if (v == nullptr) return true;
        if (!v->IsNumber()) return fail(std::string(from) + " must be a number");
        w.key(to).real(v->GetDouble());
        return true;
    }

    bool stop(JsonWriter& w) {
        const rj::Value* s = get(req_, "stop");
        if (s == nullptr) return true;
        if (s->IsString()) {
            w.key("stop_sequences").begin_array().str(sv(*s)).end_array();
            return true;
        }
        if (!s->IsArray()) return fail("stop must be a string or an array of strings");
        for (auto& x : s->GetArray()) {
            if (!x.IsString()) return fail("stop must be a string or an array of strings");
        }
        if (s->Empty()) return true;
        w.key("stop_sequences").begin_array();
        for (auto& x : s->GetArray()) w.str(sv(x));
        w.end_array();
        return true;
    }

    bool tools(JsonWriter& w) {
        const rj::Value* t = get(req_, "tools");
        const rj::Value* choice = get(req_, "tool_choice");
        const rj::Value* parallel = get(req_, "parallel_tool_calls");
        if (parallel != nullptr && !parallel->IsBool()) return fail("parallel_tool_calls must be a boolean");
        const bool no_parallel = parallel != nullptr && !parallel->GetBool();
        if (t != nullptr) {
            if (!t->IsArray()) return fail("tools must be an array");
            if (!t->Empty()) {
                w.key("tools").begin_array();
                for (rj::SizeType i = 0; i < t->Size(); ++i) {
                    const rj::Value& tool = (*t)[i];
                    const std::string at = "tools[" + std::to_string(i) + "]";
                    const rj::Value* type = get(tool, "type");
                    if (!tool.IsObject()) return fail(at + " must be an object");
                    if (type != nullptr && !is(type, "function"))
                        return fail(at + ".type must be \"function\" (anthropic providers take function tools only)");
                    const rj::Value* fn = get(tool, "function");
                    if (fn == nullptr || !fn->IsObject()) return fail(at + ".function must be an object");
                    const rj::Value* name = get(*fn, "name");
                    if (name == nullptr || !name->IsString()) return fail(at + ".function.name must be a string");
                    w.begin_object().field("name", sv(*name));
                    if (const rj::Value* d = get(*fn, "description")) {
                        if (!d->IsString()) return fail(at + ".function.description must be a string");
                        w.field("description", sv(*d));
                    }
                    w.key("input_schema");
                    if (const rj::Value* p = get(*fn, "parameters")) {
                        if (!p->IsObject()) return fail(at + ".function.parameters must be an object");
                        if (!json_depth_at_most(*p, kMaxDepth)) return fail(at + ".function.parameters is nested too deeply");
                        json_copy(w, *p);
                    } else {
                        w.begin_object().field("type", "object").end_object();
                    }
                    w.end_object();
                }
                w.end_array();
            }
        }
        if (choice == nullptr && !no_parallel) return true;
        std::string type = "auto", name;
        if (choice != nullptr) {
            if (choice->IsString()) {
                std::string_view c = sv(*choice);
                if (c == "auto") type = "auto";
                else if (c == "none") type = "none";
                else if (c == "required") type = "any";
                else return fail("tool_choice must be auto, none, required or a function");
            } else if (choice->IsObject()) {
                const rj::Value* fn = get(*choice, "function");
                const rj::Value* n = fn != nullptr ? get(*fn, "name") : nullptr;
                if (n == nullptr || !n->IsString()) return fail("tool_choice.function.name must be a string");
                type = "tool";
                name.assign(sv(*n));
            } else {
                return fail("tool_choice must be a string or an object");
            }
        }
        w.key("tool_choice").begin_object().field("type", type);
        if (type == "tool") w.field("name", name);
        if (no_parallel && type != "none") w.field("disable_parallel_tool_use", true);
        w.end_object();
        return true;
    }

    // Content blocks are kept serialized with a one-letter tag: "T<text>"
    // for a text block (so a lone one can become plain string content) and
    // "J<json>" for any other block.
    static void raw_block(JsonWriter& w, const Block& b) {
        if (b[0] == 'T') {
            w.begin_object().field("type", "text").field("text", std::string_view(b).substr(1)).end_object();
        } else {
            w.raw(std::string_view(b).substr(1));
        }
    }

    void push(const std::string& role, std::vector<Block> blocks) {
        if (blocks.empty()) return;
        if (!messages_.empty() && messages_.back().role == role) {
            for (Block& b : blocks) messages_.back().blocks.push_back(std::move(b));
            return;
        }
        messages_.push_back(Message{role, std::move(blocks)});
    }

    bool text_of(const rj::Value* c, const std::string& at, std::string& out) {
        if (c == nullptr) return true;
        if (c->IsString()) {
            out.append(sv(*c));
            return true;
        }
        if (!c->IsArray()) return fail(at + ".content must be a string or an array");
        for (rj::SizeType j = 0; j < c->Size(); ++j) {
            const rj::Value& p = (*c)[j];
            const rj::Value* type = get(p, "type");
            const rj::Value* t = get(p, is(type, "refusal") ? "refusal" : "text");
            if (!is(type, "text") && !is(type, "refusal"))
                return fail(at + ".content[" + std::to_string(j) + "] must be a text part");
            if (t == nullptr || !t->IsString()) return fail(at + ".content[" + std::to_string(j) + "].text must be a string");
            if (!out.empty()) out += "\n\n";
            out.append(sv(*t));
        }
        return true;
    }

    bool image(const rj::Value& part, const std::string& at, std::vector<Block>& out) {
        const rj::Value* iu = get(part, "image_url");
        const rj::Value* url = iu != nullptr && iu->IsObject() ? get(*iu, "url") : iu;
        if (url == nullptr || !url->IsString()) return fail(at + ".image_url.url must be a string");
        std::string_view u = sv(*url);
        JsonWriter w;
        w.begin_object().field("type", "image").key("source").begin_object();
        if (u.rfind("data:", 0) == 0) {
            std::size_t semi = u.find(";base64,");
            std::string_view media = semi == std::string_view::npos ? std::string_view() : u.substr(5, semi - 5);
            if (semi == std::string_view::npos || media.find('/') == std::string_view::npos ||
                semi + 8 >= u.size())
                return fail(at + ".image_url.url must be a base64 data URL (data:<type>;base64,<data>) or an http(s) URL");
            w.field("type", "base64").field("media_type", media).field("data", u.substr(semi + 8));
        } else if (u.rfind("https://", 0) == 0 || u.rfind("http://", 0) == 0) {
            w.field("type", "url").field("url", u);
        } else {
            return fail(at + ".image_url.url must be a base64 data URL (data:<type>;base64,<data>) or an http(s) URL");
        }
        w.end_object().end_object();
        out.push_back("J" + w.take());
        return true;
    }

    bool message(const rj::Value& m, const std::string& at) {
        if (!m.IsObject()) return fail(at + " must be an object");
        const rj::Value* role = get(m, "role");
        if (role == nullptr || !role->IsString()) return fail(at + ".role must be a string");
        const std::string_view r = sv(*role);
        const rj::Value* content = get(m, "content");
        if (r == "system" || r == "developer") {
            std::string t;
            if (!text_of(content, at, t)) return false;
            if (!t.empty()) {
                if (!system_.empty()) system_ += "\n\n";
                system_ += t;
            }
            return true;
        }
        if (r == "user") {
            std::vector<Block> blocks;
            if (content == nullptr) return fail(at + ".content is required");
            if (content->IsString()) {
                if (content->GetStringLength() > 0) blocks.push_back("T" + std::string(sv(*content)));
            } else if (content->IsArray()) {
                for (rj::SizeType j = 0; j < content->Size(); ++j) {
                    const rj::Value& p = (*content)[j];
                    const std::string pat = at + ".content[" + std::to_string(j) + "]";
                    const rj::Value* type = get(p, "type");
                    if (type == nullptr || !type->IsString()) return fail(pat + ".type must be a string");
                    if (sv(*type) == "text") {
                        const rj::Value* t = get(p, "text");
                        if (t == nullptr || !t->IsString()) return fail(pat + ".text must be a string");
                        if (t->GetStringLength() > 0) blocks.push_back("T" + std::string(sv(*t)));
                    } else if (sv(*type) == "image_url") {
                        if (!image(p, pat, blocks)) return false;
                    } else {
                        return fail(pat + ": content part type \"" + echo(sv(*type)) +
                                    "\" is not supported by anthropic providers");
                    }
                }
            } else {
                return fail(at + ".content must be a string or an array");
            }
            push("user", std::move(blocks));
            return true;
        }
        if (r == "assistant") {
            std::vector<Block> blocks;
            std::string t;
            if (!text_of(content, at, t)) return false;
            if (const rj::Value* rf = get(m, "refusal"); rf != nullptr && rf->IsString() && t.empty()) t.assign(sv(*rf));
            if (!t.empty()) blocks.push_back("T" + t);
            if (const rj::Value* tcs = get(m, "tool_calls")) {
                if (!tcs->IsArray()) return fail(at + ".tool_calls must be an array");
                for (rj::SizeType k = 0; k < tcs->Size(); ++k) {
                    const rj::Value& c = (*tcs)[k];
                    const std::string cat = at + ".tool_calls[" + std::to_string(k) + "]";
                    const rj::Value* id = get(c, "id");
                    const rj::Value* fn = get(c, "function");
                    if (id == nullptr || !id->IsString()) return fail(cat + ".id must be a string");
                    if (fn == nullptr || !fn->IsObject()) return fail(cat + ".function must be an object");
                    const rj::Value* name = get(*fn, "name");
                    const rj::Value* args = get(*fn, "arguments");
                    if (name == nullptr || !name->IsString()) return fail(cat + ".function.name must be a string");
                    rj::Document parsed;
                    if (args != nullptr) {
                        if (!args->IsString()) return fail(cat + ".function.arguments must be a string");
                        parsed.Parse<rj::kParseIterativeFlag>(args->GetString(), args->GetStringLength());
                    }
                    if (args == nullptr || args->GetStringLength() == 0) {
                        parsed.SetObject();
                    } else if (parsed.HasParseError() || !parsed.IsObject() || !json_depth_at_most(parsed, kMaxDepth)) {
                        return fail(cat + ".function.arguments must be a JSON object");
                    }
                    JsonWriter w;
                    w.begin_object().field("type", "tool_use").field("id", sv(*id)).field("name", sv(*name));
                    w.key("input");
                    json_copy(w, parsed);
                    w.end_object();
                    blocks.push_back("J" + w.take());
                }
            }
            push("assistant", std::move(blocks));
            return true;
        }
        if (r == "tool") {
            const rj::Value* id = get(m, "tool_call_id");
            if (id == nullptr || !id->IsString()) return fail(at + ".tool_call_id must be a string");
            std::string t;
            if (!text_of(content, at, t)) return false;
            JsonWriter w;
            w.begin_object().field("type", "tool_result").field("tool_use_id", sv(*id)).field("content", t).end_object();
            push("user", {"J" + w.take()});
            return true;
        }
        return fail(at + ".role \"" + echo(r) + "\" is not supported by anthropic providers");
    }

    const rj::Value& req_;
    std::string_view model_;
    const AnthropicRequestOptions& opt_;
    std::string& err_;
    std::string system_;
    std::vector<Message> messages_;
};

}  // namespace

bool anthropic_request_from_openai(const rapidjson::Value& req, std::string_view model,
                                   const AnthropicRequestOptions& opt, std::string& body, std::string& err) {
    try {
        return Translator(req, model, opt, err).run(body);
    } catch (const std::exception&) {
        err = "the request could not be translated (out of memory)";
        return false;
    }
}

}  // namespace llmgw
