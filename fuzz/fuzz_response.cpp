// libFuzzer target: what a provider (or anything posing as one) answers,
// through every codec the gateway reads answers with: the OpenAI, Anthropic
// and Gemini readers, native and translated (chat and messages callers per
// provider type), embeddings (Gemini's embedContent and batchEmbedContents
// answers after the request that decides their shape), media, the
// passthrough and the relay; whole and streamed (SSE), fed in pieces (all at
// once, byte by byte, a fixed size, or random sizes), ended cleanly or cut.
//
// Input: byte 0 picks the codec and provider type, byte 1 the client's
// stream and usage flags and the status, byte 2 the content type and how the
// body ends, byte 3 how the body is cut into pieces; the rest is the body.
// What must hold: no crash, no read past a bound; the answer ends in a
// settled result (never Open) with non-negative counts unless malformed;
// and the result does not depend on how the body was cut: fed again in one
// piece, the end, the usage, the text bytes and the length of the client's
// bytes are the same (the gateway's own ids are random but of one length).
#include <cstdint>
#include <string>

#include "core/codec/codec.h"
#include "fuzz_util.h"

using namespace llmgw;
using namespace llmgw::fuzz;

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
    {CodecKind::OpenAIResponses, ProviderType::OpenAI},     {CodecKind::OpenAIResponses, ProviderType::Anthropic},
    {CodecKind::OpenAIResponses, ProviderType::Gemini},
};
constexpr const char* kTypes[] = {"application/json", "text/event-stream", "text/plain", "",
                                  "application/json; charset=utf-8", "audio/mpeg"};
constexpr int kStatuses[] = {200, 200, 200, 400, 429, 500, 503, 201, -1, 99, 600};
// The embeddings requests whose answers a Gemini provider gives: one input
// (embedContent), three (batchEmbedContents), floats or base64.
constexpr const char* kEmbedRequests[] = {
    R"({"model":"e","input":"one"})",
    R"({"model":"e","input":["a","b","c"]})",
    R"({"model":"e","input":"one","encoding_format":"base64"})",
    R"({"model":"e","input":["a","b","c"],"encoding_format":"base64"})",
};

struct Outcome {
    EndState end = EndState::Open;
    Usage usage;
    std::int64_t text_bytes = 0;
    std::size_t out_bytes = 0;
};

Outcome run(const Combo& combo, const std::uint8_t* data, std::string_view body, bool split) {
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
    const BodyEnd how = (data[2] & 0x80) != 0 ? BodyEnd::Cut : BodyEnd::Clean;
    auto codec = make_codec(combo.kind, opt);
    FUZZ_CHECK(codec != nullptr);
    if (combo.kind == CodecKind::OpenAIEmbeddings && combo.provider == ProviderType::Gemini) {
        std::string err;
        auto doc = RequestDoc::parse(kEmbedRequests[(data[2] >> 3) % 4], err);
        FUZZ_CHECK(doc != nullptr);
        CallerRequest in;
        in.doc = doc.get();
        in.upstream_model = "text-embedding-004";
        UpstreamRequest up;
        FUZZ_CHECK(codec->build_request(in, up, err));
    }
    Splitter cut(split ? data[3] >> 6 : 0, data[3]);
    std::string out;
    Outcome o;
    codec->head(status, type);
    for (std::size_t i = 0; i < body.size();) {
        const std::size_t n = cut.next(body.size() - i);
        out.clear();
        codec->feed(body.substr(i, n), out);
        o.out_bytes += out.size();
        i += n;
    }
    out.clear();
    codec->finish(how, out);
    o.out_bytes += out.size();
    const CodecResult& res = codec->result();
    FUZZ_CHECK(res.end != EndState::Open);
    if (!res.usage.malformed) FUZZ_CHECK(res.usage.prompt_tokens >= 0 && res.usage.completion_tokens >= 0);
    FUZZ_CHECK(res.text_bytes >= 0);
    o.end = res.end;
    o.usage = res.usage;
    o.text_bytes = res.text_bytes;
    return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 4) return 0;
    const Combo& combo = kCombos[data[0] % (sizeof(kCombos) / sizeof(kCombos[0]))];
    const std::string_view body(reinterpret_cast<const char*>(data) + 4, size - 4);
    const Outcome a = run(combo, data, body, true);
    if ((data[3] >> 6) == 0) return 0;   // fed in one piece already
    const Outcome b = run(combo, data, body, false);
    FUZZ_CHECK(a.end == b.end);
    FUZZ_CHECK(a.usage.present == b.usage.present && a.usage.malformed == b.usage.malformed &&
               a.usage.prompt_tokens == b.usage.prompt_tokens &&
               a.usage.completion_tokens == b.usage.completion_tokens);
    FUZZ_CHECK(a.text_bytes == b.text_bytes);
    FUZZ_CHECK(a.out_bytes == b.out_bytes);
    return 0;
}
