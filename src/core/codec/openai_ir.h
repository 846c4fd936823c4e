// The OpenAI chat completions shapes on both sides of the chat IR (no
// nginx): a reader of an OpenAI-type provider's answers (whole and SSE
// chunks) and a writer of OpenAI answers from IR, for the translated routes.
#pragma once
#include <memory>
#include <string_view>

#include "core/codec/chat_ir.h"

namespace llmgw {

std::unique_ptr<ResponseReader> make_openai_reader();
std::unique_ptr<ResponseWriter> make_openai_writer(const WriterOptions& opt);

// The OpenAI finish_reason of an IR reason (None -> "stop").
std::string_view openai_finish_reason(FinishReason f);

}  // namespace llmgw
