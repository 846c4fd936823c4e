// GET /admin/api/usage/history (no nginx): the query's rules, every bucket
// key computed up front (one batch read), and the series document.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "core/metering/windows.h"

namespace llmgw {

struct HistoryQuery {
    std::string kind;       // user, group, total, model
    std::string id;         // all for total
    std::string metric;     // req, tokin, tokout, cost
    Window window = Window::Day;
    int span = 0;           // buckets, the current one included
};

// Span bounds per window: hour default 48 (at most 48: the store keeps hour
// counters 48 h), day default 30 (at most 35), month default 12 (at most 13).
// The minute window is not kept long enough for a history (2 min).
struct SpanBounds {
    int def, max;
};
SpanBounds history_span_bounds(Window w);

// Parses scope ("user:alice", "group:eng", "total", "model:oai/gpt-4o"),
// metric, window (default day) and span ("" = the window's default). false
// with err (a sentence for a 400) when any is invalid. Whether the user or
// group exists is the caller's check (404).
bool parse_history_query(std::string_view scope, std::string_view metric, std::string_view window,
                         std::string_view span, HistoryQuery& out, std::string& err);

// The buckets, oldest first, and their counter keys (same order).
void history_keys(const HistoryQuery& q, std::time_t now, std::vector<std::string>& buckets,
                  std::vector<std::string>& keys);

// {"scope","metric","window","span","points":[{"bucket","value"}...]} (oldest first).
std::string render_history(const HistoryQuery& q, const std::vector<std::string>& buckets,
                           const std::vector<std::int64_t>& values);

// usage/series and usage/totals: the four metrics (req, tokin, tokout,
// cost) of one scope at once. The query is a history query without a
// metric (scope "" = total). Keys: per bucket (oldest first), the four
// metrics in that order.
bool parse_series_query(std::string_view scope, std::string_view window, std::string_view span, HistoryQuery& out,
                        std::string& err);
void series_keys(const HistoryQuery& q, std::time_t now, std::vector<std::string>& buckets,
                 std::vector<std::string>& keys);
// {"scope","window","span","points":[{"bucket","requests","tokensIn","tokensOut","costMicroUsd"}...]}
std::string render_series(const HistoryQuery& q, const std::vector<std::string>& buckets,
                          const std::vector<std::int64_t>& values);
// {"scope","window","span","requests","tokensIn","tokensOut","costMicroUsd"}: the span's sums
std::string render_totals(const HistoryQuery& q, const std::vector<std::string>& buckets,
                          const std::vector<std::int64_t>& values);

}  // namespace llmgw
