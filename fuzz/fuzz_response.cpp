// libFuzzer target: what a provider (or anything posing as one) answers,
// through every codec the gateway reads answers with: native and translated
// chat and messages for each provider type, embeddings, media, the
// passthrough and the relay; whole and streamed (SSE), cut into pieces of
// every size, ended cleanly or cut. A hostile answer must end in a result
// (complete, cut, invalid, an error), never a crash or a read past a bound.
//
// The first bytes choose: the codec and provider type, the client's stream
// flag, the status, the content type, the piece size and how the body ends.
#include <cstdint>
#include <string>

#include "core/codec/codec.h"

using namespace llmgw;

namespace {

struct Combo {
    CodecKind kind;
    ProviderType provider;
};

constexpr Combo kCombos[] = {
    {CodecKind::OpenAIChat, ProviderType::OpenAI},          {CodecKind::OpenAIChat, ProviderType::Anthropic},
    {CodecKind::OpenAIChat, ProviderType::Gemini},          {CodecKind::AnthropicMessages, ProviderType::Anthropic},
    {CodecKind::AnthropicMessages, ProviderType::OpenAI},   {CodecKind::AnthropicMessages, ProviderType::Gemini},
    {CodecKind::OpenAIEmbeddings, ProviderType::OpenAI},    {CodecKind::OpenAIEmbeddings, ProviderType::Gemini},
    {CodecKind::OpenAIImages, ProviderType::OpenAI},        {CodecKind::OpenAISpeech, ProviderType::OpenAI},
    {CodecKind::OpenAITranscription, ProviderType::OpenAI}, {CodecKind::Passthrough, ProviderType::OpenAI},
    {CodecKind::Passthrough, ProviderType::Anthropic},      {CodecKind::Passthrough, ProviderType::Gemini},
    {CodecKind::Relay, ProviderType::OpenAI},
};
constexpr const char* kTypes[] = {"application/json", "text/event-stream", "text/plain", "",
                                  "application/json; charset=utf-8", "audio/mpeg"};
constexpr int kStatuses[] = {200, 200, 200, 400, 429, 500, 503, 201, -1, 99, 600};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 4) return 0;
    const Combo& combo = kCombos[data[0] % (sizeof(kCombos) / sizeof(kCombos[0]))];
    CodecOptions opt;
    opt.provider = combo.provider;
    opt.client_stream = (data[1] & 1) != 0;
    opt.client_wants_usage = (data[1] & 2) != 0;
    opt.client_model = "m";
    opt.created = 1;
    opt.whole_limit = 64 * 1024;   // small bounds, reached by the fuzzer
    opt.error_limit = 1024;
    opt.max_event_bytes = 8 * 1024;
    const int status = kStatuses[(data[1] >> 2) % (sizeof(kStatuses) / sizeof(kStatuses[0]))];
    const char* type = kTypes[data[2] % (sizeof(kTypes) / sizeof(kTypes[0]))];
    const std::size_t piece = 1 + data[3] % 64;
    const BodyEnd how = (data[2] & 0x80) != 0 ? BodyEnd::Cut : BodyEnd::Clean;
    auto codec = make_codec(combo.kind, opt);
    if (codec == nullptr) return 0;
    const std::string_view body(reinterpret_cast<const char*>(data) + 4, size - 4);
    std::string out;
    codec->head(status, type);
    for (std::size_t i = 0; i < body.size(); i += piece) codec->feed(body.substr(i, piece), out);
    codec->finish(how, out);
    const auto& res = codec->result();
    if (!res.usage.malformed && (res.usage.prompt_tokens < 0 || res.usage.completion_tokens < 0)) __builtin_trap();
    return 0;
}
