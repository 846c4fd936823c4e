// IR -> Anthropic Messages responses: the whole message and the SSE events
// (message_start, content_block_start/delta/stop, message_delta,
// message_stop, error). See docs/translation-messages.md.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>

#include "core/codec/json_copy.h"
#include "core/codec/messages_wire.h"
#include "core/codec/openai.h"
#include "core/codec/response_id.h"
#include "core/json/text_checks.h"
#include "core/json/writer.h"

namespace llmgw {

namespace {

constexpr int kMaxDepth = 256;

std::string message_id(std::string_view id) {
    if (id.substr(0, 4) == "msg_") return std::string(id);
    return (id.empty() ? response_id("msg_") : "msg_" + std::string(id));
}

std::string tool_id(std::string_view id) { return id.empty() ? response_id("toolu_") : std::string(id); }

std::string_view stop_reason(FinishReason f) {
    switch (f) {
    case FinishReason::StopSequence: return "stop_sequence";
    case FinishReason::Length: return "max_tokens";
    case FinishReason::ToolCalls: return "tool_use";
    case FinishReason::ContentFilter: return "refusal";
    case FinishReason::Stop:
    case FinishReason::None: break;
    }
    return "end_turn";
}

std::int64_t nonneg(std::int64_t v) { return v < 0 ? 0 : v; }

// Anthropic's input_tokens: the prompt without cache reads and writes.
std::int64_t input_tokens(const UsageIR& u) {
    if (!u.present) return 0;
    const std::int64_t read = nonneg(u.cache_read), creation = nonneg(u.cache_creation);
    std::int64_t in = nonneg(u.prompt);
    in = in > read ? in - read : 0;
    return in > creation ? in - creation : 0;
}

void write_usage(JsonWriter& w, const UsageIR& u) {
    w.key("usage").begin_object();
    w.field("input_tokens", input_tokens(u));
    w.field("output_tokens", u.present ? nonneg(u.completion) : std::int64_t{0});
    w.field("cache_creation_input_tokens", u.present ? nonneg(u.cache_creation) : std::int64_t{0});
    w.field("cache_read_input_tokens", u.present ? nonneg(u.cache_read) : std::int64_t{0});
    w.end_object();
}

void write_stop(JsonWriter& w, FinishReason f, std::string_view seq) {
    w.field("stop_reason", stop_reason(f)).key("stop_sequence");
    if (f == FinishReason::StopSequence && !seq.empty()) w.str(seq);
    else w.null();
}

// A tool call's arguments as the input object: {} when they are not a JSON
// object (or nest deeper than 256).
void write_input(JsonWriter& w, std::string_view args) {
    rapidjson::Document d;
    if (parse_full_precision(d, args) && d.IsObject() && json_depth_at_most(d, kMaxDepth)) json_copy(w, d);
    else w.begin_object().end_object();
}

// An error type in Anthropic's vocabulary: Anthropic's own types are kept,
// the gateway's and OpenAI's are mapped, anything else is api_error.
std::string_view error_type(std::string_view type, std::string_view code) {
    if (code == "invalid_api_key") return "authentication_error";
    for (std::string_view t : {"invalid_request_error", "authentication_error", "billing_error", "permission_error",
                               "not_found_error", "request_too_large", "rate_limit_error", "api_error",
                               "overloaded_error", "timeout_error"})
        if (type == t) return t;
    if (type == "insufficient_quota") return "rate_limit_error";
    return "api_error";
}

void put_event(std::string& out, std::string_view type, const JsonWriter& w) {
    out.append("event: ").append(type).append("\ndata: ").append(w.take()).append("\n\n");
}

class AnthropicWriter final : public ResponseWriter {
public:
    explicit AnthropicWriter(const WriterOptions& o) : opt_(o) {}

    void whole(const ChatResponseIR& r, std::string& out) override {
        try {
            do_whole(r, out);
        } catch (const std::exception&) {
        }
    }
    void event(const StreamEventIR& e, std::string& out) override {
        try {
            do_event(e, out);
        } catch (const std::exception&) {
        }
    }
    void end(std::string& out) override {
        try {
            do_end(out);
        } catch (const std::exception&) {
        }
    }
    void stream_error(std::string_view message, std::string_view type, std::string& out) override {
        try {
            if (done_) return;
            done_ = true;
            out.append("event: error\ndata: ")
                .append(anthropic_error_json(error_type(type, {}), scrub_secrets(message)))
                .append("\n\n");
        } catch (const std::exception&) {
        }
    }
    std::string error_body(std::string_view message, std::string_view type, std::string_view code) const override {
        try {
            return anthropic_error_json(error_type(type, code), scrub_secrets(message));
        } catch (const std::exception&) {
            return std::string();
        }
    }

private:
    enum class Block { None, Text, Tool };

    void do_whole(const ChatResponseIR& r, std::string& out) {
        JsonWriter w;
        w.begin_object().field("id", message_id(r.id)).field("type", "message").field("role", "assistant");
        w.field("model", opt_.model).key("content").begin_array();
        if (!r.text.empty() || !r.refusal.empty()) {
            w.begin_object().field("type", "text");
            if (r.refusal.empty()) w.field("text", r.text);
            else w.field("text", r.text + r.refusal);
            w.end_object();
        }
        for (const auto& t : r.tool_calls) {
            w.begin_object().field("type", "tool_use").field("id", tool_id(t.id)).field("name", t.name).key("input");
            write_input(w, t.arguments);
            w.end_object();
        }
        w.end_array();
        write_stop(w, r.finish, r.stop_sequence);
        write_usage(w, r.usage);
        w.end_object();
        out.append(w.take());
    }

    void start(std::string_view id, std::string& out) {
        started_ = true;
        JsonWriter w;
        w.begin_object().field("type", "message_start").key("message").begin_object();
        w.field("id", message_id(id)).field("type", "message").field("role", "assistant").field("model", opt_.model);
        w.key("content").begin_array().end_array();
        w.key("stop_reason").null().key("stop_sequence").null();
        w.key("usage").begin_object().field("input_tokens", input_tokens(usage_)).field("output_tokens", std::int64_t{0});
        w.end_object().end_object().end_object();
        put_event(out, "message_start", w);
    }

    void close_block(std::string& out) {
        if (block_ == Block::None) return;
        JsonWriter w;
        w.begin_object().field("type", "content_block_stop").field("index", index_).end_object();
        put_event(out, "content_block_stop", w);
        block_ = Block::None;
        ++index_;
    }

    void delta(std::string_view kind, std::string_view field, std::string_view text, std::string& out) {
        JsonWriter w;
        w.begin_object().field("type", "content_block_delta").field("index", index_).key("delta").begin_object();
        w.field("type", kind).field(field, text).end_object().end_object();
        put_event(out, "content_block_delta", w);
    }

    void do_event(const StreamEventIR& e, std::string& out) {
        using K = StreamEventIR::Kind;
        if (done_) return;
        if (e.kind == K::Error) {
            stream_error(e.text, e.error_type, out);
            return;
        }
        if (e.kind == K::Usage) usage_ = e.usage;   // before message_start: it shows the prompt
        if (!started_) {
            start(e.kind == K::Start ? std::string_view(e.id) : std::string_view(), out);
            if (e.kind == K::Start) return;
        }
        switch (e.kind) {
        case K::Start:       // a second Start: nothing to say
        case K::Reasoning:   // no signature to give back: dropped
        case K::Usage:
        case K::Error:
            break;
        case K::Text:
        case K::Refusal:
            if (e.text.empty()) break;
            if (block_ != Block::Text) {
                close_block(out);
                block_ = Block::Text;
                JsonWriter w;
                w.begin_object().field("type", "content_block_start").field("index", index_);
                w.key("content_block").begin_object().field("type", "text").field("text", "").end_object();
                w.end_object();
                put_event(out, "content_block_start", w);
            }
            delta("text_delta", "text", e.text, out);
            break;
        case K::ToolStart: {
            close_block(out);
            block_ = Block::Tool;
            tool_ = e.index;
            JsonWriter w;
            w.begin_object().field("type", "content_block_start").field("index", index_);
            w.key("content_block").begin_object().field("type", "tool_use").field("id", tool_id(e.id));
            w.field("name", e.name).key("input").begin_object().end_object().end_object();
            w.end_object();
            put_event(out, "content_block_start", w);
            break;
        }
        case K::ToolArgs:
            // A tool's block is open only until the next block starts:
            // arguments for any other tool are dropped.
            if (block_ == Block::Tool && tool_ == e.index && !e.text.empty())
                delta("input_json_delta", "partial_json", e.text, out);
            break;
        case K::Finish:
            finish_ = e.finish;
            stop_sequence_ = e.stop_sequence;
            break;
        }
    }

    void do_end(std::string& out) {
        if (done_) return;
        if (!started_) start({}, out);
        close_block(out);
        done_ = true;
        JsonWriter w;
        w.begin_object().field("type", "message_delta").key("delta").begin_object();
        write_stop(w, finish_, stop_sequence_);
        w.end_object();
        write_usage(w, usage_);
        w.end_object();
        put_event(out, "message_delta", w);
        out.append("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    }

    WriterOptions opt_;
    bool started_ = false;
    bool done_ = false;
    Block block_ = Block::None;
    std::int64_t index_ = 0;      // index of the open block, or of the next one
    std::size_t tool_ = 0;        // IR tool index of the open tool block
    FinishReason finish_ = FinishReason::None;
    std::string stop_sequence_;
    UsageIR usage_;
};

}  // namespace

std::unique_ptr<ResponseWriter> make_anthropic_writer(const WriterOptions& opt) {
    return make_or_null<AnthropicWriter>(opt);
}

}  // namespace llmgw
