// Limits: validation of configured values and the admission plan.
#include "core/metering/limits.h"

#include "core/metering/reservation.h"

#include <charconv>
#include <cstdint>
#include <cmath>
#include <limits>
#include <system_error>

namespace llmgw {

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// ---- decimal numbers, converted to micro-units exactly ----

// A non-negative decimal number: value = digits * 10^exp10, digits without
// leading zeros (empty for zero).
struct Decimal {
    std::string digits;
    std::int64_t exp10 = 0;
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Grammar: digits [ "." digits ] [ ("e"|"E") ["+"|"-"] digits ], with at least
// one mantissa digit on either side of the point. No sign, no spaces, no
// hex, no "nan"/"inf".
bool parse_decimal(std::string_view s, Decimal& out) {
    std::size_t i = 0;
    std::size_t mantissa_digits = 0;
    std::int64_t frac_digits = 0;
    bool in_fraction = false;
    out = Decimal{};
    for (; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '.' && !in_fraction) {
            in_fraction = true;
            continue;
        }
        if (!is_digit(c)) break;
        ++mantissa_digits;
        if (in_fraction) ++frac_digits;
        if (!(out.digits.empty() && c == '0')) out.digits.push_back(c);
    }
    if (mantissa_digits == 0) return false;
    std::int64_t exponent = 0;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        bool negative = false;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
        if (i >= s.size() || !is_digit(s[i])) return false;
        for (; i < s.size() && is_digit(s[i]); ++i) {
            if (exponent < 1000000) exponent = exponent * 10 + (s[i] - '0');  // beyond: saturated
        }
        if (negative) exponent = -exponent;
    }
    if (i != s.size()) return false;
    out.exp10 = exponent - frac_digits;
    return true;
}

// value * 1e6 rounded to nearest (half up), saturating at INT64_MAX.
std::int64_t decimal_to_micros(const Decimal& d) {
    if (d.digits.empty()) return 0;
    const std::int64_t size = static_cast<std::int64_t>(d.digits.size());
    const std::int64_t int_len = size + d.exp10 + 6;  // integer digits of the micro value
    if (int_len > 19) return kInt64Max;
    if (int_len < 0) return 0;
    unsigned __int128 v = 0;
    for (std::int64_t k = 0; k < int_len; ++k) v = v * 10 + (k < size ? static_cast<unsigned>(d.digits[k] - '0') : 0u);
    if (int_len < size && d.digits[int_len] >= '5') ++v;
    return v > static_cast<unsigned __int128>(kInt64Max) ? kInt64Max : static_cast<std::int64_t>(v);
}

// ---- limit names ----

struct LimitField {
    std::string_view spec_name;
    std::string_view directive_name;
    std::int64_t Limits::*field;
    bool is_cost;
};

constexpr LimitField kFields[] = {
    {"requestsPerMinute", "requests_per_minute", &Limits::requests_per_minute, false},
    {"requestsPerDay", "requests_per_day", &Limits::requests_per_day, false},
    {"tokensPerDay", "tokens_per_day", &Limits::tokens_per_day, false},
    {"tokensPerMonth", "tokens_per_month", &Limits::tokens_per_month, false},
    {"costPerDayUSD", "cost_per_day", &Limits::cost_per_day_micros, true},
    {"costPerMonthUSD", "cost_per_month", &Limits::cost_per_month_micros, true},
};

const LimitField* find_field(std::string_view name) {
    for (const LimitField& f : kFields) {
        if (f.spec_name == name || f.directive_name == name) return &f;
    }
    return nullptr;
}

// A value echoed in an error, kept short.
std::string shown(std::string_view v) {
    constexpr std::size_t kMax = 64;
    return v.size() <= kMax ? std::string(v) : std::string(v.substr(0, kMax)) + "...";
}

std::string unknown_limit(std::string_view name) { return "unknown limit \"" + shown(name) + "\""; }

const char* requirement(const LimitField& f) {
    return f.is_cost ? "must be a finite number >= 0" : "must be an integer >= 0";
}

std::string double_text(double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return r.ec == std::errc() ? std::string(buf, r.ptr) : std::string("?");
}

// Whether the text of a decimal number is finite as a double.
bool finite_as_double(std::string_view s) {
    double v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec == std::errc()) return std::isfinite(v);
    if (r.ec != std::errc::result_out_of_range) return false;
    // Out of range: too large, or an underflow toward zero (accepted, it is 0).
    Decimal d;
    if (!parse_decimal(s, d) || d.digits.empty()) return true;
    return static_cast<std::int64_t>(d.digits.size()) + d.exp10 <= 0;
}

// ---- admission plan ----

struct CheckSpec {
    std::string_view name;  // spec name, used in messages
    std::int64_t Limits::*field;
    const char* metrics[2];
    Window window;
    ViolationKind kind;
    Measure measure;
};

// Precedence within a scope (spec "Errors"): the first breach wins.
const CheckSpec kChecks[] = {
    {"requestsPerMinute", &Limits::requests_per_minute, {"req", nullptr}, Window::Min, ViolationKind::RateLimit, Measure::Requests},
    {"requestsPerDay", &Limits::requests_per_day, {"req", nullptr}, Window::Day, ViolationKind::RateLimit, Measure::Requests},
    {"tokensPerDay", &Limits::tokens_per_day, {"tokin", "tokout"}, Window::Day, ViolationKind::Budget, Measure::Tokens},
    {"tokensPerMonth", &Limits::tokens_per_month, {"tokin", "tokout"}, Window::Month, ViolationKind::Budget, Measure::Tokens},
    {"costPerDayUSD", &Limits::cost_per_day_micros, {"cost", nullptr}, Window::Day, ViolationKind::Budget, Measure::Cost},
    {"costPerMonthUSD", &Limits::cost_per_month_micros, {"cost", nullptr}, Window::Month, ViolationKind::Budget, Measure::Cost},
};

// Micro-USD as a plain USD decimal: 1500000 -> "1.5", 2000000 -> "2".
std::string usd_text(std::int64_t micros) {
    std::string s = std::to_string(micros / 1000000);
    std::int64_t frac = micros % 1000000;
    if (frac == 0) return s;
    std::string f = std::to_string(frac);
    f.insert(0, 6 - f.size(), '0');
    while (!f.empty() && f.back() == '0') f.pop_back();
    return s + "." + f;
}

// Message format (one of):
//   rate limit exceeded: <kind> "<id>" <limitName> <limit>
//   budget exceeded: <kind> "<id>" <limitName> <limit>
// where <limitName> is the spec name (requestsPerMinute, ..., costPerMonthUSD)
// and <limit> the configured value (costs in USD, e.g. 1.5).
std::string violation_message(const Scope& s, const CheckSpec& c, std::int64_t limit) {
    std::string m = c.kind == ViolationKind::RateLimit ? "rate limit exceeded: " : "budget exceeded: ";
    m += s.kind;
    m += " \"" + s.id + "\" ";
    m += c.name;
    m += ' ';
    m += c.field == &Limits::cost_per_day_micros || c.field == &Limits::cost_per_month_micros ? usd_text(limit)
                                                                                              : std::to_string(limit);
    return m;
}

std::int64_t ttl_for(Window w, bool in_process) { return in_process ? ttl_seconds_in_process(w) : ttl_seconds(w); }

}  // namespace

bool Limits::any() const {
    return requests_per_minute > 0 || requests_per_day > 0 || tokens_per_day > 0 || tokens_per_month > 0 ||
           cost_per_day_micros > 0 || cost_per_month_micros > 0;
}

std::int64_t usd_to_micros(double usd) {
    if (!(usd > 0)) return 0;  // zero, negative, NaN
    if (std::isinf(usd)) return kInt64Max;
    // Through the shortest decimal text of the double, so 0.0000005 rounds as
    // the decimal the user wrote (half up to 1), not as its binary neighbour.
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, usd);
    Decimal d;
    if (r.ec != std::errc() || !parse_decimal(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)), d)) {
        return 0;
    }
    return decimal_to_micros(d);
}

std::string set_limit(Limits& l, std::string_view name, std::string_view value) {
    const LimitField* f = find_field(name);
    if (f == nullptr) return unknown_limit(name);
    const std::string bad = "invalid value \"" + shown(value) + "\" for " + std::string(name) + ": ";
    if (f->is_cost) {
        Decimal d;
        if (!parse_decimal(value, d) || !finite_as_double(value)) return bad + requirement(*f);
        l.*(f->field) = decimal_to_micros(d);
        return "";
    }
    if (value.empty()) return bad + requirement(*f);
    for (char c : value) {
        if (!is_digit(c)) return bad + requirement(*f);
    }
    std::int64_t v = 0;
    const auto r = std::from_chars(value.data(), value.data() + value.size(), v);
    if (r.ec == std::errc::result_out_of_range) return bad + "must be an integer from 0 to 9223372036854775807";
    if (r.ec != std::errc() || r.ptr != value.data() + value.size()) return bad + requirement(*f);
    l.*(f->field) = v;
    return "";
}

std::string set_limit_number(Limits& l, std::string_view name, double value, bool is_integer) {
    const LimitField* f = find_field(name);
    if (f == nullptr) return unknown_limit(name);
    const std::string bad = "invalid value " + double_text(value) + " for " + std::string(name) + ": ";
    if (!std::isfinite(value) || value < 0) return bad + requirement(*f);
    if (f->is_cost) {
        l.*(f->field) = usd_to_micros(value);
        return "";
    }
    if (!is_integer || std::trunc(value) != value) return bad + requirement(*f);
    if (value >= 9223372036854775808.0) return bad + "must be an integer from 0 to 9223372036854775807";
    l.*(f->field) = static_cast<std::int64_t>(value);
    return "";
}

AdmissionPlan build_admission_plan(const std::vector<Scope>& scopes, std::time_t now, bool in_process,
                                   std::int64_t reserve_ttl, bool defer_unchecked, std::int64_t lease_ttl) {
    AdmissionPlan plan;
    plan.leased = lease_ttl > 0;
    plan.reserves_worst_cases = reserve_ttl > 0;
    // One slot length per plan: a scope's hash holds the fields of every
    // measure, and a check deletes the lapsed ones by it.
    const std::int64_t slot_ttl = reserve_ttl > 0 ? reserve_ttl : lease_ttl;
    std::vector<bool> counted(scopes.size(), !defer_unchecked);   // whose req counters the admission writes
    for (std::size_t si = 0; si < scopes.size(); ++si) {
        const Scope& s = scopes[si];
        if (s.limits == nullptr) continue;
        const std::size_t first_check = plan.checks.size();
        bool reserves[3] = {false, false, false};   // by Measure
        for (const CheckSpec& c : kChecks) {
            const std::int64_t limit = s.limits->*(c.field);
            if (limit <= 0) continue;
            Check ch;
            const std::string b = bucket(c.window, now);
            for (const char* metric : c.metrics) {
                if (metric != nullptr) ch.keys.push_back(counter_key(s.kind, s.id, metric, c.window, b));
            }
            ch.limit = limit;
            ch.add = c.kind == ViolationKind::RateLimit ? 1 : 0;
            ch.kind = c.kind;
            ch.retry_after = seconds_until_window_end(c.window, now);
            ch.message = violation_message(s, c, limit);
            ch.measure = c.measure;
            ch.window = c.window;
            if (c.measure == Measure::Requests) counted[si] = true;
            if ((reserve_ttl > 0 && c.measure != Measure::Requests) || plan.leased) {
                ch.reserved_record = reserved_record_key(s.kind, s.id);
                ch.reserved_oldest = oldest_live_slot(now, slot_ttl);
                ch.reserves = true;
                reserves[static_cast<int>(c.measure)] = true;
            }
            plan.checks.push_back(std::move(ch));
        }
        for (const Measure m : {Measure::Requests, Measure::Tokens, Measure::Cost}) {
            if (!reserves[static_cast<int>(m)]) continue;
            plan.reserve.push_back(Reservation{reserved_record_key(s.kind, s.id), m, reserve_slot(now, slot_ttl),
                                               reserve_key_ttl(now, slot_ttl)});
            std::uint64_t h = 1469598103934665603ULL;
            for (std::size_t i = first_check; i < plan.checks.size(); ++i) {
                if (plan.checks[i].reserves && plan.checks[i].measure == m) {
                    plan.checks[i].reserve_index = static_cast<int>(plan.reserve.size() - 1);
                    std::uint64_t v = static_cast<std::uint64_t>(plan.checks[i].limit);
                    for (int b = 0; b < 8; ++b, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ULL;
                }
            }
            plan.reserve.back().limits = h;
        }
    }
    const std::string day = bucket(Window::Day, now);
    for (std::size_t si = 0; si < scopes.size(); ++si) {
        const Scope& s = scopes[si];
        if (!counted[si]) {
            plan.deferred.emplace_back(s.kind, s.id);
        } else {
            plan.counted.emplace_back(s.kind, s.id);
            for (int i = 0; i < kWindowCount; ++i) {
                const Window w = static_cast<Window>(i);
                plan.admit.push_back(Incr{counter_key(s.kind, s.id, "req", w, bucket(w, now)), 1, ttl_for(w, in_process)});
            }
        }
        if (s.kind == "user" || s.kind == "group" || s.kind == "total") {
            plan.reject.push_back(Incr{counter_key(s.kind, s.id, "rej", Window::Day, day), 1,
                                       ttl_for(Window::Day, in_process)});
        }
    }
    return plan;
}

std::int64_t KvTxn::reserved(const Check& c) {
    if (c.measure == Measure::Requests) return 0;   // only a shared store's leases hold requests
    const std::string_view scope = reserved_record_scope(c.reserved_record);
    __int128 sum = 0;
    for (std::int64_t k = c.reserved_oldest; k < c.reserved_oldest + kReserveSlots; ++k) {
        sum += get(reserved_key_in(scope, c.measure == Measure::Tokens, k));
    }
    return sum >= INT64_MAX ? INT64_MAX : sum <= INT64_MIN ? INT64_MIN : static_cast<std::int64_t>(sum);
}

bool KvTxn::reserve(const Reservation& r, std::int64_t amount) {
    return incr(reserved_key_in(reserved_record_scope(r.record), r.measure == Measure::Tokens, r.slot), amount, r.ttl);
}

std::int64_t reserve_amount(const ReserveAmounts& a, Measure m) {
    const std::int64_t v = m == Measure::Tokens ? a.tokens : m == Measure::Cost ? a.cost_micros : 0;
    return v < 0 ? 0 : v;
}

std::int64_t check_add(const Check& c, const ReserveAmounts& a) {
    return c.reserves && c.measure != Measure::Requests ? reserve_amount(a, c.measure) : c.add;
}

bool execute_admission(KvTxn& kv, const AdmissionPlan& plan, AdmissionResult& result, const ReserveAmounts& amounts) {
    AdmissionResult r;
    r.used.reserve(plan.checks.size());
    // Every check is summed (what the remaining-allowance headers report);
    // the first breach decides.
    for (std::size_t i = 0; i < plan.checks.size(); ++i) {
        const Check& c = plan.checks[i];
        __int128 sum = 0;
        for (const std::string& key : c.keys) sum += kv.get(key);
        if (c.reserves) sum += kv.reserved(c);
        r.used.push_back(sum <= 0 ? 0 : sum >= INT64_MAX ? INT64_MAX : static_cast<std::int64_t>(sum));
        const std::int64_t add = check_add(c, amounts);
        const bool breach = add > 0 ? sum + add > c.limit : sum >= c.limit;
        if (breach && r.admitted) {
            r.admitted = false;
            r.kind = c.kind;
            r.retry_after = c.retry_after;
            r.message = c.message;
            r.check_index = static_cast<int>(i);
        }
    }
    const std::vector<Incr>& incrs = r.admitted ? plan.admit : plan.reject;
    for (const Incr& in : incrs) {
        if (in.delta != 0 && !kv.incr(in.key, in.delta, in.ttl)) return false;
    }
    if (r.admitted) {
        for (const Reservation& res : plan.reserve) {
            const std::int64_t amount = reserve_amount(amounts, res.measure);
            if (amount > 0 && !kv.reserve(res, amount)) return false;   // 0: a reservation of nothing
        }
    }
    result = std::move(r);
    return true;
}

}  // namespace llmgw
