// Helpers shared by the codec implementations (not for the shell).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/codec/codec.h"

namespace llmgw {

std::unique_ptr<Codec> make_openai_codec(bool chat, const CodecOptions& opt);
std::unique_ptr<Codec> make_passthrough_codec(const CodecOptions& opt);
std::unique_ptr<Codec> make_relay_codec(const CodecOptions& opt);
// Images, speech and transcription to an OpenAI-type provider.
std::unique_ptr<Codec> make_media_codec(CodecKind kind, const CodecOptions& opt);
// A caller's chat API (OpenAIChat, AnthropicMessages or OpenAIResponses) to a provider of
// another wire format (opt.provider), through the chat IR (chat_ir.h).
std::unique_ptr<Codec> make_translating_codec(CodecKind api, const CodecOptions& opt);
// /v1/messages to an Anthropic provider: bytes relayed as they are, usage
// and the end state read through the Anthropic reader.
std::unique_ptr<Codec> make_anthropic_native_codec(const CodecOptions& opt);
// /v1/responses to an OpenAI-type provider: bytes relayed as they are,
// usage and the end state read through the Responses reader.
std::unique_ptr<Codec> make_responses_native_codec(const CodecOptions& opt);
// /v1/embeddings to a Gemini provider (embedContent / batchEmbedContents).
std::unique_ptr<Codec> make_gemini_embed_codec(const CodecOptions& opt);

// The query without any "key" parameter (and without empty parameters):
// Gemini's clients may send the caller's key there, and it must not reach a
// provider, a tool server or an agent.
std::string strip_key_param(std::string_view query);

// The caller's request as it came (passthrough, relay): method, path, the
// query given, Content-Type, and the caller's body unchanged.
void caller_request_as_sent(const CallerRequest& in, std::string_view query, UpstreamRequest& out);

// out.body: the caller's parsed body (in.doc) rewritten for the upstream
// model (RequestDoc::rewrite); false, with err, when it could not be.
bool rewrite_caller_body(const CallerRequest& in, bool force_stream_usage, UpstreamRequest& out, std::string& err);

// The headers that carry a provider's key, in its type's own form
// (Authorization: Bearer, x-api-key + anthropic-version, x-goog-api-key).
void add_provider_auth(ProviderType type, std::string_view key, UpstreamRequest& out);
// The anthropic-version header the gateway sends to Anthropic providers.
inline constexpr const char* kAnthropicVersion = "2023-06-01";
// An OpenAI-style error "type" for an upstream error status.
std::string_view openai_error_type(int status);

// Usage fields found in one JSON document (see sniff_usage); fields not found
// are left as they are, so calls over the events of a stream merge. With
// model: the model the document names, when it names one (top-level "model"
// or "modelVersion", Anthropic's message_start "message.model").
void sniff_usage_fields(std::string_view json, std::int64_t& prompt, std::int64_t& completion,
                        std::string* model = nullptr);

// Whether s is one complete JSON document.
bool is_json_document(std::string_view s);

// Whether a Content-Type names the media type (case-insensitive, parameters ignored).
inline bool is_media_type(std::string_view content_type, std::string_view type) {
    if (content_type.size() < type.size()) return false;
    for (std::size_t i = 0; i < type.size(); ++i) {
        char c = content_type[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != type[i]) return false;
    }
    return content_type.size() == type.size() || content_type[type.size()] == ';' ||
           content_type[type.size()] == ' ';
}

}  // namespace llmgw
