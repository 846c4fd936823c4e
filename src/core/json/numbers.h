// A guard in front of RapidJSON's full-precision number parsing (no nginx).
// RapidJSON 1.1 (Debian's rapidjson-dev) reads past its table of cached
// powers of ten for a non-zero number below about 1e-330 written with many
// digits (its underflow check counts the digits, not where the decimal point
// is): "0.1234567890123456789012345e-330" indexes the table with a wrapped
// negative exponent; and a zero written as "0e-30" reaches its normalization
// of a zero significand (an endless shift, undefined behaviour). Found by
// fuzz/fuzz_request.cpp. Such numbers are zero or infinite as doubles; a
// document holding one is refused before it is parsed.
#pragma once
#include <string_view>

namespace llmgw {

// False when a number literal of the JSON text (strings skipped) is non-zero
// and below 1e-326 (zero as a double: the smallest double is 4.9e-324) or
// above 1e310 (infinity), or is a zero written with a power of ten beyond
// 1e-22 or 1e22 ("0e-30", "0.000…" with 23 zeros). The text is not otherwise
// checked.
bool json_numbers_representable(std::string_view json);

}  // namespace llmgw
