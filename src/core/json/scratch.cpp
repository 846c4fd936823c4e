#include "core/json/scratch.h"

#include <rapidjson/error/en.h>

#include "core/json/text_checks.h"

namespace llmgw {

JsonScratch::JsonScratch() : pool_(buf_, sizeof buf_, 16 * 1024), doc_(&pool_) {}

const rapidjson::Document& JsonScratch::parse(std::string_view s, bool full_precision) {
    pool_.Clear();   // every value of the last parse goes; the first 4 KiB are reused in place
    if (full_precision) {
        parse_full_precision(doc_, s);
    } else {
        doc_.Parse<rapidjson::kParseIterativeFlag>(s.data(), s.size());
    }
    return doc_;
}

JsonScratch& json_scratch() {
    thread_local JsonScratch scratch;
    return scratch;
}

const rapidjson::Document* parse_scratch_object(std::string_view s, std::string& err) {
    const rapidjson::Document& d = json_scratch().parse(s);
    if (d.HasParseError()) {
        err = std::string("not JSON: ") + rapidjson::GetParseError_En(d.GetParseError());
        return nullptr;
    }
    if (!d.IsObject()) {
        err = "not a JSON object";
        return nullptr;
    }
    return &d;
}

}  // namespace llmgw
