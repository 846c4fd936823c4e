#include "core/codec/sse.h"

#include <new>

namespace llmgw {

namespace {

// First CR or LF in [p, end), or end.
const char* find_line_end(const char* p, const char* end) {
    while (p != end && *p != '\n' && *p != '\r') ++p;
    return p;
}

}  // namespace

std::size_t SseParser::pending() const { return cur_bytes_ + line_.size(); }

void SseParser::end_line(std::string_view line, std::vector<SseEvent>& out) {
    if (line.empty()) {  // blank line: dispatch
        if (!cur_.lines.empty()) {
            out.push_back(std::move(cur_));
            cur_ = SseEvent();
        }
        cur_bytes_ = 0;
        cur_has_data_ = false;
        return;
    }
    cur_.lines.emplace_back(line);
    cur_bytes_ += line.size();
    if (line[0] == ':') return;  // comment

    std::string_view field = line, value;
    std::size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
        field = line.substr(0, colon);
        value = line.substr(colon + 1);
        if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
        if (cur_has_data_) cur_.data.push_back('\n');
        cur_.data.append(value.data(), value.size());
        cur_has_data_ = true;
    } else if (field == "event") {
        cur_.event.assign(value.data(), value.size());
    }
    // "id", "retry" and unknown fields are only kept in lines.
}

bool SseParser::feed(std::string_view bytes, std::vector<SseEvent>& out) {
    if (failed_) return false;
    const char* p = bytes.data();
    const char* end = p + bytes.size();
    try {
        if (last_was_cr_ && p != end) {
            if (*p == '\n') ++p;  // the LF of a CRLF split across feeds
            last_was_cr_ = false;
        }
        while (p != end) {
            const char* e = find_line_end(p, end);
            std::size_t len = static_cast<std::size_t>(e - p);
            if (cur_bytes_ + line_.size() + len > max_event_bytes_) {
                failed_ = true;
                return false;
            }
            if (e == end) {  // unterminated: keep for the next feed
                line_.append(p, len);
                break;
            }
            if (line_.empty()) {
                end_line(std::string_view(p, len), out);
            } else {
                line_.append(p, len);
                end_line(line_, out);
                line_.clear();
            }
            p = e + 1;
            if (*e == '\r') {
                if (p == end) last_was_cr_ = true;
                else if (*p == '\n') ++p;
            }
        }
    } catch (const std::bad_alloc&) {
        failed_ = true;
        return false;
    }
    return true;
}

std::string sse_serialize(const SseEvent& ev) {
    std::string s;
    if (!ev.lines.empty()) {
        std::size_t n = 1;
        for (const auto& l : ev.lines) n += l.size() + 1;
        s.reserve(n);
        for (const auto& l : ev.lines) {
            s.append(l);
            s.push_back('\n');
        }
    } else {
        s.reserve(ev.event.size() + ev.data.size() + 16);
        if (!ev.event.empty()) s.append("event: ").append(ev.event).push_back('\n');
        std::string_view d = ev.data;
        for (;;) {
            std::size_t nl = d.find('\n');
            s.append("data: ").append(d.substr(0, nl)).push_back('\n');
            if (nl == std::string_view::npos) break;
            d.remove_prefix(nl + 1);
        }
    }
    s.push_back('\n');
    return s;
}

}  // namespace llmgw
