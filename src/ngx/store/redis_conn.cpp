#include "ngx/store/redis_conn.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <new>

#include "core/log/log_escape.h"

namespace llmgw {

RedisConn::RedisConn(const RedisSettings& s, ngx_log_t* log) : s_(s), log_(log), quiet_log_(*log) {
    // nginx logs connect() and TLS failures itself (some at crit); the store
    // reports its failures once per 30 s through the latch instead.
    quiet_log_.log_level = NGX_LOG_ALERT;
    timer_.handler = on_timer;
    timer_.data = this;
    timer_.log = log;
    timer_.cancelable = 1;
    post_.handler = on_post;
    post_.data = this;
    post_.log = log;
    flush_.handler = on_flush;
    flush_.data = this;
    flush_.log = log;
}

RedisConn::~RedisConn() {
    close();
    if (timer_.timer_set) {
        ngx_del_timer(&timer_);
    }
    if (post_.posted) {
        ngx_delete_posted_event(&post_);
    }
    if (flush_.posted) {
        ngx_delete_posted_event(&flush_);
    }
    done_.clear();   // never run callbacks from a destructor
}

// A worker that is terminating (fast shutdown) sends nothing more: cb fails
// (posted). While it shuts down gracefully the connection still takes
// commands, and is opened when it has none: the accounting of the requests
// it finishes and its pending batch (docs/store.md#accounting-batches), and
// its idle reservation leases given back. The call time-out's timer then
// keeps the worker until the replies come (arm_timer), at most `timeout`.
bool RedisConn::shutting_down(Callback& cb) {
    if (!ngx_terminate) return false;
    done_.push_back({std::move(cb), {"worker is shutting down", {}}});
    if (!post_.posted) {
        ngx_post_event(&post_, &ngx_posted_events);
    }
    return true;
}

void RedisConn::exec(const std::vector<std::vector<std::string>>& cmds, Callback cb) {
    if (shutting_down(cb)) return;
    for (const auto& argv : cmds) append_resp_command(out_, argv);
    queue(cmds.size(), std::move(cb));
}

void RedisConn::exec_encoded(std::string_view wire, std::size_t ncmds, Callback cb, bool now) {
    if (shutting_down(cb)) return;
    out_.append(wire.data(), wire.size());
    queue(ncmds, std::move(cb), now);
}

// The batch of the commands just added to out_: its replies, then cb.
// A failed write fails the batches (their callbacks posted, never run here).
void RedisConn::queue(std::size_t ncmds, Callback cb, bool now) {
    batches_.push_back(Batch{ncmds, {}, std::move(cb), ngx_current_msec + s_.timeout, false, 0});
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, log_, 0, "llm_gateway: store: %uz commands queued (%uz bytes, %uz batches in flight, %s)",
                   ncmds, out_.size(), batches_.size(), ready_ ? "connected" : connecting_ ? "connecting" : "connect");
    arm_timer();
    if (ready_ && now) {
        flush();
    } else if (ready_) {
        if (!flush_.posted) {
            ngx_post_event(&flush_, &ngx_posted_events);
        }
    } else if (!connecting_) {
        connect();
    }
    if (!done_.empty()) {
        ngx_post_event(&post_, &ngx_posted_events);
    }
}

void RedisConn::arm_timer() {
    if (batches_.empty()) {
        if (timer_.timer_set) {
            ngx_del_timer(&timer_);
        }
        return;
    }
    ngx_msec_t now = ngx_current_msec;
    ngx_msec_t d = batches_.front().deadline;
    ngx_msec_t wait = d > now ? d - now : 1;
    // A worker shutting down gracefully waits for its store calls (nginx
    // exits a worker once only cancelable timers are left).
    timer_.cancelable = ngx_exiting ? 0 : 1;
    ngx_add_timer(&timer_, wait);   // re-adds when already set
}

void RedisConn::connect() {
    connecting_ = true;
    reader_ = std::make_unique<RespReader>(kRespDefaultMaxBuffer, s_.shape);
    // AUTH and SELECT go first on the pipeline; user commands queued while
    // connecting follow them.
    std::vector<std::vector<std::string>> hello;
    if (!s_.password.empty()) {
        if (!s_.url.user.empty()) {
            hello.push_back({"AUTH", s_.url.user, s_.password});
        } else {
            hello.push_back({"AUTH", s_.password});
        }
    }
    if (s_.url.db != 0) hello.push_back({"SELECT", std::to_string(s_.url.db)});
    const std::size_t must_succeed = hello.size();
    for (const std::string* src : preload_) hello.push_back({"SCRIPT", "LOAD", *src});
    if (!hello.empty()) {
        std::string pre;
        for (const auto& argv : hello) append_resp_command(pre, argv);
        out_.insert(0, pre);
        batches_.push_front(Batch{hello.size(), {}, nullptr, ngx_current_msec + s_.timeout, true, must_succeed});
    }

    peer_ = ngx_peer_connection_t{};
    peer_.sockaddr = s_.addr.sockaddr;
    peer_.socklen = s_.addr.socklen;
    peer_.name = const_cast<ngx_str_t*>(&s_.addr_text);
    peer_.get = ngx_event_get_peer;
    peer_.log = &quiet_log_;
    peer_.log_error = NGX_ERROR_ERR;
    peer_.tries = 1;

    ngx_int_t rc = ngx_event_connect_peer(&peer_);
    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED || peer_.connection == nullptr) {
        peer_.connection = nullptr;
        fail("cannot connect to the store at " + std::string(reinterpret_cast<char*>(s_.addr_text.data), s_.addr_text.len));
        return;
    }
    c_ = peer_.connection;
    c_->data = this;
    c_->read->handler = on_read;
    c_->write->handler = on_write;
    c_->pool = ngx_create_pool(1024, &quiet_log_);
    if (c_->pool == nullptr) {
        fail("out of memory");
        return;
    }
    if (rc == NGX_AGAIN) {
        ngx_add_timer(c_->write, s_.timeout);   // dial time-out
        return;
    }
    on_connected();
}

void RedisConn::on_connected() {
    if (c_->write->timer_set) {
        ngx_del_timer(c_->write);
    }
#if (NGX_SSL)
    if (s_.ssl != nullptr) {
        start_tls();
        return;
    }
#endif
    ready();
}

#if (NGX_SSL)
bool RedisConn::is_ip_literal(const std::string& host) {
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The certificate names the host: a DNS name (nginx's check) or, for an
// address, an IP subjectAltName.
bool RedisConn::certificate_matches(ngx_connection_t* c) const {
    std::string name(reinterpret_cast<char*>(s_.tls_name.data), s_.tls_name.len);
    if (!is_ip_literal(name)) return ngx_ssl_check_host(c, const_cast<ngx_str_t*>(&s_.tls_name)) == NGX_OK;
    X509* cert = SSL_get_peer_certificate(c->ssl->connection);
    if (cert == nullptr) return false;
    bool ok = X509_check_ip_asc(cert, name.c_str(), 0) == 1;
    X509_free(cert);
    return ok;
}

void RedisConn::start_tls() {
    if (ngx_ssl_create_connection(s_.ssl, c_, NGX_SSL_BUFFER | NGX_SSL_CLIENT) != NGX_OK) {
        fail("TLS setup failed");
        return;
    }
    std::string name(reinterpret_cast<char*>(s_.tls_name.data), s_.tls_name.len);
    if (!name.empty() && !is_ip_literal(name)) {   // SNI carries host names only (RFC 6066)
        SSL_set_tlsext_host_name(c_->ssl->connection, name.c_str());
    }
    ngx_int_t rc = ngx_ssl_handshake(c_);
    if (rc == NGX_AGAIN) {
        ngx_add_timer(c_->write, s_.timeout);
        c_->ssl->handler = tls_done;
        return;
    }
    tls_done_body(c_);
}

void RedisConn::tls_done(ngx_connection_t* c) {
    guarded(static_cast<RedisConn*>(c->data), "TLS", [c] { tls_done_body(c); });
}

void RedisConn::tls_done_body(ngx_connection_t* c) {
    auto* self = static_cast<RedisConn*>(c->data);
    if (c->write->timer_set) {
        ngx_del_timer(c->write);
    }
    if (!c->ssl || !c->ssl->handshaked) {
        self->fail("TLS handshake with the store failed");
        self->post_callbacks();
        return;
    }
    if (self->s_.url.verify) {
        long v = SSL_get_verify_result(c->ssl->connection);
        if (v != X509_V_OK) {
            self->fail(std::string("store certificate verify failed: ") + X509_verify_cert_error_string(v));
            self->post_callbacks();
            return;
        }
        if (!self->certificate_matches(c)) {
            self->fail("store certificate does not match the host name");
            self->post_callbacks();
            return;
        }
    }
    c->read->handler = on_read;
    c->write->handler = on_write;
    self->ready();
    self->post_callbacks();
}
#endif

void RedisConn::ready() {
    connecting_ = false;
    ready_ = true;
    flush();
    if (c_ != nullptr && ready_) read();   // a reply may already be buffered (TLS)
}

void RedisConn::flush() {
    while (c_ != nullptr && !out_.empty()) {
        ssize_t n = c_->send(c_, reinterpret_cast<u_char*>(&out_[0]), out_.size());
        if (n == NGX_AGAIN) break;
        if (n == NGX_ERROR || n <= 0) {
            fail("write to the store failed");
            return;
        }
        out_.erase(0, static_cast<std::size_t>(n));
    }
    if (c_ != nullptr && ngx_handle_write_event(c_->write, 0) != NGX_OK) fail("write to the store failed");
}

void RedisConn::read() {
    u_char buf[16384];
    for (;;) {
        if (c_ == nullptr) return;
        ssize_t n = c_->recv(c_, buf, sizeof buf);
        if (n == NGX_AGAIN) break;
        if (n == 0) {
            fail("the store closed the connection");
            return;
        }
        if (n == NGX_ERROR) {
            fail("read from the store failed");
            return;
        }
        if (!reader_->feed(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n))) {
            RespValue v;
            std::string err;
            reader_->next(v, err);   // a dead reader names its reason
            fail(err.empty() ? std::string("the store sent an invalid reply") : err);
            return;
        }
        for (;;) {
            RespValue v;
            std::string err;
            RespReader::Result res = reader_->next(v, err);
            if (res == RespReader::Result::NeedMore) break;
            if (res == RespReader::Result::Error) {
                fail(err.empty() ? std::string("the store sent an invalid reply") : err);
                return;
            }
            if (batches_.empty()) {
                fail("the store sent a reply nobody asked for");
                return;
            }
            Batch& b = batches_.front();
            b.replies.push_back(std::move(v));
            if (b.replies.size() < b.expect) continue;
            Batch done = std::move(b);
            batches_.pop_front();
            ngx_log_debug3(NGX_LOG_DEBUG_HTTP, log_, 0, "llm_gateway: store: %uz replies in %M ms%s", done.expect,
                           ngx_current_msec - (done.deadline - s_.timeout), done.internal ? " (handshake)" : "");
            if (done.internal) {
                for (std::size_t i = 0; i < done.replies.size(); ++i) {
                    const RespValue& r = done.replies[i];
                    if (r.type != RespValue::Type::Error) continue;
                    if (i >= done.must_succeed) {   // a SCRIPT LOAD: EVALSHA falls back to EVAL
                        ngx_log_error(NGX_LOG_WARN, log_, 0, "llm_gateway: SCRIPT LOAD refused (the script is sent with EVAL when needed): %s",
                                      log_text(r.str.substr(0, 120)).c_str());
                        continue;
                    }
                    bool auth = r.str.find("WRONGPASS") != std::string::npos || r.str.find("NOAUTH") != std::string::npos ||
                                r.str.find("AUTH") != std::string::npos;
                    fail(auth ? "the store refused the credentials" : "the store refused SELECT: " + r.str.substr(0, 120));
                    return;
                }
                continue;
            }
            done_.push_back({std::move(done.cb), {std::string(), std::move(done.replies)}});
        }
    }
    arm_timer();
    if (c_ != nullptr && ngx_handle_read_event(c_->read, 0) != NGX_OK) fail("read from the store failed");
}

void RedisConn::fail(const std::string& err) {
    close();
    for (auto& b : batches_) {
        if (b.internal || !b.cb) continue;
        done_.push_back({std::move(b.cb), {err, {}}});
    }
    batches_.clear();
    out_.clear();
    arm_timer();
}

void RedisConn::close() {
    connecting_ = false;
    ready_ = false;
    if (c_ == nullptr) return;
    ngx_connection_t* c = c_;
    c_ = nullptr;
#if (NGX_SSL)
    if (c->ssl) {
        c->ssl->no_wait_shutdown = 1;
        (void)ngx_ssl_shutdown(c);
    }
#endif
    ngx_pool_t* pool = c->pool;
    ngx_close_connection(c);
    if (pool) ngx_destroy_pool(pool);
}

void RedisConn::post_callbacks() {
    // Callbacks may start new commands on this connection: take them out
    // first so nothing here is touched afterwards.
    auto done = std::move(done_);
    done_.clear();
    for (auto& d : done) {
        if (d.first) deliver(d.first, d.second.first, d.second.second);
    }
}

// Runs one callback. An exception before the callback ran (handling the
// reply) fails its batch: the callback gets an error instead. One thrown by
// the callback itself is logged; the callback has done what it could.
void RedisConn::deliver(Callback& cb, std::string& err, std::vector<RespValue>& replies) noexcept {
    bool called = false;
    try {
        if (fault_next_reply_ && err.empty()) {
            fault_next_reply_ = false;
            throw std::bad_alloc();
        }
        called = true;
        cb(err, replies);
        return;
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, log_, 0, "llm_gateway: handling a store reply failed: %s", e.what());
    } catch (...) {
        ngx_log_error(NGX_LOG_ERR, log_, 0, "llm_gateway: handling a store reply failed");
    }
    if (called) return;
    try {
        std::string e = "the store reply could not be handled";
        std::vector<RespValue> none;
        cb(e, none);
    } catch (...) {
        ngx_log_error(NGX_LOG_ERR, log_, 0, "llm_gateway: failing a store call failed");
    }
}

template <typename F>
void RedisConn::guarded(RedisConn* self, const char* where, F body) noexcept {
    try {
        body();
        return;
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, self->log_, 0, "llm_gateway: store %s handler failed: %s", where, e.what());
    } catch (...) {
        ngx_log_error(NGX_LOG_ERR, self->log_, 0, "llm_gateway: store %s handler failed", where);
    }
    try {
        self->fail("internal error");
        self->post_callbacks();
    } catch (...) {
        // Out of memory even for failing: drop the connection and the
        // batches; their requests time out at the client.
        self->close();
        self->batches_.clear();
        self->done_.clear();
        ngx_log_error(NGX_LOG_ERR, self->log_, 0, "llm_gateway: store calls dropped after a handler failure");
    }
}

void RedisConn::on_read_body(ngx_event_t* ev) {
    auto* c = static_cast<ngx_connection_t*>(ev->data);
    auto* self = static_cast<RedisConn*>(c->data);
    if (self->connecting_ && !self->ready_) {   // readable before writable: test the connect
        on_write_body(c->write);
        return;
    }
    self->read();
    self->post_callbacks();
}

void RedisConn::on_write_body(ngx_event_t* ev) {
    auto* c = static_cast<ngx_connection_t*>(ev->data);
    auto* self = static_cast<RedisConn*>(c->data);
    if (ev->timedout) {
        self->fail("connecting to the store timed out");
        self->post_callbacks();
        return;
    }
    if (self->connecting_ && !self->ready_) {
        int err = 0;
        socklen_t len = sizeof(int);
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, reinterpret_cast<void*>(&err), &len) == -1) err = ngx_socket_errno;
        if (err) {
            self->fail("cannot connect to the store at " +
                       std::string(reinterpret_cast<char*>(self->s_.addr_text.data), self->s_.addr_text.len));
            self->post_callbacks();
            return;
        }
#if (NGX_SSL)
        if (c->ssl == nullptr) self->on_connected();
#else
        self->on_connected();
#endif
        self->post_callbacks();
        return;
    }
    self->flush();
    self->post_callbacks();
}

void RedisConn::on_timer_body(ngx_event_t* ev) {
    auto* self = static_cast<RedisConn*>(ev->data);
    if (self->batches_.empty()) return;
    if (self->batches_.front().deadline > ngx_current_msec + 1) {
        self->arm_timer();
        return;
    }
    self->fail("the store did not answer within the time-out");
    self->post_callbacks();
}

void RedisConn::on_post(ngx_event_t* ev) {
    auto* self = static_cast<RedisConn*>(ev->data);
    guarded(self, "callback", [self] { self->post_callbacks(); });
}

void RedisConn::on_flush(ngx_event_t* ev) {
    auto* self = static_cast<RedisConn*>(ev->data);
    guarded(self, "write", [self] {
        if (self->ready_) self->flush();
        self->post_callbacks();
    });
}

void RedisConn::on_read(ngx_event_t* ev) {
    auto* c = static_cast<ngx_connection_t*>(ev->data);
    guarded(static_cast<RedisConn*>(c->data), "read", [ev] { on_read_body(ev); });
}

void RedisConn::on_write(ngx_event_t* ev) {
    auto* c = static_cast<ngx_connection_t*>(ev->data);
    guarded(static_cast<RedisConn*>(c->data), "write", [ev] { on_write_body(ev); });
}

void RedisConn::on_timer(ngx_event_t* ev) {
    guarded(static_cast<RedisConn*>(ev->data), "timer", [ev] { on_timer_body(ev); });
}

}  // namespace llmgw
