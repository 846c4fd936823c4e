// The secrets the gateway sends upstream (provider keys, tool server and
// agent keys), removed from whatever it relays back (no nginx). A provider
// that echoes the credential it received ("Incorrect API key provided:
// sk-...", a header) must not hand it to the caller. Each occurrence is
// replaced by as many '*' bytes as it has (docs/decisions.md#redaction): the
// lengths stay, so a relayed body keeps the upstream's Content-Length and a
// JSON string stays a JSON string.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmgw {

// The byte an occurrence's every byte becomes.
inline constexpr char kRedactionByte = '*';
// Shorter secrets are not redacted: a placeholder key ("EMPTY", "ollama")
// would mask ordinary words of every answer.
inline constexpr std::size_t kMinRedactedSecret = 8;

// The patterns of a configuration's secrets (immutable once built): each
// secret as it is and, where they differ, as a JSON string escapes it
// (also with "\/") and percent-encoded.
class SecretSet {
public:
    // false (nothing added) when the secret is shorter than kMinRedactedSecret.
    bool add(std::string_view secret);
    bool empty() const { return patterns_.empty(); }
    std::size_t patterns() const { return patterns_.size(); }
    // The longest pattern's length (0: none).
    std::size_t longest() const { return longest_; }

    // Whether s holds an occurrence.
    bool contains(std::string_view s) const;
    // Masks every occurrence in place (overlapping ones too); the number of
    // occurrences.
    std::size_t mask(char* data, std::size_t n) const;
    std::size_t mask(std::string& s) const { return s.empty() ? 0 : mask(&s[0], s.size()); }

    // Every occurrence in data[0, n) as [begin, end), found on the bytes as
    // they are (appended to out, in no particular order).
    void find(const char* data, std::size_t n, std::vector<std::pair<std::size_t, std::size_t>>& out) const;
    // Where the longest suffix of data[0, n) that is a proper prefix of a
    // pattern begins (n: none); only the last longest() - 1 bytes are looked at.
    std::size_t partial_at(const char* data, std::size_t n) const;

private:
    void add_pattern(std::string p);
    void build_shifts();
    // Calls hit(begin, end) for every occurrence; stops when it returns false.
    template <class Hit>
    void scan(const char* data, std::size_t n, Hit hit) const;

    std::vector<std::string> patterns_;
    std::size_t longest_ = 0;
    bool first_[256] = {};   // bytes a pattern begins with
    // The search (Wu-Manber, blocks of two bytes): every pattern's first
    // window_ bytes (the shortest pattern's length, at most 255) are looked
    // for at once; a block of text no window holds near its end lets the
    // search skip ahead by up to window_ - 1 bytes.
    std::size_t window_ = 0;
    std::vector<unsigned char> shift_;   // per block of two bytes (64 KiB)
};

// One relayed body, piece by piece: a secret split across two pieces is
// found too. The end of a piece that could begin a secret (at most
// longest() - 1 bytes) is held back until the next piece or the end.
class StreamRedactor {
public:
    explicit StreamRedactor(const SecretSet& set) : set_(set) {}

    // The piece's bytes to pass on (masked), valid until the next call: the
    // piece itself when nothing in it is masked or held back (no copy).
    // last: the body's end; nothing is held back.
    std::string_view pass(std::string_view piece, bool last);
    // Forgets the held bytes (the body is abandoned).
    void drop();
    std::size_t held() const { return carry_.size(); }
    // Occurrences masked so far.
    std::size_t redacted() const { return redacted_; }

private:
    const SecretSet& set_;
    std::string carry_;          // held bytes, as they came
    std::size_t forced_ = 0;     // leading bytes of carry_ inside an occurrence found already
    std::string buf_;            // the bytes returned when they are not the piece itself
    std::vector<std::pair<std::size_t, std::size_t>> hits_;
    std::size_t redacted_ = 0;
};

}  // namespace llmgw
