// Session ids of the federated /mcp endpoint (no nginx): sealed, so that any
// worker of any replica holding the same key continues a session without
// shared per-session memory, and a client can neither read nor forge one.
//
//   token = "g1." base64url( nonce[12] | AES-256-GCM(payload) | tag[16] )
//   payload = "1\n" issued "\n" protocol "\n" user
//   key = SHA-256("llm-gateway mcp session v1\n" secret); the AAD is "g1".
//
// Backend sessions are opened and closed within each federated call (the
// handshake of docs/mcp.md), so a session carries only what the gateway
// needs to continue it: the user it was issued to, the negotiated protocol
// version and the time it was issued.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmgw {

struct McpSession {
    std::string user;
    std::string protocol;
    std::int64_t issued = 0;   // unix seconds
};

class SessionSealer {
public:
    explicit SessionSealer(std::string_view secret);
    // "" when the sealing failed (no randomness).
    std::string seal(const McpSession& s) const;
    // false for anything not sealed by this key, altered, or malformed.
    bool open(std::string_view token, McpSession& out) const;

    static constexpr std::size_t kMaxTokenBytes = 1024;

private:
    std::array<unsigned char, 32> key_{};
};

std::string base64url_encode(std::string_view bytes);
// false on a character outside the alphabet or an impossible length.
bool base64url_decode(std::string_view text, std::string& out);

}  // namespace llmgw
