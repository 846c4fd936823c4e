// Provider types: each names a wire format (the OpenAI
// codec, the Anthropic and Gemini readers and request builders of this folder).
#pragma once
#include <string_view>

namespace llmgw {

enum class ProviderType { OpenAI, Anthropic, Gemini };

inline bool parse_provider_type(std::string_view s, ProviderType& out) {
    if (s == "openai") { out = ProviderType::OpenAI; return true; }
    if (s == "anthropic") { out = ProviderType::Anthropic; return true; }
    if (s == "gemini") { out = ProviderType::Gemini; return true; }
    return false;
}

inline std::string_view provider_type_name(ProviderType t) {
    switch (t) {
    case ProviderType::OpenAI: return "openai";
    case ProviderType::Anthropic: return "anthropic";
    case ProviderType::Gemini: return "gemini";
    }
    return "openai";
}

}  // namespace llmgw
