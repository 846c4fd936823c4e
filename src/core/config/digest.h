// Key digests and constant-time comparison (OpenSSL, no nginx).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmgw {

using Digest = std::array<std::uint8_t, 32>;

Digest sha256(std::string_view data);
std::string to_hex(const Digest& d);
// Parses 64 hex digits (either case). Returns false on anything else.
bool from_hex(std::string_view hex, Digest& out);
// Constant time in the length of the arrays.
bool digest_equal(const Digest& a, const Digest& b);

}  // namespace llmgw
