// Provider model discovery (no nginx): the list endpoint of each provider
// type, its pagination, and the parsing of one page.
//
//   openai     GET <location>/models[?after=<last id>]         has_more, last_id
//   anthropic  GET <location>/v1/models?limit=1000[&after_id=]  has_more, last_id
//   gemini     GET <location>/v1beta/models?pageSize=1000[&pageToken=]  nextPageToken; ids "models/<id>"
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/codec/provider_type.h"

namespace llmgw {

inline constexpr std::size_t kDiscoveryMaxPages = 50;
inline constexpr std::size_t kDiscoveryMaxIds = 10000;
inline constexpr std::size_t kDiscoveryMaxIdBytes = 256;
// What one walk may read (discover_max_page=, discover_max_total=,
// discover_timeout= of llm_gateway_provider: docs/models.md#discovery).
inline constexpr std::size_t kDiscoveryMaxPageBytes = 4 * 1024 * 1024;
inline constexpr std::size_t kDiscoveryMaxTotalBytes = 16 * 1024 * 1024;
inline constexpr std::int64_t kDiscoveryTimeoutMs = 30000;

struct WalkBounds {
    std::size_t max_page = kDiscoveryMaxPageBytes;     // bytes of one page's body
    std::size_t max_total = kDiscoveryMaxTotalBytes;   // bytes of all pages' bodies together
};

struct ModelPage {
    std::vector<std::string> ids;   // usable ids of the page (others skipped)
    std::string next;               // the cursor of the next page; "" when this is the last
    std::size_t skipped = 0;        // ids refused (too long, control characters, invalid UTF-8)
};

// The path (with its query) of a list page below the provider's location;
// cursor "" for the first page. The cursor is percent-encoded.
std::string model_list_path(ProviderType type, std::string_view cursor);

// One page of a list answer; false (err: why) when the body is not one.
bool parse_model_page(ProviderType type, std::string_view body, ModelPage& out, std::string& err);

// Walks the pages of one provider: feed each page's answer; done() once the
// last page was read, a bound was reached, or a cursor came back (a provider
// looping its pagination must not loop the gateway). Its bytes are bounded
// too: a page larger than the page bound, or pages together larger than the
// total bound, fail the walk (the last good list stays).
class ModelWalk {
public:
    explicit ModelWalk(ProviderType type, WalkBounds bounds = {}) : type_(type), bounds_(bounds) {}
    std::string next_path() const { return model_list_path(type_, cursor_); }
    // The most bytes the next page's body may have: the page bound, or what
    // is left of the total when that is less. The shell stops reading a
    // page there.
    std::size_t next_page_limit() const;
    // A page cut at next_page_limit(): the walk failed; err names the bound.
    void overflow(std::string& err) const;
    // false (err) when the page is not valid or too large: the walk failed.
    bool feed(std::string_view body, std::string& err);
    std::size_t bytes() const { return bytes_; }   // the bodies read so far
    bool done() const { return done_; }
    const std::vector<std::string>& ids() const { return ids_; }
    std::size_t pages() const { return pages_; }
    bool truncated() const { return truncated_; }

private:
    ProviderType type_;
    WalkBounds bounds_;
    std::size_t bytes_ = 0;
    std::string cursor_;
    std::vector<std::string> cursors_seen_;
    std::vector<std::string> ids_;
    std::size_t pages_ = 0;
    bool done_ = false, truncated_ = false;
};

}  // namespace llmgw
