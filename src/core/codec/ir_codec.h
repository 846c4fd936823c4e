// The base of the codecs that read a chat answer through a ResponseReader
// (chat_ir.h): the Anthropic native codec (the provider's bytes relayed,
// read along for usage and the end) and the translating codec (each IR
// event written in the caller's shape). What they read alike is here: each
// SSE event of a stream into IR events, with the usage reported so far and
// the completion's text bytes tallied, and a whole answer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/codec/chat_ir.h"
#include "core/codec/codec.h"
#include "core/codec/sse.h"

namespace llmgw {

class IrCodec : public Codec {
protected:
    IrCodec(const CodecOptions& o, std::unique_ptr<ResponseReader> reader)
        : Codec(o), reader_(std::move(reader)), sse_(o.max_event_bytes) {}

    // One SSE event into IR events: the usage the provider reported so far
    // (usage_, res_.usage) and the completion's text bytes (res_.text_bytes)
    // tallied, then each(e) for every event read.
    template <class F>
    ReadStep read_ir_event(const SseEvent& ev, std::string& err, F&& each) {
        ir_.clear();
        const ReadStep step = reader_->read_event(ev, ir_, err);
        for (const StreamEventIR& e : ir_) {
            if (e.kind == StreamEventIR::Kind::Usage) {
                usage_ = e.usage;
                res_.usage = usage_.accounting();   // running: what the provider reported so far
            }
            if (is_completion_text(e.kind)) res_.text_bytes += static_cast<std::int64_t>(e.text.size());
            each(e);
        }
        return step;
    }

    // A whole answer read into r, its usage counted and its end Complete;
    // false when it is not one (the answer made invalid: out is the 502).
    bool read_whole_answer(const std::string& body, ChatResponseIR& r, std::string& out) {
        std::string err;
        if (!reader_->read_whole(body, r, err)) {
            invalid(body.empty() ? "empty response body" : err, out);
            return false;
        }
        res_.usage = r.usage.accounting();
        res_.end = EndState::Complete;
        return true;
    }

    std::unique_ptr<ResponseReader> reader_;
    SseParser sse_;
    std::vector<SseEvent> events_;
    std::vector<StreamEventIR> ir_;
    UsageIR usage_;
    bool broken_ = false, failed_ = false;
};

// A native codec that relays the provider's bytes unchanged and reads them
// along through its reader for usage and the end (Anthropic messages to an
// Anthropic provider, responses to an OpenAI-type one): a stream is complete
// once the reader saw its end marker; a whole answer must read as one.
class ReadAlongCodec : public IrCodec {
protected:
    using IrCodec::IrCodec;

    void on_stream(std::string_view bytes, std::string& out) override {
        out.append(bytes);   // relayed unchanged
        if (broken_) return;
        events_.clear();
        if (!sse_.feed(bytes, events_)) {
            broken_ = true;
            problem_ = "upstream SSE event too large to read usage from";
            return;
        }
        for (const SseEvent& ev : events_) {
            if (ev.data.empty()) continue;
            ++data_events_;
            std::string err;
            const ReadStep step = read_ir_event(ev, err, [](const StreamEventIR&) {});
            if (step == ReadStep::Failed) failed_ = true;
            if (step == ReadStep::Invalid) {
                broken_ = true;
                problem_ = "invalid upstream stream event: " + err;
                return;
            }
        }
    }

    void on_stream_end(BodyEnd how, std::string& out) override {
        res_.usage = usage_.accounting();
        if (failed_) {
            res_.end = EndState::StreamError;
        } else if (how == BodyEnd::Clean && !broken_ && reader_->complete() && !sse_.has_partial()) {
            res_.end = EndState::Complete;
        } else {
            stream_not_complete(how, out);
        }
    }

    void on_whole(std::string& body, std::string& out) override {
        ChatResponseIR r;
        if (read_whole_answer(body, r, out)) out.swap(body);
    }

    std::int64_t data_events_ = 0;   // SSE events with data relayed so far (read until the stream broke)
};

}  // namespace llmgw
