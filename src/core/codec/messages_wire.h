// The Anthropic Messages API on the client side (no nginx): a caller that
// speaks POST /v1/messages to a route whose provider is OpenAI- or
// Gemini-type. The request pivots through the OpenAI chat request shape; the
// answer is written from IR in Anthropic's shapes (whole message and SSE
// events). The table is in docs/translation-messages.md.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "core/codec/chat_ir.h"
#include "core/json/envelope.h"

namespace llmgw {

// The caller's Anthropic Messages request (a parsed JSON object) -> an OpenAI
// chat completions request body with "model": model, compact JSON, members
// in a fixed order. A streaming caller gets "stream":true and
// "stream_options":{"include_usage":true}. false with err (one sentence for a
// 400 that names the parameter) when the request cannot be translated.
// Never throws.
bool openai_request_from_anthropic(const rapidjson::Value& req, std::string_view model, std::string& body,
                                   std::string& err);

// IR -> the Anthropic Messages response shapes (whole JSON and SSE events).
std::unique_ptr<ResponseWriter> make_anthropic_writer(const WriterOptions& opt);

// anthropic_error_json and anthropic_error_type: core/json/envelope.h.

}  // namespace llmgw
