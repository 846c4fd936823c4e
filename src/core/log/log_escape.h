// Escaping of values written into error.log lines.
//
// Names, paths, models and texts that come from callers, providers or the
// users file are escaped before they reach a log line, so that no value can
// end a line, start a forged one or close the quotes around itself. Bytes are
// escaped as nginx escapes request lines in its access log: every byte below
// 0x20, over 0x7E, and the quote and backslash become \xHH.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace llmgw {

// Longest escaped value / text written into a log line, without the marker.
constexpr std::size_t kLogValueCap = 256;
constexpr std::size_t kLogTextCap = 512;

// Appended when a value was cut at its cap.
constexpr std::string_view kLogCutMarker = "...[cut]";

// A value the module puts into a field (`user="..."`, `path=...`): `"`, `\`,
// control bytes and bytes over 0x7E become \xHH. The result is at most `cap`
// bytes plus the marker; an escape sequence is never split.
std::string log_value(std::string_view in, std::size_t cap = kLogValueCap);

// A message text the module composed itself and which quotes names in it
// (`budget exceeded: user "gina" tokensPerDay 18`): as log_value, but `"`
// stays as it is. Such a text still cannot end the line.
std::string log_text(std::string_view in, std::size_t cap = kLogTextCap);

}  // namespace llmgw
