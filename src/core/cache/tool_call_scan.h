// Whether a provider's answer calls a tool the caller runs, read as its
// bytes pass (JSON or SSE, in any pieces): the response cache does not store
// such answers unless told to (llm_gateway_cache tool_calls=on). No nginx.
#pragma once
#include <string>
#include <string_view>

namespace llmgw {

// The wire format of the provider's answer.
enum class AnswerWire {
    None,        // never a tool call (embeddings)
    OpenAIChat,  // a tool call's "type": "function"; a legacy "function_call" member
    Responses,   // an output item of type function_call, custom_tool_call, computer_call, local_shell_call
    Anthropic,   // a content block of type tool_use
    Gemini,      // a part with a functionCall member
};

// Marks, not a parser: a marker is a JSON string as the value of a "type"
// member or as a member's name, so text that merely mentions a tool is not
// one (the Responses API echoes its tools as {"type":"function"}: its
// markers are the call items' types only). A "type" of a text that reads
// "tool_use" exactly would be taken for one: when in doubt the answer is
// not stored.
class ToolCallScan {
public:
    explicit ToolCallScan(AnswerWire w) : wire_(w) {}
    void feed(std::string_view bytes);
    bool found() const { return found_; }

private:
    void scan(std::string_view text, bool more_may_follow);
    AnswerWire wire_;
    bool found_ = false;
    std::string tail_;   // the last bytes fed: a marker may straddle two pieces
};

}  // namespace llmgw
