// libFuzzer target: the values an operator (or a reloaded users file, or a
// provider's Retry-After) hands the core as text: a store URL, a public URL,
// a limit's value, a Retry-After. The first byte chooses the parser; each
// must answer yes or no with a reason, within bounds, never crash.
#include <cstdint>
#include <string>

#include "core/config/store_url.h"
#include "core/metering/limits.h"
#include "core/routing/retry.h"
#include "core/targets/agent_card.h"

using namespace llmgw;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::string err, out;
    switch (data[0] % 4) {
    case 0: {
        StoreUrl url;
        if (parse_store_url(text, url, err)) {
            if (url.port < 1 || url.port > 65535 || url.db < 0) __builtin_trap();
            // the redacted form never depends on the password's value: it
            // shows only that there is one
            StoreUrl other = url;
            if (!other.password.empty()) other.password = other.password == "x" ? "y" : "x";
            if (redacted_store_url(url) != redacted_store_url(other)) __builtin_trap();
        } else if (err.empty()) {
            __builtin_trap();
        }
        break;
    }
    case 1:
        if (public_base(text, out, err) ? out.empty() || out.size() > text.size() : err.empty()) __builtin_trap();
        break;
    case 2: {
        Limits l;
        const std::size_t eq = text.find('=');
        const std::string name = eq == std::string::npos ? "requests_per_day" : text.substr(0, eq);
        const std::string value = eq == std::string::npos ? text : text.substr(eq + 1);
        err = set_limit(l, name, value);
        if (err.empty() && (l.requests_per_minute < 0 || l.requests_per_day < 0 || l.tokens_per_day < 0 ||
                            l.tokens_per_month < 0 || l.cost_per_day_micros < 0 || l.cost_per_month_micros < 0)) {
            __builtin_trap();
        }
        break;
    }
    case 3:
        (void)parse_retry_after_ms(text, 1764288000);
        break;
    }
    return 0;
}
