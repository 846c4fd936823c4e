// llm_gateway_cache's arguments and the per-request decision.
#include "core/cache/cache_settings.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace llmgw {
namespace {

bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool parse_on_off(std::string_view v, bool& out) {
    if (v == "on") return out = true, true;
    if (v == "off") return out = false, true;
    return false;
}

bool zone_name_ok(std::string_view z) {
    if (z.empty() || z.size() > 255) return false;
    for (char c : z) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '-' || c == '.';
        if (!ok) return false;
    }
    return true;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equals_nocase(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

}  // namespace

bool parse_cache_settings(const std::vector<std::string_view>& args, CacheSettings& out, std::string& err) {
    out = CacheSettings();
    if (args.size() == 1 && args[0] == "off") return true;
    bool zone = false;
    for (std::string_view a : args) {
        if (starts(a, "zone=")) {
            std::string_view z = a.substr(5);
            if (!zone_name_ok(z)) {
                err = "zone= must name a proxy_cache_path keys_zone (letters, digits, '_', '-', '.')";
                return false;
            }
            out.zone = std::string(z);
            zone = true;
        } else if (starts(a, "scope=")) {
            std::string_view v = a.substr(6);
            if (v != "group" && v != "shared") {
                err = "scope= must be \"group\" or \"shared\"";
                return false;
            }
            out.shared_scope = v == "shared";
        } else if (starts(a, "max_temperature=")) {
            std::string v(a.substr(16));
            char* end = nullptr;
            errno = 0;
            const double t = v.empty() ? -1 : std::strtod(v.c_str(), &end);
            if (v.empty() || end != v.c_str() + v.size() || errno != 0 || !std::isfinite(t) || t < 0 || t > 2) {
                err = "max_temperature= must be a number from 0 to 2";
                return false;
            }
            out.max_temperature = t;
        } else if (starts(a, "tool_calls=")) {
            if (!parse_on_off(a.substr(11), out.tool_calls)) {
                err = "tool_calls= must be \"on\" or \"off\"";
                return false;
            }
        } else if (starts(a, "groups=")) {
            std::string_view v = a.substr(7);
            while (true) {
                const std::size_t c = v.find(',');
                std::string_view g = v.substr(0, c);
                if (g.empty()) {
                    err = "groups= must list group names separated by commas";
                    return false;
                }
                out.groups.emplace_back(g);
                if (c == std::string_view::npos) break;
                v.remove_prefix(c + 1);
            }
        } else if (a == "off") {
            err = "\"off\" takes no other parameter";
            return false;
        } else {
            err = "unknown parameter \"" + std::string(a.substr(0, 64)) +
                  "\" (zone=, scope=, max_temperature=, tool_calls=, groups=)";
            return false;
        }
    }
    if (!zone) {
        err = "zone= is required: the proxy_cache_path keys_zone the provider locations cache in";
        return false;
    }
    out.on = true;
    return true;
}

std::string_view cache_skip_reason(CacheSkip s) {
    switch (s) {
    case CacheSkip::None: return "cacheable";
    case CacheSkip::Off: return "the cache is off here";
    case CacheSkip::Route: return "the route is not cached";
    case CacheSkip::Group: return "the caller's group is not in groups=";
    case CacheSkip::Client: return "the caller sent Cache-Control: no-cache or no-store";
    case CacheSkip::Temperature: return "the temperature is above max_temperature";
    }
    return "";
}

bool cache_control_bypasses(std::string_view header) {
    while (!header.empty()) {
        const std::size_t c = header.find(',');
        std::string_view d = trim(header.substr(0, c));
        if (const std::size_t eq = d.find('='); eq != std::string_view::npos) d = trim(d.substr(0, eq));
        if (equals_nocase(d, "no-cache") || equals_nocase(d, "no-store")) return true;
        if (c == std::string_view::npos) break;
        header.remove_prefix(c + 1);
    }
    return false;
}

CacheSkip cache_decision(const CacheSettings& s, const CacheAsk& a) {
    if (!s.on) return CacheSkip::Off;
    if (!a.route_cacheable) return CacheSkip::Route;
    if (!s.groups.empty()) {
        bool in = false;
        for (const std::string& g : s.groups) in = in || g == a.group;
        if (!in) return CacheSkip::Group;
    }
    if (cache_control_bypasses(a.cache_control)) return CacheSkip::Client;
    if (a.temperature > s.max_temperature) return CacheSkip::Temperature;
    return CacheSkip::None;
}

}  // namespace llmgw
