// Accounting after the provider answered: tokens, cost and the served
// model's request counter in one batch; provider attempt/failure counters;
// last-seen stamps at most once per scope per minute per worker.
#include <utility>

#include "ngx/call/accounting.h"

#include "core/log/log_escape.h"
#include "core/metering/accounting.h"
#include "core/stats/latency.h"
#include "ngx/admission/admission.h"
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
    for (const Scope& s : scopes) {
        if (s.kind != "user" && s.kind != "group") continue;
        std::string key = seen_key(s.kind, s.id);
        std::int64_t minute = now / 60;
        auto it = cache.find(key);
        if (it != cache.end() && it->second == minute) continue;
        cache[key] = minute;
        store->touch(key, now, kSeenTtl);
    }
}

// Provider attempts and failures: a failure is a 429, a 5xx or no answer.
void add_provider_deltas(std::vector<ScopeDelta>& out, const std::string& prov, const std::string& provmodel,
                         const std::string& overflow, bool failed) {
    for (const std::string* id : {&prov, &provmodel}) {
        ScopeDelta d;
        d.kind = id == &prov ? "prov" : "provmodel";
        d.id = *id;
        if (id == &provmodel) d.overflow_id = overflow;
        d.delta[kMetricAtt] = 1;
        d.delta[kMetricFail] = failed ? 1 : 0;
        out.push_back(d);
    }
}

}  // namespace

namespace {

// Whether the call produced an answer the client is billed for
// (answer_billed): a 2xx that began (complete or not, a stream that turned
// invalid included), or a call the client left while it was running.
bool call_served(const Call& c, bool cancelled) {
    BilledAnswer a;
    a.answered = c.answered();
    a.end = c.outcome().end;
    a.streamed = c.codec->mode() == BodyMode::Stream;
    a.success = c.upstream_status >= 200 && c.upstream_status < 300;
    a.cancelled = cancelled;
    return answer_billed(a);
}

// A passthrough's model is the one its answer names ("" when none).
std::string_view upstream_model_of(const RequestCtx& ctx, const Call& c) {
    if (ctx.route != nullptr && ctx.route->tally == Tally::Sniffed) {
        return c.answered() ? std::string_view(c.outcome().model) : std::string_view();
    }
    return c.target ? c.target->upstream_model : ctx.in.resolved.upstream_model;
}

std::string provmodel_of(const RequestCtx& ctx, const Call& c) {
    std::string_view m = upstream_model_of(ctx, c);
    return c.provider->name + "/" + (m.empty() ? std::string("other") : std::string(m));
}

Tally tally_of(const RequestCtx& ctx) { return ctx.route != nullptr ? ctx.route->tally : Tally::Tokens; }

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
bool call_failed(const Call& c) {
    if (!c.answered()) return true;
    switch (c.outcome().end) {
    case EndState::UpstreamError: return c.upstream_status >= 500 || c.upstream_status == 429;
    case EndState::Invalid: return true;
    default: return false;
    }
}

void account_call(ngx_log_t*, MainConf* mcf, RequestCtx* ctx, Call& call) {
    if (call.accounted || ctx->auth.user == nullptr) return;
    call.accounted = true;
    CounterStore* store = counter_store(mcf);
    if (store == nullptr) return;
    std::vector<ScopeDelta> deltas;   // views into provmodel and overflow: they outlive apply()
    const std::string provmodel = provmodel_of(*ctx, call);
    const std::string overflow = call.provider->name + "/other";
    add_provider_deltas(deltas, call.provider->name, provmodel, overflow, call_failed(call));
    apply(store, deltas, ngx_time());
}

void account_request(ngx_log_t* log, MainConf* mcf, RequestCtx* ctx, bool cancelled) {
    Call* call = ctx->attempts.chosen;
    if (ctx->billed.accounted || ctx->auth.user == nullptr || ctx->in.resolved.provider == nullptr || call == nullptr) return;
    ctx->billed.accounted = true;
    CounterStore* store = counter_store(mcf);
    if (store == nullptr) return;
    std::time_t now = ngx_time();

    // The deltas are views into these: they outlive apply().
    std::vector<ScopeDelta> deltas;
    AccountingInput in;
    std::vector<Scope> scopes = request_scopes(*ctx);
    // Past the bound on distinct statistics ids, new model ids count here.
    // The deltas view these strings: they outlive apply().
    const std::string overflow = call->provider->name + "/other";
    const std::string provmodel = provmodel_of(*ctx, *call);
    const Tally tally = tally_of(*ctx);
    if (tally == Tally::Requests && call_served(*call, cancelled)) {
        // Images and audio: the model's request after a complete answer; no
        // tokens, no cost (accounting rule 5).
        if (call->answered() && call->outcome().end == EndState::Complete) {
            in.model = call->target ? call->target->canonical : ctx->in.resolved.canonical;
            in.model_overflow = overflow;
            deltas = accounting_deltas(in);
            ngx_log_error(NGX_LOG_INFO, log, 0, "llm_gateway: usage user=\"%s\" model=\"%s\" route=\"%s\" (requests only)",
                          log_value(ctx->auth.user->name).c_str(), log_value(in.model).c_str(), ctx->route->name);
        }
    } else if (tally == Tally::Sniffed && call_served(*call, cancelled)) {
        // Passthrough: tokens and cost only when the answer carried usage;
        // the model scope when it named its model. Never estimated.
        const CodecResult& res = call->outcome();
        std::string_view model = upstream_model_of(*ctx, *call);
        if (!model.empty()) {
            in.model = call->provider->name + "/" + std::string(model);
            in.model_overflow = overflow;
        }
        if (res.usage.present && usage_plausible(res.usage, mcf->max_tokens_per_request)) {
            in.scopes = scopes;
            in.usage = res.usage;
            const Price* price = model.empty() ? nullptr
                                               : mcf->state->prices.find(call->provider->name,
                                                                         provider_type_name(call->provider->type), model);
            in.cost_micros = price ? cost_micros(*price, in.usage.prompt_tokens, in.usage.completion_tokens) : 0;
        }
        if (!in.model.empty() || !in.scopes.empty()) {
            deltas = accounting_deltas(in);
            ngx_log_error(NGX_LOG_INFO, log, 0,
                          "llm_gateway: usage user=\"%s\" model=\"%s\" prompt_tokens=%L completion_tokens=%L "
                          "cost_micro_usd=%L route=\"passthrough\"%s",
                          log_value(ctx->auth.user->name).c_str(), log_value(in.model).c_str(),
                          static_cast<long long>(in.usage.prompt_tokens),
                          static_cast<long long>(in.usage.completion_tokens), static_cast<long long>(in.cost_micros),
                          in.scopes.empty() ? " (no usage in the answer)" : "");
        }
    } else if (tally == Tally::Tokens && call_served(*call, cancelled)) {
        in.scopes = scopes;
        in.model = call->target ? call->target->canonical : ctx->in.resolved.canonical;
        in.model_overflow = overflow;
        // A stream ended at its budget: billed for what reached the client.
        const bool cut_off = call->answered() && call->outcome().end == EndState::Stopped;
        in.usage = cut_off ? ctx->cutoff.relayed_usage : call->outcome().usage;
        if (in.usage.present && in.usage.malformed) {
            ngx_log_error(NGX_LOG_WARN, log, 0,
                          "llm_gateway: implausible usage from the provider for model \"%s\" (a token count that is "
                          "not an integer from 0 to 9223372036854775807); estimating",
                          log_value(ctx->in.resolved.canonical).c_str());
            in.usage = Usage();   // unread usage
        } else if (in.usage.present && !usage_plausible(in.usage, mcf->max_tokens_per_request)) {
            ngx_log_error(NGX_LOG_WARN, log, 0,
                          "llm_gateway: implausible usage from the provider for model \"%s\" (prompt_tokens=%L "
                          "completion_tokens=%L, over llm_gateway_max_tokens_per_request %i); estimating",
                          log_value(ctx->in.resolved.canonical).c_str(), static_cast<long long>(in.usage.prompt_tokens),
                          static_cast<long long>(in.usage.completion_tokens), mcf->max_tokens_per_request);
            in.usage.present = false;
        }
        if (cut_off) {
            // The reported input, else the estimate; the larger of the reported
            // output and the relayed text / 4.
            const StreamUsage su = stream_usage(in.usage, ctx->cutoff.relayed_text_bytes, ctx->in.body.size(), nullptr);
            in.estimated = !in.usage.present;
            in.usage.present = true;
            in.usage.prompt_tokens = su.prompt_tokens;
            in.usage.completion_tokens = su.completion_tokens;
        } else if (!in.usage.present) {
            in.estimated = true;
            in.usage.prompt_tokens = static_cast<std::int64_t>(ctx->in.body.size() / 4);
            // A cancelled stream: what it carried before it ended, bytes / 4.
            in.usage.completion_tokens = cancelled ? call->outcome().text_bytes / 4 : 0;
        }
        const Price* price = answering_price(mcf, *ctx, *call);
        in.cost_micros = price ? cost_micros(*price, in.usage.prompt_tokens, in.usage.completion_tokens) : 0;
        deltas = accounting_deltas(in);
        ngx_log_error(NGX_LOG_INFO, log, 0,
                      "llm_gateway: usage user=\"%s\" model=\"%s\" prompt_tokens=%L completion_tokens=%L "
                      "cost_micro_usd=%L%s%s%s",
                      log_value(ctx->auth.user->name).c_str(), log_value(in.model).c_str(),
                      static_cast<long long>(in.usage.prompt_tokens), static_cast<long long>(in.usage.completion_tokens),
                      static_cast<long long>(in.cost_micros), in.estimated ? " (estimated)" : "",
                      cancelled ? " (client cancelled)" : "", cut_off ? " (cut off at the budget)" : "");
    }
    // The optional statistics (llm_gateway_stats), in the same batch: the
    // user's usage of the model, and the answering call's latency bucket.
    // The deltas view these strings: they outlive apply().
    // Past the statistics bound, new ids go to the provider's "other".
    std::string user_model, user_model_other, latency, latency_other;
    if (!in.model.empty() && !deltas.empty()) {
        const ScopeDelta model_delta = deltas.back();   // accounting_deltas puts the model scope last
        if (mcf->stat_user_model && model_delta.kind == "model") {
            user_model = ctx->auth.user->name + "|" + in.model;
            user_model_other = ctx->auth.user->name + "|" + overflow;
            ScopeDelta d = model_delta;
            d.kind = "usermodel";
            d.id = user_model;
            d.overflow_id = user_model_other;
            deltas.push_back(d);
        }
        if (mcf->stat_latency && call->ended != 0 && call->ended >= call->started) {
            const auto elapsed = static_cast<std::int64_t>(call->ended - call->started);
            latency = latency_id(in.model, elapsed);
            latency_other = latency_id(overflow, elapsed);
            ScopeDelta d;
            d.kind = "lat";
            d.id = latency;
            d.overflow_id = latency_other;
            d.delta[kMetricReq] = 1;
            deltas.push_back(d);
        }
    }
    ctx->billed.provider = call->provider;
    if (!in.model.empty() || !in.scopes.empty()) {
        ctx->billed.model = in.model;
        ctx->billed.in = in.usage.prompt_tokens;
        ctx->billed.out = in.usage.completion_tokens;
        ctx->billed.cost = in.cost_micros;
    }
    if (!call->accounted) {
        call->accounted = true;
        if (!cancelled) add_provider_deltas(deltas, call->provider->name, provmodel, overflow, call_failed(*call));
    }
    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, log, 0,
                   "llm_gateway: accounting: %uz counter deltas to the \"%s\" store%s, reservation %s%s",
                   deltas.size(), store->name(), deltas.empty() ? " (nothing billed)" : "",
                   ctx->admission.held.any() ? "released in the same call" : "none",
                   ctx->admission.held.lease != nullptr ? " (from the worker's lease)" : "");
    // The reservation (llm_gateway_budget_mode reserve) is released in the
    // same store operation that counts the real usage: the settle.
    apply(store, deltas, now, std::exchange(ctx->admission.held, {}));
    touch_last_seen(store, scopes, now);
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
