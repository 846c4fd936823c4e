// A RapidJSON SAX handler base for token counts (no nginx): every number
// event becomes number(int64), with -1 for what is not a count (negative,
// over INT64_MAX, a fraction or exponent). Use: struct H : CountHandler<H>
// with a public bool number(std::int64_t).
#pragma once
#include <cstdint>

#include <rapidjson/reader.h>

namespace llmgw {

template <class Derived>
struct CountHandler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Derived> {
    bool Int(int v) { return self().number(v >= 0 ? v : -1); }
    bool Uint(unsigned v) { return self().number(v); }
    bool Int64(std::int64_t v) { return self().number(v >= 0 ? v : -1); }
    bool Uint64(std::uint64_t v) {
        return self().number(v <= static_cast<std::uint64_t>(INT64_MAX) ? static_cast<std::int64_t>(v) : -1);
    }
    bool Double(double) { return self().number(-1); }   // fractions and exponents are not counts

private:
    Derived& self() { return static_cast<Derived&>(*this); }
};

}  // namespace llmgw
