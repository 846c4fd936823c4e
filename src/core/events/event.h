// The failure feed's event (spec "Gateway event") and the events response
// (no nginx). An event is stored and mirrored as its JSON text; the response
// embeds those texts as they are.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmgw {

struct GatewayEvent {
    std::int64_t time_ms = 0;   // unix milliseconds
    std::string replica, instance, user, group, model, provider, route, kind, message;
    int status = 0;             // omitted when 0
};

// Ring capacity and the shared list's length (spec "Limits").
inline constexpr std::size_t kEventCapacity = 200;
// Bytes an event's JSON may take (a ring slot); event_json stays under it.
inline constexpr std::size_t kEventMaxBytes = 2000;

// The event as one JSON object, fields in the spec's order, empty strings
// (but route, kind, message) and a 0 status left out. Every string is valid
// UTF-8 (JsonWriter) and cut: 128 bytes per name, 300 for the message; when
// escaping still makes it longer than kEventMaxBytes, they are cut harder.
std::string event_json(const GatewayEvent& e);

// Whether one stored or mirrored element is an event object (a JSON object);
// anything else is skipped by a read.
bool is_event_object(std::string_view json);

// GET /admin/api/events: {source, replica, events (newest first), capacity,
// degraded (only when true)}. events are event_json texts.
std::string render_events(std::string_view source, std::string_view replica,
                          const std::vector<std::string>& events, bool degraded);

// The events route's limit parameter: "" -> 50; an integer 1..200 -> itself;
// an integer over 200 -> 200. Anything else (0, negative, not an integer) ->
// -1 (400).
int events_limit(std::string_view arg);

}  // namespace llmgw
