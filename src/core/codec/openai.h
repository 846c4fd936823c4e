// OpenAI wire format: request inspection and rewriting, usage extraction,
// stream chunk inspection (no nginx). The provider-type seam lives in
// provider.h; Anthropic and Gemini translators plug in beside this file.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace llmgw {

struct Usage {
    std::int64_t prompt_tokens = 0;
    std::int64_t completion_tokens = 0;  // includes reasoning/thinking tokens
    bool present = false;                // false: the upstream reported none
    // A count the upstream reported is not one: negative, a fraction or an
    // exponent, above 2^63-1, or not a number (present is then true, and the
    // counts hold only the valid ones). Billed as unread usage: estimated,
    // as an implausible usage is (usage_plausible).
    bool malformed = false;
};

struct RequestInfo {
    std::string model;               // as the client sent it
    bool stream = false;             // "stream": true
    bool client_wants_usage = false; // "stream_options": {"include_usage": true}
    // The most output the request allows: the largest positive integer of
    // "max_tokens", "max_completion_tokens" and "max_output_tokens", times
    // "n" (choices, 1..128) when given; 0 when it names none.
    std::int64_t max_output = 0;
    // "temperature" when it is a number (the response cache's bound,
    // docs/cache.md); -1 when absent, null or not a number.
    double temperature = -1;
};

// A parsed JSON request body. parse() returns nullptr and sets err (a sentence
// fit for the client) when the body is not a JSON object, has no "model"
// string, or "model" is empty, or "stream" is present and not a boolean
// ("stream": null reads as false, as OpenAI reads it). Also refused, so the
// gateway and the upstream cannot read different values: more than one
// "model", "stream" or "stream_options" member (or "include_usage" inside
// stream_options); and nesting deeper than 256 (stack safety).
class RequestDoc {
public:
    static std::unique_ptr<RequestDoc> parse(std::string_view body, std::string& err);
    virtual ~RequestDoc() = default;
    virtual const RequestInfo& info() const = 0;
    // The body to send upstream: "model" replaced by upstream_model; when the
    // request streams and force_stream_usage is set, stream_options.include_usage
    // is true (other stream_options members kept; a non-object stream_options
    // is replaced). Compact JSON, members in the client's order. "" only when
    // memory runs out.
    virtual std::string rewrite(std::string_view upstream_model, bool force_stream_usage) const = 0;
};

// A complete (non-stream) chat completion or embeddings response, read once:
// false when the body is not one valid JSON document. Its usage:
// usage.prompt_tokens, usage.completion_tokens (absent for embeddings: 0);
// present=false when the body is not JSON or carries no usage object, or
// the object has neither count. A count that is not an integer from 0 to
// 2^63-1 (negative, 10.7, 1e30, 2^63, a string) makes the usage malformed
// (present, Usage::malformed); null is absent.
// completion_tokens_details.reasoning_tokens is already part of
// completion_tokens and is not added.
bool read_whole_response(std::string_view json_body, Usage& usage);

enum class ChunkKind {
    Data,       // an ordinary chunk (may carry usage too; usage is then filled)
    UsageOnly,  // "choices": [] with a usage object: the include_usage chunk
    Done,       // the literal "[DONE]"
    Error,      // a JSON object with an "error" member (not null)
    Other,      // not JSON / not an object
};

// Inspects the data of one SSE event of a chat completions stream. usage is
// reset first, then filled from a usage object (Data, UsageOnly); "usage":
// null, sent on ordinary chunks when include_usage is on, leaves it absent.
// text_bytes (when given): the bytes of completion text in its choices
// (content, reasoning_content, refusal, tool-call arguments).
ChunkKind inspect_stream_chunk(std::string_view data, Usage& usage, std::int64_t* text_bytes = nullptr);

// Text from an upstream error body fit for logs and events: the
// error.message when the body is an OpenAI-style error ({"error":"..."} and
// vLLM's top-level "message" accepted too), else a fixed text; always
// scrubbed (see scrub_secrets), control characters turned into spaces, and
// at most 300 bytes (cut at a UTF-8 character boundary).
std::string upstream_error_text(std::string_view body);

// Removes credentials from free text: "Bearer <x>", "sk-..." style keys
// (sk-ant-... included; Google "AIza..." keys too), the values of "key=<x>"
// style parameters (names ending in key, token, secret or password; sig, signature) and
// URL userinfo ("scheme://user:pass@host") become "[redacted]". A hand
// scanner, linear in the text.
std::string scrub_secrets(std::string_view text);

}  // namespace llmgw
