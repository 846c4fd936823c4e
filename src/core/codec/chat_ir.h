// The chat translation seam (no nginx). Requests pivot through the OpenAI
// chat request shape (a caller's Anthropic body is first turned into an
// OpenAI one); responses pivot through the IR below: a reader per provider
// wire format turns the upstream answer into IR, a writer per client shape
// turns IR into the client's bytes. A fourth provider type is one reader
// plus one request builder.
#pragma once
#include <exception>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rapidjson/document.h>

#include "core/codec/openai.h"
#include "core/codec/sse.h"

namespace llmgw {

// Why the model stopped, in the union of the three formats' vocabularies.
enum class FinishReason {
    None,           // not known (yet)
    Stop,           // natural end (OpenAI stop, Anthropic end_turn/pause_turn, Gemini STOP)
    StopSequence,   // a stop sequence matched (Anthropic stop_sequence; OpenAI reports stop)
    Length,         // token limit (length, max_tokens, MAX_TOKENS)
    ToolCalls,      // the model called tools (tool_calls, tool_use)
    ContentFilter,  // refused or filtered (content_filter, refusal, SAFETY, ...)
};

// Token counts. prompt includes cache reads and writes; completion includes
// reasoning/thinking tokens (accounting rule 3). The details let a writer
// report them in its own shape (Anthropic's input_tokens excludes the cache).
struct UsageIR {
    bool present = false;
    std::int64_t prompt = 0;
    std::int64_t completion = 0;
    std::int64_t cache_read = 0;       // part of prompt
    std::int64_t cache_creation = 0;   // part of prompt
    std::int64_t reasoning = 0;        // part of completion
    bool malformed = false;            // a count reported was not one (Usage::malformed)

    Usage accounting() const {
        Usage u;
        u.present = present;
        u.prompt_tokens = prompt;
        u.completion_tokens = completion;
        u.malformed = malformed;
        return u;
    }
};

struct ToolCallIR {
    std::string id;          // provider's call id ("" : the writer makes one)
    std::string name;
    std::string arguments;   // JSON text of the arguments object ("{}" when none)
};

// A complete (non-stream) answer.
struct ChatResponseIR {
    std::string id;                  // provider's response id ("" : the writer makes one)
    std::string text;                // assistant text, text parts joined in order
    std::string reasoning;           // thinking text, when the provider returned it
    std::string refusal;             // a refusal text (OpenAI message.refusal)
    std::vector<ToolCallIR> tool_calls;
    FinishReason finish = FinishReason::None;
    std::string stop_sequence;       // StopSequence: which one, when known
    UsageIR usage;
};

// One step of a streamed answer. Readers emit Start once, first; Usage
// events carry cumulative totals (the latest wins) and may come at any point
// (Anthropic sends input tokens first, output tokens last); writers keep the
// usage and the finish reason and emit them when the stream ends.
struct StreamEventIR {
    enum class Kind {
        Start,       // id = response id ("" unknown)
        Text,        // text = a text delta
        Reasoning,   // text = a thinking delta
        Refusal,     // text = a refusal delta
        ToolStart,   // index = tool call index (0-based, in order of appearance), id, name
        ToolArgs,    // index, text = a delta of the arguments' JSON text
        Finish,      // finish (+ stop_sequence)
        Usage,       // usage (cumulative)
        Error,       // text = the upstream's error message (scrubbed), error_type = its type
    };
    Kind kind = Kind::Text;
    std::size_t index = 0;
    std::string id;
    std::string name;
    std::string text;
    std::string error_type;
    FinishReason finish = FinishReason::None;
    std::string stop_sequence;
    UsageIR usage;
};

// Whether an event's text is part of the completion (what an output
// estimate counts).
inline bool is_completion_text(StreamEventIR::Kind k) {
    using K = StreamEventIR::Kind;
    return k == K::Text || k == K::Reasoning || k == K::Refusal || k == K::ToolArgs;
}

// What a reader made of one upstream SSE event.
enum class ReadStep {
    More,      // events (maybe none) appended; more to come
    Done,      // the provider's end-of-stream marker (OpenAI [DONE], Anthropic message_stop)
    Failed,    // the provider's own error event: an Error event was appended
    Invalid,   // not a valid event of the format: err says why (for the log)
};

// Provider wire format -> IR.
class ResponseReader {
public:
    virtual ~ResponseReader() = default;
    // A whole 2xx body. false (err: why, for the log) when it is not a
    // valid answer of the format. Never throws: an answer that cannot be
    // read (out of memory) is an invalid one.
    bool read_whole(std::string_view body, ChatResponseIR& out, std::string& err) noexcept {
        try {
            return whole(body, out, err);
        } catch (const std::exception&) {
            set_error(err, "out of memory reading the answer");
            return false;
        }
    }
    // One SSE event of a streamed answer; appends IR events. Never throws,
    // as read_whole.
    ReadStep read_event(const SseEvent& ev, std::vector<StreamEventIR>& out, std::string& err) noexcept {
        try {
            return event(ev, out, err);
        } catch (const std::exception&) {
            set_error(err, "out of memory reading the stream");
            return ReadStep::Invalid;
        }
    }
    // Whether a clean end of the body right now completes the answer. Formats
    // with an end marker answer true once Done was read; Gemini, which has
    // none, once a candidate carried a finishReason.
    virtual bool complete() const = 0;

protected:
    // Each format's reading, which may throw (std::bad_alloc).
    virtual bool whole(std::string_view body, ChatResponseIR& out, std::string& err) = 0;
    virtual ReadStep event(const SseEvent& ev, std::vector<StreamEventIR>& out, std::string& err) = 0;

private:
    static void set_error(std::string& err, const char* why) noexcept {
        try {
            err = why;
        } catch (...) {
        }
    }
};

struct WriterOptions {
    std::string model;            // the model value the response reports: the caller's own
    bool include_usage = false;   // OpenAI streams: the usage-only chunk is shown
    std::int64_t created = 0;     // unix seconds (OpenAI "created")
};

// IR -> the client's shape.
class ResponseWriter {
public:
    virtual ~ResponseWriter() = default;
    virtual void whole(const ChatResponseIR& r, std::string& out) = 0;
    virtual void event(const StreamEventIR& e, std::string& out) = 0;
    // The stream completed: closing events (finish, usage, terminator).
    virtual void end(std::string& out) = 0;
    // The stream failed after it began: the client's error event.
    virtual void stream_error(std::string_view message, std::string_view type, std::string& out) = 0;
    // The gateway ends the stream with its own error (a cut, a budget
    // crossed): as stream_error, for shapes that also carry a code.
    virtual void close_with_error(std::string_view message, std::string_view type, std::string_view /*code*/,
                                  std::string& out) {
        stream_error(message, type, out);
    }
    // A whole error body in the client's envelope (JSON).
    virtual std::string error_body(std::string_view message, std::string_view type, std::string_view code) const = 0;
};

// A new T(args...) for the reader and writer factories, which never throw:
// nullptr when memory runs out.
template <class T, class... Args>
std::unique_ptr<T> make_or_null(Args&&... args) noexcept {
    try {
        return std::make_unique<T>(std::forward<Args>(args)...);
    } catch (const std::exception&) {
        return nullptr;
    }
}

// The parsed JSON of a caller's request body (RequestDoc keeps it).
const rapidjson::Value& request_json(const RequestDoc& doc);

}  // namespace llmgw
