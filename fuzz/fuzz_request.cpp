// libFuzzer target: the chat request parser (RequestDoc::parse, RapidJSON
// with full precision) on a caller's body around arbitrary bytes: the value
// of "temperature", so numbers are what it varies most. It found RapidJSON
// 1.1 reading past its power-of-ten table (core/json/text_checks.h).
#include <cstdint>
#include <string>

#include "core/codec/openai.h"

using namespace llmgw;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string body = std::string("{\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":") +
                       std::string(reinterpret_cast<const char*>(data), size) + "}";
    std::string err;
    auto doc = RequestDoc::parse(body, err);
    if (!doc && err.empty()) __builtin_trap();
    return 0;
}
