// The billing decision (no nginx): what one request's accounting writes and
// says, from what its provider call observed. The shell gathers the
// observation, writes the deltas (the settle) and logs the lines the bill
// names; every rule of what is billed lives here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/codec/codec.h"
#include "core/metering/accounting.h"
#include "core/metering/pricing.h"

namespace llmgw {

// What a metered route counts after the provider answered (the user, group
// and total request counters are written by admission, before the call).
enum class Tally {
    None,       // nothing more (admin routes)
    Tokens,     // tokens and cost (estimated when the answer has none) and the model's request
    Requests,   // the model's request only: images and audio (accounting rule 5)
    Sniffed,    // tokens and cost when the answer carries usage in a known shape (passthrough)
};

// What a provider call's answer was, as the call saw it.
struct AnswerFacts {
    bool answered = false;           // the provider sent a response head
    EndState end = EndState::Open;
    bool streamed = false;           // its body was relayed as it came (BodyMode::Stream)
    int status = 0;                  // the upstream's status
    Usage usage;                     // as read (present, malformed)
    std::int64_t text_bytes = 0;     // completion text the answer carried
    std::string_view model;          // the model the answer names (passthrough; "" none)
};

// Whether the call failed in a way the breaker and the failure counters
// count: no answer, a 429, a 5xx, an invalid answer.
bool answer_failed(const AnswerFacts& a);

// Everything one request's accounting reads: its route's tally, the call
// that answered it, and the configuration that applies. The views must
// outlive the bill_request call only (the Bill owns what it keeps).
struct CallObservation {
    Tally tally = Tally::Tokens;
    bool cancelled = false;          // the client left while the call ran
    bool call_accounted = false;     // the call's provider attempt was counted already
    AnswerFacts answer;
    // llm_gateway_stream_cutoff: what reached the client of a stream the
    // gateway stopped at its budget (end Stopped).
    Usage relayed_usage;
    std::int64_t relayed_text_bytes = 0;
    std::size_t body_bytes = 0;      // the request body's size (the estimate's input)
    std::string_view model;          // canonical "<provider>/<model>" of the target that answered
    std::string_view provider;       // its provider's name
    std::string_view upstream_model; // its provider's own model id (passthrough: unused, answer.model)
    std::vector<Scope> scopes;       // user, group, total
    // The price of the model that answered: the target's (Tokens), the one
    // the answer named (Sniffed); null: unpriced, billed as 0.
    const Price* price = nullptr;
    std::int64_t max_tokens_per_request = kDefaultMaxTokensPerRequest;
    bool stat_user_model = false;    // llm_gateway_stats user_model=
    bool stat_latency = false;       // llm_gateway_stats latency=
    std::int64_t elapsed_ms = -1;    // the call's start to its end (-1: unknown)
    std::string_view user;           // the user's name (usermodel ids)
    // The response cache (llm_gateway_cache): a hit's tokens go to the
    // cache's own counters at no cost, and no provider attempt, failure or
    // latency is counted for it; a miss is counted as one.
    CacheUse cache = CacheUse::None;
};

// Which usage line the accounting logs (at info).
enum class UsageLine {
    None,          // nothing tallied: no line
    Requests,      // the model's request only ("(requests only)")
    Passthrough,   // route="passthrough", " (no usage in the answer)" when without_usage
    Tokens,        // tokens and cost, with the notes below
};

// Why a provider's usage was not believed (a warn line, then the estimate).
enum class Implausible {
    None,
    Malformed,   // a count that is not an integer from 0 to 2^63-1
    OverMax,     // a direction over max_tokens_per_request (figures in reported)
};

// What to write and what to say. The deltas view strings the Bill owns on
// the heap (owned): moving the Bill keeps them valid; it is never copied.
struct Bill {
    struct Owned {
        AccountingInput in;          // scopes, model, overflow, usage, estimated, cost tallied
        std::string provmodel;       // "<provider>/<upstream model or other>"
        std::string user_model, user_model_other;   // usermodel ids
        std::string latency, latency_other;         // lat ids
    };
    std::unique_ptr<Owned> owned = std::make_unique<Owned>();
    // In the order they are written: user, group, total, model (accounting_deltas),
    // usermodel, lat, prov, provmodel.
    std::vector<ScopeDelta> deltas;

    // For the $llm_gateway_* variables: a model or usage was tallied.
    bool tallied = false;
    const std::string& model() const { return owned->in.model; }
    std::int64_t prompt_tokens() const { return owned->in.usage.prompt_tokens; }
    std::int64_t completion_tokens() const { return owned->in.usage.completion_tokens; }
    std::int64_t cost_micros() const { return owned->in.cost_micros; }

    // For the log lines.
    UsageLine line = UsageLine::None;
    bool estimated() const { return owned->in.estimated; }
    bool cancelled = false;          // " (client cancelled)"
    bool cut_off = false;            // " (cut off at the budget)"
    bool without_usage = false;      // passthrough: " (no usage in the answer)"
    bool cache_hit = false;          // " (cache hit)": its tokens were not the provider's
    Implausible implausible = Implausible::None;
    Usage reported;                  // the usage found implausible (OverMax: its figures)
};

// The request's bill from the call that answered it: tokens and cost (read,
// cut off, estimated), the model's request, the optional statistics, and the
// call's provider attempt/failure unless counted already or cancelled.
Bill bill_request(const CallObservation& o);

// The provider attempt/failure deltas of a call that did not answer the
// client (none when o.call_accounted).
Bill bill_attempt(const CallObservation& o);

}  // namespace llmgw
