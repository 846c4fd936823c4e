// The gateway's error envelope (OpenAI style), used for every error the
// gateway itself generates:
//   {"error":{"message":"...","type":"...","code":"..."|null,"param":null}}
#pragma once
#include <string>
#include <string_view>

namespace llmgw {

// code may be empty, which is rendered as null.
std::string error_json(std::string_view message, std::string_view type, std::string_view code = {});

// The same envelope as one SSE event, "event: error\ndata: {...}\n\n".
std::string error_sse_event(std::string_view message, std::string_view type, std::string_view code = {});

// Anthropic's error envelope, for callers of the Anthropic-shaped route
// (/v1/messages): {"type":"error","error":{"type":"...","message":"..."}};
// an empty type is written as api_error.
std::string anthropic_error_json(std::string_view type, std::string_view message);
// Anthropic's error type for an HTTP status (400 invalid_request_error, 401
// authentication_error, 402 billing_error, 403 permission_error, 404
// not_found_error, 413 request_too_large, 429 rate_limit_error, 529
// overloaded_error, other 4xx invalid_request_error, other 5xx api_error).
std::string_view anthropic_error_type(int status);
// Anthropic's error type for one of the gateway's own error codes in a
// stream or a body of its own (budget_exceeded rate_limit_error, the rest
// api_error).
std::string_view anthropic_error_type_for_code(std::string_view code);

// JSON string escaping (quotes not included), valid UTF-8 out: invalid bytes
// become U+FFFD (one per maximal invalid subpart). Control characters become
// \n \r \t \b \f or \u00XX. All three functions return "" (append nothing
// more) only when memory runs out.
void json_escape_append(std::string& out, std::string_view s);

// Whether s is well-formed UTF-8 (no overlongs, surrogates or code points
// over U+10FFFF), and s with every maximal invalid subpart replaced by U+FFFD.
bool is_valid_utf8(std::string_view s);
std::string to_valid_utf8(std::string_view s);

}  // namespace llmgw
