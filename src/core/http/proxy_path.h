// The proxy routes' paths (no nginx): <prefix>/<name>[/<path>] split into
// the provider's or target's name and the path below it, and the check that
// keeps that path below the provider's base (docs/passthrough.md, docs/mcp.md).
#pragma once
#include <cstddef>
#include <string_view>

namespace llmgw {

// The name after the location's prefix (prefix_len bytes of uri) and the
// path below it ("" or beginning with '/'); views into uri.
void split_proxy_uri(std::string_view uri, std::size_t prefix_len, std::string_view& name, std::string_view& path);

// Why a path below a provider's base is refused, "" when it is not. The path
// is nginx's normalised URI (percent-decoded, dot segments resolved): refused
// when it is empty or does not begin with '/', begins with "//", holds a URL
// ("://", or a ':' in its first segment), a control byte, '\', '?' or '#',
// or a "." or ".." segment.
const char* proxy_path_problem(std::string_view path);

}  // namespace llmgw
