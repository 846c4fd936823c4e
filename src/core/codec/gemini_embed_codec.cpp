// /v1/embeddings to a Gemini provider: one input string goes to
// embedContent, a list to batchEmbedContents; the answer comes back in
// OpenAI's embeddings shape (float arrays, or base64 when the caller asked).
#include <rapidjson/document.h>

#include "core/codec/chat_ir.h"
#include "core/codec/codec_impl.h"
#include "core/codec/gemini_embed.h"
#include "core/codec/gemini_wire.h"
#include "core/json/envelope.h"

namespace llmgw {
namespace {

namespace rj = rapidjson;

bool wants_base64(const rj::Value& req) {
    if (!req.IsObject()) return false;
    auto it = req.FindMember("encoding_format");
    return it != req.MemberEnd() && it->value.IsString() &&
           std::string_view(it->value.GetString(), it->value.GetStringLength()) == "base64";
}

class GeminiEmbedCodec final : public Codec {
public:
    explicit GeminiEmbedCodec(const CodecOptions& o) : Codec(o) {}

    CodecKind kind() const override { return CodecKind::OpenAIEmbeddings; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string& err) const override {
        if (in.doc == nullptr) {
            err = "the request body was not parsed";
            return false;
        }
        const rj::Value& req = request_json(*in.doc);
        std::size_t batch = 0;
        if (!gemini_embed_request_from_openai(req, in.upstream_model, batch, out.body, err)) {
            out.refuse_status = 400;
            return false;
        }
        out.path = gemini_model_path(in.upstream_model, batch > 0 ? "batchEmbedContents" : "embedContent");
        if (out.path.empty()) {
            err = "the model id cannot be sent to a gemini provider";
            out.refuse_status = 400;
            return false;
        }
        batch_ = batch;
        base64_ = wants_base64(req);
        out.method = "POST";
        out.headers.emplace_back("Content-Type", "application/json");
        add_provider_auth(ProviderType::Gemini, in.provider_key, out);
        return true;
    }

protected:
    BodyMode on_head(int, std::string_view) override { return BodyMode::Whole; }
    void on_stream(std::string_view bytes, std::string& out) override { out.append(bytes); }
    void on_stream_end(BodyEnd how, std::string& out) override { stream_not_complete(how, out); }

    void on_whole(std::string& body, std::string& out) override {
        std::string err;
        Usage usage;
        if (!openai_embeddings_from_gemini(body, batch_, base64_, opt_.client_model, out, usage, err)) {
            out.clear();
            invalid(body.empty() ? "empty response body" : err, out);
            return;
        }
        res_.usage = usage;
        res_.content_type = "application/json";
        res_.end = EndState::Complete;
    }

    void on_error_body(std::string&, std::string& out) override {
        out = error_json("upstream returned status " + std::to_string(res_.status) + ": " + res_.text,
                         openai_error_type(res_.status), "upstream_error");
    }

private:
    // Decided by build_request, which runs once per call before the answer:
    // 0 (embedContent) or the number of inputs (batchEmbedContents).
    mutable std::size_t batch_ = 0;
    mutable bool base64_ = false;
};

}  // namespace

std::unique_ptr<Codec> make_gemini_embed_codec(const CodecOptions& opt) {
    return std::make_unique<GeminiEmbedCodec>(opt);
}

}  // namespace llmgw
