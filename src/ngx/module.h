// Shared declarations of the nginx shell: configuration structs, the
// per-request context and the entry points each file provides.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config/gwconfig.h"
#include "core/metering/allowance.h"
#include "core/metering/cutoff.h"
#include "core/metering/pricing.h"
#include "core/codec/codec_kind.h"
#include "core/codec/openai.h"
#include "core/discovery/model_list.h"
#include "core/http/multipart.h"
#include "core/log/log_escape.h"
#include "ngx/ngx_incl.h"
#include "ngx/main_conf.h"
#include "ngx/store/store.h"

namespace llmgw {

struct Worker;

class Call;   // ngx/call/call.h
// Destroys a Call (defined beside it), so the request context owns its calls
// without seeing their type.
struct CallDeleter {
    void operator()(Call* c) const;
};

struct RouteRow;   // ngx/http/routes.h

struct Federation;   // ngx/mcp/fanout.h: a /mcp request's backend calls
struct FederationDeleter {
    void operator()(Federation* f) const;
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
    const RouteRow* route = nullptr;  // its row in the route table (ngx/http/routes.h)
    std::shared_ptr<const Directory> directory;   // keeps user alive
    const UserConf* user = nullptr;

    // request
    // The client body as received, one contiguous view: nginx's buffer,
    // body_store, or nginx's temp file mapped read-only (never copied).
    std::string_view body;
    std::string body_store;           // the body's bytes when nginx held them in several buffers
    std::unique_ptr<RequestDoc> doc;  // Json routes
    std::string form_boundary;        // Multipart routes: the Content-Type's boundary
    FormScan form;                    // Multipart routes: the scanned body
    std::string_view passthrough_path;   // passthrough, target proxies: the path below the provider's base or the target's location (in r->uri)
    const TargetConf* target = nullptr;  // target proxies: the tool server or agent
    std::unique_ptr<Federation, FederationDeleter> federation;   // /mcp: its backend calls
    Resolution resolved;

    // The provider calls, in the order they ran; chosen: the one whose
    // answer the client gets (tokens and cost are taken from it).
    std::vector<std::unique_ptr<Call, CallDeleter>> calls;
    Call* chosen = nullptr;
    // Failover and retries (call/failover.cpp): the target being tried, the retries
    // made on it, the failed call a wait follows, the wait's timer.
    std::size_t target_index = 0;
    unsigned same_target_retries = 0;
    const ProviderConf* avoid = nullptr;   // asked for a Retry-After over 30 s: not tried again
    Call* last_failed = nullptr;
    ngx_event_t retry_timer{};
    std::vector<DiscoveryRun> discovery;   // GET /v1/models refreshing model lists
    bool head_sent = false;           // the client's head of a streamed answer went out
    const Price* price = nullptr;     // null: unpriced (billed as zero)
    bool is_admin_traffic = false;
    bool store_pending = false;       // a store answer is awaited (await_store)
    StoreReply admit_reply;
    ngx_msec_t admit_asked = 0;       // when the store was asked (the debug trace's round trip)
    AdmissionResult admit_result;
    // llm_gateway_budget_mode reserve: the reservation held until the
    // settle releases it (any() false: none).
    HeldReservation held;
    // llm_gateway_ratelimit_headers: the limits admission checked, and the
    // headers that say what remains (added to the client's head once).
    std::vector<LimitShape> limit_shapes;
    std::vector<std::pair<std::string, std::string>> allowance;
    bool allowance_sent = false;
    // llm_gateway_stream_cutoff (ngx/call/stream_cutoff.h): the token and
    // cost checks admission made, what remained of them, and what of the
    // streamed answer reached the client.
    struct StreamCutoff {
        std::vector<BudgetLimit> limits;   // copied at admission (the plan is shared)
        std::size_t checks = 0;            // the plan's checks, all measures
        RemainingBudget remaining;
        bool active = false;               // a budget applies to this request's stream
        bool stopped = false;              // the stream was ended at its budget
        std::int64_t relayed_text_bytes = 0;   // completion text of the batches sent
        Usage relayed_usage;                   // the provider's usage as of the last batch sent
        ngx_event_t* event = nullptr;          // ends the provider call (from the pool)
    } cutoff;
    // The client went away while a provider's answer was being relayed: the
    // answer is still read (llm_gateway_cancel_drain) for its real usage.
    bool client_left = false;
    std::size_t drained = 0;          // bytes read since
    ngx_event_t* drain_timer = nullptr;   // from the pool, once the client left
    std::shared_ptr<bool> alive = std::make_shared<bool>(true);   // false once the request is gone
    MainConf* mcf = nullptr;          // for accounting from the pool cleanup
    RequestCtx();
    ~RequestCtx();
    bool accounted = false;           // tokens and cost of the request counted
    // What was counted, for the $llm_gateway_* variables (http/variables.cpp):
    // the model that answered, its tokens and cost (-1: none counted).
    std::string tallied_model;
    std::int64_t tallied_in = -1, tallied_out = -1, tallied_cost = -1;
    const ProviderConf* tallied_provider = nullptr;   // the provider of the call that answered
    const char* reject_kind = nullptr;   // rate_limit, budget, store_down, unpriced: why admission refused
    bool own_response = false;        // the gateway wrote this response itself
    bool replacing = false;           // nginx error page being replaced by the envelope
    bool replacement_sent = false;
    std::string replacement;
};

// ctx.cpp
RequestCtx* get_ctx(ngx_http_request_t* r);
RequestCtx* create_ctx(ngx_http_request_t* r);

// respond.cpp
// A copy of s in the pool as one buffer (last_buf when last); an empty s
// gives a special buffer that only marks the end.
ngx_buf_t* string_buf(ngx_pool_t* pool, std::string_view s, bool last);
ngx_int_t send_body(ngx_http_request_t* r, ngx_uint_t status, std::string_view content_type, std::string_view body);
// The same, keeping the validators already set (ETag: nginx's not-modified
// filter may answer 304); copy=false points at bytes that outlive the request
// (the module's own data) instead of copying them into its pool.
ngx_int_t send_whole(ngx_http_request_t* r, ngx_uint_t status, std::string_view content_type, std::string_view body,
                     bool copy);
ngx_int_t send_json(ngx_http_request_t* r, ngx_uint_t status, const std::string& body);
ngx_int_t send_error(ngx_http_request_t* r, ngx_uint_t status, std::string_view message, std::string_view type,
                     std::string_view code = {});
// The gateway's error body in the envelope of the request's route.
std::string gateway_error_body(ngx_http_request_t* r, ngx_uint_t status, std::string_view message,
                               std::string_view type, std::string_view code);
// From a phase handler: answers with the envelope, finalizes, returns NGX_DONE.
ngx_int_t reject(ngx_http_request_t* r, ngx_uint_t status, std::string_view message, std::string_view type,
                 std::string_view code);
ngx_int_t add_header(ngx_http_request_t* r, std::string_view name, std::string_view value);
std::string_view sv(const ngx_str_t& s);
ngx_str_t pstr(ngx_pool_t* pool, std::string_view s);   // copy into the pool (len 0 on failure)

// auth.cpp
std::string_view presented_key(ngx_http_request_t* r);
bool is_credential_header(const ngx_table_elt_t& h);

// variables.cpp: $llm_gateway_user, ... (from preconfiguration)
ngx_int_t add_variables(ngx_conf_t* cf);

// access.cpp
ngx_int_t access_handler(ngx_http_request_t* r);
// body.cpp: ctx->body from r->request_body (false: it could not be read)
bool read_body_view(ngx_http_request_t* r, RequestCtx* ctx);
// proxy_paths.cpp: the provider and path of a passthrough request (NGX_OK),
// or its answer (404 unknown provider, 400 refused path; NGX_DONE).
ngx_int_t route_passthrough(ngx_http_request_t* r, RequestCtx* ctx, const LocConf* lcf);
// proxy_paths.cpp: the target and path of a per-target proxy request
// (NGX_OK), or its answer (404 unknown, 403 closed to the group, 400 path).
ngx_int_t route_target(ngx_http_request_t* r, RequestCtx* ctx, const LocConf* lcf);

// content.cpp
ngx_int_t content_handler(ngx_http_request_t* r);
ngx_int_t models_handler(ngx_http_request_t* r, RequestCtx* ctx);

// store_wait.cpp
// Asks the store on behalf of a request. ask(answered) starts the store
// operation; its completion stores what it learnt and calls answered()
// (once, inline or later). Answered inline: returns finish(). Otherwise the
// request is held (r->main->count) and NGX_DONE returned; when the answer
// comes, Resume::RunPhases runs the phases again (the phase handler calls
// finish itself), Resume::Finalize finalizes the request with finish().
enum class Resume { RunPhases, Finalize };
ngx_int_t await_store(ngx_http_request_t* r, RequestCtx* ctx, Resume how,
                      const std::function<void(std::function<void()> answered)>& ask,
                      std::function<ngx_int_t()> finish);

// call.cpp: a provider subrequest's Content-Length, once its location is chosen.
ngx_int_t subrequest_precontent(ngx_http_request_t* r);

// relay.cpp
ngx_int_t init_filters(ngx_conf_t* cf);
// The answer of the request's chosen call, once it ended: its stream's end,
// its whole body, or the envelope when it gave none.
ngx_int_t answer_chosen(ngx_http_request_t* r, RequestCtx* ctx);
// The request's calls at its end (from the ctx's destructor): a pending
// retry timer is deleted, a breaker probe without a verdict given back.
void release_calls(RequestCtx* ctx);
// Starts the request's provider call; NGX_DONE (the request is answered
// when the call ends) or an HTTP status.
ngx_int_t start_provider_call(ngx_http_request_t* r, RequestCtx* ctx);
// The API a route speaks (its route table row's codec column).
CodecKind codec_for(const RequestCtx& ctx);
// Whether the call failed in a way the breaker and the failure counters
// count: no answer, a 429, a 5xx, an invalid or cut answer (accounting.cpp).
bool call_failed(const Call& c);

// admission.cpp
std::vector<Scope> request_scopes(const RequestCtx& ctx);
ngx_int_t admit_request(ngx_http_request_t* r, RequestCtx* ctx);   // NGX_DECLINED admitted, NGX_DONE answered

ngx_int_t finish_admission(ngx_http_request_t* r, RequestCtx* ctx);


// accounting.cpp
// Tokens and cost of the request, once, from the call that answered
// (ctx->chosen), with that call's provider counters in the same batch.
// cancelled: the client went away mid-call; tokens are still counted, the
// provider call is counted as neither success nor failure.
void account_request(ngx_log_t* log, MainConf* mcf, RequestCtx* ctx, bool cancelled = false);
// Releases the request's reservation, if it holds one no accounting settled.
void release_reservation(MainConf* mcf, RequestCtx* ctx);
// Provider attempt/failure counters of one call, once (calls that did not answer the client).
void account_call(ngx_log_t* log, MainConf* mcf, RequestCtx* ctx, Call& call);
// The price of the model that answered a call: the admitted one's, or,
// after a failover to another model, that model's own (null: unpriced).
const Price* answering_price(MainConf* mcf, const RequestCtx& ctx, const Call& c);
// One request of each tool server or agent listed (their scopes: kind mcp
// or agent), in one store operation.
void account_targets(MainConf* mcf, const std::vector<const TargetConf*>& targets);

// admin/ui.cpp: the dashboard page and the files it loads
ngx_int_t admin_page(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_ui_file(ngx_http_request_t* r, RequestCtx* ctx);
// admin/admin.cpp: the admin API's handlers
ngx_int_t admin_usage(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_overview(ngx_http_request_t* r, RequestCtx* ctx);

// call/health.cpp, discovery/model_cache.cpp: the shared zones of the
// providers' breakers and of the discovered model lists (from init_main_conf).
ngx_shm_zone_t* add_health_zone(ngx_conf_t* cf, std::size_t providers);
ngx_shm_zone_t* add_model_cache_zone(ngx_conf_t* cf, std::size_t providers, std::size_t discovering);
// events/feed.cpp: the failure feed's ring (from init_main_conf).
ngx_shm_zone_t* add_events_zone(ngx_conf_t* cf);
// admin/admin.cpp: GET /admin/api/events.
ngx_int_t admin_events(ngx_http_request_t* r, RequestCtx* ctx);
// admin/admin.cpp: GET /admin/api/usage/history, /targets.
ngx_int_t admin_history(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_targets(ngx_http_request_t* r, RequestCtx* ctx);
// admin/admin.cpp: GET /admin/api/catalog, /consumers, /config.
ngx_int_t admin_catalog(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_consumers(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_config(ngx_http_request_t* r, RequestCtx* ctx);
// admin/metrics.cpp: the Prometheus text exposition.
ngx_int_t metrics_handler(ngx_http_request_t* r, RequestCtx* ctx);
// admin/admin.cpp: GET /admin/api/usage/models.
ngx_int_t admin_ranking(ngx_http_request_t* r, RequestCtx* ctx);
// admin/admin.cpp: GET /admin/api/usage/series, /usage/totals.
ngx_int_t admin_series(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_totals(ngx_http_request_t* r, RequestCtx* ctx);
// admin/usage_reads.cpp: GET /admin/api/performance (the latency statistic).
ngx_int_t admin_performance(ngx_http_request_t* r, RequestCtx* ctx);

// users_reload.cpp
ngx_int_t init_users_file(ngx_cycle_t* cycle, Worker& w);
std::string load_users_file_at_start(GatewayState& st);

// directives.cpp
char* set_provider(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_user(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_group(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_alias(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_api(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_admin(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_passthrough(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_metrics(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_zone(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);   // conf: MainConf
char* set_price(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_users_file(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_store(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_replica(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_instance(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_retry_backoff(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_breaker(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_cancel_drain(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
// budget_directives.cpp
char* set_budget_mode(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_stats(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
// target_directives.cpp
char* set_mcp_server(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_agent(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_mcp(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_target_proxy(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

// targets/target_proxy.cpp: a per-target proxy request's call.
ngx_int_t start_target_call(ngx_http_request_t* r, RequestCtx* ctx);
// mcp/endpoint.cpp: POST /mcp.
ngx_int_t mcp_handler(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace llmgw
