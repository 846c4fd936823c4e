// Where a store command goes: the one server, or on a Redis Cluster the
// master that serves the command's slot (docs/store.md#redis-cluster). A
// cluster's slots are read with CLUSTER SLOTS from the seeds, then from any
// node known; a MOVED reply moves its slot and the command follows it, an
// ASK reply sends that command alone to the node it names after ASKING, and
// a TRYAGAIN (a slot half migrated) sends it again 50 ms later, until the
// time-out. One
// connection per node (ngx/store/redis_conn.h: the same TLS, password and
// time-outs as the seeds'), all on the worker's event loop.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/cluster.h"
#include "ngx/store/redis_conn.h"

namespace llmgw {

struct StoreSettings;

class RedisRouter {
public:
    using Callback = RedisConn::Callback;
    // A command with no key (any node answers it).
    static constexpr int kAnySlot = -1;

    RedisRouter(const StoreSettings& s, ngx_log_t* log);
    ~RedisRouter();
    RedisRouter(const RedisRouter&) = delete;
    RedisRouter& operator=(const RedisRouter&) = delete;

    bool cluster() const { return cluster_; }
    // The slot a command on key goes to (kAnySlot on a single server).
    int slot_of(std::string_view key) const;
    // RedisConn::exec and exec_encoded, on the node of slot (every key of
    // the commands must be in it). cb runs exactly once, never from inside
    // these calls.
    void exec(int slot, const std::vector<std::vector<std::string>>& cmds, Callback cb);
    void exec_encoded(int slot, std::string_view wire, std::size_t ncmds, Callback cb, bool now = false);
    void preload_scripts(std::vector<const std::string*> sources);
    void fail_next_reply();

private:
    struct Node;
    struct Waiting {
        int slot;
        std::string wire;
        std::size_t ncmds;
        Callback cb;
        bool now;
    };

    Node* node_at(const ClusterAddress& a, std::string& err);
    Node* add_node(const ClusterAddress& a, const ngx_addr_t* resolved, std::string& err);
    // hops: redirects followed so far; since: when the command was first
    // sent (TRYAGAIN is retried until the time-out).
    void send(int slot, std::shared_ptr<const std::string> wire, std::size_t ncmds, Callback cb, bool now, int hops,
              ngx_msec_t since);
    void send_to(Node* n, int slot, bool asking, std::shared_ptr<const std::string> wire, std::size_t ncmds,
                 Callback cb, bool now, int hops, ngx_msec_t since);
    struct Retry;
    void retry_later(int slot, std::shared_ptr<const std::string> wire, std::size_t ncmds, Callback cb, bool now,
                     int hops, ngx_msec_t since);
    static void on_retry(ngx_event_t* ev);
    void refresh();
    void refresh_from(std::size_t i, std::string last_err);
    void refreshed(const std::string& err);
    // cb(err) from the event loop (posted): a callback never runs inside exec.
    void fail_later(Callback cb, const std::string& err);
    static void on_post(ngx_event_t* ev);

    const StoreSettings& s_;
    ngx_log_t* log_;
    bool cluster_ = false;
    std::unique_ptr<RedisConn> single_;
    std::vector<std::unique_ptr<Node>> nodes_;   // the seeds first, then nodes as learned (bounded)
    SlotMap map_;
    bool stale_ = true;                          // read the slots again (in the background after a redirect)
    bool refresh_first_ = false;                 // a node failed: read them before the next command
    bool refreshing_ = false;
    std::deque<Waiting> waiting_;                // commands waiting for the first slots
    std::vector<const std::string*> preload_;
    ngx_event_t post_{};
    std::vector<std::pair<Callback, std::string>> failed_;
    std::vector<std::unique_ptr<Retry>> retries_;   // commands waiting to be sent again (TRYAGAIN)
};

}  // namespace llmgw
