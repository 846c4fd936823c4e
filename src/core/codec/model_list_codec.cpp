// The codec of a model list call (discovery): GET a page, keep its body.
#include "core/codec/codec_impl.h"

namespace llmgw {
namespace {

class ModelListCodec final : public Codec {
public:
    ModelListCodec(ProviderType type, std::string path, const CodecOptions& o)
        : Codec(o), type_(type), path_(std::move(path)) {}

    CodecKind kind() const override { return CodecKind::None; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string&) const override {
        out.method = "GET";
        out.path = path_;
        add_provider_auth(type_, in.provider_key, out);
        return true;
    }

protected:
    BodyMode on_head(int, std::string_view) override { return BodyMode::Whole; }
    void on_stream(std::string_view, std::string&) override {}
    void on_stream_end(BodyEnd how, std::string& out) override { stream_not_complete(how, out); }
    void on_whole(std::string& body, std::string& out) override {
        res_.end = EndState::Complete;
        out.swap(body);
    }

private:
    ProviderType type_;
    std::string path_;
};

}  // namespace

std::unique_ptr<Codec> make_model_list_codec(ProviderType type, std::string path, std::size_t whole_limit) {
    CodecOptions o;
    o.provider = type;
    o.whole_limit = whole_limit;
    return std::make_unique<ModelListCodec>(type, std::move(path), o);
}

}  // namespace llmgw
