// Gemini wire format (no nginx): the upstream path, the OpenAI chat request
// turned into a GenerateContentRequest, and the reader of Gemini answers
// (whole and streamed) into the chat IR. Embeddings: gemini_embed.h. The
// translation table is docs/translation-gemini.md.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "core/codec/chat_ir.h"

namespace llmgw {

// "/v1beta/models/<model percent-encoded>:<action>". Every byte of the model
// outside A-Z a-z 0-9 - . _ ~ is percent-encoded (uppercase hex), so the
// model can never add a path segment, a query or a fragment. action is one
// of "generateContent", "streamGenerateContent?alt=sse", "embedContent",
// "batchEmbedContents". "" for an empty model, "." or "..", or another action.
std::string gemini_model_path(std::string_view model, std::string_view action);

// The caller's OpenAI chat completions request (a parsed JSON object) -> a
// Gemini GenerateContentRequest body (compact JSON, members in the order
// contents, systemInstruction, tools, toolConfig, generationConfig; the model
// goes in the path). false + err (one sentence for a 400 naming the
// parameter) when the request cannot be translated.
bool gemini_request_from_openai(const rapidjson::Value& req, std::string& body, std::string& err);

// Reader of Gemini GenerateContentResponse bodies: a whole answer, or the
// events of streamGenerateContent?alt=sse (each event's data one
// GenerateContentResponse). Gemini has no end marker: complete() is true once
// a finishReason (or a prompt block) was read; read_event never returns Done.
std::unique_ptr<ResponseReader> make_gemini_reader();

}  // namespace llmgw
