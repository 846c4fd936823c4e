// Provider model discovery (no nginx): the list endpoint of each provider
// type, its pagination, and the parsing of one page.
//
//   openai     GET <location>/models[?after=<last id>]         has_more, last_id
//   anthropic  GET <location>/v1/models?limit=1000[&after_id=]  has_more, last_id
//   gemini     GET <location>/v1beta/models?pageSize=1000[&pageToken=]  nextPageToken; ids "models/<id>"
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/provider.h"

namespace llmgw {

inline constexpr std::size_t kDiscoveryMaxPages = 50;
inline constexpr std::size_t kDiscoveryMaxIds = 10000;
inline constexpr std::size_t kDiscoveryMaxIdBytes = 256;

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
// looping its pagination must not loop the gateway).
class ModelWalk {
public:
    explicit ModelWalk(ProviderType type) : type_(type) {}
    std::string next_path() const { return model_list_path(type_, cursor_); }
    // false (err) when the page is not valid: the walk failed.
    bool feed(std::string_view body, std::string& err);
    bool done() const { return done_; }
    const std::vector<std::string>& ids() const { return ids_; }
    std::size_t pages() const { return pages_; }
    bool truncated() const { return truncated_; }

private:
    ProviderType type_;
    std::string cursor_;
    std::vector<std::string> cursors_seen_;
    std::vector<std::string> ids_;
    std::size_t pages_ = 0;
    bool done_ = false, truncated_ = false;
};

}  // namespace llmgw
