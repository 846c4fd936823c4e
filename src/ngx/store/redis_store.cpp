// The shared store: counters in a RESP2 server (Redis, Valkey, ...), with the
// store-down latch. Admission is one EVALSHA round trip; accounting goes
// behind the answers, the requests a worker settles merged into one script
// call (docs/store.md#accounting-batches); last-seen writes go in the
// background, at most 64 in flight. While the latch is open the store is not contacted: fail-open
// counts in shared memory, fail-closed refuses admission and drops samples.
#include <algorithm>
#include <deque>
#include <memory>

#include "core/store/account_script.h"
#include "core/store/admit_script.h"
#include "core/store/cancel_script.h"
#include "core/store/cluster_admission.h"
#include "core/store/cluster_batch.h"
#include "core/store/read_batch.h"
#include "core/events/event.h"
#include "core/store/latch.h"
#include "core/log/log_escape.h"
#include "core/metering/delta_merge.h"
#include "core/metering/keys.h"
#include "core/metering/lease.h"
#include "ngx/store/redis_router.h"
#include "ngx/store/settings.h"
#include "ngx/store/store.h"

namespace llmgw {
namespace {

constexpr std::size_t kMaxTelemetryInFlight = 64;
// Distinct caller-named statistics ids (model, provmodel) the store keeps
// counters for; the others are counted under "<provider>/other".
constexpr std::int64_t kMaxStatIds = 1000;

// The accounting of the requests settled since the last flush (write-behind,
// docs/store.md#accounting-batches): their deltas merged per scope and
// minute, the reserved counters they give back, and the reservations they
// held (which the releases view; those the shared-memory fallback admitted
// are given back there when the flush fails with fail_open).
struct PendingAccounting {
    MergedDeltas merged;
    std::deque<WindowStamps> stamps;     // each minute's, when written (a deque: parts point at them)
    std::vector<StampedDeltas> parts;    // the merged deltas as the command takes them
    std::vector<Release> released;
    std::vector<std::shared_ptr<Lease>> leases;   // the leases released views, when no held one does
    std::vector<HeldReservation> held;
    std::vector<WriteDone> dones;
    std::size_t requests = 0;
};

// A batch is written at once when it holds this many requests, even while
// another is in flight or its flush interval has not passed.
constexpr std::size_t kMaxBatchRequests = 256;
// With flush=0, the request counts an admission leaves to the accounting
// (AdmissionPlan::deferred) wait at most this long for an accounting of the
// worker (the request's own, or any other's) to carry them.
constexpr ngx_msec_t kDeferredCountMs = 1000;

// An op key lives this long (docs/store.md): a call and its cancel must
// reach the store within it of each other. Short, because every call leaves
// one.
constexpr std::int64_t kOpTtl = 300;
constexpr const char kNoMemoryAdmit[] = "out of memory writing the admission command";
constexpr const char kNoMemoryAccount[] = "out of memory writing the accounting command";
constexpr const char kNoMemoryGrant[] = "out of memory writing a lease's grant";
// Cancels waiting for the store, per worker; past this, the oldest go.
constexpr std::size_t kMaxPendingCancels = 10000;

// A request's real usage (tokens, cost) from its accounting deltas: every
// scope of a request counts the same usage; the largest is taken.
ReserveAmounts real_usage(const std::vector<ScopeDelta>& deltas) {
    ReserveAmounts r;
    for (const ScopeDelta& d : deltas) {
        const std::int64_t in = d.delta[kMetricTokIn] > 0 ? d.delta[kMetricTokIn] : 0;
        const std::int64_t out = d.delta[kMetricTokOut] > 0 ? d.delta[kMetricTokOut] : 0;
        const std::int64_t tokens = in > INT64_MAX - out ? INT64_MAX : in + out;
        if (tokens > r.tokens) r.tokens = tokens;
        if (d.delta[kMetricCost] > r.cost_micros) r.cost_micros = d.delta[kMetricCost];
    }
    return r;
}

// 1600 keys per round trip (the spec's admin chunk) as two MGETs, since a
// reply array over 1024 elements is refused (reserved counters: one HMGET
// per scope's hash, core/store/read_batch.h).
constexpr std::size_t kReadChunk = 800;

std::int64_t now_ms() {
    ngx_time_t* tp = ngx_timeofday();
    return static_cast<std::int64_t>(tp->sec) * 1000 + static_cast<std::int64_t>(tp->msec);
}

// Why an accounting script call failed ("" when it answered a count).
std::string accounting_reply_error(const std::string& err, const std::vector<RespValue>& replies) {
    if (!err.empty()) return err;
    if (!replies.empty() && replies[0].type == RespValue::Type::Integer) return "";
    if (replies.empty() || replies[0].type != RespValue::Type::Error) return "unexpected reply to the accounting script";
    return "store error: " + replies[0].str.substr(0, 120);
}

class RedisStore : public CounterStore {
public:
    RedisStore(const StoreSettings* settings, CounterStore* fallback, StoreHealth& health, bool fail_next_reply)
        : settings_(settings), fallback_(fallback), health_(health), route_(*settings, ngx_cycle->log) {
        if (fail_next_reply) route_.fail_next_reply();
        route_.preload_scripts({&admit_script_source(), &account_script_source()});
        // Not cancelable: a worker that is shutting down gives its idle
        // leases back before it exits (at most kLeaseIdleMs later).
        idle_ev_.handler = on_idle_timer;
        idle_ev_.data = this;
        idle_ev_.log = ngx_cycle->log;
        // Not cancelable either: a pending batch is written before the
        // worker exits.
        flush_ev_.handler = on_flush_timer;
        flush_ev_.data = this;
        flush_ev_.log = ngx_cycle->log;
        post_ev_.handler = on_flush_timer;
        post_ev_.data = this;
        post_ev_.log = ngx_cycle->log;
    }

    ~RedisStore() override {
        if (idle_ev_.timer_set) ngx_del_timer(&idle_ev_);
        if (flush_ev_.timer_set) ngx_del_timer(&flush_ev_);
        if (post_ev_.posted) {
            ngx_delete_posted_event(&post_ev_);   // (a macro of several statements)
        }
    }

    const char* name() const override { return "redis"; }
    bool in_process_ttls() const override { return false; }

    // The plan is the worker's for this second, shared and never changed:
    // the callbacks hold it rather than a copy. The command is written
    // straight into the worker's scratch buffer, then into the connection's.
    void admit(std::shared_ptr<const AdmissionPlan> plan, const ReserveAmounts& amounts, AdmitDone done) override {
        // Nothing to check or to write at once (no limit reads the scopes'
        // counters; their request counts go with the accounting): admitted
        // without a store call, unless the latch is open.
        if (plan->checks.empty() && plan->admit.empty() && plan->reserve.empty() && !latch().open()) {
            ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                           "llm_gateway: admitted without a store call (no limit to check); %uz scope request "
                           "counts go with the accounting",
                           plan->deferred.size());
            count_deferred(*plan);
            done(StoreReply{}, AdmissionResult{});
            return;
        }
        if (!latch().should_try(now_ms())) return degraded_admit(plan, amounts, std::move(done));
        // The worker's leases (core/metering/lease.h): a request they cover
        // whole is admitted here; otherwise parts taken from them reserve
        // nothing in the store, and others may ask a grant.
        Ticket ticket = nullptr;
        if (!plan->reserve.empty()) {
            const std::size_t before = pending_->released.size();
            ticket = leases_.take(*plan, amounts, now_ms(), returns());
            if (ticket->local) return admit_locally(plan, ticket, std::move(done));
            // A lease of an earlier slot went back: written at once, ahead of
            // this admission, whose sums must not count it as held.
            if (pending_->released.size() != before) flush();
        }
        send_cancels();
        if (route_.cluster()) return admit_parts(plan, amounts, ticket, std::move(done));
        auto op = std::make_shared<std::string>(next_op());
        script_call(
            RedisRouter::kAnySlot, kNoMemoryAdmit,
            [&](std::string& wire) { return append_admit_command(wire, *plan, amounts, true, *op, kOpTtl, ticket.get()); },
            [plan, amounts, op, ticket] { return admit_command_op(*plan, amounts, *op, kOpTtl, false, ticket.get()); },
            [this, plan, amounts, op, ticket, done = std::move(done)](const std::string& err,
                                                                      const std::vector<RespValue>& replies,
                                                                      bool sent) mutable {
                if (err.empty()) return finish_admit(replies[0], plan, amounts, ticket, std::move(done));
                if (sent) {
                    queue_cancel(RedisRouter::kAnySlot, cancel_admit_command(*plan, amounts, *op, kOpTtl, ticket.get()));
                }
                failed_admit(err, plan, amounts, ticket, std::move(done));
            },
            false);
    }

    // Accounting, behind the answer (docs/store.md#accounting-batches): the
    // request's deltas join the worker's pending batch, written as one
    // EVALSHA of the accounting script (with the bound on statistics ids
    // and the reservations given back) at the end of the event loop's turn
    // when no batch is in flight,
    // else when the one in flight answers; with flush=, after that
    // interval. The shared-memory fallback applies the same deltas and
    // releases.
    void settle(const std::vector<ScopeDelta>& deltas, HeldReservation releases, std::time_t now,
                WriteDone done) override {
        // (may_try: the batch's own call takes the probe, when it is written.)
        if (!latch().may_try(now_ms())) return degraded_settle(deltas, std::move(releases), now, std::move(done));
        PendingAccounting& p = *pending_;
        // What goes back: the request's own reservations, and a lease (or
        // its consumed part) this settle leaves idle (core/metering/lease.h).
        if (releases.plan != nullptr) {
            leases_.settle(releases.lease.get(), *releases.plan, releases.amounts, real_usage(deltas), p.released);
            if (leases_.idle_waiting() && !idle_ev_.timer_set) ngx_add_timer(&idle_ev_, kLeaseIdleMs);
            p.held.push_back(std::move(releases));
        }
        p.merged.add(deltas, now);
        if (done) p.dones.push_back(std::move(done));
        ++p.requests;
        if (p.requests >= kMaxBatchRequests) return flush();
        if (settings_->flush_ms > 0) {
            if (!flush_ev_.timer_set) ngx_add_timer(&flush_ev_, settings_->flush_ms);
            return;
        }
        if (flushes_in_flight_ == 0) post_flush();
    }

    void read(const std::vector<std::string>& keys, ReadDone done) override {
        if (!latch().should_try(now_ms())) {
            done(StoreReply{StoreStatus::Error, "the limit store is unavailable"}, {});
            return;
        }
        send_cancels();
        if (route_.cluster()) return read_parts(keys, std::move(done));
        auto batch = std::make_shared<ReadBatch>(read_batch(keys, kReadChunk));
        if (batch->commands.empty()) {
            done(StoreReply{}, {});
            return;
        }
        route_.exec(RedisRouter::kAnySlot, batch->commands, [this, batch, done = std::move(done)](const std::string& err,
                                                                          std::vector<RespValue>& replies) {
            std::vector<std::int64_t> values;
            std::string e = err;
            if (e.empty()) read_values(*batch, replies, values, e);
            if (!e.empty()) {
                on_failure(e);
                done(StoreReply{StoreStatus::Error, e}, {});
                return;
            }
            latch().on_success(now_ms());
            done(StoreReply{}, values);
        });
    }

    void touch(const std::string& key, std::int64_t value, std::int64_t ttl) override {
        // Dropped before asking the latch: a dropped write must not take the
        // probe, which would then never report and keep the latch open.
        if (telemetry_in_flight_ >= kMaxTelemetryInFlight) {
            health_.telemetry_dropped++;
            return;
        }
        if (!latch().should_try(now_ms())) {
            if (settings_->fail_open) fallback_->touch(key, value, ttl);
            return;
        }
        send_cancels();
        telemetry_in_flight_++;
        route_.exec(route_.slot_of(key), {{"SET", key, std::to_string(value), "EX", std::to_string(ttl)}},
                   [this](const std::string& err, std::vector<RespValue>& replies) {
                       telemetry_in_flight_--;
                       if (!err.empty()) {
                           on_failure(err);
                       } else if (!replies.empty() && replies[0].type == RespValue::Type::Error) {
                           on_failure("store error: " + replies[0].str.substr(0, 120));
                       } else {
                           latch().on_success(now_ms());   // this write may have been the probe
                       }
                   });
    }

    bool shares_events() const override { return true; }

    void push_event(const std::string& json) override {
        if (latch().open() || events_in_flight_ >= kMaxTelemetryInFlight) return;   // kept in the ring only
        ++events_in_flight_;
        route_.exec(route_.slot_of(kEventsKey),
                    {{"LPUSH", kEventsKey, json}, {"LTRIM", kEventsKey, "0", std::to_string(kEventCapacity - 1)}},
                   [this](const std::string& err, std::vector<RespValue>& replies) {
                       --events_in_flight_;
                       std::string e = err;
                       for (const auto& r : replies) {
                           if (e.empty() && r.type == RespValue::Type::Error) e = "store error: " + r.str.substr(0, 120);
                       }
                       if (e.empty()) return;
                       const std::int64_t now = now_ms();
                       if (now - last_mirror_log_ms_ >= StoreLatch::kLogIntervalMs || last_mirror_log_ms_ == 0) {
                           last_mirror_log_ms_ = now;
                           ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0, "llm_gateway: event mirror failed: %s",
                                         log_text(e).c_str());
                       }
                   });
    }

    void read_events(std::size_t limit, ListDone done) override {
        if (!latch().should_try(now_ms())) {
            done(StoreReply{StoreStatus::Error, "the limit store is unavailable"}, {});
            return;
        }
        send_cancels();
        route_.exec(route_.slot_of(kEventsKey), {{"LRANGE", kEventsKey, "0", std::to_string(limit == 0 ? 0 : limit - 1)}},
                   [this, done = std::move(done)](const std::string& err, std::vector<RespValue>& replies) {
                       std::string e = err;
                       if (e.empty() && (replies.size() != 1 || replies[0].type != RespValue::Type::Array)) {
                           e = replies.size() == 1 && replies[0].type == RespValue::Type::Error
                                   ? "store error: " + replies[0].str.substr(0, 120)
                                   : "unexpected reply to LRANGE";
                       }
                       if (!e.empty()) {
                           on_failure(e);
                           done(StoreReply{StoreStatus::Error, e}, {});
                           return;
                       }
                       latch().on_success(now_ms());
                       std::vector<std::string> out;
                       for (const auto& el : replies[0].elements) {
                           if (el.type == RespValue::Type::String) out.push_back(el.str);   // others skipped
                       }
                       done(StoreReply{}, out);
                   });
    }

private:
    using PlanPtr = std::shared_ptr<const AdmissionPlan>;
    using Ticket = std::shared_ptr<LeaseTicket>;
    using Cancel = std::pair<int, std::string>;

    StoreLatch& latch() { return health_.latch; }

    // near: a key of the call (on a cluster, the op key goes in its slot).
    std::string next_op(std::string_view near = {}) {
        // unique across workers and replicas: pid, start time, a random
        // number of this worker, a sequence number
        return op_key(std::to_string(ngx_pid) + ":" + std::to_string(start_ms_) + ":" + std::to_string(nonce_) + ":" +
                          std::to_string(++op_seq_),
                      near);
    }

    // Runs inside connection callbacks: never throws. slot: the call's (a
    // cluster's; kAnySlot on one server).
    void queue_cancel(int slot, std::string cmd) noexcept {
        if (cmd.empty()) return;
        try {
            if (cancels_.size() >= kMaxPendingCancels) {
                cancels_.pop_front();
                ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                              "llm_gateway: more than %uz store calls to cancel; the oldest may stay counted in the store",
                              kMaxPendingCancels);
            }
            cancels_.emplace_back(slot, std::move(cmd));
        } catch (...) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "llm_gateway: out of memory keeping a store cancel");
        }
    }

    // The cancels of failed calls go first whenever the store is contacted
    // (one pipelined batch at a time); those that fail wait for the next.
    // (On a cluster, one batch per slot.)
    void send_cancels() noexcept {
        if (cancels_.empty() || cancels_in_flight_ > 0) return;
        try {
            std::vector<std::shared_ptr<std::vector<Cancel>>> batches;
            for (Cancel& c : cancels_) {
                const int slot = route_.cluster() ? c.first : RedisRouter::kAnySlot;
                if (batches.empty() || batches.back()->front().first != slot) {
                    batches.push_back(std::make_shared<std::vector<Cancel>>());
                }
                batches.back()->emplace_back(slot, std::move(c.second));
            }
            cancels_.clear();
            for (auto& batch : batches) send_cancel_batch(std::move(batch));
        } catch (...) {
            // kept for the next contact
        }
    }

    void send_cancel_batch(std::shared_ptr<std::vector<Cancel>> batch) {
        std::string wire;
        for (const Cancel& c : *batch) wire += c.second;
        ++cancels_in_flight_;
        route_.exec_encoded(batch->front().first, wire, batch->size(),
                            [this, batch](const std::string& err, std::vector<RespValue>& replies) {
            --cancels_in_flight_;
            bool ok = err.empty() && replies.size() == batch->size();
            for (std::size_t i = 0; ok && i < replies.size(); ++i) ok = replies[i].type == RespValue::Type::Integer;
            if (ok) {
                // Those queued meanwhile (a cluster's rollbacks) go now.
                if (cancels_in_flight_ == 0 && !cancels_.empty()) send_cancels();
                return;
            }
            // Put them back in front (they are idempotent).
            try {
                for (auto it = batch->rbegin(); it != batch->rend(); ++it) cancels_.push_front(std::move(*it));
                while (cancels_.size() > kMaxPendingCancels) cancels_.pop_front();
            } catch (...) {
                ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "llm_gateway: out of memory keeping store cancels");
            }
        });
    }


    // The leases that stayed idle kLeaseIdleMs go back in a call of their
    // own (the accounting script with nothing but releases).
    static void on_idle_timer(ngx_event_t* ev) {
        try {
            static_cast<RedisStore*>(ev->data)->give_back_idle();
        } catch (...) {
            ngx_log_error(NGX_LOG_ERR, ev->log, 0, "llm_gateway: out of memory giving idle reservation leases back");
        }
    }

    // The idle leases go back with the pending batch, written now: after
    // (or with) the counts of the requests they admitted.
    void give_back_idle() {
        const std::size_t before = pending_->released.size();
        const bool waiting = leases_.give_back_idle(now_ms(), pending_->released, pending_->leases);
        if (waiting && !idle_ev_.timer_set) ngx_add_timer(&idle_ev_, kLeaseIdleMs);
        if (pending_->released.size() == before) return;
        // Unreachable store: they lapse there.
        if (!latch().may_try(now_ms())) {
            pending_->released.resize(before);
            return leases_.forget();
        }
        flush();
    }

    LeaseReturns returns() { return LeaseReturns{pending_->released, pending_->leases}; }

    // A request every part of which its worker's leases cover: admitted
    // without a store call. Its counts join the pending batch (the scopes
    // the store would have counted at admission too); a lease that runs low
    // asks its next grant in the background.
    void admit_locally(const PlanPtr& plan, const Ticket& ticket, AdmitDone done) {
        AdmissionResult res;
        res.used = leases_.local_used(*ticket, *plan);
        res.lease = ticket;
        count_behind(local_request_deltas(*plan));
        refills_.clear();
        leases_.refills(*ticket, *plan, refills_);
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                       "llm_gateway: admitted from the worker's leases without a store call (%uz leases; %uz "
                       "grants asked in the background)",
                       ticket->parts.size(), refills_.size());
        for (const Refill& f : refills_) refill(plan, f);
        done(StoreReply{}, res);
    }

    // A lease's next grant, asked in the background (no request waits).
    void refill(const PlanPtr& plan, const Refill& f) {
        std::size_t nchecks = 0;
        for (const Check& c : plan->checks) nchecks += c.reserve_index == static_cast<int>(f.index) ? 1 : 0;
        script_call(
            route_.slot_of(plan->reserve[f.index].record), kNoMemoryGrant, [&](std::string& wire) { return append_grant_command(wire, *plan, f.index, f.extra, true); },
            [plan, f] {
                std::string cmd;
                if (!append_grant_command(cmd, *plan, f.index, f.extra, false)) cmd.clear();
                return cmd;
            },
            [this, plan, f, nchecks](const std::string& err, const std::vector<RespValue>& replies, bool sent) {
                std::vector<std::int64_t> used;
                std::string e = err;
                if (e.empty() && !decode_grant_reply(replies[0], nchecks, used, e) && e.empty()) e = kNoMemoryGrant;
                const std::size_t before = pending_->released.size();
                leases_.refilled(f, *plan, e.empty(), used, returns());
                ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                               "llm_gateway: lease grant of %L on \"%s\": %s", static_cast<long long>(f.extra),
                               log_value(f.lease->record).c_str(), e.empty() ? "answered" : log_text(e).c_str());
                if (!e.empty()) {
                    if (sent) on_failure(e);
                    return;
                }
                latch().on_success(now_ms());
                if (pending_->released.size() != before) flush_later();
            },
            false);
    }

    // One call of a store script: EVALSHA, written by sha(wire) (false: out
    // of memory), and on a NOSCRIPT reply (a restart, SCRIPT FLUSH) the same
    // call by EVAL, written by eval() ("" out of memory), which loads the
    // script. answered(err, replies, sent): err is the connection's error,
    // or why the command could not be written (sent false: nothing reached
    // the store). now: written at once rather than with the loop's batch.
    // (A template: the callbacks travel inside the connection's, with no
    // allocation of their own on the request path.)
    // slot: the call's keys' (a cluster's; kAnySlot on one server).
    template <typename Sha, typename Eval, typename Answered>
    void script_call(int slot, const char* no_memory, Sha&& sha, Eval eval, Answered answered, bool now) {
        wire_.clear();
        if (!sha(wire_)) return answered(no_memory, {}, false);
        route_.exec_encoded(slot, wire_, 1, [this, slot, no_memory, eval = std::move(eval), answered = std::move(answered)](
                                         const std::string& err, std::vector<RespValue>& replies) mutable {
            if (!err.empty() || replies.empty() || !is_noscript_error(replies[0])) {
                if (err.empty() && replies.empty()) return answered("no reply from the store", replies, true);
                return answered(err, replies, true);
            }
            const std::string cmd = eval();
            if (cmd.empty()) return answered(no_memory, {}, false);
            route_.exec_encoded(slot, cmd, 1, [answered = std::move(answered)](const std::string& err2,
                                                                               std::vector<RespValue>& r2) mutable {
                if (err2.empty() && r2.empty()) return answered("no reply from the store", r2, true);
                answered(err2, r2, true);
            });
        }, now);
    }

    // One call of the accounting script, written at once from the deltas
    // (keys and all, straight into the connection's buffer: no string per
    // counter). keep holds what parts and released view until the call is
    // answered.
    template <typename Answered>
    void account_call(int slot, const std::vector<StampedDeltas>& parts, const std::vector<Release>& released,
                      std::shared_ptr<const void> keep, std::shared_ptr<const std::string> op, Answered answered) {
        const std::int64_t ids_ttl = ttl_seconds(Window::Day);
        script_call(
            slot, kNoMemoryAccount,
            [&](std::string& wire) {
                return append_account_deltas(wire, parts, kMaxStatIds, ids_ttl, *op, kOpTtl, true, released);
            },
            [&parts, &released, op, ids_ttl] {
                std::string cmd;
                if (!append_account_deltas(cmd, parts, kMaxStatIds, ids_ttl, *op, kOpTtl, false, released)) cmd.clear();
                return cmd;
            },
            [keep, answered = std::move(answered)](const std::string& err, const std::vector<RespValue>& replies,
                                                   bool sent) mutable { answered(err, replies, sent); },
            true);
    }

    void finish_admit(const RespValue& v, const PlanPtr& plan, const ReserveAmounts& amounts, const Ticket& ticket,
                      AdmitDone done) {
        AdmissionResult res;
        std::string err;
        if (!decode_admit_reply(v, *plan, res, err)) return failed_admit(err, plan, amounts, ticket, std::move(done));
        admitted_by_store(std::move(res), plan, amounts, ticket, std::move(done));
    }

    void admitted_by_store(AdmissionResult res, const PlanPtr& plan, const ReserveAmounts& amounts,
                           const Ticket& ticket, AdmitDone done) {
        latch().on_success(now_ms());
        if (ticket) leases_.answered(ticket.get(), *plan, amounts, res.admitted, res.used, res.held);
        if (res.admitted) {
            res.lease = ticket;
            count_deferred(*plan);
        }
        done(StoreReply{}, res);
    }

    void failed_admit(const std::string& err, const PlanPtr& plan, const ReserveAmounts& amounts, const Ticket& ticket,
                      AdmitDone done) {
        if (ticket) leases_.failed(ticket.get(), *plan, amounts);
        on_failure(err);
        degraded_admit(plan, amounts, std::move(done));
    }

    void degraded_admit(const PlanPtr& plan, const ReserveAmounts& amounts, AdmitDone done) {
        if (!settings_->fail_open) {
            return done(StoreReply{StoreStatus::Error, "the limit store is unavailable"}, AdmissionResult{});
        }
        if (plan->deferred.empty()) return fallback_->admit(plan, amounts, std::move(done));
        fallback_->admit(plan, amounts, [this, plan, done = std::move(done)](const StoreReply& rep,
                                                                             const AdmissionResult& res) {
            if (rep.status == StoreStatus::Ok && res.admitted) count_deferred(*plan);
            done(rep, res);
        });
    }

    // An admitted request's counts in the scopes its plan left to the
    // accounting (AdmissionPlan::deferred): they join the pending batch
    // without writing it, so they travel with the request's own
    // accounting, or at the latest kDeferredCountMs (flush= when set)
    // later; while the latch is open (fail_open: deferral is only planned
    // with it) they are counted in shared memory.
    void count_deferred(const AdmissionPlan& plan) {
        if (!plan.deferred.empty()) count_behind(admitted_request_deltas(plan));
    }

    // Request counts the store did not write at admission: into the pending
    // batch, written with the next accounting or by flush_later's timer
    // (in shared memory while the latch is open).
    void count_behind(const std::vector<ScopeDelta>& d) {
        if (latch().open()) return fallback_->settle(d, HeldReservation(), ngx_time(), WriteDone());
        pending_->merged.add(d, ngx_time());
        flush_later();
    }

    // The pending batch is written at the latest kDeferredCountMs from now
    // (flush= when set), unless something writes it sooner.
    void flush_later() {
        if (!flush_ev_.timer_set) {
            ngx_add_timer(&flush_ev_, settings_->flush_ms > 0 ? settings_->flush_ms : kDeferredCountMs);
        }
    }

    // Writes the pending batch: one call of the accounting script, or the
    // degraded path while the latch is open. Written at once: the store has
    // it before the clients have their answers.
    void flush() {
        if (flush_ev_.timer_set) ngx_del_timer(&flush_ev_);
        if (post_ev_.posted) {
            ngx_delete_posted_event(&post_ev_);   // (a macro of several statements)
        }
        if (pending_empty()) return;
        std::shared_ptr<PendingAccounting> batch = std::move(pending_);
        pending_ = std::make_shared<PendingAccounting>();
        if (!latch().should_try(now_ms())) return degraded_batch(*batch);
        send_cancels();
        if (route_.cluster()) return flush_parts(std::move(batch));
        std::size_t counters = 0;
        batch->merged.for_each_minute([&](std::time_t now, const std::vector<ScopeDelta>& ds) {
            batch->stamps.emplace_back(now, false);
            batch->parts.push_back(StampedDeltas{&batch->stamps.back(), &ds});
            for (const ScopeDelta& d : ds) counters += d.metrics() * kWindowCount * (d.overflow_id.empty() ? 1 : 2);
        });
        ngx_log_debug4(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                       "llm_gateway: accounting batch: %uz requests, %uz scope deltas, %uz counters, "
                       "%uz reservations given back",
                       batch->requests, batch->merged.size(), counters, batch->released.size());
        auto op = std::make_shared<std::string>(next_op());
        ++flushes_in_flight_;
        account_call(RedisRouter::kAnySlot, batch->parts, batch->released, batch, op,
                     [this, batch, op](const std::string& err, const std::vector<RespValue>& replies, bool sent) {
                         --flushes_in_flight_;
                         if (sent && !err.empty()) {
                             // The cancel names the counters: their keys are made now,
                             // on this rare path.
                             AccountIncrs incrs;
                             batch->merged.for_each_minute([&incrs](std::time_t now, const std::vector<ScopeDelta>& ds) {
                                 append_account_incrs(incrs, ds, now);
                             });
                             queue_cancel(RedisRouter::kAnySlot,
                                          cancel_account_command(incrs.plain, incrs.groups, *op, kOpTtl));
                         }
                         finish_batch(err, replies, *batch);
                         // (Request counts alone wait for a settle or their timer.)
                         if (settings_->flush_ms == 0 && flushes_in_flight_ == 0 && pending_->requests > 0) post_flush();
                     });
    }

    // flush=0: the batch is written at the end of this turn of the event
    // loop (a posted event), so that every request settled in the turn
    // joins it; the turn's answers are written in it too, so the batch
    // still leaves before the clients can send their next requests.
    void post_flush() {
        if (!post_ev_.posted) {
            ngx_post_event(&post_ev_, &ngx_posted_events);
        }
    }

    bool pending_empty() const {
        return pending_->requests == 0 && pending_->merged.empty() && pending_->released.empty();
    }

    static void on_flush_timer(ngx_event_t* ev) {
        try {
            static_cast<RedisStore*>(ev->data)->flush();
        } catch (...) {
            ngx_log_error(NGX_LOG_ERR, ev->log, 0, "llm_gateway: out of memory writing an accounting batch");
        }
    }

    void finish_batch(const std::string& err, const std::vector<RespValue>& replies, PendingAccounting& batch) {
        const std::string e = accounting_reply_error(err, replies);
        if (!e.empty()) {
            on_failure(e);
            return degraded_batch(batch);
        }
        latch().on_success(now_ms());
        for (WriteDone& d : batch.dones) d(StoreReply{});
    }

    // A batch the store did not take: with fail_open counted in shared
    // memory (once), else dropped (each request's done says so).
    void degraded_batch(PendingAccounting& batch) {
        StoreReply rep{StoreStatus::Error, "the limit store is unavailable; sample dropped"};
        if (settings_->fail_open) {
            rep = StoreReply{};
            auto note = [&rep](const StoreReply& r) {
                if (r.status != StoreStatus::Ok) rep = r;
            };
            batch.merged.for_each_minute([&](std::time_t now, const std::vector<ScopeDelta>& ds) {
                fallback_->settle(ds, HeldReservation(), now, note);
            });
            // A request that Redis admitted (it has a ticket) reserved
            // nothing in shared memory to give back there.
            for (HeldReservation& h : batch.held) {
                if (!h.lease) fallback_->settle({}, std::move(h), ngx_time(), note);
            }
        }
        for (WriteDone& d : batch.dones) d(rep);
    }

    // One request's accounting while the latch is open.
    void degraded_settle(const std::vector<ScopeDelta>& deltas, HeldReservation releases, std::time_t now,
                         WriteDone done) {
        if (settings_->fail_open) {
            return fallback_->settle(deltas, releases.lease ? HeldReservation() : std::move(releases), now,
                                     std::move(done));
        }
        if (done) done(StoreReply{StoreStatus::Error, "the limit store is unavailable; sample dropped"});
    }

    // ---- Redis Cluster (docs/store.md#redis-cluster) ----

    // The plan split by slot, made once per plan.
    const SplitPlan* split_of(const AdmissionPlan& plan, std::string& err) {
        if (plan.slot_view == nullptr) {
            auto split = std::make_shared<SplitPlan>();
            if (!split_plan(plan, *split, err)) return nullptr;
            plan.slot_view = std::move(split);
        }
        return static_cast<const SplitPlan*>(plan.slot_view.get());
    }

    // One admission as one script call per slot, sent at once and merged
    // (core/store/cluster_admission.h): a refusal cancels the parts that
    // admitted, and the parts that did not refuse count the rejection.
    struct PartsCall {
        std::vector<AdmissionResult> results;
        std::vector<std::string> ops;
        std::vector<LeaseTicket> tickets;
        std::vector<bool> sent;               // reached the store (its cancel may be needed)
        std::size_t waiting = 0;
        std::string err;
    };

    void admit_parts(const PlanPtr& plan, const ReserveAmounts& amounts, const Ticket& ticket, AdmitDone done) {
        std::string err;
        const SplitPlan* split = split_of(*plan, err);
        if (split == nullptr) return failed_admit(err, plan, amounts, ticket, std::move(done));
        auto call = std::make_shared<PartsCall>();
        const std::size_t n = split->parts.size();
        call->results.resize(n);
        call->ops.resize(n);
        call->tickets.resize(n);
        call->sent.assign(n, false);
        for (std::size_t k = 0; k < n; ++k) call->waiting += split->parts[k].sent() ? 1 : 0;
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                       "llm_gateway: cluster admission: %uz script calls over %uz slots", call->waiting, n);
        if (call->waiting == 0) return admitted_by_store(AdmissionResult{}, plan, amounts, ticket, std::move(done));
        auto shared_done = std::make_shared<AdmitDone>(std::move(done));
        for (std::size_t k = 0; k < n; ++k) {
            const PlanPart& part = split->parts[k];
            if (!part.sent()) continue;
            if (ticket) call->tickets[k] = part_ticket(*ticket, part);
            const LeaseTicket* t = ticket ? &call->tickets[k] : nullptr;
            const std::string& near = !part.plan.checks.empty() ? part.plan.checks.front().keys.front()
                                      : !part.plan.admit.empty() ? part.plan.admit.front().key
                                                                 : part.plan.reserve.front().record;
            call->ops[k] = next_op(near);
            script_call(
                part.slot, kNoMemoryAdmit,
                [&](std::string& wire) {
                    return append_admit_command(wire, part.plan, amounts, true, call->ops[k], kOpTtl, t);
                },
                [&part, amounts, call, k, t] { return admit_command_op(part.plan, amounts, call->ops[k], kOpTtl, false, t); },
                [this, plan, amounts, ticket, call, k, shared_done](const std::string& e,
                                                                    const std::vector<RespValue>& replies, bool sent) {
                    const SplitPlan& sp = *static_cast<const SplitPlan*>(plan->slot_view.get());
                    call->sent[k] = sent;
                    std::string why = e;
                    if (why.empty() && !decode_admit_reply(replies[0], sp.parts[k].plan, call->results[k], why) &&
                        why.empty()) {
                        why = "unexpected reply to the admission script";
                    }
                    if (!why.empty() && call->err.empty()) call->err = why;
                    if (--call->waiting == 0) parts_answered(plan, amounts, ticket, *call, std::move(*shared_done));
                },
                false);
        }
    }

    void parts_answered(const PlanPtr& plan, const ReserveAmounts& amounts, const Ticket& ticket, PartsCall& call,
                        AdmitDone done) {
        const SplitPlan& split = *static_cast<const SplitPlan*>(plan->slot_view.get());
        auto cancel = [&](std::size_t k) {
            const PlanPart& part = split.parts[k];
            queue_cancel(part.slot, cancel_admit_command(part.plan, amounts, call.ops[k], kOpTtl,
                                                         ticket ? &call.tickets[k] : nullptr));
        };
        if (!call.err.empty()) {
            for (std::size_t k = 0; k < split.parts.size(); ++k) {
                if (call.sent[k]) cancel(k);
            }
            return failed_admit(call.err, plan, amounts, ticket, std::move(done));
        }
        AdmissionResult res = merge_part_results(*plan, split, call.results);
        if (!res.admitted) {
            // The rollback: the parts that admitted are undone, and every
            // part that did not refuse counts the rejection.
            for (std::size_t k = 0; k < split.parts.size(); ++k) {
                const PlanPart& part = split.parts[k];
                const bool refused = part.sent() && !call.results[k].admitted;
                if (refused) continue;
                if (part.sent()) cancel(k);
                std::string cmd;
                if (append_reject_command(cmd, part.plan.reject)) queue_cancel(part.slot, std::move(cmd));
            }
            ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                           "llm_gateway: cluster admission refused by check %d; the other slots' parts rolled back",
                           res.check_index);
            send_cancels();
        }
        admitted_by_store(std::move(res), plan, amounts, ticket, std::move(done));
    }

    // A read of keys in many slots: one batch per slot, values put back in
    // the keys' order.
    void read_parts(const std::vector<std::string>& keys, ReadDone done) {
        struct Parts {
            std::vector<std::int64_t> values;
            std::size_t waiting = 0;
            std::string err;
        };
        std::vector<std::pair<int, std::vector<std::size_t>>> by_slot;
        for (std::size_t i = 0; i < keys.size(); ++i) {
            const int slot = route_.slot_of(keys[i]);
            auto it = std::find_if(by_slot.begin(), by_slot.end(), [slot](const auto& p) { return p.first == slot; });
            if (it == by_slot.end()) {
                by_slot.emplace_back(slot, std::vector<std::size_t>());
                it = by_slot.end() - 1;
            }
            it->second.push_back(i);
        }
        if (by_slot.empty()) return done(StoreReply{}, {});
        auto parts = std::make_shared<Parts>();
        parts->values.assign(keys.size(), 0);
        parts->waiting = by_slot.size();
        auto shared_done = std::make_shared<ReadDone>(std::move(done));
        for (auto& [slot, index] : by_slot) {
            std::vector<std::string> sub;
            sub.reserve(index.size());
            for (const std::size_t i : index) sub.push_back(keys[i]);
            auto batch = std::make_shared<ReadBatch>(read_batch(sub, kReadChunk));
            auto where = std::make_shared<std::vector<std::size_t>>(std::move(index));
            route_.exec(slot, batch->commands, [this, batch, where, parts, shared_done](const std::string& err,
                                                                                      std::vector<RespValue>& replies) {
                std::vector<std::int64_t> values;
                std::string e = err;
                if (e.empty()) read_values(*batch, replies, values, e);
                if (e.empty() && values.size() != where->size()) e = "unexpected reply to a read";
                if (e.empty()) {
                    for (std::size_t j = 0; j < where->size(); ++j) parts->values[(*where)[j]] = values[j];
                } else if (parts->err.empty()) {
                    parts->err = e;
                }
                if (--parts->waiting > 0) return;
                if (!parts->err.empty()) {
                    on_failure(parts->err);
                    return (*shared_done)(StoreReply{StoreStatus::Error, parts->err}, {});
                }
                latch().on_success(now_ms());
                (*shared_done)(StoreReply{}, parts->values);
            });
        }
    }

    // An accounting batch as one accounting call per slot; a slot whose
    // call fails follows the store policy for its own deltas only.
    struct SlotFlush {
        std::shared_ptr<PendingAccounting> batch;
        std::vector<std::unique_ptr<SlotBatch>> slots;
        std::vector<std::shared_ptr<std::string>> ops;
        std::vector<std::string> errs;
        std::size_t waiting = 0;
    };

    void flush_parts(std::shared_ptr<PendingAccounting> batch) {
        auto f = std::make_shared<SlotFlush>();
        std::vector<std::time_t> minutes;
        batch->merged.for_each_minute([&](std::time_t now, const std::vector<ScopeDelta>& ds) {
            batch->stamps.emplace_back(now, false);
            batch->parts.push_back(StampedDeltas{&batch->stamps.back(), &ds});
            minutes.push_back(now);
        });
        split_batch_by_slot(batch->parts, minutes, batch->released, f->slots);
        f->batch = std::move(batch);
        const std::size_t n = f->slots.size();
        f->ops.resize(n);
        f->errs.resize(n);
        f->waiting = n;
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                       "llm_gateway: accounting batch: %uz requests in %uz cluster slots", f->batch->requests, n);
        if (n == 0) return finish_batch("", {RespValue{RespValue::Type::Integer, 0, {}, {}}}, *f->batch);
        ++flushes_in_flight_;
        for (std::size_t k = 0; k < n; ++k) {
            const SlotBatch& sb = *f->slots[k];
            f->ops[k] = std::make_shared<std::string>(next_op(sb.near));
            account_call(sb.slot, sb.parts, sb.released, f, f->ops[k],
                         [this, f, k](const std::string& err, const std::vector<RespValue>& replies, bool sent) {
                             const SlotBatch& b = *f->slots[k];
                             f->errs[k] = accounting_reply_error(err, replies);
                             if (sent && !err.empty()) {
                                 AccountIncrs incrs;
                                 for (std::size_t i = 0; i < b.deltas.size(); ++i) {
                                     append_account_incrs(incrs, b.deltas[i], b.minutes[i]);
                                 }
                                 queue_cancel(b.slot, cancel_account_command(incrs.plain, incrs.groups, *f->ops[k], kOpTtl));
                             }
                             if (--f->waiting == 0) slots_flushed(*f);
                         });
        }
    }

    void slots_flushed(SlotFlush& f) {
        --flushes_in_flight_;
        PendingAccounting& batch = *f.batch;
        std::string first;
        for (std::size_t k = 0; k < f.slots.size(); ++k) {
            if (f.errs[k].empty()) continue;
            if (first.empty()) first = f.errs[k];
            // Fail-open: this slot's deltas are counted in shared memory.
            if (settings_->fail_open) {
                const SlotBatch& b = *f.slots[k];
                for (std::size_t i = 0; i < b.deltas.size(); ++i) {
                    fallback_->settle(b.deltas[i], HeldReservation(), b.minutes[i], WriteDone());
                }
            }
        }
        if (first.empty()) {
            latch().on_success(now_ms());
            for (WriteDone& d : batch.dones) d(StoreReply{});
        } else {
            on_failure(first);
            StoreReply rep = settings_->fail_open ? StoreReply{}
                                                  : StoreReply{StoreStatus::Error,
                                                               "the limit store is unavailable; sample dropped"};
            if (settings_->fail_open) {
                for (HeldReservation& h : batch.held) {
                    if (!h.lease) fallback_->settle({}, std::move(h), ngx_time(), WriteDone());
                }
            }
            for (WriteDone& d : batch.dones) d(rep);
        }
        if (settings_->flush_ms == 0 && flushes_in_flight_ == 0 && pending_->requests > 0) post_flush();
    }

    void on_failure(const std::string& err) {
        // What the worker's leases hold is no longer known: it lapses.
        leases_.forget();
        if (latch().on_failure(now_ms(), err)) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "llm_gateway: limit store %s failed: %s; not contacting it for 5 s (%s)",
                          log_value(settings_->redacted_url).c_str(), log_text(err).c_str(),
                          settings_->fail_open ? "counting in shared memory meanwhile"
                                               : "refusing admission meanwhile");
        }
    }

    const StoreSettings* settings_;
    CounterStore* fallback_;
    StoreHealth& health_;
    RedisRouter route_;
    std::string wire_;                  // scratch: a command written straight to RESP
    LeaseBook leases_;                  // the worker's leases
    std::vector<Refill> refills_;       // scratch of admit_locally
    ngx_event_t idle_ev_{};             // gives idle leases back (kLeaseIdleMs)
    std::shared_ptr<PendingAccounting> pending_ = std::make_shared<PendingAccounting>();
    std::size_t flushes_in_flight_ = 0;
    ngx_event_t flush_ev_{};            // writes the pending batch (flush=)
    ngx_event_t post_ev_{};             // writes it at the end of the loop's turn (flush=0)
    std::size_t telemetry_in_flight_ = 0;
    std::deque<Cancel> cancels_;             // cancel script calls, in RESP, with their slots
    std::size_t cancels_in_flight_ = 0;
    std::size_t events_in_flight_ = 0;
    std::int64_t last_mirror_log_ms_ = 0;
    std::uint64_t op_seq_ = 0;
    std::int64_t start_ms_ = now_ms();
    long nonce_ = ngx_random();
};

}  // namespace

std::unique_ptr<CounterStore> make_redis_store(const StoreSettings& settings, CounterStore* fallback,
                                               StoreHealth& health, bool fail_next_reply) {
    return std::make_unique<RedisStore>(&settings, fallback, health, fail_next_reply);
}

}  // namespace llmgw
