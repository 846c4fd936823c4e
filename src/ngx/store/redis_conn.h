// One non-blocking connection to a RESP2 store per worker, on nginx's event
// loop: nginx's own connect and TLS, hiredis only as the RESP codec.
// Commands are pipelined; each exec() is a batch whose replies come back
// together (or an error for the whole batch). What the handlers of one turn
// of the event loop send goes out in one write, after them (a posted
// event), so under load the store reads many commands per read.
#pragma once
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/resp.h"
#include "core/config/store_url.h"
#include "ngx/ngx_incl.h"

namespace llmgw {

struct RedisSettings {
    StoreUrl url;
    std::string password;          // resolved secret ("" = no AUTH)
    ngx_addr_t addr{};             // resolved at configuration time
    ngx_str_t addr_text{};         // host:port for logs (never userinfo)
#if (NGX_SSL)
    ngx_ssl_t* ssl = nullptr;      // rediss://
#endif
    ngx_str_t tls_name{};          // SNI and certificate host check
    ngx_msec_t timeout = 2000;     // dial and call time-out
    RespShape shape;               // the replies accepted (a cluster node's: kRespTopologyShape)
};

class RedisConn {
public:
    // err is "" on success; replies has one value per command.
    using Callback = std::function<void(const std::string& err, std::vector<RespValue>& replies)>;

    RedisConn(const RedisSettings& s, ngx_log_t* log);
    ~RedisConn();
    RedisConn(const RedisConn&) = delete;
    RedisConn& operator=(const RedisConn&) = delete;

    // Sends the commands (argv each) pipelined. cb runs exactly once, never
    // from inside exec() itself.
    void exec(const std::vector<std::vector<std::string>>& cmds, Callback cb);
    // The same for ncmds commands already written in RESP (RespWriter).
    // now: written at once, with whatever waits, instead of after this
    // turn's handlers: an accounting is in the store's socket before the
    // client has the answer it counts, so the client's next request, on
    // any worker or replica, is admitted against it.
    void exec_encoded(std::string_view wire, std::size_t ncmds, Callback cb, bool now = false);
    void close();                  // fails whatever is pending
    // Scripts loaded (SCRIPT LOAD) on every new connection, pipelined right
    // after AUTH and SELECT and before any queued command: the first
    // EVALSHA on the connection finds its script, so an accounting never
    // waits for a NOSCRIPT round trip after its client has the answer.
    // A script the store refuses is logged; its EVALSHA then falls back to
    // EVAL as after a SCRIPT FLUSH.
    void preload_scripts(std::vector<const std::string*> sources) { preload_ = std::move(sources); }
    std::size_t in_flight() const { return batches_.size(); }
    // Test-only (LLMGW_TEST_FAULT): handling the next reply throws
    // std::bad_alloc before its callback runs.
    void fail_next_reply() { fault_next_reply_ = true; }

private:
    struct Batch {
        std::size_t expect;
        std::vector<RespValue> replies;
        Callback cb;
        ngx_msec_t deadline;
        bool internal;             // AUTH/SELECT/SCRIPT LOAD of a new connection
        std::size_t must_succeed;  // internal: how many first replies must not be errors (AUTH, SELECT)
    };

    bool shutting_down(Callback& cb);
    void queue(std::size_t ncmds, Callback cb, bool now = false);
    void connect();
    void on_connected();
    void start_tls();
    bool certificate_matches(ngx_connection_t* c) const;
    static bool is_ip_literal(const std::string& host);
    static void tls_done(ngx_connection_t* c);
    void ready();
    void flush();
    void read();
    void fail(const std::string& err);
    void arm_timer();
    void post_callbacks();
    void deliver(Callback& cb, std::string& err, std::vector<RespValue>& replies) noexcept;
    // Runs an event handler's body; an exception fails the pending work.
    template <typename F>
    static void guarded(RedisConn* self, const char* where, F body) noexcept;
    static void on_read(ngx_event_t* ev);
    static void on_write(ngx_event_t* ev);
    static void on_timer(ngx_event_t* ev);
    static void on_post(ngx_event_t* ev);
    static void on_flush(ngx_event_t* ev);
    static void on_read_body(ngx_event_t* ev);
    static void on_write_body(ngx_event_t* ev);
    static void on_timer_body(ngx_event_t* ev);
    static void tls_done_body(ngx_connection_t* c);

    const RedisSettings& s_;
    ngx_log_t* log_;
    ngx_log_t quiet_log_;          // the connection's own log: store errors are reported by the latch, throttled
    ngx_peer_connection_t peer_{};
    ngx_connection_t* c_ = nullptr;
    bool connecting_ = false;
    bool ready_ = false;
    std::string out_;              // bytes not yet written
    std::deque<Batch> batches_;
    std::unique_ptr<RespReader> reader_;
    ngx_event_t timer_{};
    ngx_event_t post_{};           // runs completed callbacks outside I/O handlers
    ngx_event_t flush_{};          // writes out_ once the loop's handlers have queued theirs
    std::vector<std::pair<Callback, std::pair<std::string, std::vector<RespValue>>>> done_;
    bool fault_next_reply_ = false;
    std::vector<const std::string*> preload_;   // script sources, static
};

}  // namespace llmgw
