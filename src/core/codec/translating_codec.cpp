// The translating codec: a caller's chat API (OpenAI chat completions,
// Anthropic messages or OpenAI responses) to a provider of another wire
// format. The request pivots through the OpenAI chat shape; the answer is
// read into the chat IR by the provider's reader and written in the
// caller's shape by the caller's writer, event by event as it arrives
// (nothing is held back; a Responses stream also keeps its output for its
// closing response.completed, up to the whole-answer bound).
#include <ctime>
#include <vector>

#include <rapidjson/document.h>

#include "core/codec/anthropic_wire.h"
#include "core/codec/chat_ir.h"
#include "core/codec/codec_impl.h"
#include "core/codec/gemini_wire.h"
#include "core/codec/ir_codec.h"
#include "core/codec/messages_wire.h"
#include "core/codec/openai_ir.h"
#include "core/codec/responses_wire.h"
#include "core/json/envelope.h"

namespace llmgw {
namespace {

namespace rj = rapidjson;

std::unique_ptr<ResponseReader> reader_for(ProviderType p) {
    switch (p) {
    case ProviderType::Anthropic: return make_anthropic_reader();
    case ProviderType::Gemini: return make_gemini_reader();
    case ProviderType::OpenAI: break;
    }
    return make_openai_reader();
}

class TranslatingCodec final : public IrCodec {
public:
    TranslatingCodec(CodecKind api, const CodecOptions& o) : IrCodec(o, reader_for(o.provider)), api_(api) {
        WriterOptions w;
        w.model = o.client_model;
        w.include_usage = o.client_wants_usage;
        w.created = o.created != 0 ? o.created : static_cast<std::int64_t>(std::time(nullptr));
        if (api_ == CodecKind::AnthropicMessages) writer_ = make_anthropic_writer(w);
        else if (api_ == CodecKind::OpenAIResponses) writer_ = make_responses_writer(w, o.whole_limit);
        else writer_ = make_openai_writer(w);
    }

    CodecKind kind() const override { return api_; }

    bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string& err) const override {
        if (in.doc == nullptr) {
            err = "the request body was not parsed";
            return false;
        }
        const ProviderType p = opt_.provider;
        const rj::Value& req = request_json(*in.doc);
        const rj::Value* openai_req = &req;
        rj::Document pivot;
        out.method = "POST";
        out.headers.emplace_back("Content-Type", "application/json");
        add_provider_auth(p, in.provider_key, out);
        if (api_ == CodecKind::AnthropicMessages || api_ == CodecKind::OpenAIResponses) {
            std::string body;
            const bool ok = api_ == CodecKind::AnthropicMessages
                                ? openai_request_from_anthropic(req, in.upstream_model, body, err)
                                : chat_request_from_responses(req, in.upstream_model, p, body, err);
            if (!ok) {
                out.refuse_status = 400;
                return false;
            }
            if (p == ProviderType::OpenAI) {
                out.path = "/chat/completions";
                out.body = std::move(body);
                return true;
            }
            pivot.Parse<rj::kParseIterativeFlag>(body.data(), body.size());
            if (pivot.HasParseError() || !pivot.IsObject()) {
                err = "the translated request could not be built";
                return false;
            }
            openai_req = &pivot;
        }
        switch (p) {
        case ProviderType::Anthropic:
            out.path = "/v1/messages";
            if (!anthropic_request_from_openai(*openai_req, in.upstream_model, AnthropicRequestOptions(), out.body,
                                               err)) {
                out.refuse_status = 400;
                return false;
            }
            return true;
        case ProviderType::Gemini:
            if (!gemini_model_ok(in.upstream_model)) {
                err = "the model id \"" + to_valid_utf8(in.upstream_model.substr(0, 128)) +
                      "\" cannot be sent to a gemini provider (only letters, digits, '.', '_' and '-')";
                out.refuse_status = 400;
                return false;
            }
            out.path = gemini_model_path(in.upstream_model, opt_.client_stream ? "streamGenerateContent?alt=sse"
                                                                               : "generateContent");
            if (!gemini_request_from_openai(*openai_req, out.body, err)) {
                out.refuse_status = 400;
                return false;
            }
            return true;
        case ProviderType::OpenAI:
            break;
        }
        err = "no translation between these formats";
        return false;
    }

protected:
    BodyMode on_head(int, std::string_view content_type) override {
        if (opt_.client_stream && is_media_type(content_type, "text/event-stream")) return BodyMode::Stream;
        return BodyMode::Whole;
    }

    void on_stream(std::string_view bytes, std::string& out) override {
        if (broken_ || failed_) return;
        events_.clear();
        if (!sse_.feed(bytes, events_)) {
            broken_ = true;
            why_ = "upstream SSE event too large";
            return;
        }
        for (const SseEvent& ev : events_) {
            if (ev.data.empty()) continue;   // comments and keep-alives
            std::string err;
            const ReadStep step = read_ir_event(ev, err, [&](const StreamEventIR& e) { writer().event(e, out); });
            if (step == ReadStep::Failed) {
                failed_ = true;
                return;
            }
            if (step == ReadStep::Invalid) {
                broken_ = true;
                why_ = "invalid upstream stream event: " + err;
                return;
            }
        }
    }

    void on_stream_end(BodyEnd how, std::string& out) override {
        res_.usage = usage_.accounting();
        if (failed_) {
            res_.end = EndState::StreamError;   // the writer relayed the provider's error event
            return;
        }
        if (broken_) {
            invalid(why_, out);
            return;
        }
        if (how == BodyEnd::Clean && reader_->complete() && !sse_.has_partial()) {
            writer().end(out);
            res_.end = EndState::Complete;
            return;
        }
        stream_not_complete(how, out);
    }

    void on_whole(std::string& body, std::string& out) override {
        ChatResponseIR r;
        if (!read_whole_answer(body, r, out)) return;
        if (!opt_.client_stream) {
            res_.content_type = "application/json";
            writer().whole(r, out);
            return;
        }
        // The caller asked for a stream and the provider answered whole:
        // the caller still gets its stream.
        res_.content_type = "text/event-stream";
        for (const StreamEventIR& e : events_of(r)) writer().event(e, out);
        writer().end(out);
    }

    std::string error_envelope(std::string_view message, std::string_view type, std::string_view code) const override {
        if (api_ == CodecKind::AnthropicMessages) return anthropic_error_json(anthropic_error_type_for_code(code), message);
        return error_json(message, type, code);
    }

    std::string error_event(std::string_view message, std::string_view type, std::string_view code) const override {
        std::string out;
        if (api_ == CodecKind::OpenAIResponses) {
            writer_->close_with_error(message, type, code, out);   // numbered after the writer's own events
            return out;
        }
        if (api_ != CodecKind::AnthropicMessages) return error_sse_event(message, type, code);   // as the native codec's
        writer_->stream_error(message, anthropic_error_type_for_code(code), out);
        return out;
    }

    void on_error_body(std::string&, std::string& out) override {
        const int status = res_.status;
        std::string text = "upstream returned status " + std::to_string(status) + ": " + res_.text;
        if (api_ == CodecKind::AnthropicMessages) {
            out = anthropic_error_json(anthropic_error_type(status), text);
        } else {
            out = error_json(text, openai_error_type(status), "upstream_error");
        }
    }

private:
    static bool gemini_model_ok(std::string_view m) {
        if (m.empty() || m == "." || m == ".." || m.size() > 256) return false;
        for (char c : m) {
            const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                            c == '_' || c == '-';
            if (!ok) return false;
        }
        return true;
    }

    // A whole answer as the events a stream of it would have carried.
    static std::vector<StreamEventIR> events_of(const ChatResponseIR& r) {
        std::vector<StreamEventIR> v;
        auto push = [&](StreamEventIR::Kind k) -> StreamEventIR& {
            v.emplace_back();
            v.back().kind = k;
            return v.back();
        };
        push(StreamEventIR::Kind::Start).id = r.id;
        if (!r.reasoning.empty()) push(StreamEventIR::Kind::Reasoning).text = r.reasoning;
        if (!r.text.empty()) push(StreamEventIR::Kind::Text).text = r.text;
        if (!r.refusal.empty()) push(StreamEventIR::Kind::Refusal).text = r.refusal;
        for (std::size_t i = 0; i < r.tool_calls.size(); ++i) {
            StreamEventIR& s = push(StreamEventIR::Kind::ToolStart);
            s.index = i;
            s.id = r.tool_calls[i].id;
            s.name = r.tool_calls[i].name;
            StreamEventIR& a = push(StreamEventIR::Kind::ToolArgs);
            a.index = i;
            a.text = r.tool_calls[i].arguments;
        }
        StreamEventIR& f = push(StreamEventIR::Kind::Finish);
        f.finish = r.finish;
        f.stop_sequence = r.stop_sequence;
        push(StreamEventIR::Kind::Usage).usage = r.usage;
        return v;
    }

    ResponseWriter& writer() { return *writer_; }

    CodecKind api_;
    std::unique_ptr<ResponseWriter> writer_;
    std::string why_;
};

}  // namespace

std::unique_ptr<Codec> make_translating_codec(CodecKind api, const CodecOptions& opt) {
    return std::make_unique<TranslatingCodec>(api, opt);
}

}  // namespace llmgw
