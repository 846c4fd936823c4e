// IR -> OpenAI Responses answers for translated routes: a response object,
// or the typed event stream a Responses client expects. Each run of IR
// events of one kind becomes an output item: thinking a reasoning item (its
// text as a summary), text and refusals a message item (output_text and
// refusal parts), each tool call a function_call item. The stream:
//   response.created, response.in_progress,
//   per item: response.output_item.added, its part and delta events,
//             its .done events, response.output_item.done,
//   response.completed (or response.incomplete: max_output_tokens, content_filter)
// with the whole output and the usage in the closing response.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/codec/response_id.h"
#include "core/codec/responses_wire.h"
#include "core/json/envelope.h"
#include "core/json/writer.h"

namespace llmgw {
namespace {

struct Part {
    bool refusal = false;
    std::string text;
};

struct Item {
    enum Kind { Message, FunctionCall, Reasoning } kind = Message;
    std::string id;
    bool done = false;
    std::vector<Part> parts;   // Message
    std::string call_id, name, arguments;   // FunctionCall
    std::string summary;       // Reasoning
};

void write_usage(JsonWriter& w, const UsageIR& u) {
    w.key("usage").begin_object();
    w.field("input_tokens", u.prompt);
    w.key("input_tokens_details").begin_object().field("cached_tokens", u.cache_read).end_object();
    w.field("output_tokens", u.completion);
    w.key("output_tokens_details").begin_object().field("reasoning_tokens", u.reasoning).end_object();
    w.field("total_tokens", u.prompt > INT64_MAX - u.completion ? INT64_MAX : u.prompt + u.completion);
    w.end_object();
}

void write_part(JsonWriter& w, const Part& p) {
    w.begin_object();
    if (p.refusal) {
        w.field("type", "refusal").field("refusal", p.text);
    } else {
        w.field("type", "output_text").key("annotations").begin_array().end_array();
        w.key("logprobs").begin_array().end_array().field("text", p.text);
    }
    w.end_object();
}

void write_item(JsonWriter& w, const Item& it) {
    w.begin_object().field("id", it.id);
    const char* status = it.done ? "completed" : "in_progress";
    switch (it.kind) {
    case Item::Message:
        w.field("type", "message").field("status", status).key("content").begin_array();
        if (it.done)
            for (const Part& p : it.parts) write_part(w, p);
        w.end_array().field("role", "assistant");
        break;
    case Item::FunctionCall:
        w.field("type", "function_call").field("status", status);
        w.field("arguments", it.done ? std::string_view(it.arguments) : std::string_view());
        w.field("call_id", it.call_id).field("name", it.name);
        break;
    case Item::Reasoning:
        w.field("type", "reasoning").key("summary").begin_array();
        if (it.done && !it.summary.empty())
            w.begin_object().field("type", "summary_text").field("text", it.summary).end_object();
        w.end_array();
        break;
    }
    w.end_object();
}

// "incomplete" and its reason for a finish the model did not choose.
const char* incomplete_reason(FinishReason f) {
    if (f == FinishReason::Length) return "max_output_tokens";
    if (f == FinishReason::ContentFilter) return "content_filter";
    return nullptr;
}

class ResponsesWriter final : public ResponseWriter {
public:
    ResponsesWriter(const WriterOptions& o, std::size_t max_bytes) : opt_(o), max_bytes_(max_bytes) {}

    void whole(const ChatResponseIR& r, std::string& out) override {
        id_ = response_id("resp_");
        std::vector<Item> items;
        if (!r.reasoning.empty()) {
            items.emplace_back();
            items.back().kind = Item::Reasoning;
            items.back().summary = r.reasoning;
        }
        if (!r.text.empty() || !r.refusal.empty() || r.tool_calls.empty()) {
            items.emplace_back();
            Item& m = items.back();
            if (!r.text.empty() || r.refusal.empty()) m.parts.push_back(Part{false, r.text});
            if (!r.refusal.empty()) m.parts.push_back(Part{true, r.refusal});
        }
        for (const ToolCallIR& t : r.tool_calls) {
            items.emplace_back();
            Item& f = items.back();
            f.kind = Item::FunctionCall;
            f.call_id = t.id.empty() ? response_id("call_") : t.id;
            f.name = t.name;
            f.arguments = t.arguments.empty() ? "{}" : t.arguments;
        }
        for (Item& it : items) {
            it.id = item_id(it.kind);
            it.done = true;
        }
        JsonWriter w;
        write_response(w, r.finish, &items, &r.usage);
        out += w.take();
    }

    void event(const StreamEventIR& e, std::string& out) override {
        if (ended_) return;
        using K = StreamEventIR::Kind;
        if (!started_) begin(e.kind == K::Start ? e.id : std::string(), out);
        switch (e.kind) {
        case K::Start: return;
        case K::Text:
        case K::Refusal:
            if (!e.text.empty()) message_delta(e.kind == K::Refusal, e.text, out);
            return;
        case K::Reasoning:
            if (!e.text.empty()) reasoning_delta(e.text, out);
            return;
        case K::ToolStart: tool_start(e, out); return;
        case K::ToolArgs: tool_args(e.index, e.text, out); return;
        case K::Finish: finish_ = e.finish; return;
        case K::Usage: usage_ = e.usage; return;
        case K::Error: stream_error(e.text, e.error_type, out); return;
        }
    }

    void end(std::string& out) override {
        if (ended_) return;
        if (!started_) begin({}, out);
        close_open(out);
        const char* reason = incomplete_reason(finish_);
        const char* type = reason != nullptr ? "response.incomplete" : "response.completed";
        emit(out, type, [&](JsonWriter& w) {
            w.key("response");
            write_response(w, finish_, &items_, &usage_);
        });
        ended_ = true;
    }

    void stream_error(std::string_view message, std::string_view type, std::string& out) override {
        close_with_error(message, type, "upstream_error", out);
    }

    void close_with_error(std::string_view message, std::string_view type, std::string_view code,
                          std::string& out) override {
        if (ended_) return;
        const std::string_view t = type.empty() ? std::string_view("upstream_error") : type;
        out += responses_error_event(scrub_secrets(message), t, code, seq_++);
        ended_ = true;
    }

    std::string error_body(std::string_view message, std::string_view type, std::string_view code) const override {
        return error_json(message, type, code);
    }

private:
    std::string item_id(Item::Kind k) const {
        return response_id(k == Item::Message ? "msg_" : k == Item::FunctionCall ? "fc_" : "rs_");
    }

    // The response object: the snapshot of response.created (items null:
    // no output yet, usage null) or the final one.
    void write_response(JsonWriter& w, FinishReason finish, const std::vector<Item>* items, const UsageIR* usage) {
        const char* reason = items != nullptr ? incomplete_reason(finish) : nullptr;
        w.begin_object().field("id", id_).field("object", "response").field("created_at", opt_.created);
        w.field("status", items == nullptr ? "in_progress" : reason != nullptr ? "incomplete" : "completed");
        w.key("error").null().key("incomplete_details");
        if (reason != nullptr) w.begin_object().field("reason", reason).end_object();
        else w.null();
        w.field("model", opt_.model).key("output").begin_array();
        if (items != nullptr)
            for (const Item& it : *items) write_item(w, it);
        w.end_array();
        w.field("parallel_tool_calls", true).field("store", false);
        if (usage != nullptr) write_usage(w, *usage);
        else w.key("usage").null();
        w.end_object();
    }

    template <class F>
    void emit(std::string& out, std::string_view type, F&& fields) {
        JsonWriter w;
        w.begin_object().field("type", type).field("sequence_number", seq_++);
        fields(w);
        w.end_object();
        out.append("event: ").append(type).append("\ndata: ");
        out += w.take();
        out += "\n\n";
    }

    void begin(const std::string&, std::string& out) {
        started_ = true;
        id_ = response_id("resp_");
        for (const char* type : {"response.created", "response.in_progress"}) {
            emit(out, type, [&](JsonWriter& w) {
                w.key("response");
                write_response(w, FinishReason::None, nullptr, nullptr);
            });
        }
    }

    // Keeps bytes for the closing response; false (the stream ended with an
    // error event) past the bound.
    bool keep(std::size_t n, std::string& out) {
        kept_ += n;
        if (kept_ <= max_bytes_) return true;
        stream_error("the answer is larger than the gateway's response bound", "server_error", out);
        return false;
    }

    Item& open_item(Item::Kind k, std::string& out) {
        close_open(out);
        kept_ += kItemCost;   // each item's own bytes count too (checked by the next keep())
        items_.emplace_back();
        Item& it = items_.back();
        it.kind = k;
        it.id = item_id(k);
        open_ = items_.size() - 1;
        return it;
    }

    void item_added(std::string& out) {
        const std::size_t at = open_;
        emit(out, "response.output_item.added", [&](JsonWriter& w) {
            w.field("output_index", static_cast<std::int64_t>(at)).key("item");
            write_item(w, items_[at]);
        });
    }

    void part_event(std::string& out, const char* type, const Item& it, const Part& p, bool done) {
        emit(out, type, [&](JsonWriter& w) {
            w.field("item_id", it.id).field("output_index", static_cast<std::int64_t>(open_));
            w.field("content_index", static_cast<std::int64_t>(it.parts.size() - 1)).key("part");
            Part shown = p;
            if (!done) shown.text.clear();
            write_part(w, shown);
        });
    }

    void close_part(std::string& out) {
        Item& it = items_[open_];
        if (it.parts.empty()) return;
        const Part& p = it.parts.back();
        const std::int64_t ci = static_cast<std::int64_t>(it.parts.size() - 1);
        emit(out, p.refusal ? "response.refusal.done" : "response.output_text.done", [&](JsonWriter& w) {
            w.field("item_id", it.id).field("output_index", static_cast<std::int64_t>(open_));
            w.field("content_index", ci);
            if (p.refusal) {
                w.field("refusal", p.text);
            } else {
                w.field("text", p.text).key("logprobs").begin_array().end_array();
            }
        });
        part_event(out, "response.content_part.done", it, p, true);
    }

    void close_open(std::string& out) {
        if (open_ == kNone) return;
        Item& it = items_[open_];
        const std::int64_t at = static_cast<std::int64_t>(open_);
        switch (it.kind) {
        case Item::Message: close_part(out); break;
        case Item::FunctionCall:
            emit(out, "response.function_call_arguments.done", [&](JsonWriter& w) {
                w.field("item_id", it.id).field("output_index", at).field("name", it.name);
                w.field("arguments", it.arguments);
            });
            break;
        case Item::Reasoning:
            emit(out, "response.reasoning_summary_text.done", [&](JsonWriter& w) {
                w.field("item_id", it.id).field("output_index", at).field("summary_index", std::int64_t{0});
                w.field("text", it.summary);
            });
            emit(out, "response.reasoning_summary_part.done", [&](JsonWriter& w) {
                w.field("item_id", it.id).field("output_index", at).field("summary_index", std::int64_t{0});
                w.key("part").begin_object().field("type", "summary_text").field("text", it.summary).end_object();
            });
            break;
        }
        it.done = true;
        emit(out, "response.output_item.done", [&](JsonWriter& w) {
            w.field("output_index", at).key("item");
            write_item(w, it);
        });
        open_ = kNone;
    }

    void message_delta(bool refusal, const std::string& text, std::string& out) {
        if (!keep(text.size(), out)) return;
        if (open_ == kNone || items_[open_].kind != Item::Message) {
            open_item(Item::Message, out);
            item_added(out);
        }
        Item& it = items_[open_];
        if (it.parts.empty() || it.parts.back().refusal != refusal) {
            if (!it.parts.empty()) close_part(out);
            it.parts.push_back(Part{refusal, {}});
            part_event(out, "response.content_part.added", it, it.parts.back(), false);
        }
        it.parts.back().text += text;
        emit(out, refusal ? "response.refusal.delta" : "response.output_text.delta", [&](JsonWriter& w) {
            w.field("item_id", it.id).field("output_index", static_cast<std::int64_t>(open_));
            w.field("content_index", static_cast<std::int64_t>(it.parts.size() - 1)).field("delta", text);
            if (!refusal) w.key("logprobs").begin_array().end_array();
        });
    }

    void reasoning_delta(const std::string& text, std::string& out) {
        if (!keep(text.size(), out)) return;
        if (open_ == kNone || items_[open_].kind != Item::Reasoning) {
            open_item(Item::Reasoning, out);
            item_added(out);
            const Item& it = items_[open_];
            emit(out, "response.reasoning_summary_part.added", [&](JsonWriter& w) {
                w.field("item_id", it.id).field("output_index", static_cast<std::int64_t>(open_));
                w.field("summary_index", std::int64_t{0});
                w.key("part").begin_object().field("type", "summary_text").field("text", "").end_object();
            });
        }
        Item& it = items_[open_];
        it.summary += text;
        emit(out, "response.reasoning_summary_text.delta", [&](JsonWriter& w) {
            w.field("item_id", it.id).field("output_index", static_cast<std::int64_t>(open_));
            w.field("summary_index", std::int64_t{0}).field("delta", text);
        });
    }

    void tool_start(const StreamEventIR& e, std::string& out) {
        if (!keep(e.name.size() + e.id.size() + kItemCost, out)) return;
        Item& it = open_item(Item::FunctionCall, out);
        it.call_id = e.id.empty() ? response_id("call_") : e.id;
        it.name = e.name;
        tools_[e.index] = open_;
        item_added(out);
    }

    void tool_args(std::size_t index, const std::string& text, std::string& out) {
        auto found = tools_.find(index);
        if (found == tools_.end() || text.empty()) return;
        if (!keep(text.size(), out)) return;
        Item& it = items_[found->second];
        it.arguments += text;
        if (found->second != open_) return;   // an item already closed: kept for the closing response only
        emit(out, "response.function_call_arguments.delta", [&](JsonWriter& w) {
            w.field("item_id", it.id).field("output_index", static_cast<std::int64_t>(open_)).field("delta", text);
        });
    }

    static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    static constexpr std::size_t kItemCost = 128;

    WriterOptions opt_;
    std::size_t max_bytes_;
    std::size_t kept_ = 0;
    std::string id_;
    std::int64_t seq_ = 0;
    std::vector<Item> items_;
    std::unordered_map<std::size_t, std::size_t> tools_;   // IR tool index -> item
    std::size_t open_ = kNone;
    bool started_ = false, ended_ = false;
    FinishReason finish_ = FinishReason::None;
    UsageIR usage_;
};

}  // namespace

std::unique_ptr<ResponseWriter> make_responses_writer(const WriterOptions& opt, std::size_t max_output_bytes) {
    return make_or_null<ResponsesWriter>(opt, max_output_bytes);
}

std::string responses_error_event(std::string_view message, std::string_view type, std::string_view code,
                                  std::int64_t sequence_number) {
    JsonWriter w;
    w.begin_object().field("type", "error").field("sequence_number", sequence_number);
    w.field("code", code).field("message", message).key("param").null();
    w.key("error").begin_object().field("message", message).field("type", type).key("param").null();
    w.field("code", code).end_object();
    w.end_object();
    std::string out = "event: error\ndata: ";
    out += w.take();
    out += "\n\n";
    return out;
}

}  // namespace llmgw
