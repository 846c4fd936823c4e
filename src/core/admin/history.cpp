// The usage history query, its keys and its document.
#include "core/admin/history.h"

#include "core/json/writer.h"
#include "core/metering/keys.h"

namespace llmgw {

SpanBounds history_span_bounds(Window w) {
    switch (w) {
    case Window::Hour: return {48, 48};
    case Window::Day: return {30, 35};
    case Window::Month: return {12, 13};
    case Window::Min: break;
    }
    return {0, 0};
}

bool parse_history_query(std::string_view scope, std::string_view metric, std::string_view window,
                         std::string_view span, HistoryQuery& out, std::string& err) {
    const std::size_t colon = scope.find(':');
    out.kind.assign(scope.substr(0, colon));
    out.id = colon == std::string_view::npos ? std::string() : std::string(scope.substr(colon + 1));
    if (out.kind == "total") {
        if (!out.id.empty() && out.id != "all") {
            err = "scope total has the id all (scope=total)";
            return false;
        }
        out.id = "all";
    } else if (out.kind == "user" || out.kind == "group" || out.kind == "model") {
        if (out.id.empty()) {
            err = "scope must be <kind>:<id>, e.g. user:alice";
            return false;
        }
    } else {
        err = scope.empty() ? "scope is required: user:<name>, group:<name>, model:<provider>/<model> or total"
                            : "scope kind must be user, group, model or total";
        return false;
    }
    if (metric != "req" && metric != "tokin" && metric != "tokout" && metric != "cost") {
        err = "metric must be req, tokin, tokout or cost";
        return false;
    }
    out.metric.assign(metric);
    if (window.empty()) window = "day";
    if (!parse_window(window, out.window) || out.window == Window::Min) {
        err = "window must be hour, day or month";
        return false;
    }
    const SpanBounds b = history_span_bounds(out.window);
    if (span.empty()) {
        out.span = b.def;
        return true;
    }
    int n = 0;
    for (char c : span) {
        if (c < '0' || c > '9' || n > 100000) {
            n = -1;
            break;
        }
        n = n * 10 + (c - '0');
    }
    if (n < 1 || n > b.max) {
        err = "span must be an integer from 1 to " + std::to_string(b.max) + " for window " +
              std::string(window_name(out.window));
        return false;
    }
    out.span = n;
    return true;
}

void history_keys(const HistoryQuery& q, std::time_t now, std::vector<std::string>& buckets,
                  std::vector<std::string>& keys) {
    buckets.clear();
    keys.clear();
    for (int back = q.span - 1; back >= 0; --back) {
        buckets.push_back(bucket_back(q.window, now, back));
        keys.push_back(counter_key(q.kind, q.id, q.metric, q.window, buckets.back()));
    }
}

std::string render_history(const HistoryQuery& q, const std::vector<std::string>& buckets,
                           const std::vector<std::int64_t>& values) {
    JsonWriter w;
    w.begin_object();
    w.field("scope", q.kind == "total" ? std::string("total") : q.kind + ":" + q.id);
    w.field("metric", q.metric).field("window", window_name(q.window));
    w.field("span", static_cast<std::int64_t>(q.span));
    w.key("points").begin_array();
    for (std::size_t i = 0; i < buckets.size(); ++i) {
        w.begin_object().field("bucket", buckets[i]).field("value", i < values.size() ? values[i] : 0).end_object();
    }
    w.end_array().end_object();
    return w.take();
}

namespace {

constexpr const char* kSeriesMetrics[] = {"req", "tokin", "tokout", "cost"};
constexpr const char* kSeriesFields[] = {"requests", "tokensIn", "tokensOut", "costMicroUsd"};

std::int64_t sat_add(std::int64_t a, std::int64_t b) {
    if (b < 0) b = 0;
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

void head(JsonWriter& w, const HistoryQuery& q) {
    w.field("scope", q.kind == "total" ? std::string("total") : q.kind + ":" + q.id);
    w.field("window", window_name(q.window)).field("span", static_cast<std::int64_t>(q.span));
}

}  // namespace

bool parse_series_query(std::string_view scope, std::string_view window, std::string_view span, HistoryQuery& out,
                        std::string& err) {
    return parse_history_query(scope.empty() ? std::string_view("total") : scope, "req", window, span, out, err);
}

void series_keys(const HistoryQuery& q, std::time_t now, std::vector<std::string>& buckets,
                 std::vector<std::string>& keys) {
    buckets.clear();
    keys.clear();
    for (int back = q.span - 1; back >= 0; --back) {
        buckets.push_back(bucket_back(q.window, now, back));
        for (const char* m : kSeriesMetrics) keys.push_back(counter_key(q.kind, q.id, m, q.window, buckets.back()));
    }
}

std::string render_series(const HistoryQuery& q, const std::vector<std::string>& buckets,
                          const std::vector<std::int64_t>& values) {
    JsonWriter w;
    w.begin_object();
    head(w, q);
    w.key("points").begin_array();
    for (std::size_t i = 0; i < buckets.size(); ++i) {
        w.begin_object().field("bucket", buckets[i]);
        for (std::size_t m = 0; m < 4; ++m) {
            const std::size_t at = i * 4 + m;
            w.field(kSeriesFields[m], at < values.size() ? values[at] : 0);
        }
        w.end_object();
    }
    w.end_array().end_object();
    return w.take();
}

std::string render_totals(const HistoryQuery& q, const std::vector<std::string>& buckets,
                          const std::vector<std::int64_t>& values) {
    std::int64_t sums[4] = {0, 0, 0, 0};
    for (std::size_t i = 0; i < buckets.size(); ++i) {
        for (std::size_t m = 0; m < 4; ++m) {
            const std::size_t at = i * 4 + m;
            if (at < values.size()) sums[m] = sat_add(sums[m], values[at]);
        }
    }
    JsonWriter w;
    w.begin_object();
    head(w, q);
    for (std::size_t m = 0; m < 4; ++m) w.field(kSeriesFields[m], sums[m]);
    w.end_object();
    return w.take();
}

}  // namespace llmgw
