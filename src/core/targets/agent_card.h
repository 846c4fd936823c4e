// An A2A agent card fetched through the gateway (no nginx): its service
// URLs point at the gateway, so a client that follows the card keeps going
// through it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace llmgw {

// The largest card read (the shell stops reading a card there).
inline constexpr std::size_t kMaxAgentCardBytes = 1 << 20;

// Rewrites "url" and each "additionalInterfaces[].url" (A2A 0.3) and
// "supportedInterfaces[].url" (A2A 1.0) of the card. A URL's
// path below target_path (the agent's configured URL path; "" none) is kept
// and put below gateway_base ("http://host/a2a/<name>"); its query is kept.
// false (err set) when the card is not a JSON object or a URL is not an
// absolute http(s) URL.
bool rewrite_agent_card(std::string_view card, std::string_view target_path, std::string_view gateway_base,
                        std::string& out, std::string& err);

// One URL as the card rewrite maps it.
std::string gateway_url(std::string_view url, std::string_view target_path, std::string_view gateway_base);

// llm_gateway_public_url's value: where clients reach this gateway, as they
// reach it ("https://gateway.example.com", "https://example.com/llm"): an
// http or https scheme, a host (a name, an IPv4 address or an IPv6 one in
// brackets) with an optional port, an optional path; no query, no
// fragment, no user, no space or control byte, at most 2048 bytes. The path's
// trailing '/' is dropped (out). false with err a sentence otherwise.
bool public_base(std::string_view url, std::string& out, std::string& err);

}  // namespace llmgw
