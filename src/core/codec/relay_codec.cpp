// The relay codec: tool servers and agents (per-target proxies and the
// federated /mcp endpoint's backend calls). The caller's method, path, query
// (minus a key= parameter) and body go to the target's location, or the
// gateway's own request when it makes one; the status, headers and bytes
// come back unchanged and as they arrive, error statuses included. Nothing
// is read from them: a target is counted by its requests only.
#include "core/codec/codec_impl.h"

namespace llmgw {
namespace {

class RelayCodec final : public Codec {
public:
    explicit RelayCodec(const CodecOptions& o) : Codec(o) {}

    CodecKind kind() const override { return CodecKind::Relay; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string&) const override {
        caller_request_as_sent(in, strip_key_param(in.query), out);   // as the passthrough: no caller key=
        for (const auto& h : in.headers) out.headers.push_back(h);
        out.bare_headers = in.own_request;
        return true;
    }

    // The bytes are the target's own: never closed with a gateway event.
    bool event_stream() const override { return false; }
    bool relays_bytes() const override { return true; }

protected:
    bool relays_error_status() const override { return true; }

    BodyMode on_head(int status, std::string_view) override {
        error_ = status >= 400;
        return BodyMode::Stream;
    }

    void on_stream(std::string_view bytes, std::string& out) override { out.append(bytes); }

    void on_stream_end(BodyEnd how, std::string&) override {
        if (error_) {
            res_.end = EndState::UpstreamError;
            return;
        }
        relayed_end(how);
    }

    void on_whole(std::string& body, std::string& out) override {   // never chosen: on_head streams
        out.swap(body);
        res_.end = EndState::Complete;
    }

private:
    bool error_ = false;
};

}  // namespace

std::unique_ptr<Codec> make_relay_codec(const CodecOptions& opt) { return std::make_unique<RelayCodec>(opt); }

}  // namespace llmgw
