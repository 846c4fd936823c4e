// How each provider type carries its key, and the headers its API requires.
#include "core/codec/codec_impl.h"

namespace llmgw {

void add_provider_auth(ProviderType type, std::string_view key, UpstreamRequest& out) {
    switch (type) {
    case ProviderType::Anthropic:
        out.headers.emplace_back("anthropic-version", kAnthropicVersion);
        if (key.empty()) return;
        out.credential_header = "x-api-key";
        out.headers.emplace_back("x-api-key", std::string(key));
        return;
    case ProviderType::Gemini:
        if (key.empty()) return;
        out.credential_header = "x-goog-api-key";
        out.headers.emplace_back("x-goog-api-key", std::string(key));
        return;
    case ProviderType::OpenAI:
        if (key.empty()) return;
        out.credential_header = "Authorization";
        out.headers.emplace_back("Authorization", "Bearer " + std::string(key));
        return;
    }
}

std::string_view openai_error_type(int status) {
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    default: break;
    }
    return status >= 500 ? "server_error" : "invalid_request_error";
}

}  // namespace llmgw
