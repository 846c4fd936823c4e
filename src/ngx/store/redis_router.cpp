#include "ngx/store/redis_router.h"

#include "core/log/log_escape.h"
#include "ngx/store/settings.h"

namespace llmgw {

namespace {

// Nodes a worker connects to at most (the seeds and every master learned).
constexpr std::size_t kMaxNodes = 64;
// Redirects one command follows at most (a slot moving while it is sent).
constexpr int kMaxHops = 5;
// Commands waiting for the cluster's slots at most; past it they fail.
constexpr std::size_t kMaxWaiting = 4096;
// A command refused with TRYAGAIN (its slot half migrated) is sent again
// after this long, until the call's time-out has passed since it was first
// sent; at most kMaxRetries commands wait so at once.
constexpr ngx_msec_t kRetryMs = 50;
constexpr std::size_t kMaxRetries = 4096;

std::string host_port(const ClusterAddress& a) {
    return (a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port);
}

}  // namespace

struct RedisRouter::Retry {
    ngx_event_t ev{};
    RedisRouter* router = nullptr;
    int slot = 0;
    std::shared_ptr<const std::string> wire;
    std::size_t ncmds = 0;
    Callback cb;
    bool now = false;
    int hops = 0;
    ngx_msec_t since = 0;
};

struct RedisRouter::Node {
    ClusterAddress addr;
    std::string addr_text;
    std::string tls_name;
    RedisSettings settings;
    std::unique_ptr<RedisConn> conn;
};

RedisRouter::RedisRouter(const StoreSettings& s, ngx_log_t* log) : s_(s), log_(log), cluster_(s.cluster) {
    post_.handler = on_post;
    post_.data = this;
    post_.log = log;
    if (!cluster_) {
        single_ = std::make_unique<RedisConn>(s.redis, log);
        return;
    }
    std::string err;
    ClusterAddress first{s.redis.url.host, s.redis.url.port};
    if (add_node(first, &s.redis.addr, err) == nullptr) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "llm_gateway: %s", log_text(err).c_str());
    }
    for (const StoreSettings::Seed& seed : s.seeds) {
        if (add_node(ClusterAddress{seed.host, seed.port}, &seed.addr, err) == nullptr) {
            ngx_log_error(NGX_LOG_ERR, log, 0, "llm_gateway: %s", log_text(err).c_str());
        }
    }
}

RedisRouter::~RedisRouter() {
    if (post_.posted) {
        ngx_delete_posted_event(&post_);
    }
    for (auto& r : retries_) {
        if (r->ev.timer_set) ngx_del_timer(&r->ev);
    }
    retries_.clear();
    failed_.clear();
    waiting_.clear();
}

int RedisRouter::slot_of(std::string_view key) const { return cluster_ ? key_slot(key) : kAnySlot; }

void RedisRouter::preload_scripts(std::vector<const std::string*> sources) {
    preload_ = sources;
    if (single_) single_->preload_scripts(std::move(sources));
    for (auto& n : nodes_) n->conn->preload_scripts(preload_);
}

void RedisRouter::fail_next_reply() {
    if (single_) single_->fail_next_reply();
    if (!nodes_.empty()) nodes_.front()->conn->fail_next_reply();
}

RedisRouter::Node* RedisRouter::add_node(const ClusterAddress& a, const ngx_addr_t* resolved, std::string& err) {
    if (nodes_.size() >= kMaxNodes) {
        err = "the cluster names more than " + std::to_string(kMaxNodes) + " nodes; " + host_port(a) + " is not used";
        return nullptr;
    }
    auto n = std::make_unique<Node>();
    n->addr = a;
    n->addr_text = host_port(a);
    n->tls_name = s_.redis.url.sni.empty() ? a.host : s_.redis.url.sni;
    n->settings = s_.redis;
    n->settings.shape = kRespTopologyShape;
    if (resolved != nullptr) {
        n->settings.addr = *resolved;
    } else {
        // A node the cluster names: reached at the address it announces,
        // never resolved at run time (a name must be one of the seeds').
        ngx_addr_t addr{};
        std::string text = n->addr_text;
        if (ngx_parse_addr_port(ngx_cycle->pool, &addr, reinterpret_cast<u_char*>(&text[0]), text.size()) != NGX_OK) {
            err = "the cluster node " + n->addr_text + " is not an IP address and not a seed";
            return nullptr;
        }
        n->settings.addr = addr;
    }
    n->settings.addr_text.data = reinterpret_cast<u_char*>(&n->addr_text[0]);
    n->settings.addr_text.len = n->addr_text.size();
    n->settings.tls_name.data = reinterpret_cast<u_char*>(&n->tls_name[0]);
    n->settings.tls_name.len = n->tls_name.size();
    n->conn = std::make_unique<RedisConn>(n->settings, log_);
    n->conn->preload_scripts(preload_);
    nodes_.push_back(std::move(n));
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, log_, 0, "llm_gateway: store: cluster node %s added",
                   log_value(nodes_.back()->addr_text).c_str());
    return nodes_.back().get();
}

RedisRouter::Node* RedisRouter::node_at(const ClusterAddress& a, std::string& err) {
    for (auto& n : nodes_) {
        if (n->addr == a) return n.get();
    }
    return add_node(a, nullptr, err);
}

void RedisRouter::exec(int slot, const std::vector<std::vector<std::string>>& cmds, Callback cb) {
    if (single_) return single_->exec(cmds, std::move(cb));
    std::string wire;
    for (const auto& argv : cmds) append_resp_command(wire, argv);
    exec_encoded(slot, wire, cmds.size(), std::move(cb), false);
}

void RedisRouter::exec_encoded(int slot, std::string_view wire, std::size_t ncmds, Callback cb, bool now) {
    if (single_) return single_->exec_encoded(wire, ncmds, std::move(cb), now);
    const bool known = slot >= 0 ? map_.node_of(static_cast<std::uint16_t>(slot)) != nullptr : !map_.empty();
    // After a lost node (a failover may have moved its slots) the slots are
    // read first: a command is not sent to the node that just failed.
    if (!known || refresh_first_) {
        if (waiting_.size() >= kMaxWaiting) {
            return fail_later(std::move(cb), "more than " + std::to_string(kMaxWaiting) +
                                                 " store calls wait for the cluster's slots");
        }
        waiting_.push_back(Waiting{slot, std::string(wire), ncmds, std::move(cb), now});
        return refresh();
    }
    // A redirect or a lost node asked for the slots again: read in the
    // background, the commands go on with the map as it is.
    if (stale_) refresh();
    send(slot, std::make_shared<const std::string>(wire), ncmds, std::move(cb), now, 0, ngx_current_msec);
}

void RedisRouter::send(int slot, std::shared_ptr<const std::string> wire, std::size_t ncmds, Callback cb, bool now,
                       int hops, ngx_msec_t since) {
    const ClusterAddress* a =
        slot >= 0 ? map_.node_of(static_cast<std::uint16_t>(slot)) : (map_.empty() ? nullptr : &map_.nodes().front());
    if (a == nullptr) {
        stale_ = true;
        return fail_later(std::move(cb), "no cluster node serves slot " + std::to_string(slot));
    }
    std::string err;
    Node* n = node_at(*a, err);
    if (n == nullptr) return fail_later(std::move(cb), err);
    send_to(n, slot, false, std::move(wire), ncmds, std::move(cb), now, hops, since);
}

void RedisRouter::send_to(Node* n, int slot, bool asking, std::shared_ptr<const std::string> wire, std::size_t ncmds,
                          Callback cb, bool now, int hops, ngx_msec_t since) {
    auto answered = [this, slot, wire, ncmds, now, hops, since, asking, cb = std::move(cb)](
                        const std::string& err, std::vector<RespValue>& replies) mutable {
        if (!err.empty()) {
            stale_ = refresh_first_ = true;   // the node may have failed over
            return cb(err, replies);
        }
        if (asking && !replies.empty()) replies.erase(replies.begin());   // ASKING's +OK
        Redirect r;
        if (replies.empty() || !parse_redirect(replies.front(), r)) {
            const bool error = !replies.empty() && replies.front().type == RespValue::Type::Error;
            if (error && replies.front().str.rfind("CLUSTERDOWN", 0) == 0) stale_ = true;
            // A slot half migrated: the keys of one call are split between
            // two nodes for a moment. Sent again (to the slot's owner) until
            // the time-out.
            if (error && replies.front().str.rfind("TRYAGAIN", 0) == 0 && slot >= 0 &&
                ngx_current_msec - since + kRetryMs < s_.redis.timeout && retries_.size() < kMaxRetries) {
                ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log_, 0, "llm_gateway: store: TRYAGAIN on slot %d: again in %M ms",
                               slot, kRetryMs);
                return retry_later(slot, wire, ncmds, std::move(cb), now, 0, since);   // (bounded by time)
            }
            return cb(err, replies);
        }
        if (hops + 1 > kMaxHops) return cb(err, replies);   // the redirect is the reply
        ngx_log_debug3(NGX_LOG_DEBUG_HTTP, log_, 0, "llm_gateway: store: %s %ui: to %s",
                       r.ask ? "ASK" : "MOVED", static_cast<ngx_uint_t>(r.slot), log_value(host_port(r.to)).c_str());
        std::string e;
        Node* to = node_at(r.to, e);
        if (to == nullptr) return cb(e, replies);
        if (!r.ask) {
            map_.moved(r);
            stale_ = true;
        }
        send_to(to, slot, r.ask, wire, ncmds, std::move(cb), now, hops + 1, since);
    };
    if (!asking) return n->conn->exec_encoded(*wire, ncmds, std::move(answered), now);
    std::string w;
    append_resp_command(w, {"ASKING"});
    w += *wire;
    n->conn->exec_encoded(w, ncmds + 1, std::move(answered), now);
}

// The slots, from the first node that answers (the seeds first).
void RedisRouter::refresh() {
    if (refreshing_ || nodes_.empty()) {
        if (nodes_.empty()) refreshed("no cluster node is known");
        return;
    }
    refreshing_ = true;
    refresh_from(0, "");
}

void RedisRouter::refresh_from(std::size_t i, std::string last_err) {
    if (i >= nodes_.size()) return refreshed(last_err.empty() ? "no cluster node answered CLUSTER SLOTS" : last_err);
    Node* n = nodes_[i].get();
    n->conn->exec({{"CLUSTER", "SLOTS"}}, [this, i, n](const std::string& err, std::vector<RespValue>& replies) {
        std::string e = err;
        std::vector<SlotRange> ranges;
        if (e.empty() && replies.size() == 1 && replies[0].type == RespValue::Type::Error) {
            e = "store error: " + replies[0].str.substr(0, 120);
        } else if (e.empty() && (replies.size() != 1 || !parse_cluster_slots(replies[0], n->addr, ranges, e))) {
            if (e.empty()) e = "unexpected reply to CLUSTER SLOTS";
        }
        if (e.empty() && ranges.empty()) e = "the cluster serves no slot";
        if (!e.empty()) return refresh_from(i + 1, n->addr_text + ": " + e);
        map_.assign(ranges);
        ngx_log_debug3(NGX_LOG_DEBUG_HTTP, log_, 0,
                       "llm_gateway: store: cluster slots read from %s: %uz ranges on %uz masters",
                       log_value(n->addr_text).c_str(), ranges.size(), map_.nodes().size());
        refreshed("");
    });
}

void RedisRouter::refreshed(const std::string& err) {
    refreshing_ = false;
    if (err.empty()) stale_ = refresh_first_ = false;
    std::deque<Waiting> waiting;
    waiting.swap(waiting_);
    for (Waiting& w : waiting) {
        const bool known = w.slot >= 0 ? map_.node_of(static_cast<std::uint16_t>(w.slot)) != nullptr : !map_.empty();
        if (!known) {
            fail_later(std::move(w.cb), err.empty() ? "no cluster node serves slot " + std::to_string(w.slot) : err);
            continue;
        }
        send(w.slot, std::make_shared<const std::string>(std::move(w.wire)), w.ncmds, std::move(w.cb), w.now, 0,
             ngx_current_msec);
    }
}

void RedisRouter::retry_later(int slot, std::shared_ptr<const std::string> wire, std::size_t ncmds, Callback cb,
                              bool now, int hops, ngx_msec_t since) {
    auto r = std::make_unique<Retry>();
    r->ev.handler = on_retry;
    r->ev.data = r.get();
    r->ev.log = log_;
    r->router = this;
    r->slot = slot;
    r->wire = std::move(wire);
    r->ncmds = ncmds;
    r->cb = std::move(cb);
    r->now = now;
    r->hops = hops;
    r->since = since;
    ngx_add_timer(&r->ev, kRetryMs);
    retries_.push_back(std::move(r));
}

void RedisRouter::on_retry(ngx_event_t* ev) {
    auto* r = static_cast<Retry*>(ev->data);
    RedisRouter* self = r->router;
    std::unique_ptr<Retry> mine;
    for (auto it = self->retries_.begin(); it != self->retries_.end(); ++it) {
        if (it->get() == r) {
            mine = std::move(*it);
            self->retries_.erase(it);
            break;
        }
    }
    if (!mine) return;
    try {
        self->send(mine->slot, mine->wire, mine->ncmds, mine->cb, mine->now, mine->hops, mine->since);
    } catch (...) {
        try {
            self->fail_later(std::move(mine->cb), "out of memory sending a store call again");
        } catch (...) {
            ngx_log_error(NGX_LOG_ERR, ev->log, 0, "llm_gateway: out of memory sending a store call again");
        }
    }
}

void RedisRouter::fail_later(Callback cb, const std::string& err) {
    failed_.emplace_back(std::move(cb), err);
    if (!post_.posted) {
        ngx_post_event(&post_, &ngx_posted_events);
    }
}

void RedisRouter::on_post(ngx_event_t* ev) {
    auto* self = static_cast<RedisRouter*>(ev->data);
    std::vector<std::pair<Callback, std::string>> failed;
    failed.swap(self->failed_);
    for (auto& f : failed) {
        std::vector<RespValue> none;
        try {
            f.first(f.second, none);
        } catch (...) {
            ngx_log_error(NGX_LOG_ERR, ev->log, 0, "llm_gateway: a failed store call's handler failed");
        }
    }
}

}  // namespace llmgw
