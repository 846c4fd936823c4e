// GET /admin/api/usage/models (no nginx): rank the catalog's models by one
// metric over one window (span buckets summed), from one batch read.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "core/metering/keys.h"
#include "core/metering/windows.h"

namespace llmgw {

struct RankingQuery {
    std::string metric = "req";    // req, tokin, tokout, cost
    Window window = Window::Day;
    int span = 1;                  // buckets summed (history's bounds)
    std::size_t limit = 20;        // 1..1000
    std::size_t offset = 0;
    std::string prefix;            // model ids that start with it
    bool detail = false;           // the four totals and free on every entry
    std::string user;              // the userModel statistic: that user's usage per model ("" = all)
};

// "" arguments take the defaults. false with err (a sentence for a 400).
bool parse_ranking_query(std::string_view metric, std::string_view window, std::string_view span,
                         std::string_view limit, std::string_view offset, std::string_view prefix,
                         std::string_view detail, RankingQuery& out, std::string& err);

// A model of the catalog and whether billing treats it as free (free
// metadata or a zero price).
struct CatalogModel {
    std::string id;   // <provider>/<model>
    bool free = false;
};

// The catalog filtered by prefix (kept in order) and the keys of one batch:
// per model, per metric read (the ranked one; all four with detail), per
// bucket. false with err when the read would exceed kMaxAdminReadKeys.
bool ranking_keys(const RankingQuery& q, const std::vector<CatalogModel>& catalog, std::time_t now,
                  std::vector<const CatalogModel*>& models, std::vector<std::string>& keys, std::string& err);

// The ranking from the values of ranking_keys' keys.
std::string render_ranking(const RankingQuery& q, const std::vector<const CatalogModel*>& models,
                           const std::vector<std::int64_t>& values);

}  // namespace llmgw
