// Which codec a route's provider call uses (None: the route calls no provider).
#pragma once

namespace llmgw {

enum class CodecKind { None, OpenAIChat, OpenAIEmbeddings, Passthrough };

}  // namespace llmgw
