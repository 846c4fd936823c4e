#include "core/json/envelope.h"

#include <exception>

namespace llmgw {

namespace {

const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

inline bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence at s[i] (lead byte >= 0x80), or, when it
// is invalid, 0 with *bad set to the length of its maximal invalid subpart
// (Unicode's "substitution of maximal subparts": one U+FFFD for each).
std::size_t utf8_seq(std::string_view s, std::size_t i, std::size_t* bad) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t need;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;       // no overlongs
        else if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;       // no overlongs
        else if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
    } else {
        *bad = 1;
        return 0;
    }
    std::size_t k = 1;
    for (; k < need && i + k < s.size(); ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if (k == 1 ? (b < lo || b > hi) : !is_cont(b)) break;
    }
    if (k == need) return need;
    *bad = k;
    return 0;
}

// Appends the UTF-8 sequence at s[i] (lead byte >= 0x80), or U+FFFD for its
// maximal invalid subpart; returns the index after it.
std::size_t append_utf8_at(std::string& out, std::string_view s, std::size_t i) {
    std::size_t bad = 0, len = utf8_seq(s, i, &bad);
    if (len == 0) {
        out.append(kReplacement, 3);
        return i + bad;
    }
    out.append(s.data() + i, len);
    return i + len;
}

inline bool needs_escape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\' || c >= 0x80; }

void escape_append(std::string& out, std::string_view s) {
    static const char hex[] = "0123456789abcdef";
    std::size_t i = 0, n = s.size();
    while (i < n) {
        std::size_t run = i;
        while (run < n && !needs_escape(static_cast<unsigned char>(s[run]))) ++run;
        out.append(s.data() + i, run - i);
        if (run == n) break;
        i = run;
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            i = append_utf8_at(out, s, i);
            continue;
        }
        switch (c) {
        case '"': out.append("\\\"", 2); break;
        case '\\': out.append("\\\\", 2); break;
        case '\n': out.append("\\n", 2); break;
        case '\r': out.append("\\r", 2); break;
        case '\t': out.append("\\t", 2); break;
        case '\b': out.append("\\b", 2); break;
        case '\f': out.append("\\f", 2); break;
        default: {
            const char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            out.append(u, 6);
        }
        }
        ++i;
    }
}

std::string envelope(std::string_view prefix, std::string_view message, std::string_view type,
                     std::string_view code, std::string_view suffix) {
    std::string out;
    out.reserve(64 + prefix.size() + message.size() + type.size() + code.size() + suffix.size());
    out.append(prefix);
    out.append("{\"error\":{\"message\":\"");
    escape_append(out, message);
    out.append("\",\"type\":\"");
    escape_append(out, type);
    if (code.empty()) {
        out.append("\",\"code\":null");
    } else {
        out.append("\",\"code\":\"");
        escape_append(out, code);
        out.push_back('"');
    }
    out.append(",\"param\":null}}");
    out.append(suffix);
    return out;
}

}  // namespace

void json_escape_append(std::string& out, std::string_view s) {
    try {
        escape_append(out, s);
    } catch (const std::exception&) {  // out of memory: out keeps what fitted
    }
}

bool is_valid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        std::size_t bad = 0, len = utf8_seq(s, i, &bad);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

std::string to_valid_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 8);
    for (std::size_t i = 0; i < s.size();) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            out.push_back(s[i++]);
            continue;
        }
        i = append_utf8_at(out, s, i);
    }
    return out;
}

std::string error_json(std::string_view message, std::string_view type, std::string_view code) {
    try {
        return envelope({}, message, type, code, {});
    } catch (const std::exception&) {
        return std::string();
    }
}

std::string error_sse_event(std::string_view message, std::string_view type, std::string_view code) {
    try {
        return envelope("event: error\ndata: ", message, type, code, "\n\n");
    } catch (const std::exception&) {
        return std::string();
    }
}

std::string anthropic_error_json(std::string_view type, std::string_view message) {
    try {
        std::string out = "{\"type\":\"error\",\"error\":{\"type\":\"";
        json_escape_append(out, type.empty() ? std::string_view("api_error") : type);
        out += "\",\"message\":\"";
        json_escape_append(out, message);
        out += "\"}}";
        return out;
    } catch (const std::exception&) {
        return std::string();
    }
}

std::string_view anthropic_error_type_for_code(std::string_view code) {
    return code == "budget_exceeded" ? anthropic_error_type(429) : anthropic_error_type(500);
}

std::string_view anthropic_error_type(int status) {
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 402: return "billing_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 529: return "overloaded_error";
    default: break;
    }
    return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
}

}  // namespace llmgw
