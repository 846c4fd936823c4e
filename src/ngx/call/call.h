// One upstream call: a subrequest to a provider's internal location, with its
// own codec, state and buffers. A request runs Calls one after another (the
// seam for retries and failover: RequestCtx::calls, RequestCtx::chosen) or
// several at once with their bodies captured (the MCP fan-out: Capture mode,
// background subrequests, an end hook). A Call never writes to the client: it hands what its
// codec produced to the request (relay.cpp), which decides.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "core/cache/cache_settings.h"
#include "core/cache/tool_call_scan.h"
#include "core/codec/codec.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

// Capture mode: the most bytes of an answer's body one Call reads, unless
// its owner sets capture_limit lower (docs/architecture.md#bounds).
inline constexpr std::size_t kCaptureLimit = 16 * 1024 * 1024;

class Call {
public:
    enum class Mode { Relay, Capture };
    enum class State { Idle, Running, Done };
    // Capture mode: which bound ended the reading of the answer.
    enum class Overflow { None, Call, Budget };

    Call(RequestCtx* req, const ProviderConf* provider, std::unique_ptr<Codec> codec, unsigned attempt, Mode mode);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    // Builds the upstream request through the codec and starts the
    // subrequest. NGX_OK; NGX_HTTP_BAD_REQUEST when the codec refuses the
    // caller's request (refusal, when given, gets the sentence for the
    // caller); NGX_ERROR (logged) when it could not start.
    ngx_int_t start(ngx_http_request_t* r, const CallerRequest& in, std::string* refusal = nullptr);

    // The subrequest's filters and its end (called from relay.cpp's filters).
    ngx_int_t on_header(ngx_http_request_t* sr);
    ngx_int_t on_body(ngx_http_request_t* sr, ngx_chain_t* in);

    // A call still running whose time is up: nginx's own upstream time-out
    // is raised on its connection now (the subrequest ends with 504).
    // planned: the gateway ends an answer it has begun to read on purpose
    // (the stream cutoff, the drain's bound), so nginx's "upstream timed
    // out" line is logged at info instead of error.
    void expire(bool planned = false);
    // nginx reads no more of the answer in this turn of the event loop (it
    // would read on while the provider's bytes keep arriving): for a call
    // whose end was just posted (the stream cutoff, the drain's bound).
    void stop_reading();
    // A header of the upstream's response ("" when absent or no answer).
    std::string response_header(std::string_view name) const;
    std::string_view response_type() const;

    const CodecResult& outcome() const { return codec->result(); }
    bool running() const { return state == State::Running; }
    // The provider answered with headers (as opposed to no answer at all).
    bool answered() const { return answered_; }
    bool timed_out() const { return !answered_ && sr_rc == NGX_HTTP_GATEWAY_TIME_OUT; }
    // No answer, but the provider did send bytes: a response header it never completed.
    bool garbled_head() const { return garbled_head_; }
    // What the request has not sent yet: a whole body, an error body, the end of a stream.
    std::string& pending() { return pending_; }
    const std::string& captured() const { return captured_; }
    // Frees the captured bytes (once they were read): a request that runs
    // many calls holds one answer at a time, not all of them.
    void release_captured() { std::string().swap(captured_); }
    // Capture mode: the answer's body bytes read (at most capture_limit).
    std::size_t received() const { return received_; }
    // Capture mode: the answer was larger than capture_limit (Call) or than
    // what was left of capture_budget (Budget). Its reading stopped there
    // (the call is ended as nginx's time-out would end it, from a posted
    // event) and captured() holds none of the bytes past the bound.
    Overflow overflowed() const { return overflow_; }
    // The call was still running at its deadline and was ended then.
    bool deadline_passed() const { return deadline_passed_; }

    RequestCtx* const req;
    const ProviderConf* const provider;
    const std::unique_ptr<Codec> codec;
    const unsigned attempt;        // 1 for the first call of a request
    const Mode mode;

    ngx_http_request_t* sr = nullptr;
    State state = State::Idle;
    ngx_uint_t upstream_status = 0;
    ngx_int_t sr_rc = 0;
    std::string retry_after;       // the upstream's Retry-After on an error status (secrets masked)
    bool accounted = false;        // provider attempt/failure counted
    const Target* target = nullptr;     // where this call went (one of the request's failover targets)
    std::size_t provider_index = 0;     // the provider's position in the configuration (its breaker)
    bool probe = false;                 // the half-open breaker's probe
    bool health_recorded = false;       // the breaker has this call's verdict
    bool event_recorded = false;        // the failure feed has seen this call
    ngx_msec_t started = 0;             // when the subrequest was made (ngx_current_msec)
    ngx_msec_t ended = 0;               // when it ended (0: running)
    ngx_chain_t* free_bufs = nullptr;   // output buffers of the subrequest, reused
    ngx_chain_t* busy_bufs = nullptr;
    // Set before start(): a background subrequest (the request's own answer
    // never waits for it: federated calls), and what runs when it ended.
    bool background = false;
    void (*on_end)(Call& call, void* data) = nullptr;
    void* end_data = nullptr;
    // Set before start(), Capture mode: the most body bytes this call reads,
    // and bytes left that several calls share (decremented as they read;
    // null: none). See overflowed().
    std::size_t capture_limit = kCaptureLimit;
    std::size_t* capture_budget = nullptr;
    // Set before start(): when a call still running is ended (ngx_current_msec
    // value; 0: never). See deadline_passed().
    ngx_msec_t deadline = 0;

    // The response cache (call/cache.h), made in start() only when the
    // request's answer may come from nginx's proxy_cache (null: not cached).
    struct CacheState {
        std::string key;                         // $llm_gateway_cache_key
        const CacheSettings* settings = nullptr;
        ngx_uint_t status = 0;                   // the subrequest's NGX_HTTP_CACHE_* (0: none)
        std::unique_ptr<ToolCallScan> scan;      // a miss being stored: does it call a tool?
    };
    std::unique_ptr<CacheState> cache;

private:
    static ngx_int_t done_handler(ngx_http_request_t* sr, void* data, ngx_int_t rc);
    static void stop_handler(ngx_event_t* ev);
    ngx_int_t on_done(ngx_int_t rc);
    void deliver(std::string& out);
    void feed(std::string_view bytes, std::string& out);
    ngx_int_t pass_on(std::string& out);
    ngx_int_t read_file(ngx_http_request_t* s, std::string& out);
    bool take(std::size_t n);

    // Ends the call from outside the upstream's own read: posted on an
    // overflow, a timer for the deadline.
    ngx_event_t stop_{};
    std::size_t received_ = 0;
    Overflow overflow_ = Overflow::None;
    bool deadline_passed_ = false;

    bool answered_ = false;
    bool garbled_head_ = false;
    bool saw_end_ = false;
    // An answer nginx hands over in a file (buffered to a temporary file,
    // or a cache hit): read a piece at a time; a hit relayed as a stream
    // waits there while the client is slow to take it (file_buf_ pending).
    ngx_buf_t* file_buf_ = nullptr;
    ngx_chain_t* held_ = nullptr;   // a hit's buffers its slow client has not taken yet
    bool announced_ = false;        // the request was told a streamed answer began
    std::string pending_;
    std::string captured_;
    std::string body_;              // the upstream request's body the codec built (the subrequest's views read it)
};

// Implemented by the request side (relay.cpp): what the request does with a
// Call's output. on_stream_head: a streamed answer begins (send the client's
// head, if this call is the one that answers); on_stream_bytes: client bytes
// of that stream; on_answer_bytes: n bytes of the answer were read from the
// provider, how many of them the codec may have (the drain's byte bound).
ngx_int_t request_on_stream_head(Call& call);
ngx_int_t request_on_stream_bytes(Call& call, std::string_view bytes);
std::size_t request_on_answer_bytes(Call& call, std::size_t n);
// Sends what the client's connection holds, as far as it takes it now.
ngx_int_t request_flush(Call& call);

// An event handler's end of a request's provider call (the drain's bound,
// the stream cutoff): ev->data is the main request; its chosen call, while
// it runs, is ended with expire() (its end resumes the request), after
// before(r, ctx) when given (say why); then the posted requests run. An
// exception is logged, never passed on to nginx.
void end_chosen_call(ngx_event_t* ev, void (*before)(ngx_http_request_t* r, RequestCtx* ctx));

// A value of an upstream's answer (a header's, its content type) as the
// client may see it: the configured secrets masked, in a copy in r's pool
// when one was found (docs/decisions.md#redaction). false: out of memory.
bool redact_value(ngx_http_request_t* r, ngx_str_t& value);

// sr->ctx of a provider subrequest.
struct SubCtx {
    Call* call;
    // The body's length, given to the subrequest only once nginx has chosen
    // its location: nginx would hold the provider location's
    // client_max_body_size against it, and the client's body was bounded
    // (llm_gateway_max_body_size) already. -1: no body.
    off_t body_length;
};

// A provider subrequest's Content-Length, once its location is chosen
// (the precontent phase).
ngx_int_t subrequest_precontent(ngx_http_request_t* r);

}  // namespace llmgw
