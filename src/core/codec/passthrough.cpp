// The passthrough codec: the caller's method, path, query and body go to the
// provider's base unchanged but for the credential; the provider's status,
// headers and bytes come back unchanged and as they arrive, error statuses
// included. Usage and the model are sniffed wherever a known shape appears
// (OpenAI, Anthropic, Gemini), in JSON bodies and in SSE events.
#include <vector>

#include "core/codec/codec_impl.h"
#include "core/codec/sse.h"
#include "core/json/envelope.h"

namespace llmgw {
namespace {

constexpr std::size_t kSniffLimit = 4 << 20;   // JSON bytes kept to read usage from

class PassthroughCodec final : public Codec {
public:
    explicit PassthroughCodec(const CodecOptions& o) : Codec(o), sse_(o.max_event_bytes) {}

    CodecKind kind() const override { return CodecKind::Passthrough; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string&) const override {
        caller_request_as_sent(in, strip_key_param(in.query), out);
        add_provider_auth(opt_.provider, in.provider_key, out);
        return true;
    }

    // Never closed with a gateway event: the bytes are the provider's own.
    bool event_stream() const override { return false; }
    bool relays_bytes() const override { return true; }

protected:
    bool relays_error_status() const override { return true; }

    BodyMode on_head(int status, std::string_view content_type) override {
        error_ = status >= 400;
        sse_on_ = !error_ && is_media_type(content_type, "text/event-stream");
        keep_ = error_ || (status < 300 && is_media_type(content_type, "application/json"));
        return BodyMode::Stream;
    }

    void on_stream(std::string_view bytes, std::string& out) override {
        out.append(bytes);
        if (keep_) {
            const std::size_t limit = error_ ? opt_.error_limit : kSniffLimit;
            if (kept_.size() + bytes.size() <= limit) {
                kept_.append(bytes);
            } else if (!error_) {
                keep_ = false;   // too big to read usage from: relayed all the same
                std::string().swap(kept_);
                problem_ = "upstream JSON body too large to read usage from";
            } else {
                kept_.append(bytes.substr(0, limit - kept_.size()));
            }
        }
        if (!sse_on_) return;
        events_.clear();
        if (!sse_.feed(bytes, events_)) {
            sse_on_ = false;   // bytes still pass; usage of later events is not read
            problem_ = "upstream SSE event too large to read usage from";
        }
        for (const SseEvent& ev : events_) {
            if (!ev.data.empty()) sniff_usage_fields(ev.data, prompt_, completion_, &res_.model);
        }
    }

    void on_stream_end(BodyEnd how, std::string&) override {
        if (error_) {
            res_.end = EndState::UpstreamError;
            res_.text = upstream_error_text(kept_);
            return;
        }
        if (keep_) sniff_usage_fields(kept_, prompt_, completion_, &res_.model);
        res_.usage.present = prompt_ >= 0 || completion_ >= 0;
        res_.usage.prompt_tokens = prompt_ >= 0 ? prompt_ : 0;
        res_.usage.completion_tokens = completion_ >= 0 ? completion_ : 0;
        relayed_end(how);
    }

    void on_whole(std::string& body, std::string& out) override {   // never chosen: on_head streams
        out.swap(body);
        res_.end = EndState::Complete;
    }

private:
    SseParser sse_;
    std::vector<SseEvent> events_;
    bool sse_on_ = false, keep_ = false, error_ = false;
    std::string kept_;
    std::int64_t prompt_ = -1, completion_ = -1;
};

}  // namespace

std::unique_ptr<Codec> make_passthrough_codec(const CodecOptions& opt) {
    return std::make_unique<PassthroughCodec>(opt);
}

}  // namespace llmgw
