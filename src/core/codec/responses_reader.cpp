// OpenAI Responses API answers -> IR: a response object, or the typed SSE
// events of a stream. What the IR has no place for (built-in tool calls,
// annotations, logprobs) is not read; the native codec relays the
// provider's bytes anyway and reads them only for usage and the end.
#include <unordered_map>
#include <vector>

#include <rapidjson/document.h>

#include "core/codec/json_copy.h"
#include "core/codec/responses_wire.h"
#include "core/json/read.h"

namespace llmgw {
namespace {

namespace rj = rapidjson;

constexpr int kMaxDepth = 256;
constexpr std::size_t kMaxCalls = 4096;

using json::count;
using json::get;
using json::get_str;
using json::sv;

// Parses into this thread's scratch document (valid until the next parse).
const rj::Document* parse(std::string_view s, std::string& err) { return parse_scratch_bounded(s, kMaxDepth, err); }

// usage: input_tokens (cached included), output_tokens (reasoning included),
// input_tokens_details.cached_tokens, output_tokens_details.reasoning_tokens.
UsageIR usage_of(const rj::Value* u) {
    UsageIR ir;
    if (u == nullptr || !u->IsObject()) return ir;
    auto take = [&](const rj::Value* v, std::int64_t& into) {
        if (v == nullptr) return;
        ir.present = true;
        const std::int64_t n = count(v);
        if (n < 0) ir.malformed = true;
        else into = n;
    };
    take(get(*u, "input_tokens"), ir.prompt);
    take(get(*u, "output_tokens"), ir.completion);
    if (const rj::Value* d = get(*u, "input_tokens_details")) {
        const std::int64_t n = count(get(*d, "cached_tokens"));
        if (n >= 0) ir.cache_read = n;
    }
    if (const rj::Value* d = get(*u, "output_tokens_details")) {
        const std::int64_t n = count(get(*d, "reasoning_tokens"));
        if (n >= 0) ir.reasoning = n;
    }
    return ir;
}

FinishReason finish_of(const rj::Value& resp, bool called_tools) {
    const rj::Value* status = get_str(resp, "status");
    if (status != nullptr && sv(*status) == "incomplete") {
        const rj::Value* d = get(resp, "incomplete_details");
        const rj::Value* reason = d != nullptr ? get_str(*d, "reason") : nullptr;
        if (reason != nullptr && sv(*reason) == "content_filter") return FinishReason::ContentFilter;
        return FinishReason::Length;
    }
    return called_tools ? FinishReason::ToolCalls : FinishReason::Stop;
}

// The message of a failed response or an error event, for the log.
std::string error_text(const rj::Value& v, std::string& type) {
    const rj::Value* e = get(v, "error");
    const rj::Value& src = e != nullptr && e->IsObject() ? *e : v;
    if (const rj::Value* c = get_str(src, "code")) type.assign(sv(*c));
    else if (const rj::Value* t = get_str(src, "type")) type.assign(sv(*t));
    const rj::Value* m = get_str(src, "message");
    return m != nullptr ? std::string(sv(*m)) : std::string("the provider reported an error");
}

class ResponsesReader final : public ResponseReader {
public:
    bool complete() const override { return done_; }

private:
    bool whole(std::string_view body, ChatResponseIR& out, std::string& err) override {
        const rj::Document* dp = parse(body, err);
        if (dp == nullptr) return false;
        const rj::Document& d = *dp;
        const rj::Value* output = get(d, "output");
        if (output == nullptr || !output->IsArray()) {
            err = "not a Responses API response object (no output array)";
            return false;
        }
        if (const rj::Value* id = get_str(d, "id")) out.id.assign(sv(*id));
        for (const auto& item : output->GetArray()) {
            const rj::Value* t = get_str(item, "type");
            if (t == nullptr) {
                err = "an output item has no type";
                return false;
            }
            const std::string_view type = sv(*t);
            if (type == "message") {
                const rj::Value* content = get(item, "content");
                if (content == nullptr || !content->IsArray()) continue;
                for (const auto& part : content->GetArray()) {
                    const rj::Value* pt = get_str(part, "type");
                    if (pt == nullptr) continue;
                    if (sv(*pt) == "output_text") {
                        if (const rj::Value* x = get_str(part, "text")) out.text.append(sv(*x));
                    } else if (sv(*pt) == "refusal") {
                        if (const rj::Value* x = get_str(part, "refusal")) out.refusal.append(sv(*x));
                    }
                }
            } else if (type == "function_call") {
                ToolCallIR call;
                if (const rj::Value* x = get_str(item, "call_id")) call.id.assign(sv(*x));
                if (const rj::Value* x = get_str(item, "name")) call.name.assign(sv(*x));
                if (const rj::Value* x = get_str(item, "arguments")) call.arguments.assign(sv(*x));
                out.tool_calls.push_back(std::move(call));
            } else if (type == "reasoning") {
                const rj::Value* summary = get(item, "summary");
                if (summary == nullptr || !summary->IsArray()) continue;
                for (const auto& s : summary->GetArray())
                    if (const rj::Value* x = get_str(s, "text")) out.reasoning.append(sv(*x));
            }
        }
        out.finish = finish_of(d, !out.tool_calls.empty());
        out.usage = usage_of(get(d, "usage"));
        return true;
    }

    ReadStep event(const SseEvent& ev, std::vector<StreamEventIR>& out, std::string& err) override {
        const rj::Document* dp = parse(ev.data, err);
        if (dp == nullptr) return ReadStep::Invalid;
        const rj::Document& d = *dp;
        const rj::Value* t = get_str(d, "type");
        if (t == nullptr) {
            err = "an event has no type";
            return ReadStep::Invalid;
        }
        const std::string_view type = sv(*t);
        auto push = [&](StreamEventIR::Kind k) -> StreamEventIR& {
            out.emplace_back();
            out.back().kind = k;
            return out.back();
        };
        auto delta = [&](StreamEventIR::Kind k) {
            if (const rj::Value* x = get_str(d, "delta"); x != nullptr && x->GetStringLength() > 0)
                push(k).text.assign(sv(*x));
        };
        const rj::Value* resp = get(d, "response");
        if (type == "response.created" || type == "response.in_progress") {
            if (!started_) {
                started_ = true;
                const rj::Value* id = resp != nullptr ? get_str(*resp, "id") : nullptr;
                push(StreamEventIR::Kind::Start).id = id != nullptr ? std::string(sv(*id)) : std::string();
            }
            return ReadStep::More;
        }
        if (type == "response.output_text.delta") {
            delta(StreamEventIR::Kind::Text);
        } else if (type == "response.refusal.delta") {
            delta(StreamEventIR::Kind::Refusal);
        } else if (type == "response.reasoning_summary_text.delta" || type == "response.reasoning_text.delta") {
            delta(StreamEventIR::Kind::Reasoning);
        } else if (type == "response.output_item.added") {
            const rj::Value* item = get(d, "item");
            const rj::Value* it = item != nullptr ? get_str(*item, "type") : nullptr;
            const std::int64_t at = count(get(d, "output_index"));
            if (it != nullptr && sv(*it) == "function_call" && calls_.size() < kMaxCalls) {
                const std::size_t index = calls_.size();
                calls_[at] = index;
                StreamEventIR& s = push(StreamEventIR::Kind::ToolStart);
                s.index = index;
                if (const rj::Value* x = get_str(*item, "call_id")) s.id.assign(sv(*x));
                if (const rj::Value* x = get_str(*item, "name")) s.name.assign(sv(*x));
                if (const rj::Value* x = get_str(*item, "arguments"); x != nullptr && x->GetStringLength() > 0) {
                    StreamEventIR& a = push(StreamEventIR::Kind::ToolArgs);
                    a.index = index;
                    a.text.assign(sv(*x));
                }
            }
        } else if (type == "response.function_call_arguments.delta") {
            auto it = calls_.find(count(get(d, "output_index")));
            const rj::Value* x = get_str(d, "delta");
            if (it != calls_.end() && x != nullptr && x->GetStringLength() > 0) {
                StreamEventIR& a = push(StreamEventIR::Kind::ToolArgs);
                a.index = it->second;
                a.text.assign(sv(*x));
            }
        } else if (type == "response.completed" || type == "response.incomplete") {
            if (resp == nullptr || !resp->IsObject()) {
                err = std::string(type) + " without a response object";
                return ReadStep::Invalid;
            }
            push(StreamEventIR::Kind::Usage).usage = usage_of(get(*resp, "usage"));
            push(StreamEventIR::Kind::Finish).finish = finish_of(*resp, !calls_.empty());
            done_ = true;
            return ReadStep::Done;
        } else if (type == "response.failed" || type == "error") {
            if (resp != nullptr) {
                const UsageIR u = usage_of(get(*resp, "usage"));
                if (u.present) push(StreamEventIR::Kind::Usage).usage = u;
            }
            StreamEventIR& e = push(StreamEventIR::Kind::Error);
            e.text = error_text(resp != nullptr ? *resp : static_cast<const rj::Value&>(d), e.error_type);
            return ReadStep::Failed;
        }
        return ReadStep::More;
    }

    std::unordered_map<std::int64_t, std::size_t> calls_;   // output_index -> tool call index
    bool started_ = false, done_ = false;
};

}  // namespace

std::unique_ptr<ResponseReader> make_responses_reader() { return make_or_null<ResponsesReader>(); }

}  // namespace llmgw
