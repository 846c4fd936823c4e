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

class ResponsesNativeCodec final : public ReadAlongCodec {
public:
    explicit ResponsesNativeCodec(const CodecOptions& o) : ReadAlongCodec(o, make_responses_reader()) {}

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

    std::string error_event(std::string_view message, std::string_view type, std::string_view code) const override {
        return responses_error_event(message, type, code, data_events_);   // OpenAI numbers its events from 0
    }
};

}  // namespace

std::unique_ptr<Codec> make_responses_native_codec(const CodecOptions& opt) {
    return std::make_unique<ResponsesNativeCodec>(opt);
}

}  // namespace llmgw
