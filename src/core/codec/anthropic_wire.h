// The Anthropic provider side of translation (no nginx): an OpenAI chat
// request -> an Anthropic Messages API request, and the Messages API's
// answers (whole and SSE events) -> the chat IR.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "core/codec/chat_ir.h"

namespace llmgw {

struct AnthropicRequestOptions {
    std::int64_t default_max_tokens = 4096;   // Anthropic requires max_tokens
};

// The caller's OpenAI chat completions request (a parsed JSON object) -> an
// Anthropic Messages request body for model. false + err (one sentence for a
// 400 to the caller, naming the parameter) when it cannot be expressed.
bool anthropic_request_from_openai(const rapidjson::Value& req, std::string_view model,
                                   const AnthropicRequestOptions& opt, std::string& body, std::string& err);

// Anthropic Messages API answers -> IR.
std::unique_ptr<ResponseReader> make_anthropic_reader();

}  // namespace llmgw
