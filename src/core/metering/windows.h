// Counter windows, UTC buckets, TTLs and Retry-After (no nginx). Every
// function takes the time explicitly so tests inject the clock.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace llmgw {

enum class Window { Min = 0, Hour = 1, Day = 2, Month = 3 };
constexpr int kWindowCount = 4;

std::string_view window_name(Window w);             // "min" "hour" "day" "month"
bool parse_window(std::string_view s, Window& w);

// UTC bucket: min YYYYMMDDHHMM, hour YYYYMMDDHH, day YYYYMMDD, month YYYYMM.
std::string bucket(Window w, std::time_t now);
// The bucket `back` windows before the one holding now (back=0: current).
std::string bucket_back(Window w, std::time_t now, int back);

// Store TTL of a counter: 2 min / 48 h / 35 d / 400 d.
std::int64_t ttl_seconds(Window w);
// In-process (shared memory) TTL: min(ttl_seconds, 48 h) but never below the
// window's enforcement floor (min 2 min, hour 2 h, day 25 h, month 32 d).
std::int64_t ttl_seconds_in_process(Window w);

// Whole seconds from now until the window holding now ends (>= 1).
std::int64_t seconds_until_window_end(Window w, std::time_t now);

// Store keys are built in core/metering/keys.h.

}  // namespace llmgw
