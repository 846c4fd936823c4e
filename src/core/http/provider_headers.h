// Response headers of a provider that describe the operator's own account
// with it, not the caller's allowance at the gateway: its rate-limit state
// (OpenAI's x-ratelimit-*, Anthropic's anthropic-ratelimit-*, the IETF
// RateLimit and RateLimit-Policy fields). The gateway never relays them
// (no nginx).
#pragma once
#include <string_view>

#include "core/http/ascii.h"

namespace llmgw {

inline bool is_provider_rate_limit_header(std::string_view name) {
    return ascii_istarts_with(name, "x-ratelimit-") || ascii_istarts_with(name, "anthropic-ratelimit-") ||
           ascii_iequals(name, "ratelimit") || ascii_iequals(name, "ratelimit-policy");
}

}  // namespace llmgw
