// Model prices and cost arithmetic in micro-USD (no nginx). The built-in
// table is prices.def beside this file (one line per model, with its date).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace llmgw {

struct Price {
    // USD per million tokens, scaled by 1e6: 2.50 USD/M = 2'500'000.
    // (Numerically this is pico-USD per token... kept as micro-USD per 1M tokens.)
    std::int64_t input_micros_per_mtok = 0;
    std::int64_t output_micros_per_mtok = 0;
    bool free = false;      // model metadata free: true
    std::string source;     // "builtin", "config"
};

// Cost in micro-USD of a request: (prompt * input + completion * output) / 1e6,
// rounded to nearest, saturating at INT64_MAX; 0 when price.free. Negative
// token counts are treated as 0.
std::int64_t cost_micros(const Price& price, std::int64_t prompt_tokens, std::int64_t completion_tokens);

class PriceTable {
public:
    // Loads prices.def (provider type + model id). Keys are "<type>/<model>",
    // e.g. "openai/gpt-4o-mini".
    static PriceTable builtin();
    static std::string_view builtin_date();   // the date line of prices.def

    // Config override for a canonical "<provider>/<model>" (provider name as
    // configured). Returns "" or a sentence saying what is wrong.
    std::string set_override(std::string_view canonical, double input_usd_per_mtok, double output_usd_per_mtok);
    void set_free(std::string_view canonical);

    // Lookup order: override for canonical "<provider>/<model>", then builtin
    // "<provider type>/<model>", then builtin with a dated suffix removed
    // ("gpt-4o-2024-08-06" -> "gpt-4o"). nullptr when unpriced.
    const Price* find(std::string_view provider_name, std::string_view provider_type,
                      std::string_view model) const;

    std::size_t size() const { return prices_.size(); }
    const std::unordered_map<std::string, Price>& all() const { return prices_; }

private:
    std::unordered_map<std::string, Price> prices_;   // builtin, then overrides over them
    std::unordered_map<std::string, Price> builtin_;  // builtin only, for steps 2 and 3 of find
};

}  // namespace llmgw
