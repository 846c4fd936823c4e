// The Prometheus text exposition and its label escaping.
#include "core/metrics/exposition.h"

#include <cmath>
#include <cstdio>

namespace llmgw {
namespace {

// Length of the valid UTF-8 sequence at s[i] (0: invalid).
std::size_t utf8_len(std::string_view s, std::size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
    else return 0;
    if (i + n > s.size()) return 0;
    for (std::size_t k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
        return 0;
    }
    return n;
}

}  // namespace

std::string escape_label_value(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size();) {
        const char c = v[i];
        // A backslash of the name is doubled in the value (\\ in the text),
        // so that a value's single \xHH is always a marker.
        if (c == '\\') { out += "\\\\\\\\"; ++i; continue; }
        if (c == '"') { out += "\\\""; ++i; continue; }
        if (c == '\n') { out += "\\n"; ++i; continue; }
        const std::size_t n = utf8_len(v, i);
        if (n == 0) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\\\x%02X", static_cast<unsigned char>(c));
            out += buf;
            ++i;
            continue;
        }
        out.append(v.substr(i, n));
        i += n;
    }
    return out;
}

void Exposition::family(std::string name, std::string type, std::string help) {
    if (index_.count(name)) return;
    index_.emplace(name, families_.size());
    families_.push_back(Family{std::move(name), std::move(type), std::move(help), {}});
}

bool Exposition::add(std::string_view name, const Labels& labels, const std::string& value) {
    auto it = index_.find(name);
    if (it == index_.end()) return false;
    std::string series(name);
    if (!labels.empty()) {
        series += '{';
        for (std::size_t i = 0; i < labels.size(); ++i) {
            if (i) series += ',';
            series.append(labels[i].first).append("=\"").append(escape_label_value(labels[i].second)).append("\"");
        }
        series += '}';
    }
    if (!series_.insert(series).second) return false;
    Family& f = families_[it->second];
    f.lines.append(series).append(" ").append(value).append("\n");
    return true;
}

bool Exposition::sample(std::string_view name, const Labels& labels, std::int64_t value) {
    return add(name, labels, std::to_string(value));
}

bool Exposition::sample(std::string_view name, const Labels& labels, double value) {
    if (!std::isfinite(value)) return add(name, labels, std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf");
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", value);
    return add(name, labels, buf);
}

std::string Exposition::text() const {
    std::string out;
    for (const Family& f : families_) {
        out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n");
        out.append("# TYPE ").append(f.name).append(" ").append(f.type).append("\n");
        out.append(f.lines);
    }
    return out;
}

}  // namespace llmgw
