// OpenAI chat completions answers -> IR: a whole chat.completion object, or
// the chat.completion.chunk events of a stream up to "data: [DONE]". Only
// choice 0 is read. Tool call indexes are remapped to a dense 0-based order
// of first appearance.
#include <cstdint>
#include <exception>
#include <vector>

#include <rapidjson/document.h>

#include "core/json/read.h"
#include "core/json/scratch.h"
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "core/codec/openai_ir.h"

namespace llmgw {
namespace {

namespace rj = rapidjson;

constexpr std::size_t kMaxDepth = 256;
constexpr std::int64_t kMaxToolIndex = 128;

using json::count;
using json::get;
using json::sv;

// Nesting depth of a parsed value, bounded (iterative).
bool depth_ok(const rj::Value& root) {
    struct Item {
        const rj::Value* v;
        std::size_t d;
    };
    std::vector<Item> stack{{&root, 1}};
    while (!stack.empty()) {
        Item it = stack.back();
        stack.pop_back();
        if (it.d > kMaxDepth) return false;
        if (it.v->IsObject()) {
            for (auto m = it.v->MemberBegin(); m != it.v->MemberEnd(); ++m) stack.push_back({&m->value, it.d + 1});
        } else if (it.v->IsArray()) {
            for (auto& e : it.v->GetArray()) stack.push_back({&e, it.d + 1});
        }
    }
    return true;
}

// Parses into this thread's scratch document (valid until the next parse).
const rj::Document* parse(std::string_view s, std::string& err) {
    const rj::Document* d = parse_scratch_object(s, err);
    if (d != nullptr && !depth_ok(*d)) {
        err = "JSON nested too deeply";
        return nullptr;
    }
    return d;
}

// A token count member: its count, or -1 when it is absent (or null); one
// that is there but not a count (negative, 10.7, 1e30, 2^63, a string) sets
// malformed.
std::int64_t count_member(const rj::Value& u, const char* name, bool& malformed) {
    const rj::Value* v = get(u, name);
    const std::int64_t n = count(v);
    if (v != nullptr && n < 0) malformed = true;
    return n;
}

// usage -> IR; false when the object has neither count.
bool read_usage(const rj::Value& u, UsageIR& out) {
    if (!u.IsObject()) return false;
    bool malformed = false;
    const std::int64_t p = count_member(u, "prompt_tokens", malformed), c = count_member(u, "completion_tokens", malformed);
    if (p < 0 && c < 0 && !malformed) return false;
    out = UsageIR();
    out.present = true;
    out.malformed = malformed;
    out.prompt = p < 0 ? 0 : p;
    out.completion = c < 0 ? 0 : c;
    if (const rj::Value* d = get(u, "prompt_tokens_details")) out.cache_read = std::max<std::int64_t>(0, count(get(*d, "cached_tokens")));
    if (const rj::Value* d = get(u, "completion_tokens_details"))
        out.reasoning = std::max<std::int64_t>(0, count(get(*d, "reasoning_tokens")));
    return true;
}

FinishReason finish_of(std::string_view s) {
    if (s == "length") return FinishReason::Length;
    if (s == "tool_calls" || s == "function_call") return FinishReason::ToolCalls;
    if (s == "content_filter") return FinishReason::ContentFilter;
    return FinishReason::Stop;
}

// message.content: a string, or an array of text parts (joined).
bool content_text(const rj::Value* c, std::string& out, std::string& err) {
    if (c == nullptr) return true;
    if (c->IsString()) {
        out.append(sv(*c));
        return true;
    }
    if (!c->IsArray()) {
        err = "message.content is neither a string nor an array";
        return false;
    }
    for (auto& part : c->GetArray()) {
        const rj::Value* t = get(part, "text");
        if (t != nullptr && t->IsString()) out.append(sv(*t));
    }
    return true;
}

std::string error_message(const rj::Value& e) {
    if (e.IsString()) return scrub_secrets(sv(e).substr(0, 300));
    if (const rj::Value* m = get(e, "message"); m != nullptr && m->IsString()) return scrub_secrets(sv(*m).substr(0, 300));
    return "the upstream provider reported an error";
}

class OpenAIReader final : public ResponseReader {
public:
    bool complete() const override { return done_; }

private:
    bool whole(std::string_view body, ChatResponseIR& out, std::string& err) override {
        const rj::Document* dp = parse(body, err);
        if (dp == nullptr) return false;
        const rj::Document& d = *dp;
        const rj::Value* choices = get(d, "choices");
        if (choices == nullptr || !choices->IsArray()) {
            err = "no choices array";
            return false;
        }
        if (const rj::Value* id = get(d, "id"); id != nullptr && id->IsString()) out.id.assign(sv(*id));
        if (const rj::Value* u = get(d, "usage")) read_usage(*u, out.usage);
        const rj::Value* choice = nullptr;
        for (auto& c : choices->GetArray()) {
            const rj::Value* idx = get(c, "index");
            if (!c.IsObject()) continue;
            if (idx == nullptr || (idx->IsInt64() && idx->GetInt64() == 0)) {
                choice = &c;
                break;
            }
        }
        if (choice == nullptr) {
            if (choices->Empty()) return true;   // no answer text (e.g. filtered): an empty answer
            err = "no choice 0";
            return false;
        }
        if (const rj::Value* f = get(*choice, "finish_reason"); f != nullptr && f->IsString()) out.finish = finish_of(sv(*f));
        const rj::Value* m = get(*choice, "message");
        if (m == nullptr) return true;
        if (!m->IsObject()) {
            err = "message is not an object";
            return false;
        }
        if (!content_text(get(*m, "content"), out.text, err)) return false;
        if (const rj::Value* r = get(*m, "refusal"); r != nullptr && r->IsString()) out.refusal.assign(sv(*r));
        if (const rj::Value* r = get(*m, "reasoning_content"); r != nullptr && r->IsString()) out.reasoning.assign(sv(*r));
        if (const rj::Value* tcs = get(*m, "tool_calls")) {
            if (!tcs->IsArray()) {
                err = "message.tool_calls is not an array";
                return false;
            }
            for (auto& tc : tcs->GetArray()) {
                const rj::Value* fn = get(tc, "function");
                if (fn == nullptr || !fn->IsObject()) {
                    err = "a tool call has no function object";
                    return false;
                }
                ToolCallIR t;
                if (const rj::Value* id = get(tc, "id"); id != nullptr && id->IsString()) t.id.assign(sv(*id));
                if (const rj::Value* n = get(*fn, "name"); n != nullptr && n->IsString()) t.name.assign(sv(*n));
                const rj::Value* a = get(*fn, "arguments");
                if (a != nullptr && a->IsString()) {
                    t.arguments.assign(sv(*a));
                } else if (a != nullptr && a->IsObject()) {   // some servers send the object itself
                    rj::StringBuffer sb;
                    rj::Writer<rj::StringBuffer> w(sb);
                    a->Accept(w);
                    t.arguments.assign(sb.GetString(), sb.GetSize());
                }
                out.tool_calls.push_back(std::move(t));
            }
        }
        return true;
    }

    ReadStep event(const SseEvent& ev, std::vector<StreamEventIR>& out, std::string& err) override {
        if (ev.data.empty()) return ReadStep::More;
        if (ev.data == "[DONE]") {
            done_ = true;
            return ReadStep::Done;
        }
        const rj::Document* dp = parse(ev.data, err);
        if (dp == nullptr) return ReadStep::Invalid;
        const rj::Document& d = *dp;
        if (const rj::Value* e = get(d, "error")) {
            StreamEventIR x;
            x.kind = StreamEventIR::Kind::Error;
            x.text = error_message(*e);
            const rj::Value* t = get(*e, "type");
            x.error_type = t != nullptr && t->IsString() && t->GetStringLength() <= 64 ? std::string(sv(*t)) : "upstream_error";
            out.push_back(std::move(x));
            return ReadStep::Failed;
        }
        if (!started_) {
            started_ = true;
            StreamEventIR s;
            s.kind = StreamEventIR::Kind::Start;
            if (const rj::Value* id = get(d, "id"); id != nullptr && id->IsString()) s.id.assign(sv(*id));
            out.push_back(std::move(s));
        }
        const rj::Value* choices = get(d, "choices");
        if (choices != nullptr && !choices->IsArray()) {
            err = "choices is not an array";
            return ReadStep::Invalid;
        }
        if (choices != nullptr) {
            for (auto& c : choices->GetArray()) {
                if (!c.IsObject()) {
                    err = "a choice is not an object";
                    return ReadStep::Invalid;
                }
                const rj::Value* idx = get(c, "index");
                if (idx != nullptr && !(idx->IsInt64() && idx->GetInt64() == 0)) continue;
                if (!choice(c, out, err)) return ReadStep::Invalid;
            }
        }
        if (const rj::Value* u = get(d, "usage")) {
            StreamEventIR x;
            x.kind = StreamEventIR::Kind::Usage;
            if (read_usage(*u, x.usage)) out.push_back(std::move(x));
        }
        return ReadStep::More;
    }

    bool choice(const rj::Value& c, std::vector<StreamEventIR>& out, std::string& err) {
        if (const rj::Value* d = get(c, "delta")) {
            if (!d->IsObject()) {
                err = "delta is not an object";
                return false;
            }
            auto text = [&](const char* field, StreamEventIR::Kind k) {
                const rj::Value* v = get(*d, field);
                if (v == nullptr || !v->IsString() || v->GetStringLength() == 0) return;
                StreamEventIR x;
                x.kind = k;
                x.text.assign(sv(*v));
                out.push_back(std::move(x));
            };
            text("reasoning_content", StreamEventIR::Kind::Reasoning);
            text("content", StreamEventIR::Kind::Text);
            text("refusal", StreamEventIR::Kind::Refusal);
            if (const rj::Value* tcs = get(*d, "tool_calls")) {
                if (!tcs->IsArray()) {
                    err = "delta.tool_calls is not an array";
                    return false;
                }
                for (auto& tc : tcs->GetArray()) {
                    if (!tool_delta(tc, out, err)) return false;
                }
            }
        }
        if (const rj::Value* f = get(c, "finish_reason")) {
            if (!f->IsString()) {
                err = "finish_reason is not a string";
                return false;
            }
            StreamEventIR x;
            x.kind = StreamEventIR::Kind::Finish;
            x.finish = finish_of(sv(*f));
            out.push_back(std::move(x));
        }
        return true;
    }

    bool tool_delta(const rj::Value& tc, std::vector<StreamEventIR>& out, std::string& err) {
        if (!tc.IsObject()) {
            err = "a tool call delta is not an object";
            return false;
        }
        const rj::Value* idx = get(tc, "index");
        std::int64_t provider_index = 0;
        if (idx != nullptr) {
            if (!idx->IsInt64() || idx->GetInt64() < 0 || idx->GetInt64() >= kMaxToolIndex) {
                err = "a tool call index is not a small non-negative integer";
                return false;
            }
            provider_index = idx->GetInt64();
        }
        const rj::Value* fn = get(tc, "function");
        if (fn != nullptr && !fn->IsObject()) {
            err = "a tool call's function is not an object";
            return false;
        }
        std::size_t dense = 0;
        bool seen = false;
        for (std::size_t i = 0; i < tools_.size(); ++i) {
            if (tools_[i] == provider_index) {
                dense = i;
                seen = true;
                break;
            }
        }
        if (!seen) {
            dense = tools_.size();
            tools_.push_back(provider_index);
            StreamEventIR s;
            s.kind = StreamEventIR::Kind::ToolStart;
            s.index = dense;
            if (const rj::Value* id = get(tc, "id"); id != nullptr && id->IsString()) s.id.assign(sv(*id));
            if (fn != nullptr) {
                if (const rj::Value* n = get(*fn, "name"); n != nullptr && n->IsString()) s.name.assign(sv(*n));
            }
            out.push_back(std::move(s));
        }
        if (fn != nullptr) {
            const rj::Value* a = get(*fn, "arguments");
            if (a != nullptr && a->IsString() && a->GetStringLength() > 0) {
                StreamEventIR x;
                x.kind = StreamEventIR::Kind::ToolArgs;
                x.index = dense;
                x.text.assign(sv(*a));
                out.push_back(std::move(x));
            }
        }
        return true;
    }

    bool started_ = false, done_ = false;
    std::vector<std::int64_t> tools_;   // provider tool index by dense index
};

}  // namespace

std::unique_ptr<ResponseReader> make_openai_reader() { return make_or_null<OpenAIReader>(); }

}  // namespace llmgw
