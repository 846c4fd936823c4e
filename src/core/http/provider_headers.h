// Response headers of a provider that describe the operator's own account
// with it, not the caller's allowance at the gateway: its rate-limit state
// (OpenAI's x-ratelimit-*, Anthropic's anthropic-ratelimit-*, the IETF
// RateLimit and RateLimit-Policy fields). The gateway never relays them
// (no nginx).
#pragma once
#include <cctype>
#include <string_view>

namespace llmgw {

inline bool ascii_iequal_prefix(std::string_view name, std::string_view prefix) {
    if (name.size() < prefix.size()) return false;
    for (std::size_t i = 0; i < prefix.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(name[i])) != prefix[i]) return false;
    }
    return true;
}

inline bool is_provider_rate_limit_header(std::string_view name) {
    return ascii_iequal_prefix(name, "x-ratelimit-") || ascii_iequal_prefix(name, "anthropic-ratelimit-") ||
           (name.size() == 9 && ascii_iequal_prefix(name, "ratelimit")) ||
           (name.size() == 16 && ascii_iequal_prefix(name, "ratelimit-policy"));
}

}  // namespace llmgw
