// libFuzzer target: the request side of every codec that reads a caller's
// body, each request translator included: chat completions to Anthropic
// messages and to Gemini generateContent, messages to chat completions (and
// on through the chat shape to Gemini), embeddings to Gemini
// embedContent / batchEmbedContents, and the native rewrites (chat,
// messages, embeddings, images, speech; the transcription's model splice).
// The body goes through RequestDoc::parse first, as the gateway's does.
// (The response side of the same translators is fuzz_response's.)
//
// Input: byte 0 picks the API and provider type, byte 1 the provider's name
// of the model (one of a list, or the caller's own), the rest is the body.
// What must hold: no crash, no read past a bound; a refusal says why; an
// accepted request has a path below the provider's base ('/'-led, no
// fragment, a Gemini model percent-encoded into one segment), a body that is
// one JSON document (or the caller's bytes with a splice in bounds), no
// CR, LF or NUL in a header, and the provider key nowhere but its header.
// /v1/responses too: native to OpenAI-type providers, translated to
// Anthropic and Gemini ones.
#include <cstdint>
#include <string>

#include "core/codec/codec.h"
#include "core/http/multipart.h"
#include "fuzz_util.h"
#include "json_mutator.h"

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

struct Combo {
    CodecKind kind;
    ProviderType provider;
};

constexpr Combo kCombos[] = {
    {CodecKind::OpenAIChat, ProviderType::OpenAI},       {CodecKind::OpenAIChat, ProviderType::Anthropic},
    {CodecKind::OpenAIChat, ProviderType::Gemini},       {CodecKind::AnthropicMessages, ProviderType::Anthropic},
    {CodecKind::AnthropicMessages, ProviderType::OpenAI}, {CodecKind::AnthropicMessages, ProviderType::Gemini},
    {CodecKind::OpenAIEmbeddings, ProviderType::OpenAI}, {CodecKind::OpenAIEmbeddings, ProviderType::Gemini},
    {CodecKind::OpenAIImages, ProviderType::OpenAI},     {CodecKind::OpenAISpeech, ProviderType::OpenAI},
    {CodecKind::OpenAITranscription, ProviderType::OpenAI},
    {CodecKind::OpenAIResponses, ProviderType::OpenAI},  {CodecKind::OpenAIResponses, ProviderType::Anthropic},
    {CodecKind::OpenAIResponses, ProviderType::Gemini},
};
constexpr const char* kModels[] = {"gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.0-flash", "text-embedding-3-small",
                                   "", ".", "..", "a/b", "m?x#y", "models/gemini-pro", "m\r\nX-Injected: 1",
                                   "m%2F..%2F", "\xff\xfe", nullptr /* the caller's own model */};
constexpr const char* kKey = "sk-fuzz-PROVIDERKEY-0123456789";
constexpr const char* kBoundary = "XyZ";

bool clean_header(const std::string& s) {
    for (char c : s) {
        if (c == '\r' || c == '\n' || c == '\0') return false;
    }
    return true;
}

// The model segment of a Gemini path: "/v1beta/models/<encoded>:<action>".
void check_gemini_path(const std::string& path) {
    const std::string prefix = "/v1beta/models/";
    FUZZ_CHECK(path.compare(0, prefix.size(), prefix) == 0);
    const std::size_t colon = path.find(':', prefix.size());
    FUZZ_CHECK(colon != std::string::npos);
    for (std::size_t i = prefix.size(); i < colon; ++i) {
        const char c = path[i];
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '.' || c == '_' || c == '~' || c == '%';
        FUZZ_CHECK(ok);
    }
    const std::string action = path.substr(colon + 1);
    FUZZ_CHECK(action == "generateContent" || action == "streamGenerateContent?alt=sse" || action == "embedContent" ||
               action == "batchEmbedContents");
}

}  // namespace

LLMGW_JSON_MUTATOR(2, "model", "messages", "role", "content", "system", "user", "assistant", "tool", "developer",
                   "type", "text", "image_url", "url", "tools", "tool_choice", "function", "name", "parameters",
                   "arguments", "tool_calls", "tool_call_id", "id", "stream", "stream_options", "include_usage",
                   "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "stop", "n", "seed",
                   "response_format", "json_schema", "schema", "reasoning_effort", "thinking", "budget_tokens",
                   "tool_use", "tool_result", "tool_use_id", "is_error", "source", "media_type", "data", "image",
                   "input", "input_schema", "dimensions", "encoding_format", "base64", "metadata", "user_id",
                   "stop_sequences", "disable_parallel_tool_use", "parallel_tool_calls", "logprobs", "modalities",
                   "audio", "prediction", "refusal", "redacted_thinking", "cache_control", "voice", "prompt", "size")

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const Combo& combo = kCombos[data[0] % (sizeof(kCombos) / sizeof(kCombos[0]))];
    const std::string body(reinterpret_cast<const char*>(data) + 2, size - 2);

    std::string err;
    std::unique_ptr<RequestDoc> doc;
    FormScan form;
    std::string content_type = "application/json";
    if (combo.kind == CodecKind::OpenAITranscription) {
        form = scan_form_data(body, kBoundary);
        if (form.status != FormStatus::Ok) return 0;
        content_type = std::string("multipart/form-data; boundary=") + kBoundary;
    } else {
        doc = RequestDoc::parse(body, err);
        if (!doc) {
            FUZZ_CHECK(!err.empty());
            return 0;
        }
    }
    const char* pick = kModels[data[1] % (sizeof(kModels) / sizeof(kModels[0]))];
    const std::string upstream_model =
        pick != nullptr ? pick : doc ? doc->info().model : form.model;

    CodecOptions opt;
    opt.provider = combo.provider;
    opt.client_stream = doc && doc->info().stream;
    opt.client_wants_usage = doc && doc->info().client_wants_usage;
    opt.client_model = doc ? doc->info().model : form.model;
    opt.created = 1;
    auto codec = make_codec(combo.kind, opt);
    FUZZ_CHECK(codec != nullptr);

    CallerRequest in;
    in.body = body;
    in.doc = doc.get();
    in.upstream_model = upstream_model;
    in.path = "/v1/x";
    in.provider_key = kKey;
    in.content_type = content_type;
    in.form = doc ? nullptr : &form;
    UpstreamRequest up;
    err.clear();
    if (!codec->build_request(in, up, err)) {
        FUZZ_CHECK(!err.empty());
        FUZZ_CHECK(up.refuse_status == 0 || up.refuse_status == 400);
        return 0;
    }
    FUZZ_CHECK(!up.path.empty() && up.path[0] == '/');
    FUZZ_CHECK(up.path.find('#') == std::string::npos);
    if (combo.provider == ProviderType::Gemini) check_gemini_path(up.path);
    for (const auto& [name, value] : up.headers) {
        FUZZ_CHECK(!name.empty() && clean_header(name) && clean_header(value));
        if (name != up.credential_header) FUZZ_CHECK(!contains(value, kKey));
    }
    const bool key_in_body = contains(body, kKey) || contains(upstream_model, kKey);
    if (!key_in_body) {
        FUZZ_CHECK(!contains(up.path, kKey));
        FUZZ_CHECK(!contains(up.body, kKey));
    }
    if (up.caller_body) {
        FUZZ_CHECK(up.splice_at <= body.size() && up.splice_len <= body.size() - up.splice_at);
        if (combo.kind == CodecKind::OpenAITranscription) {
            std::string sent = body.substr(0, up.splice_at) + up.body + body.substr(up.splice_at + up.splice_len);
            // the model field now says the provider's model
            const FormScan again = scan_form_data(sent, kBoundary);
            if (again.status == FormStatus::Ok && !form.model_truncated) FUZZ_CHECK(again.model == upstream_model);
        }
    } else {
        FUZZ_CHECK(is_json(up.body));
    }
    return 0;
}
