// Provider types: the seam where wire-format translation plugs in. OpenAI
// style providers are spoken natively; Anthropic and Gemini translators come
// with their own files beside openai.h.
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

// Whether this build can route to a provider of that type. Only OpenAI-style
// providers are routed today; the others are accepted by the parser so the
// error names the real limitation.
inline bool provider_type_supported(ProviderType t) { return t == ProviderType::OpenAI; }

}  // namespace llmgw
