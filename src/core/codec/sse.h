// Incremental Server-Sent Events parser (no nginx). Accepts CR, LF and CRLF
// line ends, including a CR at the end of one chunk and its LF at the start of
// the next. Events are dispatched on a blank line.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace llmgw {

struct SseEvent {
    std::string event;                   // value of the last "event:" field, "" if none
    std::string data;                    // "data:" values joined with '\n'
    std::vector<std::string> lines;      // every line of the event as received, without its line end
};

class SseParser {
public:
    explicit SseParser(std::size_t max_event_bytes = 4 << 20) : max_event_bytes_(max_event_bytes) {}

    // Feeds bytes; appends every completed event to out. Returns false when an
    // event exceeded max_event_bytes (the bytes of its lines, line ends not
    // counted, including a line still unterminated) or memory ran out; the
    // parser is then unusable and every later feed() returns false.
    // Any non-blank line makes an event: one holding only comments (":...")
    // or other fields is dispatched too, with empty data, so relaying keeps it.
    bool feed(std::string_view bytes, std::vector<SseEvent>& out);

    // Bytes held for an event not yet terminated by a blank line.
    std::size_t pending() const;

    // True when lines were received after the last dispatched event.
    bool has_partial() const { return pending() != 0; }

private:
    std::size_t max_event_bytes_;
    std::string line_;                   // current incomplete line
    bool last_was_cr_ = false;           // previous chunk ended with CR
    SseEvent cur_;
    std::size_t cur_bytes_ = 0;          // bytes of cur_.lines (line ends not counted)
    bool cur_has_data_ = false;          // a "data" field was seen (data may be "")
    bool failed_ = false;

    // Handles one complete line (without its line end).
    void end_line(std::string_view line, std::vector<SseEvent>& out);
};

// Serializes an event with LF line ends: each of ev.lines then a blank line.
// An event built in code with no lines is rendered from its fields instead:
// "event: <event>" when event is set, one "data: ..." line per line of data.
std::string sse_serialize(const SseEvent& ev);

}  // namespace llmgw
