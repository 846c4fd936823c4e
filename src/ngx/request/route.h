// A row of the route table (ngx/phases/routes.cpp): one per endpoint. The
// access phase (method, key, body, admission) and the content phase
// (handler) read the row; the call reads its codec, accounting its tally.
#pragma once
#include <string_view>

#include "core/codec/codec_kind.h"
#include "core/metering/billing.h"   // Tally
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
    Tally tally;                    // counted after the answer (core/metering/billing.h)
    RouteHandler handler;           // content phase
};

}  // namespace llmgw
