// Limit admission, before any provider call: the 402 pricing rule, then one
// atomic store operation that checks every limit of the request's scopes in
// precedence order and counts the request (or, when rejected, counts the
// rejection instead).
#include <unordered_map>
#include <vector>

#include "ngx/admission/admission.h"

#include "core/log/log_escape.h"
#include "core/metering/lease.h"
#include "core/metering/reservation.h"
#include "ngx/events/feed.h"
#include "ngx/http/request_events.h"
#include "ngx/http/respond.h"
#include "ngx/http/store_wait.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"
#include "ngx/request/route.h"
#include "ngx/store/store.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

bool cost_budget_applies(const RequestCtx& ctx) {
    if (ctx.auth.user->limits.has_cost_budget()) return true;
    const GroupConf* g = ctx.auth.directory->find_group(ctx.auth.user->group);
    return g != nullptr && g->limits.has_cost_budget();
}

ngx_int_t answer_rejection(ngx_http_request_t* r, RequestCtx* ctx, const AdmissionResult& res) {
    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: rejected user=\"%s\": %s",
                  log_value(ctx->auth.user->name).c_str(), log_text(res.message).c_str());
    if (add_header(r, "Retry-After", std::to_string(res.retry_after)) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    request_event(*ctx, res.kind == ViolationKind::Budget ? "budget" : "rate_limit", 429, res.message);
    for (const Scope& s : request_scopes(*ctx)) {
        if (s.kind != "total") count_rejection(main_conf(r), s.kind, s.id);
    }
    if (res.kind == ViolationKind::Budget) {
        ctx->admission.reject_kind = "budget";
        return reject(r, NGX_HTTP_TOO_MANY_REQUESTS, res.message, "insufficient_quota", "budget_exceeded");
    }
    ctx->admission.reject_kind = "rate_limit";
    return reject(r, NGX_HTTP_TOO_MANY_REQUESTS, res.message, "rate_limit_error", "rate_limit_exceeded");
}

// The 402 rule: a model with no price cannot be billed against a cost budget.
bool priced_or_allowed(ngx_http_request_t* r, RequestCtx* ctx, MainConf* mcf) {
    const ProviderConf& p = *ctx->in.resolved.provider;
    ctx->in.price = mcf->state->prices.find(p.name, provider_type_name(p.type), ctx->in.resolved.upstream_model);
    if (ctx->in.price != nullptr || !cost_budget_applies(*ctx)) return true;
    if (mcf->allow_unpriced) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm_gateway: model \"%s\" has no price; billed as zero for user \"%s\" "
                      "(llm_gateway_allow_unpriced on)",
                      log_value(ctx->in.resolved.canonical).c_str(), log_value(ctx->auth.user->name).c_str());
        request_event(*ctx, "unpriced", 0,
                      "model " + ctx->in.resolved.canonical + " has no configured price; billed as zero under a cost budget",
                      nullptr, {}, "pricing");
        return true;
    }
    return false;
}

// A user's admission plan is the same for every request within one second
// (its keys name the current buckets, its Retry-After values count from that
// second), so each worker keeps the plans of the current second, shared with
// the admissions still waiting for the store and never changed (a request's
// reservation travels beside it).
// defer_unchecked: a shared store with fail_open=on counts the request in
// the scopes no request limit checks with the accounting, behind
// (docs/store.md#accounting-batches); with fail_open=off the admission call
// stays, since it is also what refuses requests while the store is down.
const std::shared_ptr<const AdmissionPlan>& plan_for(PlanCache& pc, const RequestCtx& ctx, std::time_t now,
                                                     bool in_process, std::int64_t reserve_ttl, bool defer_unchecked,
                                                     std::int64_t lease_ttl) {
    if (pc.dir != ctx.auth.directory.get() || pc.plans[0].size() + pc.plans[1].size() > 4096) {
        pc.dir = ctx.auth.directory.get();   // users were reloaded: their addresses may be reused
        pc.plans[0].clear();
        pc.plans[1].clear();
    }
    PlanCache::Cached& c = pc.plans[ctx.auth.is_admin_traffic ? 1 : 0][ctx.auth.user];
    if (c.second != now || c.plan == nullptr) {
        c.plan = std::make_shared<const AdmissionPlan>(build_admission_plan(request_scopes(ctx), now, in_process, reserve_ttl,
                                                                          defer_unchecked, lease_ttl));
        c.second = now;
    }
    return c.plan;
}

// A request's worst case (llm_gateway_budget_mode reserve): its input
// estimate plus the output it allows (or output=), priced at the dearest of
// its failover targets (worst_case_reservation). A passthrough's model is
// unknown: it reserves nothing.
ReserveAmounts reservation_for(const MainConf* mcf, const RequestCtx& ctx) {
    std::vector<const Price*> prices;
    prices.reserve(ctx.in.resolved.targets.size());
    for (const Target& t : ctx.in.resolved.targets) {
        // The first target's price was looked up by the 402 rule.
        const bool first = ctx.in.price != nullptr && t.provider == ctx.in.resolved.provider &&
                           t.upstream_model == ctx.in.resolved.upstream_model;
        prices.push_back(first ? ctx.in.price
                               : mcf->state->prices.find(t.provider->name, provider_type_name(t.provider->type),
                                                         t.upstream_model));
    }
    return worst_case_reservation(ctx.in.body.size(), ctx.in.doc ? ctx.in.doc->info().max_output : 0,
                                  ctx.route->codec == CodecKind::OpenAIEmbeddings, mcf->reserve_output, prices);
}

// llm_gateway_stream_cutoff: the request's token and cost checks, kept
// before the store answers (the plan is the worker's, and changes), then,
// once admitted, what remains of them (ngx/call/stream_cutoff.h).
void cutoff_keep_limits(const MainConf* mcf, RequestCtx* ctx, const AdmissionPlan& plan) {
    ctx->cutoff.limits.clear();
    if (!mcf->stream_cutoff) return;
    ctx->cutoff.limits = budget_limits(plan);
    ctx->cutoff.checks = plan.checks.size();
}

void cutoff_admitted(ngx_log_t* log, RequestCtx* ctx) {
    if (ctx->cutoff.limits.empty()) return;
    ctx->cutoff.remaining = remaining_budget(ctx->cutoff.limits, ctx->admission.result.used, ctx->cutoff.checks);
    ctx->cutoff.active = ctx->cutoff.remaining.any();
    const RemainingBudget& b = ctx->cutoff.remaining;
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, log, 0, "llm_gateway: stream cutoff %s: %L tokens, %L micro-USD left%s",
                   ctx->cutoff.active ? "armed" : "not armed", static_cast<long long>(b.has_tokens ? b.tokens : -1),
                   static_cast<long long>(b.has_cost ? b.cost_micros : -1),
                   b.has_tokens && b.has_cost ? "" : " (-1: no such budget)");
}

}  // namespace

std::vector<Scope> request_scopes(const RequestCtx& ctx) {
    std::vector<Scope> scopes;
    scopes.reserve(3);
    const UserConf& u = *ctx.auth.user;
    scopes.push_back(Scope{"user", u.name, &u.limits});
    if (ctx.auth.is_admin_traffic) return scopes;   // the admin's own limits; never group or total
    const GroupConf* g = ctx.auth.directory->find_group(u.group);
    scopes.push_back(Scope{"group", u.group, g ? &g->limits : nullptr});
    scopes.push_back(Scope{"total", "all", nullptr});
    return scopes;
}

ngx_int_t admit_request(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    // The 402 rule is for routes billed by tokens; media routes record no
    // cost, and a passthrough's model is known only from its answer.
    const bool billed = ctx->route != nullptr && ctx->route->tally == Tally::Tokens;
    if (!ctx->auth.is_admin_traffic && billed && !priced_or_allowed(r, ctx, mcf)) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm_gateway: model \"%s\" has no price and a cost budget applies to user \"%s\"",
                      log_value(ctx->in.resolved.canonical).c_str(), log_value(ctx->auth.user->name).c_str());
        ctx->admission.reject_kind = "unpriced";
        std::string msg = "model " + ctx->in.resolved.canonical + " has no configured price and a cost budget applies to this key";
        request_event(*ctx, "unpriced", 402, msg, nullptr, {}, "pricing");
        return reject(r, 402, msg, "invalid_request_error", "model_unpriced");
    }
    CounterStore* store = counter_store(mcf);
    Worker* w = worker();
    if (store == nullptr || w == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    // A shared store admits from the worker's leases (core/metering/lease.h),
    // in slots of the reservation TTL, or in check mode kCheckLeaseTtl.
    const bool shared = mcf->state->store != nullptr;
    const std::int64_t lease_ttl = !shared ? 0 : mcf->reserve_ttl > 0 ? mcf->reserve_ttl : kCheckLeaseTtl;
    std::shared_ptr<const AdmissionPlan> plan =
        plan_for(w->plans, *ctx, ngx_time(), store_uses_in_process_ttls(mcf), mcf->reserve_ttl,
                 shared && mcf->state->store->fail_open, lease_ttl);
    if (mcf->ratelimit_headers && !ctx->auth.is_admin_traffic) ctx->admission.limit_shapes = limit_shapes(*plan);
    // Reservations: this request's worst case (a request that reserves
    // nothing, zeros).
    ReserveAmounts amounts;
    if (!plan->reserve.empty()) {
        // (A plan built for leases reserves in check mode too: what only a
        // lease holds, nothing of the request's own.)
        if (billed && mcf->reserve_ttl > 0) amounts = reservation_for(mcf, *ctx);
        ctx->admission.held = HeldReservation{plan, amounts};
    }
    if (billed) cutoff_keep_limits(mcf, ctx, *plan);
    ngx_log_debug7(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm_gateway: admission of user \"%s\" group \"%s\": %uz checks, %uz reservations "
                   "(worst case %L tokens, %L micro-USD), store \"%s\"",
                   log_value(ctx->auth.user->name).c_str(), log_value(ctx->auth.user->group).c_str(), plan->checks.size(),
                   plan->reserve.size(), static_cast<long long>(amounts.tokens),
                   static_cast<long long>(amounts.cost_micros), store->name());
    ctx->admission.asked = ngx_current_msec;

    ctx->phase = RequestCtx::Phase::Admitting;
    return await_store(
        r, ctx, Resume::RunPhases,
        [store, plan = std::move(plan), amounts, ctx](std::function<void()> answered) {
            std::weak_ptr<bool> alive = ctx->alive;
            store->admit(plan, amounts, [store, plan, amounts, ctx, alive, answered = std::move(answered)](
                                            const StoreReply& rep, const AdmissionResult& res) {
                auto token = alive.lock();
                if (!token || !*token) {
                    // The request ended while the store was asked: what the
                    // admission reserved goes back at once (a worker's lease
                    // would otherwise stay held until it lapsed).
                    if (rep.status == StoreStatus::Ok && res.admitted && !plan->reserve.empty()) {
                        store->settle({}, HeldReservation{plan, amounts, res.lease}, ngx_time(), WriteDone());
                    }
                    return;
                }
                ctx->admission.reply = rep;
                ctx->admission.result = res;
                answered();
            });
        },
        [r, ctx]() { return finish_admission(r, ctx); });
}

ngx_int_t finish_admission(ngx_http_request_t* r, RequestCtx* ctx) {
    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm_gateway: admission answered in %M ms: %s%s%s (lease %s)", ngx_current_msec - ctx->admission.asked,
                   ctx->admission.reply.status != StoreStatus::Ok ? "store error: "
                   : ctx->admission.result.admitted            ? "admitted"
                                                           : "rejected: ",
                   ctx->admission.reply.status != StoreStatus::Ok ? log_text(ctx->admission.reply.error).c_str() : "",
                   ctx->admission.reply.status == StoreStatus::Ok && !ctx->admission.result.admitted
                       ? log_text(ctx->admission.result.message).c_str()
                       : "",
                   ctx->admission.result.lease != nullptr ? "held" : "none");
    // What remains, from this admission's own sums (no further store read).
    if (!ctx->admission.limit_shapes.empty() && ctx->admission.reply.status == StoreStatus::Ok) {
        ctx->admission.allowance = allowance_headers(tightest_allowances(ctx->admission.limit_shapes, ctx->admission.result, ngx_time()));
    }
    // Nothing was reserved unless the request was admitted; a shared store
    // may hold parts of it in the worker's leases.
    if (ctx->admission.reply.status != StoreStatus::Ok || !ctx->admission.result.admitted) ctx->admission.held.clear();
    if (ctx->admission.held.plan != nullptr) ctx->admission.held.lease = std::move(ctx->admission.result.lease);
    if (ctx->admission.reply.status != StoreStatus::Ok) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: admission refused: %s",
                      log_text(ctx->admission.reply.error).c_str());
        ctx->admission.reject_kind = "store_down";
        request_event(*ctx, "store_down", 503, "the limit store is unavailable");
        return reject(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the limit store is unavailable", "server_error",
                      "limit_store_unavailable");
    }
    if (!ctx->admission.result.admitted) return answer_rejection(r, ctx, ctx->admission.result);
    cutoff_admitted(r->connection->log, ctx);
    ctx->phase = RequestCtx::Phase::Admitted;
    return NGX_DECLINED;
}

}  // namespace llmgw
