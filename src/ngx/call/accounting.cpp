// Accounting after the provider answered. What is billed is decided in the
// core (core/metering/billing.h: bill_request, bill_attempt); here the
// observation is gathered from the request and its call, the bill logged and
// its deltas written in one batch (tokens, cost, the served model's request,
// statistics, provider attempt/failure counters), with last-seen stamps at
// most once per scope per minute per worker.
#include <utility>

#include "ngx/call/accounting.h"

#include "core/log/log_escape.h"
#include "core/metering/accounting.h"
#include "core/metering/billing.h"
#include "ngx/admission/admission.h"
#include "ngx/call/cache.h"
#include "ngx/call/call.h"
#include "ngx/call/relay.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"
#include "ngx/request/route.h"
#include "ngx/store/store.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

constexpr std::int64_t kSeenTtl = 400 * 86400;

// Writes each scope's last-seen stamp at most once a minute per worker
// (Worker::seen remembers the minute of the last write).
void touch_last_seen(CounterStore* store, const std::vector<Scope>& scopes, std::time_t now) {
    Worker* w = worker();
    if (w == nullptr) return;
    auto& cache = w->seen;
    if (cache.size() > 100000) cache.clear();
    thread_local std::string key;   // reused: most requests find their scopes stamped this minute
    for (const Scope& s : scopes) {
        if (s.kind != "user" && s.kind != "group") continue;
        assign_seen_key(key, s.kind, s.id);
        std::int64_t minute = now / 60;
        auto it = cache.find(key);
        if (it != cache.end() && it->second == minute) continue;
        cache[key] = minute;
        store->touch(key, now, kSeenTtl);
    }
}

// What the call's answer was.
AnswerFacts answer_facts(const Call& c) {
    const CodecResult& res = c.outcome();
    AnswerFacts a;
    a.answered = c.answered();
    a.end = res.end;
    a.streamed = c.codec->mode() == BodyMode::Stream;
    a.status = static_cast<int>(c.upstream_status);
    a.usage = res.usage;
    a.text_bytes = res.text_bytes;
    a.model = res.model;
    return a;
}

Tally tally_of(const RequestCtx& ctx) { return ctx.route != nullptr ? ctx.route->tally : Tally::Tokens; }

// What bill_attempt needs of a call: the provider and model it went to.
CallObservation observe_call(const RequestCtx& ctx, const Call& c) {
    CallObservation o;
    o.tally = tally_of(ctx);
    o.call_accounted = c.accounted;
    o.answer = answer_facts(c);
    o.model = c.target ? c.target->canonical : ctx.in.resolved.canonical;
    o.provider = c.provider->name;
    o.upstream_model = c.target ? c.target->upstream_model : ctx.in.resolved.upstream_model;
    return o;
}

// What bill_request needs of the request and the call that answered it.
CallObservation observe_request(MainConf* mcf, const RequestCtx& ctx, const Call& c, bool cancelled) {
    CallObservation o = observe_call(ctx, c);
    o.cancelled = cancelled;
    o.relayed_usage = ctx.cutoff.relayed_usage;
    o.relayed_text_bytes = ctx.cutoff.relayed_text_bytes;
    o.body_bytes = ctx.in.body.size();
    o.scopes = request_scopes(ctx);
    if (o.tally == Tally::Sniffed) {
        // A passthrough is priced at the model its answer names.
        const std::string& m = c.outcome().model;
        o.price = m.empty() ? nullptr
                            : mcf->state->prices.find(c.provider->name, provider_type_name(c.provider->type), m);
    } else if (o.tally == Tally::Tokens) {
        o.price = answering_price(mcf, ctx, c);
    }
    o.max_tokens_per_request = mcf->max_tokens_per_request;
    o.stat_user_model = mcf->stat_user_model;
    o.stat_latency = mcf->stat_latency;
    if (c.ended != 0 && c.ended >= c.started) o.elapsed_ms = static_cast<std::int64_t>(c.ended - c.started);
    o.user = ctx.auth.user->name;
    o.cache = cache_use(c);
    return o;
}

// The log lines of a bill, as the accounting has always written them.
void log_bill(ngx_log_t* log, MainConf* mcf, const RequestCtx& ctx, const Bill& b) {
    if (b.implausible == Implausible::Malformed) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "llm_gateway: implausible usage from the provider for model \"%s\" (a token count that is "
                      "not an integer from 0 to 9223372036854775807); estimating",
                      log_value(ctx.in.resolved.canonical).c_str());
    } else if (b.implausible == Implausible::OverMax) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "llm_gateway: implausible usage from the provider for model \"%s\" (prompt_tokens=%L "
                      "completion_tokens=%L, over llm_gateway_max_tokens_per_request %i); estimating",
                      log_value(ctx.in.resolved.canonical).c_str(), static_cast<long long>(b.reported.prompt_tokens),
                      static_cast<long long>(b.reported.completion_tokens), mcf->max_tokens_per_request);
    }
    switch (b.line) {
    case UsageLine::None: break;
    case UsageLine::Requests:
        ngx_log_error(NGX_LOG_INFO, log, 0, "llm_gateway: usage user=\"%s\" model=\"%s\" route=\"%s\" (requests only)",
                      log_value(ctx.auth.user->name).c_str(), log_value(b.model()).c_str(), ctx.route->name);
        break;
    case UsageLine::Passthrough:
        ngx_log_error(NGX_LOG_INFO, log, 0,
                      "llm_gateway: usage user=\"%s\" model=\"%s\" prompt_tokens=%L completion_tokens=%L "
                      "cost_micro_usd=%L route=\"passthrough\"%s",
                      log_value(ctx.auth.user->name).c_str(), log_value(b.model()).c_str(),
                      static_cast<long long>(b.prompt_tokens()), static_cast<long long>(b.completion_tokens()),
                      static_cast<long long>(b.cost_micros()), b.without_usage ? " (no usage in the answer)" : "");
        break;
    case UsageLine::Tokens:
        ngx_log_error(NGX_LOG_INFO, log, 0,
                      "llm_gateway: usage user=\"%s\" model=\"%s\" prompt_tokens=%L completion_tokens=%L "
                      "cost_micro_usd=%L%s%s%s%s",
                      log_value(ctx.auth.user->name).c_str(), log_value(b.model()).c_str(),
                      static_cast<long long>(b.prompt_tokens()), static_cast<long long>(b.completion_tokens()),
                      static_cast<long long>(b.cost_micros()), b.estimated() ? " (estimated)" : "",
                      b.cancelled ? " (client cancelled)" : "", b.cut_off ? " (cut off at the budget)" : "",
                      b.cache_hit ? " (cache hit)" : "");
        break;
    }
}

void apply(CounterStore* store, const std::vector<ScopeDelta>& deltas, std::time_t now,
           HeldReservation releases = {}) {
    store->settle(deltas, std::move(releases), now, [](const StoreReply& rep) {
        if (rep.status != StoreStatus::Ok) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "llm_gateway: accounting dropped: %s", log_text(rep.error).c_str());
        }
    });
}

}  // namespace

const Price* answering_price(MainConf* mcf, const RequestCtx& ctx, const Call& c) {
    if (c.target == nullptr || c.target->canonical == ctx.in.resolved.canonical) return ctx.in.price;
    return mcf->state->prices.find(c.provider->name, provider_type_name(c.provider->type), c.target->upstream_model);
}

// A failure is a 429, a 5xx, an invalid answer or no answer at all.
bool call_failed(const Call& c) { return answer_failed(answer_facts(c)); }

void account_call(ngx_log_t*, MainConf* mcf, RequestCtx* ctx, Call& call) {
    if (call.accounted || ctx->auth.user == nullptr) return;
    const CallObservation o = observe_call(*ctx, call);
    call.accounted = true;
    CounterStore* store = counter_store(mcf);
    if (store == nullptr) return;
    const Bill bill = bill_attempt(o);   // its deltas view strings it owns
    apply(store, bill.deltas, ngx_time());
}

void account_request(ngx_log_t* log, MainConf* mcf, RequestCtx* ctx, bool cancelled) {
    Call* call = ctx->attempts.chosen;
    if (ctx->billed.accounted || ctx->auth.user == nullptr || ctx->in.resolved.provider == nullptr || call == nullptr) return;
    ctx->billed.accounted = true;
    CounterStore* store = counter_store(mcf);
    if (store == nullptr) return;
    std::time_t now = ngx_time();

    const CallObservation o = observe_request(mcf, *ctx, *call, cancelled);
    const Bill bill = bill_request(o);   // its deltas view strings it owns
    log_bill(log, mcf, *ctx, bill);
    ctx->billed.provider = call->provider;
    if (bill.tallied) {
        ctx->billed.model = bill.model();
        ctx->billed.in = bill.prompt_tokens();
        ctx->billed.out = bill.completion_tokens();
        ctx->billed.cost = bill.cost_micros();
    }
    call->accounted = true;   // its provider attempt is in this bill (none when cancelled)
    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, log, 0,
                   "llm_gateway: accounting: %uz counter deltas to the \"%s\" store%s, reservation %s%s",
                   bill.deltas.size(), store->name(), bill.deltas.empty() ? " (nothing billed)" : "",
                   ctx->admission.held.any() ? "released in the same call" : "none",
                   ctx->admission.held.lease != nullptr ? " (from the worker's lease)" : "");
    // The reservation (llm_gateway_budget_mode reserve) is released in the
    // same store operation that counts the real usage: the settle.
    apply(store, bill.deltas, now, std::exchange(ctx->admission.held, {}));
    touch_last_seen(store, o.scopes, now);
}

void release_reservation(MainConf* mcf, RequestCtx* ctx) {
    if (!ctx->admission.held.any()) return;
    if (CounterStore* store = counter_store(mcf)) apply(store, {}, ngx_time(), std::exchange(ctx->admission.held, {}));
}

void account_targets(MainConf* mcf, const std::vector<const TargetConf*>& targets) {
    CounterStore* store = counter_store(mcf);
    if (store == nullptr || targets.empty()) return;
    std::vector<ScopeDelta> deltas(targets.size());
    for (std::size_t i = 0; i < targets.size(); ++i) {
        deltas[i].kind = target_kind_name(targets[i]->kind);
        deltas[i].id = targets[i]->name;
        deltas[i].delta[kMetricReq] = 1;
    }
    apply(store, deltas, ngx_time());
}

void end_metered_request(RequestCtx* ctx) noexcept {
    release_calls(ctx);
    // A provider call whose request ended before the relay finished (the
    // client went away): its tokens are still counted.
    if (ctx->attempts.chosen != nullptr && !ctx->billed.accounted && ctx->mcf != nullptr) {
        try {
            account_request(ngx_cycle->log, ctx->mcf, ctx, true);
        } catch (...) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "llm_gateway: accounting of a cancelled request failed");
        }
    }
    // A reservation no accounting settled (no call was made, or nothing was
    // counted): released now.
    if (ctx->admission.held.any() && ctx->mcf != nullptr) {
        try {
            release_reservation(ctx->mcf, ctx);
        } catch (...) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "llm_gateway: releasing a reservation failed");
        }
    }
}

}  // namespace llmgw
