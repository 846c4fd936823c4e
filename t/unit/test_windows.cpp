// Counter windows: UTC buckets, bucket_back, TTLs, Retry-After, keys.
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>

#include "core/metering/keys.h"
#include "core/metering/windows.h"

using namespace llmgw;

namespace {

// Instants checked against an independent calendar (Python calendar.timegm).
constexpr std::time_t kLeapDayEnd = 1709251199;   // 2024-02-29T23:59:59Z
constexpr std::time_t kMarch2024 = 1709251200;    // 2024-03-01T00:00:00Z
constexpr std::time_t kYearEnd2025 = 1767225599;  // 2025-12-31T23:59:59Z
constexpr std::time_t kMidday = 1795268730;       // 2026-11-21T13:45:30Z
constexpr std::time_t kFeb2023 = 1677585600;      // 2023-02-28T12:00:00Z
constexpr std::time_t kY2K = 946684800;           // 2000-01-01T00:00:00Z
constexpr std::time_t kJan2025 = 1736935200;      // 2025-01-15T10:00:00Z

}  // namespace

TEST(Windows, NamesRoundTrip) {
    for (int i = 0; i < kWindowCount; ++i) {
        Window w = Window::Min;
        ASSERT_TRUE(parse_window(window_name(static_cast<Window>(i)), w));
        EXPECT_EQ(static_cast<int>(w), i);
    }
    EXPECT_EQ(window_name(Window::Min), "min");
    EXPECT_EQ(window_name(Window::Hour), "hour");
    EXPECT_EQ(window_name(Window::Day), "day");
    EXPECT_EQ(window_name(Window::Month), "month");
    Window w = Window::Day;
    EXPECT_FALSE(parse_window("minute", w));
    EXPECT_FALSE(parse_window("", w));
    EXPECT_FALSE(parse_window("Day", w));
    EXPECT_EQ(w, Window::Day);
}

TEST(Windows, BucketsAtKnownInstants) {
    EXPECT_EQ(bucket(Window::Min, kLeapDayEnd), "202402292359");
    EXPECT_EQ(bucket(Window::Hour, kLeapDayEnd), "2024022923");
    EXPECT_EQ(bucket(Window::Day, kLeapDayEnd), "20240229");
    EXPECT_EQ(bucket(Window::Month, kLeapDayEnd), "202402");

    EXPECT_EQ(bucket(Window::Min, kMarch2024), "202403010000");
    EXPECT_EQ(bucket(Window::Day, kMarch2024), "20240301");
    EXPECT_EQ(bucket(Window::Month, kMarch2024), "202403");

    EXPECT_EQ(bucket(Window::Min, kYearEnd2025), "202512312359");
    EXPECT_EQ(bucket(Window::Hour, kYearEnd2025), "2025123123");
    EXPECT_EQ(bucket(Window::Day, kYearEnd2025), "20251231");
    EXPECT_EQ(bucket(Window::Month, kYearEnd2025), "202512");
    EXPECT_EQ(bucket(Window::Min, kYearEnd2025 + 1), "202601010000");
    EXPECT_EQ(bucket(Window::Hour, kYearEnd2025 + 1), "2026010100");
    EXPECT_EQ(bucket(Window::Day, kYearEnd2025 + 1), "20260101");
    EXPECT_EQ(bucket(Window::Month, kYearEnd2025 + 1), "202601");

    EXPECT_EQ(bucket(Window::Min, kMidday), "202611211345");
    EXPECT_EQ(bucket(Window::Hour, kMidday), "2026112113");
    EXPECT_EQ(bucket(Window::Day, kY2K), "20000101");
    EXPECT_EQ(bucket(Window::Min, 0), "197001010000");
    EXPECT_EQ(bucket(Window::Min, -1), "196912312359");
    EXPECT_EQ(bucket(Window::Month, -1), "196912");
}

// The integer calendar agrees with gmtime_r (itself TZ-independent) at noon
// of every day from 1900 to 2400, and at a few seconds around midnight.
TEST(Windows, DayBucketsMatchGmtimeOverCenturies) {
    const std::time_t start = -2208988800;  // 1900-01-01T00:00:00Z
    const std::time_t end = 13569465600;    // 2400-01-01T00:00:00Z
    char want[32];
    for (std::time_t t = start; t < end; t += 86400) {
        for (std::time_t probe : {t, t + 43200, t + 86399}) {
            std::tm tm{};
            ASSERT_NE(gmtime_r(&probe, &tm), nullptr);
            std::snprintf(want, sizeof want, "%04d%02d%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                          tm.tm_hour, tm.tm_min);
            ASSERT_EQ(bucket(Window::Min, probe), want) << "t=" << probe;
        }
    }
}

TEST(Windows, BucketBackFixedWindows) {
    EXPECT_EQ(bucket_back(Window::Min, kMidday, 0), "202611211345");
    EXPECT_EQ(bucket_back(Window::Min, kMidday, 46), "202611211259");
    EXPECT_EQ(bucket_back(Window::Hour, kMidday, 14), "2026112023");
    EXPECT_EQ(bucket_back(Window::Day, kMarch2024, 1), "20240229");
    EXPECT_EQ(bucket_back(Window::Day, kYearEnd2025 + 1, 1), "20251231");
    EXPECT_EQ(bucket_back(Window::Day, kYearEnd2025 + 1, 366), "20241231");
    EXPECT_EQ(bucket_back(Window::Hour, kYearEnd2025 + 1, 1), "2025123123");
    EXPECT_EQ(bucket_back(Window::Min, kYearEnd2025 + 1, 1), "202512312359");
}

TEST(Windows, BucketBackMonthAcrossYears) {
    EXPECT_EQ(bucket_back(Window::Month, kJan2025, 0), "202501");
    EXPECT_EQ(bucket_back(Window::Month, kJan2025, 1), "202412");
    EXPECT_EQ(bucket_back(Window::Month, kJan2025, 12), "202401");
    EXPECT_EQ(bucket_back(Window::Month, kJan2025, 13), "202312");
    EXPECT_EQ(bucket_back(Window::Month, kJan2025, 25), "202212");
    EXPECT_EQ(bucket_back(Window::Month, kYearEnd2025, 11), "202501");
    EXPECT_EQ(bucket_back(Window::Month, kYearEnd2025, 12), "202412");
    // Month arithmetic, not 30-day steps: March 31 back one is February.
    EXPECT_EQ(bucket_back(Window::Month, kMarch2024 + 30 * 86400, 1), "202402");
    EXPECT_EQ(bucket_back(Window::Month, kMarch2024, -10), "202501");
}

TEST(Windows, TtlSeconds) {
    EXPECT_EQ(ttl_seconds(Window::Min), 120);
    EXPECT_EQ(ttl_seconds(Window::Hour), 48 * 3600);
    EXPECT_EQ(ttl_seconds(Window::Day), 35 * 86400);
    EXPECT_EQ(ttl_seconds(Window::Month), 400 * 86400);
}

TEST(Windows, TtlSecondsInProcess) {
    // min(ttl, 48 h), never below the floor (2 min, 2 h, 25 h, 32 d).
    EXPECT_EQ(ttl_seconds_in_process(Window::Min), 120);
    EXPECT_EQ(ttl_seconds_in_process(Window::Hour), 48 * 3600);
    EXPECT_EQ(ttl_seconds_in_process(Window::Day), 48 * 3600);
    EXPECT_EQ(ttl_seconds_in_process(Window::Month), 32 * 86400);
}

TEST(Windows, SecondsUntilMinuteAndHourEnd) {
    EXPECT_EQ(seconds_until_window_end(Window::Min, kMidday), 30);
    EXPECT_EQ(seconds_until_window_end(Window::Min, kMidday - 30), 60);  // on the boundary: a full minute
    EXPECT_EQ(seconds_until_window_end(Window::Min, kLeapDayEnd), 1);
    EXPECT_EQ(seconds_until_window_end(Window::Hour, kMidday), 14 * 60 + 30);
    EXPECT_EQ(seconds_until_window_end(Window::Hour, kYearEnd2025), 1);
    EXPECT_EQ(seconds_until_window_end(Window::Min, -1), 1);
}

TEST(Windows, SecondsUntilDayEnd) {
    EXPECT_EQ(seconds_until_window_end(Window::Day, kMidday), 10 * 3600 + 14 * 60 + 30);
    EXPECT_EQ(seconds_until_window_end(Window::Day, kLeapDayEnd), 1);
    EXPECT_EQ(seconds_until_window_end(Window::Day, kMarch2024), 86400);
    EXPECT_EQ(seconds_until_window_end(Window::Day, kYearEnd2025), 1);
}

TEST(Windows, SecondsUntilMonthEnd) {
    // Leap February 2024: 29 days.
    EXPECT_EQ(seconds_until_window_end(Window::Month, kLeapDayEnd), 1);
    EXPECT_EQ(seconds_until_window_end(Window::Month, kLeapDayEnd - 28 * 86400), 28 * 86400 + 1);  // Feb 1 23:59:59
    // Common February 2023: from the 28th at noon, 12 h to March 1.
    EXPECT_EQ(seconds_until_window_end(Window::Month, kFeb2023), 12 * 3600);
    // December -> January.
    EXPECT_EQ(seconds_until_window_end(Window::Month, kYearEnd2025), 1);
    EXPECT_EQ(seconds_until_window_end(Window::Month, kYearEnd2025 + 1), 31 * 86400);  // all of January 2026
    // March 2024 starts: a whole 31-day month.
    EXPECT_EQ(seconds_until_window_end(Window::Month, kMarch2024), 31 * 86400);
    // November 21 2026 13:45:30 -> December 1: 9 days 10:14:30.
    EXPECT_EQ(seconds_until_window_end(Window::Month, kMidday), 9 * 86400 + 10 * 3600 + 14 * 60 + 30);
}

TEST(Windows, SecondsUntilEndIsAlwaysPositive) {
    for (std::time_t t = kYearEnd2025 - 5; t < kYearEnd2025 + 5; ++t) {
        for (int i = 0; i < kWindowCount; ++i) {
            EXPECT_GE(seconds_until_window_end(static_cast<Window>(i), t), 1);
        }
    }
}

TEST(Windows, CounterKey) {
    EXPECT_EQ(counter_key("user", "alice", "req", Window::Min, "202611211345"),
              "llmgw:user:alice:req:min:202611211345");
    EXPECT_EQ(counter_key("model", "openai/gpt-4o", "tokin", Window::Month, bucket(Window::Month, kMidday)),
              "llmgw:model:openai/gpt-4o:tokin:month:202611");
}

// The month end lands on the 1st at 00:00:00 of the next month, every day of
// 1999..2101 (leap years 2000 and 2100 rules included).
TEST(Windows, MonthEndMatchesGmtime) {
    const std::time_t start = 915148800;  // 1999-01-01T00:00:00Z
    const std::time_t end = 4133980800;   // 2101-01-01T00:00:00Z
    for (std::time_t t = start; t < end; t += 86400 + 3601) {
        const std::time_t stop = t + seconds_until_window_end(Window::Month, t);
        const std::time_t last = stop - 1;
        std::tm a{}, b{}, c{};
        ASSERT_NE(gmtime_r(&stop, &a), nullptr);
        ASSERT_NE(gmtime_r(&last, &b), nullptr);
        ASSERT_NE(gmtime_r(&t, &c), nullptr);
        ASSERT_EQ(a.tm_mday, 1) << t;
        ASSERT_EQ(a.tm_hour * 3600 + a.tm_min * 60 + a.tm_sec, 0) << t;
        ASSERT_EQ(b.tm_mon, c.tm_mon) << t;
        ASSERT_EQ(b.tm_year, c.tm_year) << t;
    }
}
