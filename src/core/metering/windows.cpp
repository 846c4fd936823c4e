// Counter windows in UTC, by integer arithmetic only: the process time zone
// (TZ, localtime) never enters.
#include "core/metering/windows.h"

#include <cstdio>

namespace llmgw {

namespace {

constexpr std::int64_t kMinute = 60;
constexpr std::int64_t kHour = 3600;
constexpr std::int64_t kDay = 86400;

struct Civil {
    std::int64_t year;
    int month;  // 1..12
    int day;    // 1..31
    int hour;
    int minute;
};

// Floor division and the matching non-negative remainder.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    std::int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

std::int64_t floor_mod(std::int64_t a, std::int64_t b) { return a - floor_div(a, b) * b; }

// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
// civil_from_days, with eras of 400 years).
void civil_from_days(std::int64_t z, std::int64_t& y, int& m, int& d) {
    z += 719468;
    const std::int64_t era = floor_div(z, 146097);
    const std::int64_t doe = z - era * 146097;                                // [0, 146096]
    const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
    const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);         // [0, 365]
    const std::int64_t mp = (5 * doy + 2) / 153;                              // [0, 11], March first
    d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
    m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
    y = yoe + era * 400 + (m <= 2 ? 1 : 0);
}

// The inverse: days since 1970-01-01 of year-month-day.
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
    y -= m <= 2 ? 1 : 0;
    const std::int64_t era = floor_div(y, 400);
    const std::int64_t yoe = y - era * 400;                                   // [0, 399]
    const std::int64_t mp = m > 2 ? m - 3 : m + 9;                            // [0, 11]
    const std::int64_t doy = (153 * mp + 2) / 5 + d - 1;                      // [0, 365]
    const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           // [0, 146096]
    return era * 146097 + doe - 719468;
}

Civil to_civil(std::int64_t t) {
    Civil c{};
    const std::int64_t days = floor_div(t, kDay);
    const std::int64_t secs = t - days * kDay;
    civil_from_days(days, c.year, c.month, c.day);
    c.hour = static_cast<int>(secs / kHour);
    c.minute = static_cast<int>((secs % kHour) / kMinute);
    return c;
}

// Length of the fixed-size windows; 0 for month.
std::int64_t fixed_length(Window w) {
    switch (w) {
        case Window::Min: return kMinute;
        case Window::Hour: return kHour;
        case Window::Day: return kDay;
        case Window::Month: break;
    }
    return 0;
}

std::string format_bucket(Window w, const Civil& c) {
    char buf[48];
    const long long y = static_cast<long long>(c.year);
    switch (w) {
        case Window::Min:
            std::snprintf(buf, sizeof buf, "%04lld%02d%02d%02d%02d", y, c.month, c.day, c.hour, c.minute);
            break;
        case Window::Hour:
            std::snprintf(buf, sizeof buf, "%04lld%02d%02d%02d", y, c.month, c.day, c.hour);
            break;
        case Window::Day:
            std::snprintf(buf, sizeof buf, "%04lld%02d%02d", y, c.month, c.day);
            break;
        case Window::Month:
            std::snprintf(buf, sizeof buf, "%04lld%02d", y, c.month);
            break;
    }
    return buf;
}

}  // namespace

std::string_view window_name(Window w) {
    switch (w) {
        case Window::Min: return "min";
        case Window::Hour: return "hour";
        case Window::Day: return "day";
        case Window::Month: return "month";
    }
    return "min";
}

bool parse_window(std::string_view s, Window& w) {
    for (int i = 0; i < kWindowCount; ++i) {
        const Window c = static_cast<Window>(i);
        if (window_name(c) == s) {
            w = c;
            return true;
        }
    }
    return false;
}

// Buckets are asked for many times a second with the same time: remember the
// last one per window (per thread; nginx workers are single-threaded).
std::string bucket(Window w, std::time_t now) {
    struct Last {
        std::time_t t = -1;
        std::string b;
    };
    thread_local Last last[kWindowCount];
    Last& l = last[static_cast<int>(w)];
    if (l.t != now) {
        l.b = format_bucket(w, to_civil(static_cast<std::int64_t>(now)));
        l.t = now;
    }
    return l.b;
}

std::string bucket_back(Window w, std::time_t now, int back) {
    const std::int64_t t = static_cast<std::int64_t>(now);
    if (w != Window::Month) return format_bucket(w, to_civil(t - static_cast<std::int64_t>(back) * fixed_length(w)));
    Civil c = to_civil(t);
    const std::int64_t index = c.year * 12 + (c.month - 1) - back;  // months since year 0
    c.year = floor_div(index, 12);
    c.month = static_cast<int>(floor_mod(index, 12)) + 1;
    return format_bucket(w, c);
}

std::int64_t ttl_seconds(Window w) {
    switch (w) {
        case Window::Min: return 2 * kMinute;
        case Window::Hour: return 48 * kHour;
        case Window::Day: return 35 * kDay;
        case Window::Month: return 400 * kDay;
    }
    return 2 * kMinute;
}

std::int64_t ttl_seconds_in_process(Window w) {
    constexpr std::int64_t ceiling = 48 * kHour;
    std::int64_t floor = 2 * kMinute;
    switch (w) {
        case Window::Min: floor = 2 * kMinute; break;
        case Window::Hour: floor = 2 * kHour; break;
        case Window::Day: floor = 25 * kHour; break;
        case Window::Month: floor = 32 * kDay; break;
    }
    const std::int64_t ttl = ttl_seconds(w) < ceiling ? ttl_seconds(w) : ceiling;
    return ttl > floor ? ttl : floor;
}

std::int64_t seconds_until_window_end(Window w, std::time_t now) {
    const std::int64_t t = static_cast<std::int64_t>(now);
    if (w != Window::Month) {
        const std::int64_t len = fixed_length(w);
        return len - floor_mod(t, len);
    }
    const Civil c = to_civil(t);
    const std::int64_t next_year = c.month == 12 ? c.year + 1 : c.year;
    const int next_month = c.month == 12 ? 1 : c.month + 1;
    const std::int64_t end = days_from_civil(next_year, next_month, 1) * kDay;
    return end - t;  // >= 1: t lies inside the month that ends at `end`
}

}  // namespace llmgw
