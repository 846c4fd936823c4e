// Images, speech and transcription to an OpenAI-type provider. The request
// is the caller's with the model replaced by the provider's own id: a JSON
// body rewritten (images, speech), or the multipart body with only the model
// field's value spliced (transcription; every other byte, the audio file
// included, goes as it came). A JSON answer is checked and relayed whole;
// anything else (audio, text, SSE) is relayed as it arrives, byte-exact.
// No usage is read: media routes count requests only (accounting rule 5).
#include "core/codec/codec_impl.h"
#include "core/json/envelope.h"

namespace llmgw {
namespace {

class MediaCodec final : public Codec {
public:
    MediaCodec(CodecKind kind, const CodecOptions& o) : Codec(o), kind_(kind) {}

    CodecKind kind() const override { return kind_; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string& err) const override {
        out.method = "POST";
        add_provider_auth(ProviderType::OpenAI, in.provider_key, out);
        if (kind_ == CodecKind::OpenAITranscription) {
            if (in.form == nullptr || in.form->status != FormStatus::Ok || in.content_type.empty()) {
                err = "the multipart body was not scanned";
                return false;
            }
            out.path = "/audio/transcriptions";
            out.headers.emplace_back("Content-Type", std::string(in.content_type));   // its boundary with it
            out.caller_body = true;
            if (in.form->model_truncated || in.form->model != in.upstream_model) {
                out.splice_at = in.form->model_at;
                out.splice_len = in.form->model_len;
                out.body.assign(in.upstream_model);
            }
            return true;
        }
        if (in.doc == nullptr) {
            err = "the request body was not parsed";
            return false;
        }
        out.path = kind_ == CodecKind::OpenAIImages ? "/images/generations" : "/audio/speech";
        out.headers.emplace_back("Content-Type", "application/json");
        return rewrite_caller_body(in, false, out, err);
    }

    bool event_stream() const override { return sse_; }
    // Audio, text, subtitles: the head goes with the first bytes, so a cut
    // before them is still a 502 (Codec::finish).
    bool head_waits_for_bytes() const override { return !sse_; }

protected:
    BodyMode on_head(int, std::string_view content_type) override {
        if (is_media_type(content_type, "application/json")) return BodyMode::Whole;
        sse_ = is_media_type(content_type, "text/event-stream");
        return BodyMode::Stream;
    }

    void on_stream(std::string_view bytes, std::string& out) override { out.append(bytes); }

    void on_stream_end(BodyEnd how, std::string& out) override {
        if (how == BodyEnd::Clean) {
            res_.end = EndState::Complete;
        } else if (sse_) {
            stream_not_complete(how, out);   // the closing error event
        } else {
            relayed_end(how);
        }
    }

    void on_whole(std::string& body, std::string& out) override {
        if (!is_json_document(body)) {
            invalid(body.empty() ? "empty response body" : "the response body is not valid JSON", out);
            return;
        }
        res_.end = EndState::Complete;
        out.swap(body);
    }

private:
    CodecKind kind_;
    bool sse_ = false;
};

}  // namespace

std::unique_ptr<Codec> make_media_codec(CodecKind kind, const CodecOptions& opt) {
    return std::make_unique<MediaCodec>(kind, opt);
}

}  // namespace llmgw
