// The passthrough codec: the caller's body goes upstream unchanged and the
// provider's bytes come back unchanged; usage is sniffed wherever a known
// shape appears (OpenAI, Anthropic, Gemini), in whole bodies and SSE events.
#include <vector>

#include "core/codec/codec_impl.h"
#include "core/codec/sse.h"
#include "core/json/envelope.h"

namespace llmgw {
namespace {

class PassthroughCodec final : public Codec {
public:
    explicit PassthroughCodec(const CodecOptions& o) : Codec(o), sse_(o.max_event_bytes) {}

    CodecKind kind() const override { return CodecKind::Passthrough; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string&) const override {
        out.method = "POST";
        out.path.assign(in.path);
        out.headers.emplace_back("Content-Type", "application/json");
        if (!in.provider_key.empty()) {
            out.credential_header = "Authorization";
            out.headers.emplace_back("Authorization", "Bearer " + std::string(in.provider_key));
        }
        out.body.assign(in.body);
        return true;
    }

protected:
    BodyMode on_head(int, std::string_view content_type) override {
        return is_media_type(content_type, "text/event-stream") ? BodyMode::Stream : BodyMode::Whole;
    }

    void on_stream(std::string_view bytes, std::string& out) override {
        out.append(bytes);
        if (sniff_off_) return;
        events_.clear();
        if (!sse_.feed(bytes, events_)) {
            sniff_off_ = true;   // bytes still pass; usage of later events is not read
            problem_ = "upstream SSE event too large to read usage from";
        }
        for (const SseEvent& ev : events_) {
            if (!ev.data.empty()) sniff_usage_fields(ev.data, prompt_, completion_);
        }
        set_usage();
    }

    void on_stream_end(BodyEnd how, std::string& out) override {
        if (how == BodyEnd::Clean) {
            res_.end = EndState::Complete;
        } else {
            stream_not_complete(how, out);
        }
    }

    void on_whole(std::string& body, std::string& out) override {
        sniff_usage_fields(body, prompt_, completion_);
        set_usage();
        res_.end = EndState::Complete;
        out.swap(body);
    }

private:
    void set_usage() {
        res_.usage.present = prompt_ >= 0 || completion_ >= 0;
        res_.usage.prompt_tokens = prompt_ >= 0 ? prompt_ : 0;
        res_.usage.completion_tokens = completion_ >= 0 ? completion_ : 0;
    }

    SseParser sse_;
    std::vector<SseEvent> events_;
    bool sniff_off_ = false;
    std::int64_t prompt_ = -1, completion_ = -1;
};

}  // namespace

std::unique_ptr<Codec> make_passthrough_codec(const CodecOptions& opt) {
    return std::make_unique<PassthroughCodec>(opt);
}

}  // namespace llmgw
