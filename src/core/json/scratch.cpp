#include "core/json/scratch.h"

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

}  // namespace llmgw
