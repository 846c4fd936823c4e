// The billing decision: what a request's accounting writes and says.
#include "core/metering/billing.h"

#include "core/metering/cutoff.h"
#include "core/stats/latency.h"

namespace llmgw {
namespace {

// Whether the call produced an answer the client is billed for
// (answer_billed): a 2xx that began (complete or not, a stream that turned
// invalid included), or a call the client left while it was running.
bool served(const CallObservation& o) {
    BilledAnswer a;
    a.answered = o.answer.answered;
    a.end = o.answer.end;
    a.streamed = o.answer.streamed;
    a.success = o.answer.status >= 200 && o.answer.status < 300;
    a.cancelled = o.cancelled;
    return answer_billed(a);
}

// The provider's model the call used: a passthrough's is the one its answer
// names ("" when none).
std::string_view upstream_model_of(const CallObservation& o) {
    if (o.tally == Tally::Sniffed) return o.answer.answered ? o.answer.model : std::string_view();
    return o.upstream_model;
}

std::int64_t cost_at(const Price* price, const Usage& u) {
    return price != nullptr ? cost_micros(*price, u.prompt_tokens, u.completion_tokens) : 0;
}

// Images and audio: the model's request after a complete answer; no tokens,
// no cost (accounting rule 5).
void bill_requests(const CallObservation& o, Bill& b) {
    AccountingInput& in = b.owned->in;
    if (!o.answer.answered || o.answer.end != EndState::Complete) return;
    in.model = std::string(o.model);
    b.line = UsageLine::Requests;
}

// Passthrough: tokens and cost only when the answer carried usage; the model
// scope when it named its model. Never estimated.
void bill_sniffed(const CallObservation& o, Bill& b) {
    AccountingInput& in = b.owned->in;
    const std::string_view model = upstream_model_of(o);
    if (!model.empty()) in.model = std::string(o.provider) + "/" + std::string(model);
    if (o.answer.usage.present && usage_plausible(o.answer.usage, o.max_tokens_per_request)) {
        in.scopes = o.scopes;
        in.usage = o.answer.usage;
        in.cost_micros = model.empty() ? 0 : cost_at(o.price, in.usage);
    }
    if (in.model.empty() && in.scopes.empty()) return;
    b.line = UsageLine::Passthrough;
    b.without_usage = in.scopes.empty();
}

// Chat, messages, embeddings: the usage read, else the estimate; a stream
// stopped at its budget is billed for what reached the client.
void bill_tokens(const CallObservation& o, Bill& b) {
    AccountingInput& in = b.owned->in;
    in.scopes = o.scopes;
    in.model = std::string(o.model);
    b.cut_off = o.answer.answered && o.answer.end == EndState::Stopped;
    in.usage = b.cut_off ? o.relayed_usage : o.answer.usage;
    if (in.usage.present && in.usage.malformed) {
        b.implausible = Implausible::Malformed;
        b.reported = in.usage;
        in.usage = Usage();   // unread usage
    } else if (in.usage.present && !usage_plausible(in.usage, o.max_tokens_per_request)) {
        b.implausible = Implausible::OverMax;
        b.reported = in.usage;
        in.usage.present = false;
    }
    if (b.cut_off) {
        // The reported input, else the estimate; the larger of the reported
        // output and the relayed text / 4.
        const StreamUsage su = stream_usage(in.usage, o.relayed_text_bytes, o.body_bytes, nullptr);
        in.estimated = !in.usage.present;
        in.usage.present = true;
        in.usage.prompt_tokens = su.prompt_tokens;
        in.usage.completion_tokens = su.completion_tokens;
    } else if (!in.usage.present) {
        in.estimated = true;
        in.usage.prompt_tokens = static_cast<std::int64_t>(o.body_bytes / 4);
        // A cancelled stream: what it carried before it ended, bytes / 4.
        in.usage.completion_tokens = o.cancelled ? o.answer.text_bytes / 4 : 0;
    }
    in.cache = o.cache;
    b.cache_hit = o.cache == CacheUse::Hit;
    // A hit costs nothing: the provider was not called (docs/cache.md).
    in.cost_micros = b.cache_hit ? 0 : cost_at(o.price, in.usage);
    b.line = UsageLine::Tokens;
}

// The optional statistics (llm_gateway_stats): the user's usage of the
// model (a copy of the model scope's delta), and the call's latency bucket.
// Past the statistics bound, new ids go to the provider's "other".
void add_statistics(const CallObservation& o, Bill& b) {
    Bill::Owned& s = *b.owned;
    if (s.in.model.empty() || b.deltas.empty()) return;
    const ScopeDelta model_delta = b.deltas.back();   // accounting_deltas puts the model scope last
    if (o.stat_user_model && model_delta.kind == "model") {
        s.user_model = std::string(o.user) + "|" + s.in.model;
        s.user_model_other = std::string(o.user) + "|" + s.in.model_overflow;
        ScopeDelta d = model_delta;
        d.kind = "usermodel";
        d.id = s.user_model;
        d.overflow_id = s.user_model_other;
        b.deltas.push_back(d);
    }
    if (o.stat_latency && o.elapsed_ms >= 0 && o.cache != CacheUse::Hit) {
        s.latency = latency_id(s.in.model, o.elapsed_ms);
        s.latency_other = latency_id(s.in.model_overflow, o.elapsed_ms);
        ScopeDelta d;
        d.kind = "lat";
        d.id = s.latency;
        d.overflow_id = s.latency_other;
        d.delta[kMetricReq] = 1;
        b.deltas.push_back(d);
    }
}

// Provider attempts and failures: a failure is a 429, a 5xx or no answer.
void add_provider_deltas(const CallObservation& o, Bill& b) {
    Bill::Owned& s = *b.owned;
    const std::string_view m = upstream_model_of(o);
    s.provmodel = std::string(o.provider) + "/" + (m.empty() ? std::string("other") : std::string(m));
    const bool failed = answer_failed(o.answer);
    ScopeDelta prov;
    prov.kind = "prov";
    prov.id = o.provider;
    prov.delta[kMetricAtt] = 1;
    prov.delta[kMetricFail] = failed ? 1 : 0;
    ScopeDelta provmodel = prov;
    provmodel.kind = "provmodel";
    provmodel.id = s.provmodel;
    provmodel.overflow_id = s.in.model_overflow;
    b.deltas.push_back(prov);
    b.deltas.push_back(provmodel);
}

}  // namespace

bool answer_failed(const AnswerFacts& a) {
    if (!a.answered) return true;
    switch (a.end) {
    case EndState::UpstreamError: return a.status >= 500 || a.status == 429;
    case EndState::Invalid: return true;
    default: return false;
    }
}

Bill bill_request(const CallObservation& o) {
    Bill b;
    AccountingInput& in = b.owned->in;
    // Past the bound on distinct statistics ids, new model ids count here.
    in.model_overflow = std::string(o.provider) + "/other";
    b.cancelled = o.cancelled;
    if (o.tally != Tally::None && served(o)) {
        switch (o.tally) {
        case Tally::Requests: bill_requests(o, b); break;
        case Tally::Sniffed: bill_sniffed(o, b); break;
        case Tally::Tokens: bill_tokens(o, b); break;
        case Tally::None: break;
        }
    }
    b.tallied = !in.model.empty() || !in.scopes.empty();
    if (b.tallied) b.deltas = accounting_deltas(in);
    add_statistics(o, b);
    if (!o.call_accounted && !o.cancelled && o.cache != CacheUse::Hit) add_provider_deltas(o, b);
    return b;
}

Bill bill_attempt(const CallObservation& o) {
    Bill b;
    b.owned->in.model_overflow = std::string(o.provider) + "/other";
    if (!o.call_accounted) add_provider_deltas(o, b);
    return b;
}

}  // namespace llmgw
