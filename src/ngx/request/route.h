// A row of the route table (ngx/phases/routes.cpp): one per endpoint. The
// access phase (method, key, body, admission) and the content phase
// (handler) read the row; the call reads its codec, accounting its tally.
#pragma once
#include <string_view>

#include "core/codec/codec_kind.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"

namespace llmgw {

// What the access phase does with the request body before admission.
enum class BodyRule {
    None,        // not read; discarded by the content phase
    Json,        // read whole, parsed as a JSON request with a model
    Multipart,   // read whole, multipart/form-data with a model part
    Raw,         // read whole, relayed as is
    Rpc,         // read whole, a JSON-RPC message the content phase reads (/mcp)
};

// What a metered route counts after the provider answered (the user, group
// and total request counters are written by admission, before the call).
enum class Tally {
    None,       // nothing more (admin routes)
    Tokens,     // tokens and cost (estimated when the answer has none) and the model's request
    Requests,   // the model's request only: images and audio (accounting rule 5)
    Sniffed,    // tokens and cost when the answer carries usage in a known shape (passthrough)
};

struct RequestCtx;
using RouteHandler = ngx_int_t (*)(ngx_http_request_t* r, RequestCtx* ctx);

struct RouteRow {
    LocMode mode;
    std::string_view suffixes[2];   // path suffixes (an empty one is unused; none: every path)
    ngx_uint_t methods;             // NGX_HTTP_GET | ...
    const char* allow;              // Allow header of a 405
    bool authenticated;             // needs a key (admin mode: an admin key)
    BodyRule body;
    const char* name;               // in log lines
    const char* event_route;        // the spec's event route value; nullptr: none
    CodecKind codec;
    bool metered;                   // goes through limit admission
    Tally tally;                    // counted after the answer
    RouteHandler handler;           // content phase
};

}  // namespace llmgw
