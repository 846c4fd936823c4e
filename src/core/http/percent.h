// Percent-encoding (RFC 3986): every byte outside the unreserved set
// A-Z a-z 0-9 - . _ ~ written as %XX, uppercase hex. The one home of it:
// model ids in Gemini paths, pagination cursors, store URLs, and the forms a
// configured secret is searched for in relayed answers.
#pragma once
#include <string>
#include <string_view>

namespace llmgw {

// keep_slash: '/' is written as it is (a path).
std::string percent_encode(std::string_view s, bool keep_slash = false);

}  // namespace llmgw
