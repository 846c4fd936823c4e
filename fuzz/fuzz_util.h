// Helpers shared by the fuzz targets (not part of the gateway).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

namespace llmgw {
namespace fuzz {

// Stops the run with a message on stderr (the fuzzer records the input).
[[noreturn]] inline void fail(const char* what) {
    __builtin_fprintf(stderr, "fuzz invariant broken: %s\n", what);
    __builtin_trap();
}
#define FUZZ_CHECK(cond)                                  \
    do {                                                  \
        if (!(cond)) ::llmgw::fuzz::fail(#cond);          \
    } while (0)

// Two strings that must be equal; both printed (at most 400 bytes each) when not.
inline void check_equal(const std::string& a, const std::string& b, const char* what) {
    if (a == b) return;
    __builtin_fprintf(stderr, "fuzz invariant broken: %s\n  left:  %.400s\n  right: %.400s\n", what, a.c_str(),
                      b.c_str());
    __builtin_trap();
}
#define FUZZ_CHECK_EQ(a, b) ::llmgw::fuzz::check_equal((a), (b), #a " == " #b)

// One JSON document (RapidJSON's reading, iterative: no recursion).
inline bool is_json(std::string_view s) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseIterativeFlag>(s.data(), s.size());
    return !d.HasParseError();
}

inline bool contains(std::string_view hay, std::string_view needle) {
    return hay.find(needle) != std::string_view::npos;
}

// A small deterministic generator (xorshift64*), for splits and choices
// derived from the input, so a recorded input replays the same way.
class Rng {
public:
    explicit Rng(std::uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ULL + 1) {}
    std::uint64_t next() {
        s_ ^= s_ >> 12;
        s_ ^= s_ << 25;
        s_ ^= s_ >> 27;
        return s_ * 0x2545F4914F6CDD1DULL;
    }
    // 0..n-1 (n > 0)
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

private:
    std::uint64_t s_;
};

// The sizes a body is cut into as it arrives: all of it at once (mode 0),
// every byte alone (1), a fixed size (2), or random sizes from 1 to 64 and
// now and then a large piece (3).
class Splitter {
public:
    Splitter(std::uint8_t mode, std::uint8_t seed) : mode_(mode % 4), fixed_(1 + seed % 64), rng_(seed) {}
    std::size_t next(std::size_t left) {
        std::size_t n = left;
        switch (mode_) {
        case 0: break;
        case 1: n = 1; break;
        case 2: n = fixed_; break;
        default: n = rng_.below(8) == 0 ? 1 + rng_.below(4096) : 1 + rng_.below(64); break;
        }
        return n < left ? n : left;
    }

private:
    std::uint8_t mode_;
    std::size_t fixed_;
    Rng rng_;
};

// Percent-decoding as nginx's ngx_unescape_uri reads a query argument
// (a '%' not followed by two hex digits stays as it is).
inline std::string percent_decode(std::string_view s) {
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
            i += 2;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

// Valid UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
inline bool valid_utf8(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t n = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + n >= s.size()) return false;
        for (std::size_t k = 1; k <= n; ++k) {
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
            return false;
        }
        i += n + 1;
    }
    return true;
}

}  // namespace fuzz
}  // namespace llmgw
