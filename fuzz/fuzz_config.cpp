// libFuzzer target: the values an operator (or a reloaded users file, or a
// provider's Retry-After) hands the core as text. The first byte picks the
// parser:
//  0 a store URL (parse_store_url, redacted_store_url);
//  1 a store URL with a known password in it: "redis://u:<password>@<rest>";
//  2 llm_gateway_public_url (public_base);
//  3 a limit's value as a directive writes it (set_limit);
//  4 a limit's value as the users file gives it, a JSON number
//    (set_limit_number, with the double read from the input's bytes);
//  5 a price as llm_gateway_price reads it (the cost check, strtod,
//    PriceTable::set_override) and the cost arithmetic over it
//    (cost_micros), with a model looked up (PriceTable::find);
//  6 a secret reference (resolve_secret, describe_secret_ref), env: names
//    resolving to a known value;
//  7 a provider's Retry-After (parse_retry_after_ms);
//  8 llm_gateway_cache's arguments (split at spaces: parse_cache_settings)
//    and a caller's Cache-Control (cache_control_bypasses): accepted
//    settings in bounds (a zone, a temperature from 0 to 2, named groups);
//  9 a provider's answer through the cache's tool-call marks
//    (ToolCallScan, each answer format), whose verdict must not depend on
//    how the answer is cut.
// What must hold: no crash, no read past a bound; every parser answers yes
// or no with a reason; what is accepted is in bounds (ports, databases,
// limits and prices not negative, costs not negative and growing with the
// tokens); the store URL's password appears neither in its errors nor in
// its redacted form (which does not depend on the password's value); a
// secret's description and errors never hold its value.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "core/cache/cache_settings.h"
#include "core/cache/tool_call_scan.h"
#include "core/config/secret.h"
#include "core/config/store_url.h"
#include "core/metering/limits.h"
#include "core/metering/pricing.h"
#include "core/routing/retry.h"
#include "core/targets/agent_card.h"
#include "fuzz_util.h"

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

constexpr const char* kPassword = "Pw-MARK-7c1e";
constexpr const char* kEnvValue = "env-SECRET-VALUE-4d2b";

const char* fake_getenv(const char* name) {
    if (std::strcmp(name, "EMPTY") == 0) return "";
    return name[0] >= 'A' && name[0] <= 'Z' ? kEnvValue : nullptr;
}

bool limits_ok(const Limits& l) {
    return l.requests_per_minute >= 0 && l.requests_per_day >= 0 && l.tokens_per_day >= 0 && l.tokens_per_month >= 0 &&
           l.cost_per_day_micros >= 0 && l.cost_per_month_micros >= 0;
}

void store_url(const std::string& text) {
    StoreUrl url;
    std::string err;
    if (parse_store_url(text, url, err)) {
        FUZZ_CHECK(url.port >= 1 && url.port <= 65535 && url.db >= 0 && !url.host.empty());
        // the redacted form never depends on the password's value: it shows only that there is one
        StoreUrl other = url;
        if (!other.password.empty()) other.password = other.password == "x" ? "y" : "x";
        FUZZ_CHECK(redacted_store_url(url) == redacted_store_url(other));
    } else {
        FUZZ_CHECK(!err.empty());
    }
}

void store_url_with_password(const std::string& pw, const std::string& rest) {
    const std::string text = "redis://u:" + std::string(kPassword) + pw + "@" + rest;
    StoreUrl url;
    std::string err;
    // the marker may come back only where the rest of the text holds it
    const bool elsewhere = contains(rest, kPassword) || contains(percent_decode(rest), kPassword);
    if (parse_store_url(text, url, err)) {
        if (!elsewhere) FUZZ_CHECK(!contains(redacted_store_url(url), kPassword));
    } else {
        FUZZ_CHECK(!err.empty());
        if (!elsewhere) FUZZ_CHECK(!contains(err, kPassword));
    }
}

void limit_number(const std::uint8_t* data, std::size_t size) {
    if (size < 10) return;
    double d;
    std::memcpy(&d, data, sizeof d);
    const bool is_int = (data[8] & 1) != 0;
    const std::string name(reinterpret_cast<const char*>(data) + 9, size - 9);
    Limits l;
    const std::string err = set_limit_number(l, name, d, is_int);
    if (err.empty()) {
        FUZZ_CHECK(std::isfinite(d) && d >= 0);
        FUZZ_CHECK(limits_ok(l));
    }
    (void)usd_to_micros(d);
    FUZZ_CHECK(usd_to_micros(d) >= 0);
}

void price(const std::string& text) {
    // "<input>\n<output>\n<model>": the directive's input= and output= values
    const std::size_t a = text.find('\n');
    const std::size_t b = a == std::string::npos ? std::string::npos : text.find('\n', a + 1);
    const std::string in = text.substr(0, a);
    const std::string out = a == std::string::npos ? "1" : text.substr(a + 1, b == std::string::npos ? b : b - a - 1);
    const std::string model = b == std::string::npos ? "gpt-4o-2024-08-06" : text.substr(b + 1);
    Limits probe;
    if (!set_limit(probe, "cost_per_day", in).empty() || !set_limit(probe, "cost_per_day", out).empty()) return;
    const double din = std::strtod(in.c_str(), nullptr), dout = std::strtod(out.c_str(), nullptr);
    static const PriceTable builtin = PriceTable::builtin();
    PriceTable t = builtin;
    const std::string err = t.set_override("oai/" + model, din, dout);
    FUZZ_CHECK(err.empty());   // the directive's check admits only what set_override takes
    const Price* p = t.find("oai", "openai", model);
    FUZZ_CHECK(p != nullptr && p->source == "config");
    FUZZ_CHECK(p->input_micros_per_mtok >= 0 && p->output_micros_per_mtok >= 0);
    const std::int64_t c1 = cost_micros(*p, 1000, 1000);
    const std::int64_t c2 = cost_micros(*p, 1000000000, 1000000000);
    const std::int64_t c3 = cost_micros(*p, INT64_MAX, INT64_MAX);
    FUZZ_CHECK(c1 >= 0 && c1 <= c2 && c2 <= c3);
    FUZZ_CHECK(cost_micros(*p, -5, -5) == 0);
    (void)builtin.find("x", "openai", model);
}

// Files a file: reference may name: "file:@0" to "file:@6" are these (the
// fuzzer never opens a path of its own choosing: a device could block or
// have effects).
std::string prepared_file(char which) {
    static const std::string dir = [] {
        // one folder per user, written again by each run (no folder left per run)
        const std::string base = "/tmp/llmgw-fuzz-secrets-" + std::to_string(getuid());
        mkdir(base.c_str(), 0700);
        const std::string contents[] = {"", "\n", "\r\n", "key\r\n", std::string(64 * 1024, 'k'),
                                        std::string(64 * 1024 + 1, 'k')};
        for (int i = 0; i < 6; ++i) {
            FILE* f = std::fopen((base + "/" + std::to_string(i)).c_str(), "wb");
            if (f == nullptr) std::abort();
            std::fwrite(contents[i].data(), 1, contents[i].size(), f);
            std::fclose(f);
        }
        mkdir((base + "/6").c_str(), 0700);   // a directory
        return base;
    }();
    return dir + "/" + std::string(1, which);
}

void secret(const std::string& ref_in) {
    std::string ref = ref_in;
    if (ref.rfind("file:", 0) == 0 && ref.size() > 5) {
        if (ref.size() != 7 || ref[5] != '@' || ref[6] < '0' || ref[6] > '6') return;   // describe only: above
        ref = "file:" + prepared_file(ref[6]);
    }
    const SecretResult r = resolve_secret(ref, fake_getenv);
    const std::string shown = describe_secret_ref(ref);
    if (r.ok) {
        FUZZ_CHECK(!r.value.empty() && r.error.empty());
    } else {
        FUZZ_CHECK(!r.error.empty());
    }
    if (!contains(ref, kEnvValue)) FUZZ_CHECK(!contains(shown, kEnvValue) && !contains(r.error, kEnvValue));
    // a literal is shown as "literal", never itself
    if (ref.rfind("env:", 0) != 0 && ref.rfind("file:", 0) != 0) FUZZ_CHECK(shown == "literal");
    // an env: name that is not a valid name is not echoed (it may be a pasted
    // secret): its error is the same whatever the name
    if (ref.rfind("env:", 0) == 0 && shown == "env:(invalid name)") {
        FUZZ_CHECK(r.error == resolve_secret("env:1-invalid", fake_getenv).error);
    }
}

void cache_settings(const std::string& text) {
    std::vector<std::string_view> args;
    std::string_view rest(text);
    while (!rest.empty()) {
        const std::size_t sp = rest.find(' ');
        args.push_back(rest.substr(0, sp));
        if (sp == std::string_view::npos) break;
        rest.remove_prefix(sp + 1);
    }
    CacheSettings s;
    std::string err;
    if (parse_cache_settings(args, s, err)) {
        FUZZ_CHECK(err.empty());
        if (s.on) {
            FUZZ_CHECK(!s.zone.empty() && s.max_temperature >= 0 && s.max_temperature <= 2);
            for (const std::string& g : s.groups) FUZZ_CHECK(!g.empty());
        }
    } else {
        FUZZ_CHECK(!err.empty());
    }
    (void)cache_control_bypasses(text);
}

void tool_call_scan(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return;
    const auto wire = static_cast<AnswerWire>(data[0] % 5);
    const std::size_t step = data[1] % 13 + 1;
    const std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
    ToolCallScan whole(wire), cut(wire);
    whole.feed(body);
    for (std::size_t i = 0; i < body.size(); i += step) cut.feed(body.substr(i, step));
    FUZZ_CHECK(whole.found() == cut.found());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::string err, out;
    switch (data[0] % 10) {
    case 0: store_url(text); break;
    case 1: {
        const std::size_t cut = text.find('\0');
        store_url_with_password(text.substr(0, cut), cut == std::string::npos ? "" : text.substr(cut + 1));
        break;
    }
    case 2:
        if (public_base(text, out, err) ? out.empty() || out.size() > text.size() : err.empty()) __builtin_trap();
        break;
    case 3: {
        Limits l;
        const std::size_t eq = text.find('=');
        const std::string name = eq == std::string::npos ? "requests_per_day" : text.substr(0, eq);
        const std::string value = eq == std::string::npos ? text : text.substr(eq + 1);
        err = set_limit(l, name, value);
        if (err.empty()) FUZZ_CHECK(limits_ok(l));
        break;
    }
    case 4: limit_number(data + 1, size - 1); break;
    case 5: price(text); break;
    case 6:
        (void)describe_secret_ref(text);
        secret(text);
        break;
    case 7: (void)parse_retry_after_ms(text, 1764288000); break;
    case 8: cache_settings(text); break;
    default: tool_call_scan(data + 1, size - 1); break;
    }
    return 0;
}
