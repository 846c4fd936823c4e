// The wire format a route speaks to its provider: picks the codec.
#pragma once

namespace llmgw {
enum class CodecKind { None, OpenAIChat, OpenAIEmbeddings, Passthrough };
}  // namespace llmgw
