// /v1/responses to an OpenAI-type provider: the caller's body goes upstream
// with only "model" rewritten (every other parameter, previous_response_id,
// store and built-in tools included, is the provider's to take), and the
// provider's bytes come back unchanged. The Responses reader follows along
// for usage and for how the answer ended (a stream is complete at
// response.completed or response.incomplete).
#include <vector>

#include "core/codec/chat_ir.h"
#include "core/codec/codec_impl.h"
#include "core/codec/ir_codec.h"
#include "core/codec/responses_wire.h"
#include "core/json/envelope.h"

namespace llmgw {
namespace {

class ResponsesNativeCodec final : public IrCodec {
public:
    explicit ResponsesNativeCodec(const CodecOptions& o) : IrCodec(o, make_responses_reader()) {}

    CodecKind kind() const override { return CodecKind::OpenAIResponses; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string& err) const override {
        if (in.doc == nullptr) {
            err = "the request body was not parsed";
            return false;
        }
        out.method = "POST";
        out.path = "/responses";
        out.headers.emplace_back("Content-Type", "application/json");
        add_provider_auth(ProviderType::OpenAI, in.provider_key, out);
        return rewrite_caller_body(in, false, out, err);
    }

protected:
    BodyMode on_head(int, std::string_view content_type) override {
        return opt_.client_stream && is_media_type(content_type, "text/event-stream") ? BodyMode::Stream
                                                                                     : BodyMode::Whole;
    }

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
            ++relayed_;   // OpenAI numbers its events from 0: the gateway's own closing event follows them
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

    std::string error_event(std::string_view message, std::string_view type, std::string_view code) const override {
        return responses_error_event(message, type, code, relayed_);
    }

private:
    std::int64_t relayed_ = 0;
};

}  // namespace

std::unique_ptr<Codec> make_responses_native_codec(const CodecOptions& opt) {
    return std::make_unique<ResponsesNativeCodec>(opt);
}

}  // namespace llmgw
