// Checks of JSON text made before RapidJSON parses it (no nginx): how deep
// it nests, and whether its numbers are safe for RapidJSON's full-precision
// parsing; and that parsing, guarded.
//
// RapidJSON 1.1 (Debian's rapidjson-dev) reads past its table of cached
// powers of ten for a non-zero number below about 1e-330 written with many
// digits (its underflow check counts the digits, not where the decimal point
// is): "0.1234567890123456789012345e-330" indexes the table with a wrapped
// negative exponent; and a zero written as "0e-30" reaches its normalization
// of a zero significand (an endless shift, undefined behaviour). Found by
// fuzz/fuzz_request.cpp. Such numbers are zero or infinite as doubles; a
// document holding one is refused before it is parsed. So is a number whose
// significant digits begin 18446744073709551615 (2^64-1) then 5 to 9: its
// rounding wraps the 64-bit significand to zero, normalized as above into a
// garbage value (18446744073709551615.73709551615 read as -2.5e263; found by
// fuzz_request once its build checked clz(0) again).
#pragma once
#include <string_view>

#include <rapidjson/document.h>

namespace llmgw {

// True when no container in s nests deeper than max (strings skipped with
// memchr, so long base64 strings cost little). Exact for valid JSON; for
// invalid JSON it bounds what the parser can reach before its first error.
// Callers bound what recursive code (a writer, a copy) may meet later.
bool json_text_depth_at_most(std::string_view s, int max);

// False when a number literal of the JSON text (strings skipped) is non-zero
// and below 1e-326 (zero as a double: the smallest double is 4.9e-324) or
// above DBL_MAX, 1.7976931348623157e308 (infinity: RapidJSON's big-integer
// rounding asserts there, and an assert aborts the worker), or is a zero
// written with a power of ten beyond 1e-22 or 1e22 ("0e-30", "0.000…" with
// 23 zeros), or has significant digits beginning 18446744073709551615 then
// 5 to 9 (see above). The text is not otherwise checked.
bool json_numbers_representable(std::string_view json);

// Parses s into doc with full precision (and Flags) when its numbers are
// safe for it; a refused text leaves doc in an error state as a parse error
// would. True when doc holds s.
template <unsigned Flags = rapidjson::kParseIterativeFlag, typename Doc>
bool parse_full_precision(Doc& doc, std::string_view s) {
    if (!json_numbers_representable(s)) {
        doc.template Parse<Flags>("", 0);   // an empty document: an error
        return false;
    }
    doc.template Parse<Flags | rapidjson::kParseFullPrecisionFlag>(s.data(), s.size());
    return !doc.HasParseError();
}

}  // namespace llmgw
