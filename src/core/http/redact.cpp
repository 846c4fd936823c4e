// Configured secrets masked in relayed bytes: whole strings and streams.
#include "core/http/redact.h"

#include <algorithm>
#include <cstring>

#include "core/http/percent.h"

namespace llmgw {
namespace {

const char kHex[] = "0123456789ABCDEF";

// The secret inside a JSON string, as a writer escapes it ('/' kept).
std::string json_form(std::string_view s) {
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (u < 0x20) {
                out += "\\u00";
                out += kHex[u >> 4];
                out += kHex[u & 15];
            } else {
                out += c;
            }
        }
    }
    return out;
}

constexpr std::size_t kBuckets = 65536;   // every block of two bytes its own

inline std::size_t bucket(unsigned char a, unsigned char b) { return (static_cast<std::size_t>(a) << 8) | b; }

}  // namespace

void SecretSet::add_pattern(std::string p) {
    if (std::find(patterns_.begin(), patterns_.end(), p) != patterns_.end()) return;
    longest_ = std::max(longest_, p.size());
    first_[static_cast<unsigned char>(p[0])] = true;
    patterns_.push_back(std::move(p));
}

void SecretSet::build_shifts() {
    window_ = 255;
    for (const std::string& p : patterns_) window_ = std::min(window_, p.size());
    const std::size_t m = window_;
    shift_.assign(kBuckets, static_cast<unsigned char>(m - 1));
    for (const std::string& p : patterns_) {
        for (std::size_t j = 0; j + 1 < m; ++j) {   // the block p[j], p[j + 1] ends m - 2 - j before the window's end
            unsigned char& s = shift_[bucket(static_cast<unsigned char>(p[j]), static_cast<unsigned char>(p[j + 1]))];
            s = std::min(s, static_cast<unsigned char>(m - 2 - j));
        }
    }
}

template <class Hit>
void SecretSet::scan(const char* data, std::size_t n, Hit hit) const {
    const std::size_t m = window_;
    if (patterns_.empty() || n < m) return;
    const auto* t = reinterpret_cast<const unsigned char*>(data);
    for (std::size_t pos = m - 1; pos < n;) {   // pos: the last byte of the window looked at
        const unsigned char s = shift_[bucket(t[pos - 1], t[pos])];
        if (s != 0) {
            pos += s;
            continue;
        }
        const std::size_t at = pos + 1 - m;
        for (const std::string& p : patterns_) {
            if (p.size() <= n - at && static_cast<unsigned char>(p[0]) == t[at] &&
                std::memcmp(p.data(), data + at, p.size()) == 0 && !hit(at, at + p.size())) {
                return;
            }
        }
        ++pos;
    }
}

bool SecretSet::add(std::string_view secret) {
    if (secret.size() < kMinRedactedSecret) return false;
    add_pattern(std::string(secret));
    std::string json = json_form(secret);
    if (json.find('/') != std::string::npos) {
        std::string slashed;
        for (char c : json) {
            if (c == '/') slashed += '\\';
            slashed += c;
        }
        add_pattern(std::move(slashed));
    }
    add_pattern(std::move(json));
    add_pattern(percent_encode(secret));   // in a URL (a query echoed back)
    build_shifts();
    return true;
}

void SecretSet::find(const char* data, std::size_t n, std::vector<std::pair<std::size_t, std::size_t>>& out) const {
    scan(data, n, [&](std::size_t b, std::size_t e) {
        out.emplace_back(b, e);
        return true;
    });
}

bool SecretSet::contains(std::string_view s) const {
    bool found = false;
    scan(s.data(), s.size(), [&](std::size_t, std::size_t) { return !(found = true); });
    return found;
}

std::size_t SecretSet::mask(char* data, std::size_t n) const {
    if (patterns_.empty() || n == 0) return 0;
    std::vector<std::pair<std::size_t, std::size_t>> hits;
    find(data, n, hits);   // all of them first: one masked cannot hide an overlapping other
    for (const auto& [b, e] : hits) std::memset(data + b, kRedactionByte, e - b);
    return hits.size();
}

std::size_t SecretSet::partial_at(const char* data, std::size_t n) const {
    if (longest_ < 2) return n;
    const std::size_t from = n > longest_ - 1 ? n - (longest_ - 1) : 0;
    for (std::size_t i = from; i < n; ++i) {
        if (!first_[static_cast<unsigned char>(data[i])]) continue;
        const std::size_t tail = n - i;
        for (const std::string& p : patterns_) {
            if (p.size() > tail && std::memcmp(p.data(), data + i, tail) == 0) return i;
        }
    }
    return n;
}

std::string_view StreamRedactor::pass(std::string_view piece, bool last) {
    const char* d = piece.data();
    std::size_t n = piece.size();
    if (!carry_.empty()) {
        buf_.assign(carry_).append(piece);
        carry_.clear();
        d = buf_.data();
        n = buf_.size();
    }
    const std::size_t forced = forced_;
    forced_ = 0;
    hits_.clear();
    set_.find(d, n, hits_);
    const std::size_t keep = last ? n : set_.partial_at(d, n);
    if (hits_.empty() && forced == 0 && keep == n) return std::string_view(d, n);
    if (d != buf_.data()) {
        buf_.assign(d, n);
        d = buf_.data();
    }
    char* w = &buf_[0];
    if (forced > 0) {   // the held bytes of an occurrence that began in the last piece
        std::memset(w, kRedactionByte, std::min(forced, keep));
        if (forced > keep) forced_ = forced - keep;
    }
    // An occurrence that begins in the bytes held back is found again with
    // them next time; one that reaches into them masks them when they go.
    for (const auto& [b, e] : hits_) {
        if (b >= keep) continue;
        ++redacted_;
        std::memset(w + b, kRedactionByte, std::min(e, keep) - b);
        if (e > keep) forced_ = std::max(forced_, e - keep);
    }
    if (keep < n) carry_.assign(d + keep, n - keep);
    buf_.resize(keep);
    return buf_;
}

void StreamRedactor::drop() {
    carry_.clear();
    forced_ = 0;
}

}  // namespace llmgw
