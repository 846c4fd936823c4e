// The OpenAI codec: chat completions (JSON or SSE) and embeddings (JSON).
// Streams: include_usage forced upstream, the usage-only chunk hidden from a
// client that did not ask for it, complete only after "data: [DONE]".
#include <vector>

#include "core/codec/codec_impl.h"
#include "core/codec/sse.h"
#include "core/json/envelope.h"

namespace llmgw {
namespace {

class OpenAICodec final : public Codec {
public:
    OpenAICodec(bool chat, const CodecOptions& o) : Codec(o), chat_(chat), sse_(o.max_event_bytes) {}

    CodecKind kind() const override { return chat_ ? CodecKind::OpenAIChat : CodecKind::OpenAIEmbeddings; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string& err) const override {
        if (in.doc == nullptr) {
            err = "the request body was not parsed";
            return false;
        }
        out.method = "POST";
        out.path = chat_ ? "/chat/completions" : "/embeddings";
        out.headers.emplace_back("Content-Type", "application/json");
        if (!in.provider_key.empty()) {
            out.credential_header = "Authorization";
            out.headers.emplace_back("Authorization", "Bearer " + std::string(in.provider_key));
        }
        return rewrite_caller_body(in, chat_ && in.doc->info().stream, out, err);
    }

protected:
    BodyMode on_head(int, std::string_view content_type) override {
        if (chat_ && opt_.client_stream && is_media_type(content_type, "text/event-stream")) return BodyMode::Stream;
        return BodyMode::Whole;
    }

    void on_stream(std::string_view bytes, std::string& out) override {
        if (broken_) return;
        events_.clear();
        if (!sse_.feed(bytes, events_)) {
            broken_ = true;
            problem_ = "upstream SSE event too large";
            return;
        }
        for (const SseEvent& ev : events_) {
            if (!ev.data.empty()) {
                Usage u;
                std::int64_t text = 0;
                ChunkKind k = inspect_stream_chunk(ev.data, u, &text);
                if (u.present) res_.usage = u;
                res_.text_bytes += text;
                if (k == ChunkKind::Done) done_ = true;
                if (k == ChunkKind::Error) error_event_ = true;
                if (k == ChunkKind::UsageOnly && !opt_.client_wants_usage) continue;
            }
            out += sse_serialize(ev);
        }
    }

    void on_stream_end(BodyEnd how, std::string& out) override {
        if (how == BodyEnd::Clean && done_ && !sse_.has_partial() && !broken_) {
            res_.end = EndState::Complete;
        } else if (error_event_) {
            res_.end = EndState::StreamError;   // the upstream said why itself
        } else {
            stream_not_complete(how, out);
        }
    }

    void on_whole(std::string& body, std::string& out) override {
        if (!read_whole_response(body, res_.usage)) {   // one pass: checked and its usage read
            invalid(body.empty() ? "empty response body" : "the response body is not valid JSON", out);
            return;
        }
        res_.end = EndState::Complete;
        out.swap(body);
    }

private:
    bool chat_;
    SseParser sse_;
    std::vector<SseEvent> events_;
    bool done_ = false, error_event_ = false, broken_ = false;
};

}  // namespace

std::unique_ptr<Codec> make_openai_codec(bool chat, const CodecOptions& opt) {
    return std::make_unique<OpenAICodec>(chat, opt);
}

}  // namespace llmgw
