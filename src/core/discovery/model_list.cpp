#include "core/discovery/model_list.h"

#include <exception>

#include <rapidjson/document.h>

#include "core/http/percent.h"
#include "core/json/envelope.h"
#include "core/json/read.h"

namespace llmgw {
namespace {

namespace rj = rapidjson;

bool usable_id(std::string_view id) {
    if (id.empty() || id.size() > kDiscoveryMaxIdBytes || !is_valid_utf8(id)) return false;
    for (unsigned char c : id) {
        if (c < 0x20 || c == 0x7f) return false;
    }
    return true;
}

using json::get;
using json::sv;

}  // namespace

std::string model_list_path(ProviderType type, std::string_view cursor) {
    switch (type) {
    case ProviderType::Anthropic:
        return cursor.empty() ? "/v1/models?limit=1000" : "/v1/models?limit=1000&after_id=" + percent_encode(cursor);
    case ProviderType::Gemini:
        return cursor.empty() ? "/v1beta/models?pageSize=1000" : "/v1beta/models?pageSize=1000&pageToken=" + percent_encode(cursor);
    case ProviderType::OpenAI:
        break;
    }
    return cursor.empty() ? "/models" : "/models?after=" + percent_encode(cursor);
}

bool parse_model_page(ProviderType type, std::string_view body, ModelPage& out, std::string& err) {
    try {
        rj::Document d;
        d.Parse<rj::kParseIterativeFlag>(body.data(), body.size());
        if (d.HasParseError() || !d.IsObject()) {
            err = "the model list is not a JSON object";
            return false;
        }
        const rj::Value* list = get(d, type == ProviderType::Gemini ? "models" : "data");
        if (list == nullptr && type == ProviderType::Gemini) {   // an empty last page may omit it
            out.next.clear();
            return true;
        }
        if (list == nullptr || !list->IsArray()) {
            err = type == ProviderType::Gemini ? "models is not an array" : "data is not an array";
            return false;
        }
        for (auto& m : list->GetArray()) {
            const rj::Value* id = get(m, type == ProviderType::Gemini ? "name" : "id");
            if (id == nullptr || !id->IsString()) {
                ++out.skipped;
                continue;
            }
            std::string_view s = sv(*id);
            if (type == ProviderType::Gemini && s.rfind("models/", 0) == 0) s.remove_prefix(7);
            if (!usable_id(s)) {
                ++out.skipped;
                continue;
            }
            out.ids.emplace_back(s);
        }
        out.next.clear();
        if (type == ProviderType::Gemini) {
            if (const rj::Value* t = get(d, "nextPageToken")) {
                if (!t->IsString()) {
                    err = "nextPageToken is not a string";
                    return false;
                }
                out.next.assign(sv(*t));
            }
        } else if (const rj::Value* more = get(d, "has_more")) {
            if (!more->IsBool()) {
                err = "has_more is not a boolean";
                return false;
            }
            if (more->GetBool()) {
                const rj::Value* last = get(d, "last_id");
                if (last != nullptr && last->IsString()) {
                    out.next.assign(sv(*last));
                } else if (!list->Empty()) {
                    const rj::Value* id = get((*list)[list->Size() - 1], "id");
                    if (id != nullptr && id->IsString()) out.next.assign(sv(*id));
                }
                if (out.next.empty()) {
                    err = "has_more without a last id";
                    return false;
                }
            }
        }
        if (out.next.size() > 4096) {
            err = "the page cursor is too long";
            return false;
        }
        return true;
    } catch (const std::exception&) {
        err = "out of memory reading the model list";
        return false;
    }
}

std::size_t ModelWalk::next_page_limit() const {
    const std::size_t left = bytes_ < bounds_.max_total ? bounds_.max_total - bytes_ : 0;
    return left < bounds_.max_page ? left : bounds_.max_page;
}

void ModelWalk::overflow(std::string& err) const {
    const bool page = next_page_limit() == bounds_.max_page;   // the page bound was the nearer one
    err = page ? "page " + std::to_string(pages_ + 1) + " is larger than discover_max_page (" +
                     std::to_string(bounds_.max_page) + " bytes)"
               : "the pages are larger together than discover_max_total (" + std::to_string(bounds_.max_total) +
                     " bytes) at page " + std::to_string(pages_ + 1);
}

bool ModelWalk::feed(std::string_view body, std::string& err) {
    if (body.size() > next_page_limit()) {
        overflow(err);
        return false;
    }
    bytes_ += body.size();
    ModelPage page;
    if (!parse_model_page(type_, body, page, err)) return false;
    ++pages_;
    for (std::string& id : page.ids) {
        if (ids_.size() >= kDiscoveryMaxIds) {
            truncated_ = true;
            break;
        }
        ids_.push_back(std::move(id));
    }
    if (page.next.empty() || truncated_) {
        done_ = true;
        return true;
    }
    for (const std::string& c : cursors_seen_) {
        if (c == page.next) {   // the provider sent a cursor again: stop here
            done_ = true;
            truncated_ = true;
            return true;
        }
    }
    if (pages_ >= kDiscoveryMaxPages) {
        done_ = true;
        truncated_ = true;
        return true;
    }
    cursors_seen_.push_back(page.next);
    cursor_ = std::move(page.next);
    return true;
}

}  // namespace llmgw
