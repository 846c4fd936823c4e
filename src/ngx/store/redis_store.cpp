// The shared store: counters in a RESP2 server (Redis, Valkey, ...), with the
// store-down latch. Admission is one EVALSHA round trip; accounting one
// pipelined batch; last-seen writes go in the background, at most 64 in
// flight. While the latch is open the store is not contacted: fail-open
// counts in shared memory, fail-closed refuses admission and drops samples.
#include <memory>

#include "core/store/admit_script.h"
#include "core/store/latch.h"
#include "ngx/module.h"
#include "ngx/store/redis_conn.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

constexpr std::size_t kMaxTelemetryInFlight = 64;
// 1600 keys per round trip (the spec's admin chunk) as two MGETs, since a
// reply array over 1024 elements is refused.
constexpr std::size_t kReadChunk = 800;

std::int64_t now_ms() {
    ngx_time_t* tp = ngx_timeofday();
    return static_cast<std::int64_t>(tp->sec) * 1000 + static_cast<std::int64_t>(tp->msec);
}

class RedisStore : public CounterStore {
public:
    RedisStore(StoreSettings* settings, CounterStore* fallback, Worker& w)
        : settings_(settings), fallback_(fallback), worker_(w), conn_(settings->redis, ngx_cycle->log) {
        if (w.faults.redis_reply_bad_alloc) conn_.fail_next_reply();
    }

    const char* name() const override { return "redis"; }
    bool in_process_ttls() const override { return false; }

    void admit(const AdmissionPlan& plan, AdmitDone done) override {
        if (!latch().should_try(now_ms())) return degraded_admit(plan, std::move(done));
        auto p = std::make_shared<AdmissionPlan>(plan);
        conn_.exec({admit_command(*p, true)}, [this, p, done = std::move(done)](const std::string& err,
                                                                               std::vector<RespValue>& replies) mutable {
            if (!err.empty()) return failed_admit(err, *p, std::move(done));
            if (is_noscript_error(replies[0])) {
                // The server forgot the script (restart, SCRIPT FLUSH): send it whole.
                conn_.exec({admit_command(*p, false)}, [this, p, done = std::move(done)](
                                                           const std::string& err2, std::vector<RespValue>& r2) mutable {
                    if (!err2.empty()) return failed_admit(err2, *p, std::move(done));
                    finish_admit(r2[0], *p, std::move(done));
                });
                return;
            }
            finish_admit(replies[0], *p, std::move(done));
        });
    }

    void write(const std::vector<Incr>& incrs, WriteDone done) override {
        if (incrs.empty()) {
            if (done) done(StoreReply{});
            return;
        }
        if (!latch().should_try(now_ms())) return degraded_write(incrs, std::move(done));
        auto copy = std::make_shared<std::vector<Incr>>(incrs);
        conn_.exec({account_command(incrs, true)}, [this, copy, done = std::move(done)](
                                                       const std::string& err, std::vector<RespValue>& replies) mutable {
            if (err.empty() && is_noscript_error(replies[0])) {
                conn_.exec({account_command(*copy, false)},
                           [this, copy, done = std::move(done)](const std::string& err2,
                                                                std::vector<RespValue>& r2) mutable {
                               finish_write(err2, r2, *copy, std::move(done));
                           });
                return;
            }
            finish_write(err, replies, *copy, std::move(done));
        });
    }

    void read(const std::vector<std::string>& keys, ReadDone done) override {
        if (!latch().should_try(now_ms())) {
            done(StoreReply{StoreStatus::Error, "the limit store is unavailable"}, {});
            return;
        }
        std::vector<std::vector<std::string>> cmds;
        for (std::size_t i = 0; i < keys.size(); i += kReadChunk) {
            std::vector<std::string> cmd{"MGET"};
            for (std::size_t j = i; j < keys.size() && j < i + kReadChunk; ++j) cmd.push_back(keys[j]);
            cmds.push_back(std::move(cmd));
        }
        if (cmds.empty()) {
            done(StoreReply{}, {});
            return;
        }
        std::size_t n = keys.size();
        conn_.exec(cmds, [this, n, done = std::move(done)](const std::string& err, std::vector<RespValue>& replies) {
            std::vector<std::int64_t> values;
            std::string e = err;
            for (const auto& r : replies) {
                if (!e.empty()) break;
                if (r.type != RespValue::Type::Array) {
                    e = "unexpected reply to MGET";
                    break;
                }
                for (const auto& el : r.elements) {
                    if (el.type == RespValue::Type::Nil) {
                        values.push_back(0);
                    } else if (el.type == RespValue::Type::String || el.type == RespValue::Type::Integer) {
                        values.push_back(el.type == RespValue::Type::Integer ? el.integer
                                                                             : std::strtoll(el.str.c_str(), nullptr, 10));
                    } else {
                        e = "unexpected element in MGET reply";
                        break;
                    }
                }
            }
            if (e.empty() && values.size() != n) e = "short MGET reply";
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
        if (!latch().should_try(now_ms())) {
            if (settings_->fail_open) fallback_->touch(key, value, ttl);
            return;
        }
        if (telemetry_in_flight_ >= kMaxTelemetryInFlight) {
            worker_.telemetry_dropped++;
            return;
        }
        telemetry_in_flight_++;
        conn_.exec({{"SET", key, std::to_string(value), "EX", std::to_string(ttl)}},
                   [this](const std::string& err, std::vector<RespValue>& replies) {
                       telemetry_in_flight_--;
                       if (!err.empty()) {
                           on_failure(err);
                       } else if (!replies.empty() && replies[0].type == RespValue::Type::Error) {
                           on_failure("store error: " + replies[0].str.substr(0, 120));
                       }
                   });
    }

private:
    StoreLatch& latch() { return worker_.latch; }

    void finish_admit(const RespValue& v, const AdmissionPlan& plan, AdmitDone done) {
        AdmissionResult res;
        std::string err;
        if (!decode_admit_reply(v, plan, res, err)) return failed_admit(err, plan, std::move(done));
        latch().on_success(now_ms());
        done(StoreReply{}, res);
    }

    void failed_admit(const std::string& err, const AdmissionPlan& plan, AdmitDone done) {
        on_failure(err);
        degraded_admit(plan, std::move(done));
    }

    void degraded_admit(const AdmissionPlan& plan, AdmitDone done) {
        if (settings_->fail_open) return fallback_->admit(plan, std::move(done));
        done(StoreReply{StoreStatus::Error, "the limit store is unavailable"}, AdmissionResult{});
    }

    void finish_write(const std::string& err, const std::vector<RespValue>& replies, const std::vector<Incr>& incrs,
                      WriteDone done) {
        std::string e = err;
        if (e.empty() && (replies.empty() || replies[0].type != RespValue::Type::Integer)) {
            e = replies.empty() || replies[0].type != RespValue::Type::Error
                    ? std::string("unexpected reply to the accounting script")
                    : "store error: " + replies[0].str.substr(0, 120);
        }
        if (!e.empty()) {
            on_failure(e);
            return degraded_write(incrs, std::move(done));
        }
        latch().on_success(now_ms());
        if (done) done(StoreReply{});
    }

    void degraded_write(const std::vector<Incr>& incrs, WriteDone done) {
        if (settings_->fail_open) return fallback_->write(incrs, std::move(done));
        if (done) done(StoreReply{StoreStatus::Error, "the limit store is unavailable; sample dropped"});
    }

    void on_failure(const std::string& err) {
        if (latch().on_failure(now_ms(), err)) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "llm_gateway: limit store %s failed: %s; not contacting it for 5 s (%s)",
                          settings_->redacted_url.c_str(), err.c_str(),
                          settings_->fail_open ? "counting in shared memory meanwhile"
                                               : "refusing admission meanwhile");
        }
    }

    StoreSettings* settings_;
    CounterStore* fallback_;
    Worker& worker_;
    RedisConn conn_;
    std::size_t telemetry_in_flight_ = 0;
};

}  // namespace

CounterStore* counter_store(MainConf* mcf) {
    Worker* w = worker();
    if (w == nullptr) return nullptr;
    CounterStore* shm = shm_store(mcf->zone);
    StoreSettings* st = mcf->state->store.get();
    if (st == nullptr || shm == nullptr) return shm;
    if (!w->redis) w->redis = std::make_unique<RedisStore>(st, shm, *w);
    return w->redis.get();
}

bool store_uses_in_process_ttls(MainConf* mcf) { return mcf->state->store == nullptr; }

}  // namespace llmgw
