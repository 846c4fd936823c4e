// The request body as one contiguous view, without copying what nginx
// already holds: its single memory buffer as it is, or its temp file mapped
// read-only (pages of the page cache, not worker heap: a 25 MB upload costs
// no 25 MB of private memory). Only a body nginx split over several memory
// buffers (each at most client_body_buffer_size) is gathered into one string.
#include <sys/mman.h>

#include "ngx/http/body.h"

#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {
namespace {

struct Mapping {
    void* addr;
    std::size_t len;
};

void unmap(void* data) {
    auto* m = static_cast<Mapping*>(data);
    if (m->addr != nullptr) munmap(m->addr, m->len);
}

// Maps b's file range; the mapping goes with the request's pool (before the
// temp file is closed: pool cleanups run newest first).
bool map_file(ngx_http_request_t* r, const ngx_buf_t* b, std::string_view& out) {
    const off_t size = b->file_last - b->file_pos;
    if (size == 0) {
        out = {};
        return true;
    }
    const off_t base = b->file_pos - b->file_pos % static_cast<off_t>(ngx_pagesize);
    const std::size_t len = static_cast<std::size_t>(size + (b->file_pos - base));
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(r->pool, sizeof(Mapping));
    if (cln == nullptr) return false;
    auto* m = static_cast<Mapping*>(cln->data);
    m->addr = nullptr;
    m->len = 0;
    cln->handler = unmap;
    void* p = mmap(nullptr, len, PROT_READ, MAP_PRIVATE, b->file->fd, base);
    if (p == MAP_FAILED) return false;
    m->addr = p;
    m->len = len;
    out = std::string_view(static_cast<const char*>(p) + (b->file_pos - base), static_cast<std::size_t>(size));
    return true;
}

bool append_buf(const ngx_buf_t* b, std::string& out) {
    if (!b->in_file) {
        out.append(reinterpret_cast<const char*>(b->pos), static_cast<std::size_t>(b->last - b->pos));
        return true;
    }
    const off_t size = b->file_last - b->file_pos;
    const std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(size));
    ssize_t n = ngx_read_file(b->file, reinterpret_cast<u_char*>(&out[at]), static_cast<size_t>(size), b->file_pos);
    return n == static_cast<ssize_t>(size);
}

}  // namespace

bool read_body_view(ngx_http_request_t* r, RequestCtx* ctx) {
    ctx->in.body = {};
    if (r->request_body == nullptr || r->request_body->bufs == nullptr) return true;
    ngx_chain_t* first = r->request_body->bufs;
    if (first->next == nullptr) {
        const ngx_buf_t* b = first->buf;
        if (b->in_file) {
            if (map_file(r, b, ctx->in.body)) return true;
            ngx_log_error(NGX_LOG_WARN, r->connection->log, ngx_errno,
                          "llm_gateway: cannot map the request body's temp file; reading it");
        } else {
            ctx->in.body = std::string_view(reinterpret_cast<const char*>(b->pos), static_cast<std::size_t>(b->last - b->pos));
            return true;
        }
    }
    ctx->in.body_store.clear();
    for (ngx_chain_t* cl = first; cl; cl = cl->next) {
        if (!append_buf(cl->buf, ctx->in.body_store)) return false;
    }
    ctx->in.body = ctx->in.body_store;
    return true;
}

}  // namespace llmgw
