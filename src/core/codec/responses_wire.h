// OpenAI's Responses API (POST /v1/responses) on both sides of the chat IR
// (no nginx): the caller's request turned into an OpenAI chat request (the
// pivot the Anthropic and Gemini request builders take), a reader of an
// OpenAI-type provider's Responses answers (whole and the typed SSE events)
// into IR, and a writer of Responses answers from IR for translated routes.
// The table is docs/translation-responses.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "core/codec/chat_ir.h"
#include "core/codec/provider_type.h"

namespace llmgw {

// The caller's Responses request (a parsed JSON object) -> an OpenAI chat
// completions request body for model, to be built further for a provider of
// type target (Anthropic or Gemini). false with err (one sentence for a 400,
// naming the Responses parameter) when the request cannot be translated:
// what needs the provider's server-side state (previous_response_id,
// conversation, prompt, item_reference, store: true, background: true),
// built-in tools, and what the target type cannot express. Never throws.
bool chat_request_from_responses(const rapidjson::Value& req, std::string_view model, ProviderType target,
                                 std::string& body, std::string& err);

// Responses answers of an OpenAI-type provider -> IR: a response object, or
// the events of a stream (response.created ... response.completed). Usage:
// prompt = input_tokens (cached ones included), completion = output_tokens
// (reasoning included). complete() once response.completed or
// response.incomplete was read; response.failed and error events fail.
std::unique_ptr<ResponseReader> make_responses_reader();

// IR -> Responses answers: a response object, or the typed event stream
// (event: <type> lines, sequence numbers from 0). max_output_bytes bounds
// the output the stream keeps for its closing response.completed (the
// whole-answer bound); past it the stream ends with an error event.
std::unique_ptr<ResponseWriter> make_responses_writer(const WriterOptions& opt, std::size_t max_output_bytes);

// The error event of a Responses stream: "event: error" with the documented
// fields (code, message, param, sequence_number) and the error object too,
// which the official clients raise as an API error.
std::string responses_error_event(std::string_view message, std::string_view type, std::string_view code,
                                  std::int64_t sequence_number);

}  // namespace llmgw
