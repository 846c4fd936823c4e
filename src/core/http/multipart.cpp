// multipart/form-data: the boundary of a Content-Type and the scan for the
// "model" field (see multipart.h).
#include "core/http/multipart.h"

#include <cstring>

#include "core/http/ascii.h"

namespace llmgw {
namespace {

// One "; key=value" parameter list (RFC 2045 / 7578): values are tokens or
// quoted strings (backslash escapes honoured). Calls f(key, value) for each;
// false when the list is malformed.
template <typename F>
bool each_param(std::string_view s, F f) {
    std::size_t i = 0;
    const std::size_t n = s.size();
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ';')) ++i;
        if (i >= n) break;
        std::size_t k = i;
        while (i < n && s[i] != '=' && s[i] != ';') ++i;
        std::string_view key = trim_ows(s.substr(k, i - k));
        if (i >= n || s[i] != '=' || key.empty()) return false;
        ++i;
        while (i < n && (s[i] == ' ' || s[i] == '\t')) ++i;
        std::string value;
        if (i < n && s[i] == '"') {
            ++i;
            bool closed = false;
            while (i < n) {
                char c = s[i++];
                if (c == '\\' && i < n) {
                    value.push_back(s[i++]);
                } else if (c == '"') {
                    closed = true;
                    break;
                } else {
                    value.push_back(c);
                }
            }
            if (!closed) return false;
            while (i < n && (s[i] == ' ' || s[i] == '\t')) ++i;
            if (i < n && s[i] != ';') return false;
        } else {
            std::size_t v = i;
            while (i < n && s[i] != ';') ++i;
            value.assign(trim_ows(s.substr(v, i - v)));
        }
        if (!f(key, value)) return false;
    }
    return true;
}

bool boundary_char(char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return std::strchr("'()+_,-./:=? ", c) != nullptr && c != '\0';
}

// The field name of one part's header block ("" when it has none); false
// when the block is malformed.
bool part_name(std::string_view headers, std::string& name) {
    bool seen_disposition = false;
    while (!headers.empty()) {
        std::size_t eol = headers.find("\r\n");
        std::string_view line = headers.substr(0, eol);
        headers.remove_prefix(eol == std::string_view::npos ? headers.size() : eol + 2);
        if (line.empty() || line.front() == ' ' || line.front() == '\t') return false;   // no folding
        std::size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) return false;
        std::string_view key = line.substr(0, colon);
        for (char c : key) {
            if (c == ' ' || c == '\t' || static_cast<unsigned char>(c) < 0x21 || c == 0x7f) return false;
        }
        if (!ascii_iequals(key, "content-disposition")) continue;
        if (seen_disposition) return false;
        seen_disposition = true;
        std::string_view value = trim_ows(line.substr(colon + 1));
        std::size_t semi = value.find(';');
        if (!ascii_iequals(trim_ows(value.substr(0, semi)), "form-data")) return false;
        if (semi == std::string_view::npos) continue;
        bool named = false;
        bool ok = each_param(value.substr(semi + 1), [&](std::string_view k, std::string& v) {
            if (!ascii_iequals(k, "name")) return true;
            if (named) return false;   // two names: which field is it?
            named = true;
            name = std::move(v);
            return true;
        });
        if (!ok) return false;
    }
    return seen_disposition && !name.empty();
}

}  // namespace

std::string form_data_boundary(std::string_view content_type) {
    std::size_t semi = content_type.find(';');
    if (!ascii_iequals(trim_ows(content_type.substr(0, semi)), "multipart/form-data")) return {};
    if (semi == std::string_view::npos) return {};
    std::string boundary;
    bool twice = false;
    bool ok = each_param(content_type.substr(semi + 1), [&](std::string_view k, std::string& v) {
        if (!ascii_iequals(k, "boundary")) return true;
        if (!boundary.empty()) twice = true;
        boundary = std::move(v);
        return true;
    });
    if (!ok || twice || boundary.empty() || boundary.size() > 70 || boundary.back() == ' ') return {};
    for (char c : boundary) {
        if (!boundary_char(c)) return {};
    }
    return boundary;
}

FormScan scan_form_data(std::string_view body, std::string_view boundary) {
    FormScan out;
    if (boundary.empty()) return out;
    const std::string delim = "\r\n--" + std::string(boundary);
    const std::string_view dash = std::string_view(delim).substr(2);   // the first may open the body

    std::size_t pos;
    if (body.substr(0, dash.size()) == dash) {
        pos = dash.size();
    } else {
        std::size_t f = body.find(delim);
        if (f == std::string_view::npos) return out;
        pos = f + delim.size();
    }
    bool duplicate = false;
    bool have_model = false;
    for (;;) {
        // After a delimiter: "--" closes the body (the epilogue is ignored),
        // else optional padding and CRLF open a part.
        if (body.substr(pos, 2) == "--") break;
        while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
        if (body.substr(pos, 2) != "\r\n") return out;
        pos += 2;

        std::string_view headers;
        std::size_t content_at;
        if (body.substr(pos, 2) == "\r\n") {
            return out;   // a part without headers has no Content-Disposition
        }
        std::size_t limit = body.size() - pos < kMaxPartHeaderBytes + 4 ? body.size() - pos : kMaxPartHeaderBytes + 4;
        std::size_t end = body.substr(pos, limit).find("\r\n\r\n");
        if (end == std::string_view::npos) return out;
        headers = body.substr(pos, end);
        content_at = pos + end + 4;

        std::string name;
        if (!part_name(headers, name)) return out;
        if (++out.parts > kMaxFormParts) return out;

        std::size_t next = body.find(delim, content_at);
        if (next == std::string_view::npos) return out;
        if (name == "model") {
            if (have_model) {
                duplicate = true;
            } else {
                have_model = true;
                out.model_at = content_at;
                out.model_len = next - content_at;
                std::size_t keep = out.model_len < kMaxModelBytes ? out.model_len : kMaxModelBytes;
                out.model.assign(body.substr(content_at, keep));
                out.model_truncated = out.model_len > kMaxModelBytes;
            }
        }
        pos = next + delim.size();
    }
    if (out.parts == 0) return out;   // a form without fields
    if (duplicate) {
        out.status = FormStatus::DuplicateModel;
    } else if (!have_model || out.model_len == 0) {
        out.status = FormStatus::NoModel;
    } else {
        out.status = FormStatus::Ok;
    }
    return out;
}

}  // namespace llmgw
