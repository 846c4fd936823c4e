// The failure feed's event as JSON, the events response, the limit parameter.
#include "core/events/event.h"

#include <ctime>

#include "core/codec/codec_impl.h"
#include "core/json/writer.h"

namespace llmgw {
namespace {

// A cut at a UTF-8 character boundary, at most n bytes.
std::string_view cut(std::string_view s, std::size_t n) {
    if (s.size() <= n) return s;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return s.substr(0, n);
}

std::string rfc3339_ms(std::int64_t ms) {
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
    return buf;
}

std::string render(const GatewayEvent& e, std::size_t name_cap, std::size_t message_cap) {
    JsonWriter w;
    w.begin_object();
    w.field("time", rfc3339_ms(e.time_ms));
    w.field("replica", cut(e.replica, name_cap));
    auto opt = [&](std::string_view k, const std::string& v) {
        if (!v.empty()) w.field(k, cut(v, name_cap));
    };
    opt("instance", e.instance);
    opt("user", e.user);
    opt("group", e.group);
    opt("model", e.model);
    opt("provider", e.provider);
    w.field("route", cut(e.route, name_cap));
    w.field("kind", cut(e.kind, name_cap));
    w.field("message", cut(e.message, message_cap));
    if (e.status != 0) w.field("status", static_cast<std::int64_t>(e.status));
    w.end_object();
    return w.take();
}

}  // namespace

std::string event_json(const GatewayEvent& e) {
    std::string s = render(e, 128, 300);
    if (s.size() < kEventMaxBytes) return s;
    return render(e, 24, 64);   // escapes (\u00XX) at most 6x: 10 strings x 24 x 6 + 64 x 6 + keys < 2000
}

bool is_event_object(std::string_view json) {
    std::size_t i = 0;
    while (i < json.size() && (json[i] == ' ' || json[i] == '\t' || json[i] == '\r' || json[i] == '\n')) ++i;
    return i < json.size() && json[i] == '{' && is_json_document(json);
}

std::string render_events(std::string_view source, std::string_view replica, const std::vector<std::string>& events,
                          bool degraded) {
    JsonWriter w;
    w.begin_object().field("source", source).field("replica", replica).key("events").begin_array();
    for (const std::string& e : events) w.raw(e);
    w.end_array().field("capacity", static_cast<std::int64_t>(kEventCapacity));
    if (degraded) w.field("degraded", true);
    w.end_object();
    return w.take();
}

int events_limit(std::string_view arg) {
    if (arg.empty()) return 50;
    if (arg.size() > 9) {
        for (char c : arg) {
            if (c < '0' || c > '9') return -1;
        }
        return static_cast<int>(kEventCapacity);   // a huge integer: the maximum
    }
    int n = 0;
    for (char c : arg) {
        if (c < '0' || c > '9') return -1;
        n = n * 10 + (c - '0');
    }
    if (n <= 0) return -1;
    return n > static_cast<int>(kEventCapacity) ? static_cast<int>(kEventCapacity) : n;
}

}  // namespace llmgw
