// Limit admission, before any provider call: the 402 pricing rule, then one
// atomic store operation that checks every limit of the request's scopes in
// precedence order and counts the request (or, when rejected, counts the
// rejection instead).
#include "ngx/module.h"

namespace llmgw {
namespace {

bool cost_budget_applies(const RequestCtx& ctx) {
    if (ctx.user->limits.has_cost_budget()) return true;
    const GroupConf* g = ctx.directory->find_group(ctx.user->group);
    return g != nullptr && g->limits.has_cost_budget();
}

ngx_int_t answer_rejection(ngx_http_request_t* r, RequestCtx* ctx, const AdmissionResult& res) {
    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "llm_gateway: rejected user=\"%s\": %s",
                  ctx->user->name.c_str(), res.message.c_str());
    if (add_header(r, "Retry-After", std::to_string(res.retry_after)) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (res.kind == ViolationKind::Budget) {
        return reject(r, NGX_HTTP_TOO_MANY_REQUESTS, res.message, "insufficient_quota", "budget_exceeded");
    }
    return reject(r, NGX_HTTP_TOO_MANY_REQUESTS, res.message, "rate_limit_error", "rate_limit_exceeded");
}

// The 402 rule: a model with no price cannot be billed against a cost budget.
bool priced_or_allowed(ngx_http_request_t* r, RequestCtx* ctx, MainConf* mcf) {
    const ProviderConf& p = *ctx->resolved.provider;
    ctx->price = mcf->state->prices.find(p.name, provider_type_name(p.type), ctx->resolved.upstream_model);
    if (ctx->price != nullptr || !cost_budget_applies(*ctx)) return true;
    if (mcf->allow_unpriced) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm_gateway: model \"%s\" has no price; billed as zero for user \"%s\" "
                      "(llm_gateway_allow_unpriced on)",
                      ctx->resolved.canonical.c_str(), ctx->user->name.c_str());
        return true;
    }
    return false;
}

}  // namespace

std::vector<Scope> request_scopes(const RequestCtx& ctx) {
    std::vector<Scope> scopes;
    const UserConf& u = *ctx.user;
    scopes.push_back(Scope{"user", u.name, &u.limits});
    if (ctx.is_admin_traffic) return scopes;   // the admin's own limits; never group or total
    const GroupConf* g = ctx.directory->find_group(u.group);
    scopes.push_back(Scope{"group", u.group, g ? &g->limits : nullptr});
    scopes.push_back(Scope{"total", "all", nullptr});
    return scopes;
}

ngx_int_t admit_request(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    if (!ctx->is_admin_traffic && !priced_or_allowed(r, ctx, mcf)) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm_gateway: model \"%s\" has no price and a cost budget applies to user \"%s\"",
                      ctx->resolved.canonical.c_str(), ctx->user->name.c_str());
        return reject(r, 402,
                      "model " + ctx->resolved.canonical +
                          " has no configured price and a cost budget applies to this key",
                      "invalid_request_error", "model_unpriced");
    }
    CounterStore* store = shm_store(mcf->zone);
    if (store == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    AdmissionPlan plan = build_admission_plan(request_scopes(*ctx), ngx_time(), true);

    StoreReply reply;
    AdmissionResult result;
    store->admit(plan, [&](const StoreReply& rep, const AdmissionResult& res) {
        reply = rep;
        result = res;
    });
    if (reply.status != StoreStatus::Ok) {
        return reject(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the limit store is unavailable", "server_error",
                      "limit_store_unavailable");
    }
    if (!result.admitted) return answer_rejection(r, ctx, result);
    ctx->phase = RequestCtx::Phase::Admitted;
    return NGX_DECLINED;
}

}  // namespace llmgw
