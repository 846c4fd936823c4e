// IR -> OpenAI chat completions answers: a chat.completion object, or
// chat.completion.chunk events ending in "data: [DONE]". The finish reason
// and usage are held until the stream ends; the usage-only chunk is written
// only for a caller that asked for it (stream_options.include_usage).
#include <cstdint>
#include <exception>

#include "core/codec/openai_ir.h"
#include "core/codec/response_id.h"
#include "core/json/envelope.h"
#include "core/json/writer.h"

namespace llmgw {
namespace {

void write_usage(JsonWriter& w, const UsageIR& u) {
    w.key("usage").begin_object();
    w.field("prompt_tokens", u.prompt).field("completion_tokens", u.completion);
    const std::int64_t total = u.prompt > INT64_MAX - u.completion ? INT64_MAX : u.prompt + u.completion;
    w.field("total_tokens", total);
    w.key("prompt_tokens_details").begin_object().field("cached_tokens", u.cache_read).end_object();
    w.key("completion_tokens_details").begin_object().field("reasoning_tokens", u.reasoning).end_object();
    w.end_object();
}

class OpenAIWriter final : public ResponseWriter {
public:
    explicit OpenAIWriter(const WriterOptions& o) : opt_(o) {}

    void whole(const ChatResponseIR& r, std::string& out) override {
        JsonWriter w;
        w.begin_object();
        w.field("id", r.id.empty() ? response_id("chatcmpl-") : r.id);
        w.field("object", "chat.completion").field("created", opt_.created).field("model", opt_.model);
        w.key("choices").begin_array().begin_object().field("index", std::int64_t{0});
        w.key("message").begin_object().field("role", "assistant");
        w.key("content");
        if (!r.text.empty() || (r.tool_calls.empty() && r.refusal.empty())) {
            w.str(r.text);
        } else {
            w.null();
        }
        w.key("refusal");
        if (r.refusal.empty()) {
            w.null();
        } else {
            w.str(r.refusal);
        }
        if (!r.tool_calls.empty()) {
            w.key("tool_calls").begin_array();
            for (const ToolCallIR& t : r.tool_calls) {
                w.begin_object().field("id", t.id.empty() ? response_id("call_") : t.id).field("type", "function");
                w.key("function").begin_object().field("name", t.name);
                w.field("arguments", t.arguments.empty() ? std::string_view("{}") : std::string_view(t.arguments));
                w.end_object().end_object();
            }
            w.end_array();
        }
        w.end_object();
        w.key("logprobs").null().field("finish_reason", openai_finish_reason(r.finish));
        w.end_object().end_array();
        write_usage(w, r.usage);
        w.end_object();
        out += w.take();
    }

    void event(const StreamEventIR& e, std::string& out) override {
        if (ended_) return;
        using K = StreamEventIR::Kind;
        if (e.kind == K::Start) {
            if (started_) return;
            id_ = e.id;
            begin(out);
            return;
        }
        if (!started_) begin(out);
        switch (e.kind) {
        case K::Text:
            if (!e.text.empty()) delta(out, [&](JsonWriter& w) { w.field("content", e.text); });
            return;
        case K::Refusal:
            if (!e.text.empty()) delta(out, [&](JsonWriter& w) { w.field("refusal", e.text); });
            return;
        case K::ToolStart:
            delta(out, [&](JsonWriter& w) {
                w.key("tool_calls").begin_array().begin_object().field("index", static_cast<std::int64_t>(e.index));
                w.field("id", e.id.empty() ? response_id("call_") : e.id).field("type", "function");
                w.key("function").begin_object().field("name", e.name).field("arguments", "").end_object();
                w.end_object().end_array();
            });
            return;
        case K::ToolArgs:
            if (e.text.empty()) return;
            delta(out, [&](JsonWriter& w) {
                w.key("tool_calls").begin_array().begin_object().field("index", static_cast<std::int64_t>(e.index));
                w.key("function").begin_object().field("arguments", e.text).end_object();
                w.end_object().end_array();
            });
            return;
        case K::Finish:
            finish_ = e.finish;
            return;
        case K::Usage:
            usage_ = e.usage;
            return;
        case K::Error:
            stream_error(e.text, e.error_type, out);
            return;
        case K::Reasoning:   // no place for it in OpenAI's chat shape
        case K::Start:
            return;
        }
    }

    void end(std::string& out) override {
        if (ended_) return;
        if (!started_) begin(out);
        chunk(out, [&](JsonWriter& w) {
            w.key("choices").begin_array().begin_object().field("index", std::int64_t{0});
            w.key("delta").begin_object().end_object();
            w.key("logprobs").null().field("finish_reason", openai_finish_reason(finish_));
            w.end_object().end_array();
            if (opt_.include_usage) w.key("usage").null();
        });
        if (opt_.include_usage) {
            chunk(out, [&](JsonWriter& w) {
                w.key("choices").begin_array().end_array();
                write_usage(w, usage_);
            });
        }
        out += "data: [DONE]\n\n";
        ended_ = true;
    }

    void stream_error(std::string_view message, std::string_view type, std::string& out) override {
        if (ended_) return;
        out += error_sse_event(scrub_secrets(message), type.empty() ? std::string_view("upstream_error") : type,
                               "upstream_error");
        ended_ = true;
    }

    std::string error_body(std::string_view message, std::string_view type, std::string_view code) const override {
        return error_json(message, type, code);
    }

private:
    void begin(std::string& out) {
        started_ = true;
        if (id_.empty()) id_ = response_id("chatcmpl-");
        delta(out, [&](JsonWriter& w) { w.field("role", "assistant").field("content", ""); });
    }

    template <class F>
    void chunk(std::string& out, F&& body) {
        JsonWriter w;
        w.begin_object().field("id", id_).field("object", "chat.completion.chunk");
        w.field("created", opt_.created).field("model", opt_.model);
        body(w);
        w.end_object();
        out += "data: ";
        out += w.take();
        out += "\n\n";
    }

    template <class F>
    void delta(std::string& out, F&& fields) {
        chunk(out, [&](JsonWriter& w) {
            w.key("choices").begin_array().begin_object().field("index", std::int64_t{0});
            w.key("delta").begin_object();
            fields(w);
            w.end_object();
            w.key("logprobs").null().key("finish_reason").null();
            w.end_object().end_array();
            if (opt_.include_usage) w.key("usage").null();
        });
    }

    WriterOptions opt_;
    std::string id_;
    bool started_ = false, ended_ = false;
    FinishReason finish_ = FinishReason::None;
    UsageIR usage_;
};

}  // namespace

std::string_view openai_finish_reason(FinishReason f) {
    switch (f) {
    case FinishReason::Length: return "length";
    case FinishReason::ToolCalls: return "tool_calls";
    case FinishReason::ContentFilter: return "content_filter";
    case FinishReason::None:
    case FinishReason::Stop:
    case FinishReason::StopSequence: break;
    }
    return "stop";
}

std::unique_ptr<ResponseWriter> make_openai_writer(const WriterOptions& opt) {
    return make_or_null<OpenAIWriter>(opt);
}

}  // namespace llmgw
