// The response cache's settings (llm_gateway_cache, docs/cache.md) and the
// decision, per request, whether its answer may come from nginx's
// proxy_cache and be stored there (no nginx).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace llmgw {

struct CacheSettings {
    bool on = false;
    std::string zone;                 // the proxy_cache_path keys_zone the provider locations use
    bool shared_scope = false;        // scope=shared: callers of every group share answers
    double max_temperature = 1.0;     // a request asking for more is neither looked up nor stored
    bool tool_calls = false;          // tool_calls=on: answers that call tools are stored too
    std::vector<std::string> groups;  // groups=: only these callers' groups (empty: every caller)
};

// Parses the directive's arguments ("off", or "zone=NAME [scope=group|shared]
// [max_temperature=N] [tool_calls=on|off] [groups=a,b]"). false with a
// sentence for nginx -t.
bool parse_cache_settings(const std::vector<std::string_view>& args, CacheSettings& out, std::string& err);

// Why a request's answer is not looked up in the cache nor stored there.
enum class CacheSkip {
    None,          // cacheable: looked up, stored on a miss (unless it calls a tool)
    Off,           // llm_gateway_cache off (or not set) where the request runs
    Route,         // not a route the cache serves (chat, messages, responses, embeddings)
    Group,         // the caller's group is not in groups=
    Client,        // the caller sent Cache-Control: no-cache or no-store
    Temperature,   // "temperature" above max_temperature
};
std::string_view cache_skip_reason(CacheSkip s);   // for the debug log

struct CacheAsk {
    bool route_cacheable = false;
    std::string_view group;           // the caller's group ("" none)
    std::string_view cache_control;   // the caller's Cache-Control header(s), joined by ","
    double temperature = -1;          // -1: the request named none
};
CacheSkip cache_decision(const CacheSettings& s, const CacheAsk& a);

// Cache-Control holds the directive no-cache or no-store (any case, with or
// without a value, among others separated by commas).
bool cache_control_bypasses(std::string_view header);

}  // namespace llmgw
