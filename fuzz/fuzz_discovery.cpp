// libFuzzer target: the model list pages of the three provider types, as
// discovery reads them: each page's answer through the model list codec
// (fed in pieces), then the walk over the pages (ModelWalk: its bounds on
// bytes, pages and ids, a cursor sent twice), and every page read as each
// type's page (parse_model_page).
//
// Input: byte 0 picks the provider type, byte 1 the walk's byte bounds,
// byte 2 how each answer is cut; the rest is the pages, separated by 0x1e.
// What must hold: no crash, no read past a bound; a refused page says why;
// every id kept is 1 to 256 bytes of valid UTF-8 without control bytes; at
// most 10,000 ids and 50 pages; the bytes read stay within the bounds; the
// next page's path is the type's list path with the cursor percent-encoded.
#include <cstdint>
#include <string>

#include "core/codec/codec.h"
#include "core/discovery/model_list.h"
#include "fuzz_util.h"
#include "json_mutator.h"

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

void check_id(const std::string& id) {
    FUZZ_CHECK(!id.empty() && id.size() <= kDiscoveryMaxIdBytes && valid_utf8(id));
    for (unsigned char c : id) FUZZ_CHECK(c >= 0x20 && c != 0x7f);
}

void check_path(ProviderType type, const std::string& path) {
    const std::string first = model_list_path(type, "");
    FUZZ_CHECK(path.compare(0, first.size(), first) == 0);
    if (path.size() == first.size()) return;
    const std::size_t eq = path.find('=', first.size());
    FUZZ_CHECK(eq != std::string::npos);
    for (std::size_t i = eq + 1; i < path.size(); ++i) {
        const char c = path[i];
        const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '.' || c == '_' || c == '~' || c == '%';
        FUZZ_CHECK(ok);
    }
}

// The body as the shell keeps it: the model list codec's whole answer.
bool through_codec(ProviderType type, std::string_view page, std::size_t limit, Splitter cut, std::string& body) {
    auto codec = make_model_list_codec(type, model_list_path(type, ""), limit);
    codec->head(200, "application/json");
    std::string out;
    for (std::size_t i = 0; i < page.size();) {
        const std::size_t n = cut.next(page.size() - i);
        codec->feed(page.substr(i, n), out);
        i += n;
    }
    codec->finish(BodyEnd::Clean, out);
    if (codec->result().end != EndState::Complete || codec->spilled()) return false;
    body.swap(out);
    FUZZ_CHECK(body == page);
    return true;
}

}  // namespace

LLMGW_JSON_PAGES_MUTATOR(3, '\x1e', "data", "id", "object", "model", "owned_by", "created", "has_more", "last_id",
                         "first_id", "models", "name", "nextPageToken", "displayName", "supportedGenerationMethods",
                         "type", "display_name", "created_at", "models/", "list")

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 3) return 0;
    const auto type = static_cast<ProviderType>(data[0] % 3);
    WalkBounds bounds;
    if (data[1] & 1) bounds.max_page = 64 + data[1] * 8;
    if (data[1] & 2) bounds.max_total = 256 + data[1] * 16;
    const std::string_view body(reinterpret_cast<const char*>(data) + 3, size - 3);

    ModelWalk walk(type, bounds);
    std::size_t at = 0, feeds = 0;
    while (!walk.done()) {
        check_path(type, walk.next_path());
        if (at > body.size()) break;   // no more pages: the walk stays unfinished
        std::size_t end = body.find('\x1e', at);
        if (end == std::string_view::npos) end = body.size();
        const std::string_view page = body.substr(at, end - at);
        at = end + 1;
        for (ProviderType t : {ProviderType::OpenAI, ProviderType::Anthropic, ProviderType::Gemini}) {
            ModelPage p;
            std::string err;
            if (parse_model_page(t, page, p, err)) {
                for (const std::string& id : p.ids) check_id(id);
                FUZZ_CHECK(p.next.size() <= 4096);
            } else {
                FUZZ_CHECK(!err.empty());
            }
        }
        std::string err;
        const std::size_t limit = walk.next_page_limit();
        if (page.size() > limit) {   // the shell stops reading there
            walk.overflow(err);
            FUZZ_CHECK(!err.empty());
            break;
        }
        std::string got;
        if (!through_codec(type, page, limit, Splitter(data[2], data[2] >> 2), got)) break;
        ++feeds;
        if (!walk.feed(got, err)) {
            FUZZ_CHECK(!err.empty());
            break;
        }
        FUZZ_CHECK(walk.bytes() <= bounds.max_total);
        FUZZ_CHECK(feeds <= kDiscoveryMaxPages);
    }
    FUZZ_CHECK(walk.pages() <= kDiscoveryMaxPages && walk.ids().size() <= kDiscoveryMaxIds);
    for (const std::string& id : walk.ids()) check_id(id);
    return 0;
}
