// $llm_gateway_cache_key: what makes two provider calls the same call for
// the response cache (docs/cache.md). No nginx.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmgw {

struct CacheKeyParts {
    std::string_view provider;         // the provider's name
    std::string_view upstream_model;   // the provider's own model id
    std::string_view method;           // "POST"
    std::string_view path;             // below the provider's location, with its query
    std::string_view scope;            // "group:<name>", "user:<name>" (no group) or "shared"
    // The headers the call sends that shape its answer (the codec's, the
    // credential left out; a caller's anthropic-beta and the like), in order.
    std::vector<std::pair<std::string_view, std::string_view>> headers;
    // The upstream body, in pieces (a caller's body around the codec's splice).
    std::vector<std::string_view> body;
};

// 64 lowercase hex digits: SHA-256 over every part, each preceded by its
// length, so no two different sets of parts share a key.
std::string cache_key(const CacheKeyParts& p);

// A caller's header that changes what a provider answers and goes upstream
// with the call: it is part of the key (anthropic-beta, anthropic-version,
// openai-beta; any case).
bool cache_keyed_header(std::string_view name);

}  // namespace llmgw
