// The per-request context: one struct per concern, held by the request.
// Each concern's code reads and writes its own part (the access phase the
// input, admission its part, the provider call its attempts, the stream its
// cutoff and drain, accounting the bill); the parts hold data only.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/codec/openai.h"
#include "core/config/gwconfig.h"
#include "core/discovery/model_list.h"
#include "core/http/multipart.h"
#include "core/metering/allowance.h"
#include "core/metering/cutoff.h"
#include "core/metering/pricing.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/store/store.h"

namespace llmgw {

struct RouteRow;   // ngx/request/route.h

class Call;   // ngx/call/call.h
// Destroys a Call (defined beside it), so the request owns its calls
// without seeing their type.
struct CallDeleter {
    void operator()(Call* c) const;
};

struct Federation;   // ngx/mcp/fanout.h: a /mcp request's backend calls
struct FederationDeleter {
    void operator()(Federation* f) const;
};

// Who asks (ngx/phases/access.cpp): the key's user, in the directory that
// was current when the request came (kept alive with it).
struct AuthPart {
    std::shared_ptr<const Directory> directory;
    const UserConf* user = nullptr;
    bool is_admin_traffic = false;
};

// What is asked, as read and routed by the access phase.
struct InputPart {
    // The client body as received, one contiguous view: nginx's buffer,
    // body_store, or nginx's temp file mapped read-only (never copied).
    std::string_view body;
    std::string body_store;           // the body's bytes when nginx held them in several buffers
    std::unique_ptr<RequestDoc> doc;  // Json routes
    std::string form_boundary;        // Multipart routes: the Content-Type's boundary
    FormScan form;                    // Multipart routes: the scanned body
    std::string_view passthrough_path;   // passthrough, target proxies: the path below the provider's base or the target's location (in r->uri)
    const TargetConf* target = nullptr;  // target proxies: the tool server or agent
    Resolution resolved;              // the model and its targets
    const Price* price = nullptr;     // of the resolved model; null: unpriced (billed as zero)
};

// Limit admission (ngx/admission/) and the reservation it holds.
struct AdmissionPart {
    StoreReply reply;
    ngx_msec_t asked = 0;             // when the store was asked (the debug trace's round trip)
    AdmissionResult result;
    // llm_gateway_budget_mode reserve: the reservation held until the
    // settle releases it (any() false: none).
    HeldReservation held;
    // llm_gateway_ratelimit_headers: the limits admission checked, and the
    // headers that say what remains (added to the client's head once).
    std::vector<LimitShape> limit_shapes;
    std::vector<std::pair<std::string, std::string>> allowance;
    bool allowance_sent = false;
    const char* reject_kind = nullptr;   // rate_limit, budget, store_down, unpriced: why admission refused
};

// The provider calls and failover (ngx/call/), in the order they ran;
// chosen: the one whose answer the client gets (tokens and cost are taken
// from it).
struct AttemptsPart {
    std::vector<std::unique_ptr<Call, CallDeleter>> calls;
    Call* chosen = nullptr;
    // Failover and retries (call/failover.cpp): the target being tried, the
    // retries made on it, the failed call a wait follows, the wait's timer.
    std::size_t target_index = 0;
    unsigned same_target_retries = 0;
    const ProviderConf* avoid = nullptr;   // asked for a Retry-After over 30 s: not tried again
    Call* last_failed = nullptr;
    ngx_event_t retry_timer{};
    bool head_sent = false;           // the client's head of a streamed answer went out
};

// llm_gateway_stream_cutoff (ngx/call/stream_cutoff.h): the token and cost
// checks admission made, what remained of them, and what of the streamed
// answer reached the client.
struct CutoffPart {
    std::vector<BudgetLimit> limits;   // copied at admission (the plan is shared)
    std::size_t checks = 0;            // the plan's checks, all measures
    RemainingBudget remaining;
    bool active = false;               // a budget applies to this request's stream
    bool stopped = false;              // the stream was ended at its budget
    std::int64_t relayed_text_bytes = 0;   // completion text of the batches sent
    Usage relayed_usage;                   // the provider's usage as of the last batch sent
    ngx_event_t* event = nullptr;          // ends the provider call (from the pool)
};

// The client went away while a provider's answer was being relayed: the
// answer is still read (llm_gateway_cancel_drain, ngx/call/drain.h) for its
// real usage.
struct DrainPart {
    bool client_left = false;
    std::size_t bytes = 0;            // read since
    ngx_event_t* timer = nullptr;     // from the pool, once the client left
};

// What was counted (ngx/call/accounting.cpp), for the $llm_gateway_*
// variables: the model that answered, its tokens and cost (-1: none).
struct BilledPart {
    bool accounted = false;           // tokens and cost of the request counted
    std::string model;
    std::int64_t in = -1, out = -1, cost = -1;
    const ProviderConf* provider = nullptr;   // the provider of the call that answered
};

// The response cache (llm_gateway_cache, ngx/call/cache.h): whether this
// request's answer may come from nginx's proxy_cache, decided at its first
// provider call.
struct CachePart {
    bool decided = false;
    const CacheSettings* settings = nullptr;   // where the request runs (null: off)
    CacheSkip skip = CacheSkip::Off;
};

// The gateway's own answers and nginx's error pages replaced by the
// envelope (ngx/http/error_pages.cpp).
struct PagePart {
    bool own_response = false;        // the gateway wrote this response itself
    bool replacing = false;           // nginx error page being replaced by the envelope
    bool replacement_sent = false;
    std::string replacement;
};

// One provider's model list being refreshed by a GET /v1/models
// (ngx/discovery/models.cpp): its page walk and the call of the current page.
struct DiscoveryRun {
    std::size_t provider;
    ModelWalk walk;
    Call* call = nullptr;
    bool failed = false;
    std::string why;          // failed: a scrubbed reason for the log
    ngx_msec_t deadline = 0;  // the walk's end (discover_timeout=), ngx_current_msec
};

// Per-request state. Placement-new'd into pool cleanup storage (its
// destructor is the cleanup), so it is found again after an internal
// redirect cleared r->ctx.
struct RequestCtx {
    enum class Phase { Start, ReadingBody, BodyRead, Admitting, Admitted, Done };

    Phase phase = Phase::Start;
    bool waiting_body = false;
    bool store_pending = false;       // a store answer is awaited (ngx/http/store_wait.h)
    const RouteRow* route = nullptr;  // its row in the route table (ngx/request/route.h)

    AuthPart auth;
    InputPart in;
    AdmissionPart admission;
    AttemptsPart attempts;
    CutoffPart cutoff;
    DrainPart drain;
    BilledPart billed;
    CachePart cache;
    PagePart page;
    std::unique_ptr<Federation, FederationDeleter> federation;   // /mcp: its backend calls
    std::vector<DiscoveryRun> discovery;   // GET /v1/models refreshing model lists

    std::shared_ptr<bool> alive = std::make_shared<bool>(true);   // false once the request is gone
    MainConf* mcf = nullptr;          // for the end of the request (from the pool cleanup)
    // Runs once as the request's pool goes (set by the phase handler that
    // takes the request: the calls' and the reservation's end). noexcept.
    void (*on_end)(RequestCtx* ctx) noexcept = nullptr;

    RequestCtx();
    ~RequestCtx();
};

RequestCtx* get_ctx(ngx_http_request_t* r);
RequestCtx* create_ctx(ngx_http_request_t* r);

}  // namespace llmgw
