// A codec per wire format (no nginx). It builds the upstream request from the
// caller's request and turns the upstream response, whole or streamed, into
// the bytes the client gets, the usage, and how the answer ended. The shell
// moves bytes and headers; everything the wire format decides lives here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/codec/codec_kind.h"
#include "core/codec/openai.h"
#include "core/codec/provider_type.h"
#include "core/http/multipart.h"
#include "core/http/redact.h"

namespace llmgw {

// What the codec needs from the caller's request.
struct CallerRequest {
    std::string_view body;             // as received
    const RequestDoc* doc = nullptr;   // parsed body (JSON codecs need it)
    std::string_view upstream_model;   // the provider's name of the model
    std::string_view path;             // the caller's path below the route (passthrough)
    std::string_view provider_key;     // "" when the provider has none
    std::string_view method = "POST";  // the caller's method (passthrough)
    std::string_view query;            // the caller's query string, without '?' (passthrough)
    std::string_view content_type;     // the caller's Content-Type (transcription, passthrough)
    const FormScan* form = nullptr;    // the scanned multipart body (transcription)
    // Relay: the gateway's own request (a federated tool call): none of the
    // caller's headers go with it, only these.
    bool own_request = false;
    std::vector<std::pair<std::string, std::string>> headers;
};

// The request the shell sends to the provider's internal location. The shell
// strips the caller's credential and hop-by-hop headers; the codec names the
// headers to add, the credential among them.
struct UpstreamRequest {
    std::string method = "POST";
    std::string path;                  // appended to the provider's location
    // Headers to add; one named here replaces the caller's header of that name.
    std::vector<std::pair<std::string, std::string>> headers;
    std::string credential_header;     // name of the header carrying the provider key ("" none)
    int refuse_status = 0;             // build_request failed because of the caller's request: answer this (400)
    // The body: `body`; or, with caller_body, the caller's body as received
    // with its bytes [splice_at, splice_at + splice_len) replaced by `body`
    // (splice_len 0 and an empty body: the caller's bytes unchanged).
    std::string body;
    bool caller_body = false;
    std::size_t splice_at = 0;
    std::size_t splice_len = 0;
    bool bare_headers = false;         // none of the caller's headers are copied
};

// How the upstream answer is handled, decided by head().
enum class BodyMode {
    Stream,    // relayed as it arrives: the shell sends the status and headers now
    Whole,     // buffered; finish() gives the whole client body
    Error,     // an upstream error status: finish() gives the client's error body
    Invalid,   // not a usable final HTTP answer: finish() gives a 502 envelope
};

// How the upstream body ended, as the transport saw it.
enum class BodyEnd {
    Clean,     // framing complete
    Cut,       // the connection closed early (or timed out, or the gateway ended the call)
    Invalid,   // broken framing (e.g. invalid chunked encoding)
};

// The codec's verdict on the answer.
enum class EndState {
    Open,          // not finished yet
    Complete,      // a full answer reached the client
    StreamError,   // the upstream ended its stream with its own error event (relayed)
    Cut,           // the answer ended early after bytes reached the client: it sees them incomplete
    UpstreamError, // the upstream answered an error status
    Invalid,       // the upstream answer was broken, or cut before any byte reached the client: a 502
    Stopped,       // the gateway ended the stream (a budget crossed mid-stream: stop())
};

// The state's name, for logs: "open", "complete", "stream_error", "cut", "upstream_error", "invalid", "stopped".
const char* end_state_name(EndState e);

struct CodecResult {
    EndState end = EndState::Open;
    int status = 0;              // status for the client (whole, error, invalid answers)
    std::string content_type;    // "" keeps the upstream's (Whole)
    std::string text;            // scrubbed text for the log (errors)
    Usage usage;
    std::string model;           // the model the answer names (passthrough; "" unknown)
    std::size_t redacted = 0;    // occurrences of configured secrets masked in the answer (redact())
    // Bytes of completion text a streamed answer carried so far (content,
    // reasoning, refusals, tool-call arguments): what an estimate of its
    // output counts when the provider never reports usage.
    std::int64_t text_bytes = 0;
};

struct CodecOptions {
    ProviderType provider = ProviderType::OpenAI;   // the wire format of the provider called
    bool client_stream = false;        // the caller asked for a stream
    bool client_wants_usage = false;   // stream_options.include_usage from the caller
    std::string client_model;          // the model value the caller sent (translated answers report it)
    std::int64_t created = 0;          // the answer's time (unix seconds; 0: now)
    std::size_t whole_limit = 16 * 1024 * 1024;   // bytes a Whole answer may buffer
    std::size_t error_limit = 64 * 1024;          // bytes of an error body kept
    std::size_t max_event_bytes = 4 << 20;        // SSE event bound
};

class Codec {
public:
    explicit Codec(const CodecOptions& o) : opt_(o) {}
    virtual ~Codec() = default;
    Codec(const Codec&) = delete;
    Codec& operator=(const Codec&) = delete;

    virtual CodecKind kind() const = 0;

    // Request side. false (err set) when the request cannot be built.
    virtual bool build_request(const CallerRequest& in, UpstreamRequest& out, std::string& err) const = 0;

    // Response side, in order: head() once, feed() per piece, finish() once.
    // A status outside 200..599 (1xx included: nginx 1.22 relays none) is
    // Invalid; a negative status means the answer had no HTTP status line.
    BodyMode head(int status, std::string_view content_type);
    // The configured secrets (the gateway's credentials upstream) are
    // masked in the upstream's bytes before anything reads them, so neither
    // the client's bytes nor result().text hold one (docs/decisions.md#redaction).
    // Set before the answer arrives; nullptr or an empty set: nothing to do.
    void redact(const SecretSet* secrets);
    // Appends client bytes for Stream mode (nothing otherwise). A Whole
    // answer over whole_limit turns into Stream mode: out then holds what was
    // buffered, and the shell must send the head first (spilled() is true).
    void feed(std::string_view bytes, std::string& out);
    // Appends the remaining client bytes (the whole body, an error body, a
    // closing error event) and settles result().
    void finish(BodyEnd how, std::string& out);
    // The gateway ends a streamed answer: appends its closing error event in
    // the caller's shape and settles result() as Stopped. Later feed() and
    // finish() calls change nothing (no second closing event; usage and
    // text_bytes stay as they were).
    void stop(std::string_view message, std::string_view type, std::string_view code, std::string& out);

    BodyMode mode() const { return mode_; }
    bool spilled() const { return spilled_; }
    // A streamed answer is an SSE stream of the caller's API: the gateway
    // sets its own cache headers and may close it with its own error event.
    // Otherwise (audio, a spilled JSON body, a passthrough) the upstream's
    // headers are kept and a cut answer closes the connection.
    virtual bool event_stream() const { return !spilled_; }
    // The client gets the upstream's bytes unchanged (passthrough, tool
    // servers, agents): the upstream's Content-Length holds for them too.
    virtual bool relays_bytes() const { return false; }
    // A streamed answer whose head goes to the client with its first client
    // bytes, not with the upstream's head (audio): until then nothing has
    // reached the client, so an answer cut or broken before them is refused
    // with the 502 envelope, as a whole answer is (and may be tried again).
    virtual bool head_waits_for_bytes() const { return false; }
    const CodecResult& result() const { return res_; }
    // A problem worth logging that appeared in the last feed() ("" none); cleared by the call.
    std::string take_problem() { return std::move(problem_); }

    // Texts of the gateway's own answers to broken upstream responses.
    static constexpr const char* kInvalidMessage = "the upstream provider sent an invalid response";
    static constexpr const char* kCutMessage = "the upstream stream ended before completion";
    // The reason (log, event) of an answer cut before any byte reached the client.
    static constexpr const char* kCutShortReason = "the response body ended before completion";

protected:
    // Whether an error status (>= 300) goes to on_head like a success
    // (passthrough relays it as it is) instead of the Error mode.
    virtual bool relays_error_status() const { return false; }
    virtual BodyMode on_head(int status, std::string_view content_type) = 0;
    virtual void on_stream(std::string_view bytes, std::string& out) = 0;
    // Stream ended: settles res_ (end, usage) and appends any closing bytes.
    virtual void on_stream_end(BodyEnd how, std::string& out) = 0;
    // Whole body received cleanly: settles res_ and appends the client body
    // (may take body's bytes).
    virtual void on_whole(std::string& body, std::string& out) = 0;

    // The caller's shapes of the gateway's own errors (OpenAI's by default):
    // a whole JSON body and a closing SSE event.
    virtual std::string error_envelope(std::string_view message, std::string_view type, std::string_view code) const;
    virtual std::string error_event(std::string_view message, std::string_view type, std::string_view code) const;
    // An upstream error status's body (at most error_limit bytes) -> the
    // client's error body; res_.text is set (scrubbed) before the call.
    virtual void on_error_body(std::string& body, std::string& out);

    void invalid(std::string_view why, std::string& out);
    // The 502 envelope of an answer of which nothing reached the client
    // (out is replaced), whatever the mode.
    void refuse(std::string_view why, std::string& out);
    // A stream that did not complete: invalid framing (a 502 or error event),
    // or cut (the closing error event).
    void stream_not_complete(BodyEnd how, std::string& out);
    // The end of bytes relayed as they came (passthrough, tool servers,
    // agents, audio): complete, cut, or invalid framing; nothing closes them.
    void relayed_end(BodyEnd how);

    CodecOptions opt_;
    CodecResult res_;
    std::string problem_;

private:
    void take(std::string_view bytes, std::string& out);
    void settle(BodyEnd how, std::string& out);

    std::optional<StreamRedactor> redactor_;
    BodyMode mode_ = BodyMode::Invalid;
    bool headed_ = false;
    bool spilled_ = false;
    bool overflow_ = false;
    bool streamed_ = false;       // Stream mode produced client bytes
    std::string buf_;             // Whole / Error body
};

// The codec of a route's API for a provider type (opt.provider); nullptr
// for CodecKind::None and when the type cannot serve the API (codec_serves).
std::unique_ptr<Codec> make_codec(CodecKind kind, const CodecOptions& opt);
bool codec_serves(CodecKind kind, ProviderType provider);

// The codec of one model list page (discovery): GET path below the
// provider's location with its credential; the body is kept whole, up to
// whole_limit bytes (the page bound the shell reads to).
std::unique_ptr<Codec> make_model_list_codec(ProviderType type, std::string path,
                                             std::size_t whole_limit = 8 * 1024 * 1024);

const char* codec_kind_name(CodecKind kind);

// Usage in any known response shape: OpenAI usage.prompt_tokens /
// completion_tokens, Anthropic usage.input_tokens / output_tokens (also under
// "message", as message_start sends it), Gemini usageMetadata.promptTokenCount /
// candidatesTokenCount. present=false when none is found.
Usage sniff_usage(std::string_view json);

}  // namespace llmgw
