// libFuzzer target: the Prometheus label escaper (escape_label_value) and
// the exposition that writes label values into /metrics (model ids,
// provider, user and group names are label values an outsider can choose).
//
// Input: the label values, separated by 0x00 (after the first byte, which
// picks the label names and the sample values).
// What must hold: no crash, no read past a bound; an escaped value holds no
// raw newline and no unescaped double quote, only the escapes \\ \" \n,
// and is valid UTF-8; reading it back as Prometheus does and undoing the
// markers gives the value again (the escaping is injective); the
// exposition's text has one line per HELP, TYPE and accepted sample (no
// value can add a line or a series), and a series is never written twice.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/metrics/exposition.h"
#include "fuzz_util.h"

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

// The value as a Prometheus parser reads the text between the quotes
// (\\ \" \n); false for any other escape, a raw newline or a raw quote.
bool prometheus_unescape(std::string_view text, std::string& out) {
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n' || c == '"') return false;
        if (c != '\\') {
            out += c;
            continue;
        }
        if (++i == text.size()) return false;
        switch (text[i]) {
        case '\\': out += '\\'; break;
        case '"': out += '"'; break;
        case 'n': out += '\n'; break;
        default: return false;
        }
    }
    return true;
}

int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The gateway's markers undone: \\ is a backslash, \xHH a byte.
bool unmark(std::string_view s, std::string& out) {
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\') {
            out += s[i];
            continue;
        }
        if (i + 1 < s.size() && s[i + 1] == '\\') {
            out += '\\';
            ++i;
        } else if (i + 3 < s.size() && s[i + 1] == 'x' && hexval(s[i + 2]) >= 0 && hexval(s[i + 3]) >= 0) {
            out += static_cast<char>(hexval(s[i + 2]) * 16 + hexval(s[i + 3]));
            i += 3;
        } else {
            return false;
        }
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::vector<std::string> values;
    for (std::size_t p = 0;;) {
        const std::size_t q = in.find('\0', p);
        values.push_back(in.substr(p, q == std::string::npos ? std::string::npos : q - p));
        if (q == std::string::npos) break;
        p = q + 1;
    }
    for (const std::string& v : values) {
        const std::string e = escape_label_value(v);
        FUZZ_CHECK(!contains(e, "\n"));
        FUZZ_CHECK(valid_utf8(e));
        std::string read, back;
        FUZZ_CHECK(prometheus_unescape(e, read));
        FUZZ_CHECK(unmark(read, back));
        FUZZ_CHECK(back == v);
    }
    // two values that differ never escape alike
    if (values.size() >= 2 && values[0] != values[1]) {
        FUZZ_CHECK(escape_label_value(values[0]) != escape_label_value(values[1]));
    }

    Exposition x;
    x.family("llmgw_requests_total", "counter", "Requests.");
    x.family("llmgw_latency_seconds", "gauge", "Latency.");
    static const char* const kNames[] = {"model", "provider", "user", "group"};
    std::size_t accepted = 0;
    std::set<std::vector<std::string>> series;
    for (std::size_t i = 0; i < values.size(); ++i) {
        const std::size_t nlabels = (data[0] >> (i % 4)) % 3;
        Labels labels;
        std::vector<std::string> key{std::to_string(i % 2)};
        for (std::size_t k = 0; k < nlabels; ++k) {
            const std::string& v = values[(i + k) % values.size()];
            labels.emplace_back(kNames[(i + k) % 4], v);
            key.push_back(std::string(kNames[(i + k) % 4]) + "=" + v);
        }
        const bool fresh = series.insert(key).second;
        const bool ok = i % 2 == 0 ? x.sample("llmgw_requests_total", labels, static_cast<std::int64_t>(i))
                                   : x.sample("llmgw_latency_seconds", labels, i * 0.25 - 1.0);
        FUZZ_CHECK(ok == fresh);
        accepted += ok ? 1 : 0;
    }
    FUZZ_CHECK(!x.sample("llmgw_undeclared", {}, std::int64_t{1}));
    const std::string text = x.text();
    std::size_t lines = 0;
    for (char c : text) lines += c == '\n' ? 1 : 0;
    FUZZ_CHECK(lines == 4 + accepted);
    FUZZ_CHECK(!text.empty() && text.back() == '\n');
    return 0;
}
