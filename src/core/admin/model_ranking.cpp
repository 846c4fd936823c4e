// The model ranking: its query, its one batch of keys, its document.
#include "core/admin/model_ranking.h"

#include <algorithm>

#include "core/admin/history.h"
#include "core/json/writer.h"
#include "core/metering/keys.h"

namespace llmgw {
namespace {

constexpr const char* kMetrics[] = {"req", "tokin", "tokout", "cost"};

bool parse_uint(std::string_view s, std::size_t max, std::size_t& out) {
    if (s.empty() || s.size() > 9) return false;
    std::size_t n = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    if (n > max) return false;
    out = n;
    return true;
}

}  // namespace

bool parse_ranking_query(std::string_view metric, std::string_view window, std::string_view span,
                         std::string_view limit, std::string_view offset, std::string_view prefix,
                         std::string_view detail, RankingQuery& out, std::string& err) {
    if (!metric.empty()) {
        if (std::find(std::begin(kMetrics), std::end(kMetrics), metric) == std::end(kMetrics)) {
            err = "metric must be req, tokin, tokout or cost";
            return false;
        }
        out.metric.assign(metric);
    }
    if (!window.empty() && (!parse_window(window, out.window) || out.window == Window::Min)) {
        err = "window must be hour, day or month";
        return false;
    }
    const SpanBounds b = history_span_bounds(out.window);
    std::size_t n = 0;
    if (!span.empty()) {
        if (!parse_uint(span, static_cast<std::size_t>(b.max), n) || n == 0) {
            err = "span must be an integer from 1 to " + std::to_string(b.max) + " for window " +
                  std::string(window_name(out.window));
            return false;
        }
        out.span = static_cast<int>(n);
    }
    if (!limit.empty()) {
        if (!parse_uint(limit, 1000, n) || n == 0) {
            err = "limit must be an integer from 1 to 1000";
            return false;
        }
        out.limit = n;
    }
    if (!offset.empty() && !parse_uint(offset, 1000000, out.offset)) {
        err = "offset must be an integer from 0 to 1000000";
        return false;
    }
    out.prefix.assign(prefix);
    if (!detail.empty() && detail != "0" && detail != "1" && detail != "true" && detail != "false") {
        err = "detail must be 1 or 0";
        return false;
    }
    out.detail = detail == "1" || detail == "true";
    return true;
}

bool ranking_keys(const RankingQuery& q, const std::vector<CatalogModel>& catalog, std::time_t now,
                  std::vector<const CatalogModel*>& models, std::vector<std::string>& keys, std::string& err) {
    models.clear();
    keys.clear();
    for (const CatalogModel& m : catalog) {
        if (m.id.compare(0, q.prefix.size(), q.prefix) == 0) models.push_back(&m);
    }
    const std::size_t per_model = static_cast<std::size_t>(q.span) * (q.detail ? 4 : 1);
    if (models.size() * per_model > kMaxAdminReadKeys) {
        err = "the ranking would read " + std::to_string(models.size() * per_model) + " keys, over the " +
              std::to_string(kMaxAdminReadKeys) + " an admin read may take: narrow it with prefix or span";
        return false;
    }
    std::vector<std::string> buckets;
    for (int back = q.span - 1; back >= 0; --back) buckets.push_back(bucket_back(q.window, now, back));
    keys.reserve(models.size() * per_model);
    const char* kind = q.user.empty() ? "model" : "usermodel";
    for (const CatalogModel* m : models) {
        const std::string id = q.user.empty() ? m->id : q.user + "|" + m->id;
        for (const char* metric : kMetrics) {
            if (!q.detail && q.metric != metric) continue;
            for (const std::string& b : buckets) keys.push_back(counter_key(kind, id, metric, q.window, b));
        }
    }
    return true;
}

std::string render_ranking(const RankingQuery& q, const std::vector<const CatalogModel*>& models,
                           const std::vector<std::int64_t>& values) {
    struct Row {
        const CatalogModel* m;
        std::int64_t totals[4] = {0, 0, 0, 0};   // req, tokin, tokout, cost
        std::int64_t value = 0;
    };
    std::vector<Row> rows;
    const std::size_t metrics = q.detail ? 4 : 1;
    const std::size_t span = static_cast<std::size_t>(q.span);
    int ranked = 0;
    for (int i = 0; i < 4; ++i) {
        if (q.metric == kMetrics[i]) ranked = i;
    }
    for (std::size_t i = 0; i < models.size(); ++i) {
        Row r;
        r.m = models[i];
        for (std::size_t k = 0; k < metrics; ++k) {
            const int metric = q.detail ? static_cast<int>(k) : ranked;
            std::int64_t sum = 0;
            for (std::size_t b = 0; b < span; ++b) {
                const std::size_t at = (i * metrics + k) * span + b;
                const std::int64_t v = at < values.size() ? values[at] : 0;
                sum = v > 0 && sum > INT64_MAX - v ? INT64_MAX : sum + (v > 0 ? v : 0);
            }
            r.totals[metric] = sum;
        }
        r.value = r.totals[ranked];
        const bool any = r.totals[0] || r.totals[1] || r.totals[2] || r.totals[3];
        if (q.detail ? any : r.value > 0) rows.push_back(r);
    }
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
        if (a.value != b.value) return a.value > b.value;
        return a.m->id < b.m->id;
    });
    JsonWriter w;
    w.begin_object().field("metric", q.metric).field("window", window_name(q.window));
    w.field("span", static_cast<std::int64_t>(q.span)).field("total", static_cast<std::int64_t>(rows.size()));
    w.key("models").begin_array();
    for (std::size_t i = q.offset; i < rows.size() && i < q.offset + q.limit; ++i) {
        const Row& r = rows[i];
        w.begin_object().field("model", r.m->id).field("value", r.value);
        if (q.detail) {
            w.field("requests", r.totals[0]).field("tokensIn", r.totals[1]).field("tokensOut", r.totals[2]);
            w.field("costMicroUsd", r.totals[3]).field("free", r.m->free);
        }
        w.end_object();
    }
    w.end_array().end_object();
    return w.take();
}

}  // namespace llmgw
