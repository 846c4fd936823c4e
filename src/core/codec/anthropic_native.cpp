// /v1/messages to an Anthropic provider: the caller's body goes upstream with
// only "model" rewritten, and the provider's bytes come back unchanged. The
// Anthropic reader follows along for usage (cache tokens included) and for
// how the answer ended (a stream is complete at message_stop).
#include <vector>

#include "core/codec/anthropic_wire.h"
#include "core/codec/chat_ir.h"
#include "core/codec/codec_impl.h"
#include "core/codec/ir_codec.h"
#include "core/json/envelope.h"

namespace llmgw {
namespace {

class AnthropicNativeCodec final : public ReadAlongCodec {
public:
    explicit AnthropicNativeCodec(const CodecOptions& o) : ReadAlongCodec(o, make_anthropic_reader()) {}

    CodecKind kind() const override { return CodecKind::AnthropicMessages; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string& err) const override {
        if (in.doc == nullptr) {
            err = "the request body was not parsed";
            return false;
        }
        out.method = "POST";
        out.path = "/v1/messages";
        out.headers.emplace_back("Content-Type", "application/json");
        add_provider_auth(ProviderType::Anthropic, in.provider_key, out);
        return rewrite_caller_body(in, false, out, err);
    }

protected:
    BodyMode on_head(int, std::string_view content_type) override {
        return is_media_type(content_type, "text/event-stream") ? BodyMode::Stream : BodyMode::Whole;
    }

    std::string error_envelope(std::string_view message, std::string_view, std::string_view) const override {
        return anthropic_error_json("api_error", message);
    }

    std::string error_event(std::string_view message, std::string_view, std::string_view code) const override {
        std::string out = "event: error\ndata: ";
        out += anthropic_error_json(anthropic_error_type_for_code(code), message);
        out += "\n\n";
        return out;
    }

    void on_error_body(std::string& body, std::string& out) override {
        if (is_anthropic_error(body)) {
            out.swap(body);   // the provider's own error, in the caller's shape already
            return;
        }
        out = anthropic_error_json(anthropic_error_type(res_.status),
                                   "upstream returned status " + std::to_string(res_.status) + ": " + res_.text);
    }

private:
    static bool is_anthropic_error(std::string_view body) {
        Usage dummy;
        return body.find("\"type\"") != std::string_view::npos && inspect_stream_chunk(body, dummy) == ChunkKind::Error;
    }
};

}  // namespace

std::unique_ptr<Codec> make_anthropic_native_codec(const CodecOptions& opt) {
    return std::make_unique<AnthropicNativeCodec>(opt);
}

}  // namespace llmgw
