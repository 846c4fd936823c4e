// The backend calls of one /mcp request (docs/mcp.md): a tools/list sent to
// every tool server the caller's group may reach, all in flight at once, or
// a tools/call sent to the server that owns the tool. Each backend's part
// is a BackendOp: the bare call, and on a JSON-RPC error or an HTTP 4xx the
// session handshake (initialize, notifications/initialized, the retry with
// Mcp-Session-Id, then a best-effort DELETE that nobody waits for). Every
// call has its own time-out; a backend that runs out of time is given up
// (and its call ended) while the others are still merged. Their answers are
// bounded the same way: each call reads at most max_response= bytes and all
// of them together max_total=; the backend whose answer crosses a bound is
// given up (its call ended, its pages dropped).
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/mcp/jsonrpc.h"
#include "core/mcp/tool_merge.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

class Call;
struct Federation;

struct BackendOp {
    enum class Step { Bare, Initialize, Initialized, Retry, Done };
    enum class Outcome { Pending, Result, RpcError, Failed };

    Federation* fed = nullptr;
    std::size_t backend = 0;            // index in the configuration's targets
    const TargetConf* target = nullptr;
    std::string method;                 // tools/list or tools/call
    std::string params;                 // tools/call: with the tool's own name
    Step step = Step::Bare;
    std::string session;                // Mcp-Session-Id of the handshake ("" none)
    std::string protocol;               // the version the handshake agreed
    std::string want_id;                // the id of the call in flight (JSON)
    Call* call = nullptr;
    ngx_event_t timer{};
    bool settled = false;
    Outcome outcome = Outcome::Pending;
    std::string json;                   // Result (not a list): the result; RpcError: the error object
    std::vector<std::string> pages;     // a list: every page's result
    unsigned pages_left = 16;
    // Failed: the failure feed's event and the log's reason.
    const char* event_kind = "upstream";
    int event_status = 0;
    std::string event_message;
    std::string why;
};

struct Federation {
    Federation(ngx_http_request_t* req, RequestCtx* c, const McpEndpoint* e)
        : r(req), ctx(c), ep(e), capture_left(e->max_total) {}
    ~Federation();
    Federation(const Federation&) = delete;
    Federation& operator=(const Federation&) = delete;

    ngx_http_request_t* r;
    RequestCtx* ctx;
    const McpEndpoint* ep;
    RpcMessage msg;                     // the caller's request
    std::string listing;                // the list method asked of every server ("" none)
    std::vector<std::unique_ptr<BackendOp>> ops;
    std::deque<std::string> bodies;     // request bodies (their subrequests view them)
    unsigned unsettled = 0;
    std::vector<const TargetConf*> counted;   // a request per settled op, written once (count_requests)
    unsigned next_id = 0;
    // The body bytes the backend calls may still read together
    // (max_total=; each call also stops at max_response=).
    std::size_t capture_left = 0;
    // Runs on the request once every op has settled.
    void (*on_settled)(Federation& f) = nullptr;
};

// Starts a backend op (bare call); false when nothing could be started (the
// op is then settled as failed).
void start_op(Federation& f, std::size_t backend, std::string method, std::string params);

// The requests of the settled ops, counted under their servers' scopes in
// one store operation (once the answer is known).
void count_requests(Federation& f);

// Runs done(f) once every op started so far has settled (now, if they have).
void when_settled(Federation& f, void (*done)(Federation& f));

// The pages of every op of the list method that got them (moved out: a
// list is merged once).
std::vector<ServerTools> listed_pages(Federation& f, std::string_view method);

}  // namespace llmgw
