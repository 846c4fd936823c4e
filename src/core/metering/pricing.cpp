// Model prices (built-in table from prices.def, config overrides) and cost
// arithmetic.
#include "core/metering/pricing.h"

#include <cmath>
#include <limits>

#include "core/metering/limits.h"  // usd_to_micros

namespace llmgw {

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

struct BuiltinPrice {
    const char* type;
    const char* model;
    double input_usd_per_mtok;
    double output_usd_per_mtok;
};

const BuiltinPrice kBuiltinPrices[] = {
#define LLMGW_PRICES_DATE(date)
#define LLMGW_PRICE(type, model, in, out) {type, model, in, out},
#include "prices.def"
#undef LLMGW_PRICE
#undef LLMGW_PRICES_DATE
};

constexpr std::string_view kBuiltinDate =
#define LLMGW_PRICES_DATE(date) date
#define LLMGW_PRICE(type, model, in, out)
#include "prices.def"
#undef LLMGW_PRICE
#undef LLMGW_PRICES_DATE
    ;

bool all_digits(std::string_view s) {
    for (char c : s) {
        if (c < '0' || c > '9') return false;
    }
    return true;
}

// The model id without a trailing "-YYYY-MM-DD", "-YYYYMMDD" or "-latest";
// the id itself when it has none.
std::string_view strip_dated_suffix(std::string_view m) {
    const std::size_t n = m.size();
    if (n > 7 && m.substr(n - 7) == "-latest") return m.substr(0, n - 7);
    if (n > 11 && m[n - 11] == '-' && m[n - 6] == '-' && m[n - 3] == '-' && all_digits(m.substr(n - 10, 4)) &&
        all_digits(m.substr(n - 5, 2)) && all_digits(m.substr(n - 2, 2))) {
        return m.substr(0, n - 11);
    }
    if (n > 9 && m[n - 9] == '-' && all_digits(m.substr(n - 8))) return m.substr(0, n - 9);
    return m;
}

std::string join_key(std::string_view a, std::string_view b) {
    std::string k;
    k.reserve(a.size() + 1 + b.size());
    k.append(a).append("/").append(b);
    return k;
}

const Price* lookup(const std::unordered_map<std::string, Price>& m, const std::string& key) {
    const auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
}

}  // namespace

std::int64_t cost_micros(const Price& price, std::int64_t prompt_tokens, std::int64_t completion_tokens) {
    if (price.free) return 0;
    using u128 = unsigned __int128;
    const auto nonneg = [](std::int64_t v) { return v > 0 ? static_cast<u128>(v) : u128{0}; };
    // Each product < 2^126, so the sum fits in 128 bits.
    const u128 scaled = nonneg(prompt_tokens) * nonneg(price.input_micros_per_mtok) +
                        nonneg(completion_tokens) * nonneg(price.output_micros_per_mtok);
    const u128 micros = (scaled + 500000) / 1000000;  // rounded to nearest, half up
    return micros > static_cast<u128>(kInt64Max) ? kInt64Max : static_cast<std::int64_t>(micros);
}

PriceTable PriceTable::builtin() {
    PriceTable t;
    for (const BuiltinPrice& b : kBuiltinPrices) {
        Price p;
        p.input_micros_per_mtok = usd_to_micros(b.input_usd_per_mtok);
        p.output_micros_per_mtok = usd_to_micros(b.output_usd_per_mtok);
        p.source = "builtin";
        const std::string key = join_key(b.type, b.model);
        t.builtin_[key] = p;
        t.prices_[key] = std::move(p);
    }
    return t;
}

std::string_view PriceTable::builtin_date() { return kBuiltinDate; }

std::string PriceTable::set_override(std::string_view canonical, double input_usd_per_mtok,
                                     double output_usd_per_mtok) {
    const std::string shown = "\"" + std::string(canonical) + "\"";
    if (canonical.empty()) return "price override needs a model name";
    if (!std::isfinite(input_usd_per_mtok) || input_usd_per_mtok < 0) {
        return "invalid input price for " + shown + ": must be a finite number >= 0";
    }
    if (!std::isfinite(output_usd_per_mtok) || output_usd_per_mtok < 0) {
        return "invalid output price for " + shown + ": must be a finite number >= 0";
    }
    Price& p = prices_[std::string(canonical)];
    if (p.source != "config") p.free = false;  // a new entry, or one replacing a builtin
    p.input_micros_per_mtok = usd_to_micros(input_usd_per_mtok);
    p.output_micros_per_mtok = usd_to_micros(output_usd_per_mtok);
    p.source = "config";
    return "";
}

void PriceTable::set_free(std::string_view canonical) {
    Price& p = prices_[std::string(canonical)];
    p.free = true;
    p.source = "config";
}

const Price* PriceTable::find(std::string_view provider_name, std::string_view provider_type,
                              std::string_view model) const {
    if (const Price* p = lookup(prices_, join_key(provider_name, model)); p != nullptr && p->source != "builtin") {
        return p;
    }
    if (const Price* p = lookup(builtin_, join_key(provider_type, model))) return p;
    const std::string_view base = strip_dated_suffix(model);
    if (base.size() != model.size()) return lookup(builtin_, join_key(provider_type, base));
    return nullptr;
}

}  // namespace llmgw
