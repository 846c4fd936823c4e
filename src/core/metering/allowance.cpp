#include "core/metering/allowance.h"

#include <algorithm>

namespace llmgw {

std::int64_t window_length(Window w, std::time_t now) {
    switch (w) {
        case Window::Min: return 60;
        case Window::Hour: return 3600;
        case Window::Day: return 86400;
        case Window::Month: {
            std::tm t{};
            gmtime_r(&now, &t);
            static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
            const int y = t.tm_year + 1900;
            const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            return static_cast<std::int64_t>(kDays[t.tm_mon] + (t.tm_mon == 1 && leap ? 1 : 0)) * 86400;
        }
    }
    return 60;
}

std::vector<LimitShape> limit_shapes(const AdmissionPlan& plan) {
    std::vector<LimitShape> out;
    out.reserve(plan.checks.size());
    for (const Check& c : plan.checks) out.push_back(LimitShape{c.measure, c.limit, c.retry_after, c.window});
    return out;
}

Allowances tightest_allowances(const std::vector<LimitShape>& checks, const AdmissionResult& result, std::time_t now) {
    Allowances out;
    if (result.used.size() != checks.size()) return out;
    for (std::size_t i = 0; i < checks.size(); ++i) {
        const LimitShape& c = checks[i];
        std::int64_t used = result.used[i];
        // This request's own request, once admitted.
        if (c.measure == Measure::Requests && result.admitted && used < INT64_MAX) ++used;
        const std::int64_t remaining = used >= c.limit ? 0 : c.limit - used;
        Allowance& a = c.measure == Measure::Requests ? out.requests : c.measure == Measure::Tokens ? out.tokens : out.cost;
        if (a.set && a.remaining <= remaining) continue;
        a.set = true;
        a.limit = c.limit;
        a.remaining = remaining;
        a.reset_seconds = std::max<std::int64_t>(c.retry_after, 0);
        a.window_seconds = window_length(c.window, now);
    }
    return out;
}

std::string reset_text(std::int64_t seconds) {
    if (seconds <= 0) return "0s";
    const std::int64_t h = seconds / 3600, m = seconds % 3600 / 60, s = seconds % 60;
    if (h > 0) return std::to_string(h) + "h" + std::to_string(m) + "m" + std::to_string(s) + "s";
    if (m > 0) return std::to_string(m) + "m" + std::to_string(s) + "s";
    return std::to_string(s) + "s";
}

namespace {

std::string usd6(std::int64_t micros) {
    std::string frac = std::to_string(micros % 1000000);
    frac.insert(0, 6 - frac.size(), '0');
    return std::to_string(micros / 1000000) + "." + frac;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> allowance_headers(const Allowances& a) {
    std::vector<std::pair<std::string, std::string>> h;
    std::string policy, state;
    auto item = [&](const char* name, const Allowance& x) {
        if (!x.set) return;
        if (!policy.empty()) {
            policy += ", ";
            state += ", ";
        }
        policy += std::string("\"") + name + "\";q=" + std::to_string(x.limit) + ";w=" + std::to_string(x.window_seconds);
        state += std::string("\"") + name + "\";r=" + std::to_string(x.remaining) + ";t=" + std::to_string(x.reset_seconds);
    };
    if (a.requests.set) {
        h.emplace_back("x-ratelimit-limit-requests", std::to_string(a.requests.limit));
        h.emplace_back("x-ratelimit-remaining-requests", std::to_string(a.requests.remaining));
        h.emplace_back("x-ratelimit-reset-requests", reset_text(a.requests.reset_seconds));
    }
    if (a.tokens.set) {
        h.emplace_back("x-ratelimit-limit-tokens", std::to_string(a.tokens.limit));
        h.emplace_back("x-ratelimit-remaining-tokens", std::to_string(a.tokens.remaining));
        h.emplace_back("x-ratelimit-reset-tokens", reset_text(a.tokens.reset_seconds));
    }
    if (a.cost.set) {
        h.emplace_back("x-ratelimit-limit-cost-usd", usd6(a.cost.limit));
        h.emplace_back("x-ratelimit-remaining-cost-usd", usd6(a.cost.remaining));
    }
    item("requests", a.requests);
    item("tokens", a.tokens);
    if (!policy.empty()) {
        h.emplace_back("RateLimit-Policy", policy);
        h.emplace_back("RateLimit", state);
    }
    return h;
}

}  // namespace llmgw
