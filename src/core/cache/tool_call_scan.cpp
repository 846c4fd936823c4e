// The tool-call marks of each provider's answers.
#include "core/cache/tool_call_scan.h"

namespace llmgw {
namespace {

struct Marker {
    std::string_view quoted;   // the JSON string, quotes included
    bool key;                  // before a colon (a member's name); else the value of a "type" member
};

constexpr Marker kChat[] = {{"\"function\"", false}, {"\"function_call\"", true}};
constexpr Marker kResponses[] = {{"\"function_call\"", false},
                                 {"\"custom_tool_call\"", false},
                                 {"\"computer_call\"", false},
                                 {"\"local_shell_call\"", false}};
constexpr Marker kAnthropic[] = {{"\"tool_use\"", false}};
constexpr Marker kGemini[] = {{"\"functionCall\"", true}};

// White space a mark allows on each side of its colon (a pretty-printed
// answer has one); the tail keeps the longest mark with "type" and its colon.
constexpr std::size_t kMaxSpace = 16;
constexpr std::size_t kTail = 64;
static_assert(kTail >= 18 + 6 + 2 * kMaxSpace + 1, "a mark and its context fit in the tail");

bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

template <std::size_t N>
bool any_marker(const Marker (&ms)[N], std::string_view text, bool more_may_follow, bool& undecided) {
    for (const Marker& m : ms) {
        for (std::size_t at = text.find(m.quoted); at != std::string_view::npos; at = text.find(m.quoted, at + 1)) {
            if (m.key) {
                std::size_t i = at + m.quoted.size();
                const std::size_t end = i + kMaxSpace;
                while (i < text.size() && i < end && space(text[i])) ++i;
                if (i == text.size()) {
                    undecided = undecided || more_may_follow;
                    continue;
                }
                if (text[i] == ':') return true;
            } else {
                // The value of a "type" member.
                std::size_t i = at;
                std::size_t n = 0;
                while (i > 0 && n < kMaxSpace && space(text[i - 1])) --i, ++n;
                if (i == 0 || text[i - 1] != ':') continue;
                --i;
                n = 0;
                while (i > 0 && n < kMaxSpace && space(text[i - 1])) --i, ++n;
                constexpr std::string_view kType = "\"type\"";
                if (i >= kType.size() && text.substr(i - kType.size(), kType.size()) == kType) return true;
            }
        }
    }
    return false;
}

}  // namespace

void ToolCallScan::scan(std::string_view text, bool more_may_follow) {
    bool undecided = false;
    switch (wire_) {
    case AnswerWire::None: return;
    case AnswerWire::OpenAIChat: found_ = any_marker(kChat, text, more_may_follow, undecided); break;
    case AnswerWire::Responses: found_ = any_marker(kResponses, text, more_may_follow, undecided); break;
    case AnswerWire::Anthropic: found_ = any_marker(kAnthropic, text, more_may_follow, undecided); break;
    case AnswerWire::Gemini: found_ = any_marker(kGemini, text, more_may_follow, undecided); break;
    }
    (void)undecided;   // a key at the very end is decided with the next piece (it stays in the tail)
}

void ToolCallScan::feed(std::string_view bytes) {
    if (found_ || wire_ == AnswerWire::None || bytes.empty()) return;
    if (tail_.empty()) {
        scan(bytes, true);
    } else {
        // The tail and enough of the new piece for any marker that begins in it;
        // the rest of the piece on its own.
        std::string joined = tail_;
        joined.append(bytes.substr(0, kTail));
        scan(joined, true);
        if (!found_ && bytes.size() > kTail) scan(bytes, true);
    }
    if (bytes.size() >= kTail) {
        tail_.assign(bytes.substr(bytes.size() - kTail));
    } else {
        tail_.append(bytes);
        if (tail_.size() > kTail) tail_.erase(0, tail_.size() - kTail);
    }
}

}  // namespace llmgw
