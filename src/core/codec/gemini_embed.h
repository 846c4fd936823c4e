// Gemini embeddings (no nginx): an OpenAI embeddings request turned into
// embedContent / batchEmbedContents, and the answer turned back into an
// OpenAI embeddings response. See docs/translation-gemini.md.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "core/codec/openai.h"

namespace llmgw {

// The caller's OpenAI embeddings request (a parsed JSON object) -> the body
// of embedContent (input is one string: batch=0) or batchEmbedContents
// (input is an array of strings: batch = their number, each request naming
// "models/<model>"). dimensions -> outputDimensionality. false + err (one
// sentence for a 400 naming the parameter): token-id inputs, wrong types.
bool gemini_embed_request_from_openai(const rapidjson::Value& req, std::string_view model, std::size_t& batch,
        std::string& body, std::string& err);

// The Gemini answer -> an OpenAI embeddings response:
// {"object":"list","data":[{"object":"embedding","index":i,"embedding":[...]}],
//  "model":client_model,"usage":{"prompt_tokens":0,"total_tokens":0}}.
// base64: each vector as the base64 of its little-endian float32 values.
// usage is set present=false (Gemini reports no token counts for
// embeddings). batch: 0 for embedContent's answer, else the number of
// inputs sent to batchEmbedContents, which must be the number of vectors.
// false + err (for the log) when body is not a valid answer to the request.
bool openai_embeddings_from_gemini(std::string_view body, std::size_t batch, bool base64, std::string_view client_model,
        std::string& out, Usage& usage, std::string& err);

}  // namespace llmgw
