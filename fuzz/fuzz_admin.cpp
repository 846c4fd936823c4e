// libFuzzer target: the admin routes' query parameters. The query string is
// split into arguments as nginx's ngx_http_arg finds them (the first
// "name=" at the start or after '&', name case-insensitive; scope, prefix
// and user percent-decoded as ngx_unescape_uri does: both done in src/ngx,
// imitated here), then read by the core's parsers the routes call:
// parse_history_query (usage/history), parse_series_query (usage/series,
// usage/totals), parse_ranking_query (usage/models), events_limit (events)
// and parse_window (performance), and what follows an accepted query: its
// keys (history_keys, series_keys, ranking_keys) and its document
// (render_history, render_series, render_totals, render_ranking).
//
// Input: byte 0 picks the time; the rest is the query string.
// What must hold: no crash, no read past a bound; a refused query says why;
// an accepted one stays within its bounds (span per window, limit 1..1000,
// events 1..200) and never asks the store for more than the admin read
// bound; every document is valid JSON in valid UTF-8.
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "core/admin/history.h"
#include "core/admin/model_ranking.h"
#include "core/events/event.h"
#include "core/metering/windows.h"
#include "fuzz_util.h"

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

bool iequal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

std::string_view arg(std::string_view args, std::string_view name) {
    while (true) {
        const std::size_t amp = args.find('&');
        const std::string_view p = args.substr(0, amp);
        const std::size_t eq = p.find('=');
        if (eq != std::string_view::npos && iequal(p.substr(0, eq), name)) return p.substr(eq + 1);
        if (amp == std::string_view::npos) return {};
        args.remove_prefix(amp + 1);
    }
}

void check_doc(const std::string& json) {
    FUZZ_CHECK(is_json(json));
    FUZZ_CHECK(valid_utf8(json));
}

const std::vector<CatalogModel>& catalog() {
    static const std::vector<CatalogModel> c = [] {
        std::vector<CatalogModel> v;
        for (const char* id : {"oai/gpt-4o", "oai/gpt-4o-mini", "claude/claude-sonnet-4-5", "gem/gemini-2.0-flash",
                               "free/llama", "oai/\xc3\xa9t\xc3\xa9"}) {
            v.push_back(CatalogModel{id, id[0] == 'f'});
        }
        for (int i = 0; i < 20; ++i) v.push_back(CatalogModel{"bulk/m" + std::to_string(i), false});
        return v;
    }();
    return c;
}

// Enough models that the widest ranking would pass the admin read bound.
const std::vector<CatalogModel>& big_catalog() {
    static const std::vector<CatalogModel> c = [] {
        std::vector<CatalogModel> v;
        for (int i = 0; i < 1400; ++i) v.push_back(CatalogModel{"big/m" + std::to_string(i), false});
        return v;
    }();
    return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::time_t now = 1795268730 + static_cast<std::time_t>(data[0]) * 86400 * 3;
    const std::string_view q(reinterpret_cast<const char*>(data) + 1, size - 1);
    const std::string scope = percent_decode(arg(q, "scope"));
    std::string err;

    HistoryQuery h;
    if (parse_history_query(scope, arg(q, "metric"), arg(q, "window"), arg(q, "span"), h, err)) {
        const SpanBounds b = history_span_bounds(h.window);
        FUZZ_CHECK(h.window != Window::Min && h.span >= 1 && h.span <= b.max);
        std::vector<std::string> buckets, keys;
        history_keys(h, now, buckets, keys);
        FUZZ_CHECK(buckets.size() == static_cast<std::size_t>(h.span) && keys.size() == buckets.size());
        std::vector<std::int64_t> values(keys.size(), INT64_MAX);
        check_doc(render_history(h, buckets, values));
    } else {
        FUZZ_CHECK(!err.empty());
    }

    HistoryQuery s;
    err.clear();
    const std::string_view span = arg(q, "span");
    if (parse_series_query(scope, arg(q, "window"), span.empty() && (data[0] & 1) ? "1" : span, s, err)) {
        FUZZ_CHECK(s.span >= 1 && s.span <= history_span_bounds(s.window).max);
        std::vector<std::string> buckets, keys;
        series_keys(s, now, buckets, keys);
        FUZZ_CHECK(keys.size() == 4 * buckets.size() && buckets.size() == static_cast<std::size_t>(s.span));
        std::vector<std::int64_t> values(keys.size());
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = i % 3 == 0 ? INT64_MAX : static_cast<std::int64_t>(i);
        check_doc(render_series(s, buckets, values));
        check_doc(render_totals(s, buckets, values));
    } else {
        FUZZ_CHECK(!err.empty());
    }

    RankingQuery r;
    err.clear();
    if (parse_ranking_query(arg(q, "metric"), arg(q, "window"), arg(q, "span"), arg(q, "limit"), arg(q, "offset"),
                            percent_decode(arg(q, "prefix")), arg(q, "detail"), r, err)) {
        FUZZ_CHECK(r.limit >= 1 && r.limit <= 1000 && r.offset <= 1000000);
        FUZZ_CHECK(r.span >= 1 && r.span <= history_span_bounds(r.window).max);
        r.user = percent_decode(arg(q, "user"));
        std::vector<const CatalogModel*> models;
        std::vector<std::string> keys;
        err.clear();
        if (ranking_keys(r, catalog(), now, models, keys, err)) {
            FUZZ_CHECK(keys.size() <= kMaxAdminReadKeys);
            FUZZ_CHECK(keys.size() == models.size() * static_cast<std::size_t>(r.span) * (r.detail ? 4 : 1));
            std::vector<std::int64_t> values(keys.size());
            for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int64_t>(i * 7 % 5) - 1;
            if (!values.empty()) values[0] = INT64_MAX;
            check_doc(render_ranking(r, models, values));
        } else {
            FUZZ_CHECK(!err.empty());
        }
        // the widest read of the big catalog: refused, or within the bound
        RankingQuery wide = r;
        wide.detail = true;
        wide.span = history_span_bounds(wide.window).max;
        std::size_t matching = 0;
        for (const CatalogModel& m : big_catalog()) matching += m.id.compare(0, wide.prefix.size(), wide.prefix) == 0;
        const std::size_t want = matching * static_cast<std::size_t>(wide.span) * 4;
        err.clear();
        if (want > kMaxAdminReadKeys || want <= 4096) {   // (the reads in between are slow to build)
            const bool ok = ranking_keys(wide, big_catalog(), now, models, keys, err);
            FUZZ_CHECK(ok == (want <= kMaxAdminReadKeys));
            FUZZ_CHECK(ok ? keys.size() == want : !err.empty());
        }
    } else {
        FUZZ_CHECK(!err.empty());
    }

    const int limit = events_limit(arg(q, "limit"));
    FUZZ_CHECK(limit == -1 || (limit >= 1 && limit <= 200));
    Window w;
    if (parse_window(arg(q, "window"), w)) FUZZ_CHECK(!window_name(w).empty());
    return 0;
}
