// The codec base: status checks, buffering of whole and error bodies, the
// gateway's answers to broken upstream responses; the factory; usage sniffing.
#include "core/codec/codec.h"
#include "core/codec/codec_impl.h"
#include "core/codec/json_counts.h"

#include <cstdint>
#include <exception>

#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include "core/json/envelope.h"

namespace llmgw {

namespace rj = rapidjson;

namespace {

struct NullScan : rj::BaseReaderHandler<rj::UTF8<>, NullScan> {};

// Usage fields of one document; -1: absent or not a count. Gemini's parts:
// prompt and tool-use prompt tokens are the prompt, candidates and thoughts
// tokens the completion (thinking counts as completion, as the translating
// codec counts it: gemini_reader.cpp).
struct UsageFields {
    std::int64_t prompt = -1, completion = -1;
    std::int64_t gem_prompt = -1, gem_tool_prompt = -1, gem_candidates = -1, gem_thoughts = -1;
};

// SAX scan for the known usage shapes; iterative, nothing stored but the
// key path of the current value (keys deeper than kMaxDepth are not kept).
struct UsageScan : CountHandler<UsageScan> {
    static constexpr std::size_t kMaxDepth = 4;
    struct Frame {
        bool array;
        std::string key;
    };
    std::vector<Frame> frames;
    std::size_t depth = 0;   // real depth (frames holds at most kMaxDepth)
    UsageFields f;
    std::string model;

    enum Field { kNone, kPrompt, kCompletion, kGemPrompt, kGemToolPrompt, kGemCandidates, kGemThoughts };

    Field field_here() const {
        if (depth != frames.size() || depth == 0 || frames.back().array) return kNone;
        std::size_t i = 0;
        if (frames[0].array) i = 1;   // a root array: each element is a document
        const std::size_t n = depth - i;
        auto key = [&](std::size_t k) -> const std::string& { return frames[i + k].key; };
        const std::string& last = frames.back().key;
        // OpenAI and Anthropic answers, Anthropic's message_start event,
        // OpenAI Responses events (response.completed: {"response": {"usage": ...}})
        bool usage = (n == 2 && key(0) == "usage") ||
                     (n == 3 && (key(0) == "message" || key(0) == "response") && key(1) == "usage" &&
                      !frames[i + 1].array);
        if (usage) {
            if (last == "prompt_tokens" || last == "input_tokens") return kPrompt;
            if (last == "completion_tokens" || last == "output_tokens") return kCompletion;
            return kNone;
        }
        if (n == 2 && key(0) == "usageMetadata") {
            if (last == "promptTokenCount") return kGemPrompt;
            if (last == "toolUsePromptTokenCount") return kGemToolPrompt;
            if (last == "candidatesTokenCount") return kGemCandidates;
            if (last == "thoughtsTokenCount") return kGemThoughts;
        }
        return kNone;
    }
    // The answer's model: "model" at the top (OpenAI, Anthropic) or in
    // Anthropic's message_start "message", Gemini's "modelVersion".
    bool String(const char* s, rj::SizeType len, bool) {
        if (depth != frames.size() || depth == 0 || frames.back().array || frames[0].array) return true;
        const std::string& last = frames.back().key;
        bool here = (depth == 1 && (last == "model" || last == "modelVersion")) ||
                    (depth == 2 && (frames[0].key == "message" || frames[0].key == "response") && last == "model");
        if (here && len > 0 && len <= 256) model.assign(s, len);
        return true;
    }
    bool number(std::int64_t v) {
        switch (field_here()) {
        case kPrompt: f.prompt = v; break;
        case kCompletion: f.completion = v; break;
        case kGemPrompt: f.gem_prompt = v; break;
        case kGemToolPrompt: f.gem_tool_prompt = v; break;
        case kGemCandidates: f.gem_candidates = v; break;
        case kGemThoughts: f.gem_thoughts = v; break;
        case kNone: break;
        }
        return true;
    }
    bool Key(const char* s, rj::SizeType len, bool) {
        if (depth == frames.size() && depth > 0) frames.back().key.assign(s, len);
        return true;
    }
    bool start(bool array) {
        if (depth == frames.size() && depth < kMaxDepth) frames.push_back(Frame{array, {}});
        ++depth;
        return true;
    }
    bool end() {
        if (depth == frames.size()) frames.pop_back();
        --depth;
        return true;
    }
    bool StartObject() { return start(false); }
    bool StartArray() { return start(true); }
    bool EndObject(rj::SizeType) { return end(); }
    bool EndArray(rj::SizeType) { return end(); }
};

template <class H>
bool parse_with(std::string_view s, H& h) {
    rj::MemoryStream ms(s.data(), s.size());
    rj::EncodedInputStream<rj::UTF8<>, rj::MemoryStream> is(ms);
    rj::Reader reader;
    return !reader.Parse<rj::kParseIterativeFlag>(is, h).IsError();
}

}  // namespace

// Shared with the codecs: fields found in one JSON document (partial documents
// give what was read before the error).
void sniff_usage_fields(std::string_view json, std::int64_t& prompt, std::int64_t& completion, std::string* model) {
    UsageScan h;
    try {
        parse_with(json, h);
    } catch (const std::exception&) {
        return;
    }
    auto z = [](std::int64_t n) { return n < 0 ? 0 : n; };
    auto sum = [](std::int64_t a, std::int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; };
    if (h.f.gem_prompt >= 0 || h.f.gem_tool_prompt >= 0) h.f.prompt = sum(z(h.f.gem_prompt), z(h.f.gem_tool_prompt));
    if (h.f.gem_candidates >= 0 || h.f.gem_thoughts >= 0) {
        h.f.completion = sum(z(h.f.gem_candidates), z(h.f.gem_thoughts));
    }
    if (h.f.prompt >= 0) prompt = h.f.prompt;
    if (h.f.completion >= 0) completion = h.f.completion;
    if (model != nullptr && !h.model.empty()) *model = std::move(h.model);
}

std::string strip_key_param(std::string_view query) {
    std::string out;
    while (!query.empty()) {
        std::size_t amp = query.find('&');
        std::string_view p = query.substr(0, amp);
        query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
        std::string_view name = p.substr(0, p.find('='));
        if (name == "key" || p.empty()) continue;
        if (!out.empty()) out += '&';
        out.append(p);
    }
    return out;
}

void caller_request_as_sent(const CallerRequest& in, std::string_view query, UpstreamRequest& out) {
    out.method.assign(in.method);
    out.path.assign(in.path);
    if (!query.empty()) out.path.append("?").append(query);
    if (!in.content_type.empty()) out.headers.emplace_back("Content-Type", std::string(in.content_type));
    out.caller_body = true;
}

bool rewrite_caller_body(const CallerRequest& in, bool force_stream_usage, UpstreamRequest& out, std::string& err) {
    out.body = in.doc->rewrite(in.upstream_model, force_stream_usage);
    if (out.body.empty()) {
        err = "the upstream request could not be built";
        return false;
    }
    return true;
}

bool is_json_document(std::string_view s) {
    NullScan h;
    return parse_with(s, h);
}

Usage sniff_usage(std::string_view json) {
    std::int64_t p = -1, c = -1;
    sniff_usage_fields(json, p, c);
    Usage u;
    u.present = p >= 0 || c >= 0;
    u.prompt_tokens = p >= 0 ? p : 0;
    u.completion_tokens = c >= 0 ? c : 0;
    return u;
}

BodyMode Codec::head(int status, std::string_view content_type) {
    headed_ = true;
    res_.status = status;
    if (status < 200 || status > 599) {
        mode_ = BodyMode::Invalid;
        res_.text = status < 0 ? "no valid HTTP status line"
                               : "status " + std::to_string(status) + " is not a final HTTP status";
        return mode_;
    }
    if (status >= 300 && !relays_error_status()) {
        mode_ = BodyMode::Error;
        return mode_;
    }
    mode_ = on_head(status, content_type);
    return mode_;
}

void Codec::redact(const SecretSet* secrets) {
    redactor_.reset();
    if (secrets != nullptr && !secrets->empty()) redactor_.emplace(*secrets);   // held in the codec: no allocation
}

void Codec::feed(std::string_view bytes, std::string& out) {
    if (res_.end == EndState::Stopped) return;
    if (redactor_) {
        bytes = redactor_->pass(bytes, false);
        res_.redacted = redactor_->redacted();
        if (bytes.empty()) return;
    }
    take(bytes, out);
}

void Codec::take(std::string_view bytes, std::string& out) {
    switch (mode_) {
    case BodyMode::Stream: {
        const std::size_t before = out.size();
        if (spilled_) {
            out.append(bytes);
        } else {
            on_stream(bytes, out);
        }
        if (out.size() > before) streamed_ = true;
        return;
    }
    case BodyMode::Whole:
        if (buf_.size() + bytes.size() > opt_.whole_limit) {
            // Too big to hold: relayed from here on, usage unknown.
            mode_ = BodyMode::Stream;
            spilled_ = true;
            out.append(buf_).append(bytes);
            std::string().swap(buf_);
            return;
        }
        buf_.append(bytes);
        return;
    case BodyMode::Error:
    case BodyMode::Invalid:
        if (buf_.size() < opt_.error_limit) buf_.append(bytes.substr(0, opt_.error_limit - buf_.size()));
        return;
    }
}

std::string Codec::error_envelope(std::string_view message, std::string_view type, std::string_view code) const {
    return error_json(message, type, code);
}

std::string Codec::error_event(std::string_view message, std::string_view type, std::string_view code) const {
    return error_sse_event(message, type, code);
}

void Codec::on_error_body(std::string& body, std::string& out) {
    Usage dummy;
    if (inspect_stream_chunk(body, dummy) == ChunkKind::Error) {
        out.swap(body);   // already an error object
    } else {
        out = error_json("upstream returned status " + std::to_string(res_.status) + ": " + res_.text,
                         "upstream_error", "upstream_error");
    }
}

void Codec::stream_not_complete(BodyEnd how, std::string& out) {
    if (how == BodyEnd::Invalid) {
        invalid("invalid framing of the stream", out);
        return;
    }
    res_.end = EndState::Cut;
    out += error_event(kCutMessage, "upstream_error", "stream_interrupted");
}

void Codec::relayed_end(BodyEnd how) {
    res_.end = how == BodyEnd::Clean ? EndState::Complete : how == BodyEnd::Cut ? EndState::Cut : EndState::Invalid;
    if (res_.end == EndState::Invalid) res_.text = "invalid framing of the response body";
}

void Codec::invalid(std::string_view why, std::string& out) {
    if (mode_ != BodyMode::Stream) {
        refuse(why, out);
        return;
    }
    res_.end = EndState::Invalid;
    res_.text.assign(why);
    out += error_event(kInvalidMessage, "upstream_error", "bad_gateway");
}

void Codec::refuse(std::string_view why, std::string& out) {
    res_.end = EndState::Invalid;
    res_.text.assign(why);
    res_.status = 502;
    res_.content_type = "application/json";
    out = error_envelope(kInvalidMessage, "upstream_error", "bad_gateway");
}

void Codec::stop(std::string_view message, std::string_view type, std::string_view code, std::string& out) {
    if (res_.end != EndState::Open) return;
    if (redactor_) redactor_->drop();   // the stream ends here: held bytes never go
    res_.end = EndState::Stopped;
    out += error_event(message, type, code);
}

void Codec::finish(BodyEnd how, std::string& out) {
    if (res_.end != EndState::Open) return;
    if (redactor_ && headed_ && redactor_->held() > 0) {   // the bytes held back, last
        std::string_view tail = redactor_->pass({}, true);
        if (!tail.empty()) take(tail, out);
    }
    if (redactor_) res_.redacted = redactor_->redacted();
    settle(how, out);
}

void Codec::settle(BodyEnd how, std::string& out) {
    if (!headed_) {
        invalid("no response", out);
        return;
    }
    switch (mode_) {
    case BodyMode::Stream:
        if (spilled_) {
            res_.end = how == BodyEnd::Clean ? EndState::Complete : EndState::Cut;
            return;
        }
        if (how != BodyEnd::Clean && !streamed_ && head_waits_for_bytes()) {
            // Nothing reached the client: refused as a whole answer is.
            refuse(how == BodyEnd::Cut ? kCutShortReason : "invalid framing of the response body", out);
            return;
        }
        on_stream_end(how, out);
        return;
    case BodyMode::Whole:
        if (how == BodyEnd::Cut) {   // held, so nothing reached the client
            std::string().swap(buf_);
            refuse(kCutShortReason, out);
            return;
        }
        if (how == BodyEnd::Invalid) {
            invalid("invalid framing of the response body", out);
            return;
        }
        on_whole(buf_, out);
        std::string().swap(buf_);
        return;
    case BodyMode::Error: {
        res_.end = EndState::UpstreamError;
        res_.text = upstream_error_text(buf_);   // scrubbed
        res_.content_type = "application/json";
        on_error_body(buf_, out);
        return;
    }
    case BodyMode::Invalid: {
        std::string why = res_.text;
        invalid(why, out);
        return;
    }
    }
}

bool codec_serves(CodecKind kind, ProviderType provider) {
    switch (kind) {
    case CodecKind::OpenAIChat:
    case CodecKind::AnthropicMessages:
    case CodecKind::OpenAIResponses:
    case CodecKind::Passthrough:
    case CodecKind::Relay: return true;
    case CodecKind::OpenAIEmbeddings: return provider != ProviderType::Anthropic;   // Anthropic has no embeddings API
    // Gemini's image and speech APIs take other parameters and answer in
    // other shapes: no exact translation, so OpenAI-type providers only.
    case CodecKind::OpenAIImages:
    case CodecKind::OpenAISpeech:
    case CodecKind::OpenAITranscription: return provider == ProviderType::OpenAI;
    case CodecKind::None: break;
    }
    return false;
}

std::unique_ptr<Codec> make_codec(CodecKind kind, const CodecOptions& opt) {
    if (!codec_serves(kind, opt.provider)) return nullptr;
    const ProviderType p = opt.provider;
    switch (kind) {
    case CodecKind::OpenAIChat:
        if (p == ProviderType::OpenAI) return make_openai_codec(true, opt);
        return make_translating_codec(kind, opt);
    case CodecKind::OpenAIEmbeddings:
        if (p == ProviderType::Gemini) return make_gemini_embed_codec(opt);
        return make_openai_codec(false, opt);
    case CodecKind::AnthropicMessages:
        if (p == ProviderType::Anthropic) return make_anthropic_native_codec(opt);
        return make_translating_codec(kind, opt);
    case CodecKind::OpenAIResponses:
        if (p == ProviderType::OpenAI) return make_responses_native_codec(opt);
        return make_translating_codec(kind, opt);
    case CodecKind::OpenAIImages:
    case CodecKind::OpenAISpeech:
    case CodecKind::OpenAITranscription: return make_media_codec(kind, opt);
    case CodecKind::Passthrough: return make_passthrough_codec(opt);
    case CodecKind::Relay: return make_relay_codec(opt);
    case CodecKind::None: break;
    }
    return nullptr;
}

const char* codec_kind_name(CodecKind kind) {
    switch (kind) {
    case CodecKind::OpenAIChat: return "openai-chat";
    case CodecKind::OpenAIEmbeddings: return "openai-embeddings";
    case CodecKind::AnthropicMessages: return "anthropic-messages";
    case CodecKind::OpenAIResponses: return "openai-responses";
    case CodecKind::OpenAIImages: return "openai-images";
    case CodecKind::OpenAISpeech: return "openai-speech";
    case CodecKind::OpenAITranscription: return "openai-transcription";
    case CodecKind::Passthrough: return "passthrough";
    case CodecKind::Relay: return "relay";
    case CodecKind::None: break;
    }
    return "none";
}

const char* end_state_name(EndState e) {
    switch (e) {
    case EndState::Open: return "open";
    case EndState::Complete: return "complete";
    case EndState::StreamError: return "stream_error";
    case EndState::Cut: return "cut";
    case EndState::UpstreamError: return "upstream_error";
    case EndState::Invalid: return "invalid";
    case EndState::Stopped: return "stopped";
    }
    return "?";
}

}  // namespace llmgw
