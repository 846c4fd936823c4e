// Checks of JSON text before it is parsed (see text_checks.h).
#include "core/json/text_checks.h"

#include <cstring>

namespace llmgw {
namespace {

bool digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool json_text_depth_at_most(std::string_view s, int max) {
    const char* p = s.data();
    const char* end = p + s.size();
    int depth = 0;
    while (p < end) {
        const char c = *p++;
        if (c == '"') {
            for (;;) {
                const char* q = static_cast<const char*>(std::memchr(p, '"', static_cast<std::size_t>(end - p)));
                if (q == nullptr) return true;  // unterminated: the parser fails
                const char* b = q;
                while (b > p && b[-1] == '\\') --b;
                p = q + 1;
                if (((q - b) & 1) == 0) break;  // not escaped: end of string
            }
        } else if (c == '{' || c == '[') {
            if (++depth > max) return false;
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
    return true;
}

namespace {

// DBL_MAX's significant digits (1.7976931348623157e308).
constexpr std::string_view kMaxDigits = "17976931348623157";

// Whether the significant digits sig (then a non-zero digit when more) of a
// number of the same magnitude as DBL_MAX are above DBL_MAX's.
bool above_max(std::string_view sig, bool more) {
    for (std::size_t k = 0; k < sig.size() && k < kMaxDigits.size(); ++k) {
        if (sig[k] != kMaxDigits[k]) return sig[k] > kMaxDigits[k];
    }
    if (sig.size() < kMaxDigits.size()) return false;   // a prefix: not above
    for (std::size_t k = kMaxDigits.size(); k < sig.size(); ++k) {
        if (sig[k] != '0') return true;
    }
    return more;
}

// 2^64-1: RapidJSON keeps a number's first significant digits in 64 bits
// and rounds up on the next digit; after these 20 digits, a 5 to 9 wraps
// its significand to zero, which it then normalizes (undefined behaviour:
// clz(0), shifts by 64 or more) into a garbage value ("18446744073709551615.7"
// read as -2.5e263).
constexpr std::string_view kWrapDigits = "18446744073709551615";

}  // namespace

bool json_numbers_representable(std::string_view s) {
    // A non-zero literal is refused below 1e-326 (zero as a double) and above
    // DBL_MAX (infinity): RapidJSON indexes its table at the magnitude less 19
    // or 20 digits, which stays in range from -348 to +340. A zero is refused
    // when written beyond 1e-22 or 1e22 (RapidJSON then normalizes a zero
    // significand, which never ends well).
    constexpr long kLowest = -325, kHighest = 309, kZeroPower = 22;
    constexpr long kSaturate = 1000000;   // exponents are summed up to this much
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        const char c = s[i];
        if (c == '"') {   // skip a string
            for (++i; i < n && s[i] != '"'; ++i) {
                if (s[i] == '\\') ++i;
            }
            ++i;
            continue;
        }
        if (c != '-' && !digit(c)) {
            ++i;
            continue;
        }
        // A number: [-] int [. frac] [e|E [+|-] exp]. magnitude: the power of
        // ten of its first significant digit, plus one.
        if (c == '-') ++i;
        long magnitude = 0, fraction = 0;
        bool nonzero = false;
        // The first significant digits, compared with DBL_MAX's near the top.
        char sig[kMaxDigits.size() + 1];
        std::size_t nsig = 0;
        bool more = false;   // a non-zero digit after those
        // The first 21 significant digits, compared with kWrapDigits.
        char lead[kWrapDigits.size() + 1];
        std::size_t nlead = 0;
        auto keep = [&](char d) {
            if (nlead < sizeof lead) lead[nlead++] = d;
            if (nsig < sizeof sig) {
                sig[nsig++] = d;
            } else if (d != '0') {
                more = true;
            }
        };
        for (; i < n && digit(s[i]); ++i) {
            if (s[i] != '0') nonzero = true;
            if (nonzero && magnitude < kSaturate) ++magnitude;
            if (nonzero) keep(s[i]);
        }
        if (i < n && s[i] == '.') {
            for (++i; i < n && digit(s[i]); ++i) {
                if (fraction < kSaturate) ++fraction;
                if (nonzero) {
                    keep(s[i]);
                    continue;
                }
                if (s[i] != '0') {
                    nonzero = true;
                    keep(s[i]);
                } else if (magnitude > -kSaturate) {
                    --magnitude;
                }
            }
        }
        long exp = 0;
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
            ++i;
            bool negative = false;
            if (i < n && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
            for (; i < n && digit(s[i]); ++i) {
                if (exp < kSaturate) exp = exp * 10 + (s[i] - '0');
            }
            if (negative) exp = -exp;
        }
        if (nonzero && (magnitude + exp < kLowest || magnitude + exp > kHighest)) return false;
        // Between 1e308 and 1e309: above DBL_MAX is infinity, where
        // RapidJSON's big-integer rounding asserts (3.769e308 aborted a
        // worker: found by fuzz/fuzz_request.cpp).
        if (nonzero && magnitude + exp == kHighest && above_max(std::string_view(sig, nsig), more)) return false;
        if (!nonzero && (exp - fraction < -kZeroPower || exp - fraction > kZeroPower)) return false;
        if (nlead == sizeof lead && std::string_view(lead, kWrapDigits.size()) == kWrapDigits &&
            lead[kWrapDigits.size()] >= '5') {
            return false;
        }
    }
    return true;
}

}  // namespace llmgw
