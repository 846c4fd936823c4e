// Accounting after the provider answered: tokens, cost and the served
// model's request counter in one batch; provider attempt/failure counters;
// last-seen stamps at most once per scope per minute per worker.
#include "core/metering/accounting.h"
#include "ngx/module.h"
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

void account_request(ngx_log_t* log, MainConf* mcf, RequestCtx* ctx, bool cancelled) {
    if (ctx->accounted || ctx->user == nullptr || ctx->resolved.provider == nullptr) return;
    ctx->accounted = true;
    CounterStore* store = counter_store(mcf);
    if (store == nullptr) return;
    std::time_t now = ngx_time();

    std::vector<ScopeDelta> deltas;
    AccountingInput in;
    bool served = ctx->relay == RequestCtx::Relay::Sse || ctx->relay == RequestCtx::Relay::Pass ||
                  (cancelled && ctx->relay == RequestCtx::Relay::Pending);
    std::vector<Scope> scopes = request_scopes(*ctx);
    // Past the bound on distinct statistics ids, new model ids count here.
    const std::string overflow = ctx->resolved.provider->name + "/other";
    if (served) {
        in.scopes = scopes;
        in.model = ctx->resolved.canonical;
        in.model_overflow = overflow;
        in.usage = ctx->usage;
        if (in.usage.present && !usage_plausible(in.usage, mcf->max_tokens_per_request)) {
            ngx_log_error(NGX_LOG_WARN, log, 0,
                          "llm_gateway: implausible usage from the provider for model \"%s\" (prompt_tokens=%L "
                          "completion_tokens=%L, over llm_gateway_max_tokens_per_request %i); estimating",
                          ctx->resolved.canonical.c_str(), static_cast<long long>(in.usage.prompt_tokens),
                          static_cast<long long>(in.usage.completion_tokens), mcf->max_tokens_per_request);
            in.usage.present = false;
        }
        if (!in.usage.present) {
            in.estimated = true;
            in.usage.prompt_tokens = static_cast<std::int64_t>(ctx->body.size() / 4);
            in.usage.completion_tokens = 0;
        }
        in.cost_micros = ctx->price ? cost_micros(*ctx->price, in.usage.prompt_tokens, in.usage.completion_tokens) : 0;
        deltas = accounting_deltas(in);
        ngx_log_error(NGX_LOG_INFO, log, 0,
                      "llm_gateway: usage user=\"%s\" model=\"%s\" prompt_tokens=%L completion_tokens=%L "
                      "cost_micro_usd=%L%s%s",
                      log_value(ctx->user->name).c_str(), log_value(ctx->resolved.canonical).c_str(),
                      static_cast<long long>(in.usage.prompt_tokens), static_cast<long long>(in.usage.completion_tokens),
                      static_cast<long long>(in.cost_micros), in.estimated ? " (estimated)" : "",
                      cancelled ? " (client cancelled)" : "");
    }
    bool failed = !served && !(ctx->relay == RequestCtx::Relay::UpstreamError && ctx->upstream_status < 500 &&
                               ctx->upstream_status != 429);
    const std::string provmodel = ctx->resolved.provider->name + "/" + ctx->resolved.upstream_model;
    if (!cancelled) add_provider_deltas(deltas, ctx->resolved.provider->name, provmodel, overflow, failed);
    store->apply(deltas, now, [](const StoreReply& rep) {
        if (rep.status != StoreStatus::Ok) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "llm_gateway: accounting dropped: %s", log_text(rep.error).c_str());
        }
    });
    touch_last_seen(store, scopes, now);
}

}  // namespace llmgw
