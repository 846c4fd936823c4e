// The API a route speaks to its caller; with the provider's type it picks
// the codec (make_codec).
#pragma once

namespace llmgw {
enum class CodecKind {
    None,
    OpenAIChat,          // POST /v1/chat/completions
    OpenAIEmbeddings,    // POST /v1/embeddings
    AnthropicMessages,   // POST /v1/messages
    OpenAIResponses,     // POST /v1/responses
    OpenAIImages,        // POST /v1/images/generations
    OpenAISpeech,        // POST /v1/audio/speech
    OpenAITranscription, // POST /v1/audio/transcriptions (multipart/form-data)
    Passthrough,         // native provider passthrough
    Relay,               // tool servers and agents: bytes both ways, nothing read (core/codec/relay_codec.cpp)
};
}  // namespace llmgw
