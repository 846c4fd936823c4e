// A reusable parse target for the stream readers (no nginx): parsing each
// SSE event into a fresh rapidjson::Document costs a 64 KiB pool chunk and a
// parse stack per event; the scratch document keeps both, per thread (one
// per nginx worker), so a translated stream parses without allocating. The
// parsed document is valid until the next parse() on the same thread.
#pragma once
#include <string>
#include <string_view>

#include <rapidjson/document.h>

namespace llmgw {

class JsonScratch {
public:
    JsonScratch();
    JsonScratch(const JsonScratch&) = delete;
    JsonScratch& operator=(const JsonScratch&) = delete;

    // Parses s (iteratively; numbers at full precision when asked, through
    // parse_full_precision: text_checks.h) into the scratch document; check
    // HasParseError().
    const rapidjson::Document& parse(std::string_view s, bool full_precision = false);

private:
    alignas(16) char buf_[4096];
    rapidjson::MemoryPoolAllocator<> pool_;
    rapidjson::Document doc_;
};

// This thread's scratch document.
JsonScratch& json_scratch();

// s parsed into this thread's scratch document, when it is a JSON object;
// else nullptr and err says why ("not JSON: ...", "not a JSON object").
const rapidjson::Document* parse_scratch_object(std::string_view s, std::string& err);

}  // namespace llmgw
