// The in-process counter store: a shared memory zone holding an rbtree of
// counters keyed by a hash of their key string, with a queue for expiry
// sweeps. Exact across worker processes (every operation runs under the
// zone's mutex) and kept across "nginx -s reload" (the old zone is reused).
#include <cstring>
#include <memory>

#include "ngx/module.h"

namespace llmgw {
namespace {

constexpr std::int64_t kSweepInterval = 30;   // seconds
constexpr std::int64_t kMaxTtl = 32 * 86400;    // longest life of an entry in shared memory

struct Entry {
    ngx_rbtree_node_t node;    // node.key: crc32 of the key string
    ngx_queue_t queue;
    std::int64_t value;
    std::int64_t expires;      // unix seconds
    u_short len;
    u_char key[1];
};

struct Shared {
    ngx_rbtree_t rbtree;
    ngx_rbtree_node_t sentinel;
    ngx_queue_t queue;
    std::int64_t last_sweep;
    ngx_uint_t entries;
};

struct ZoneCtx {
    Shared* sh;
    ngx_slab_pool_t* shpool;
    ngx_str_t name;
};

Entry* entry_of(ngx_rbtree_node_t* n) { return reinterpret_cast<Entry*>(n); }

int compare(const Entry* e, ngx_uint_t hash, const std::string& key) {
    if (hash != e->node.key) return hash < e->node.key ? -1 : 1;
    int c = ngx_memn2cmp(reinterpret_cast<u_char*>(const_cast<char*>(key.data())), const_cast<u_char*>(e->key),
                         key.size(), e->len);
    return c;
}

void insert_value(ngx_rbtree_node_t* temp, ngx_rbtree_node_t* node, ngx_rbtree_node_t* sentinel) {
    ngx_rbtree_node_t** p;
    for (;;) {
        if (node->key != temp->key) {
            p = (node->key < temp->key) ? &temp->left : &temp->right;
        } else {
            Entry* a = entry_of(node);
            Entry* b = entry_of(temp);
            p = (ngx_memn2cmp(a->key, b->key, a->len, b->len) < 0) ? &temp->left : &temp->right;
        }
        if (*p == sentinel) break;
        temp = *p;
    }
    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}

class Locked {
public:
    explicit Locked(ngx_slab_pool_t* pool) : pool_(pool) { ngx_shmtx_lock(&pool_->mutex); }
    ~Locked() { ngx_shmtx_unlock(&pool_->mutex); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

private:
    ngx_slab_pool_t* pool_;
};

// Operations on the zone; the caller holds the mutex.
class ZoneTxn : public KvTxn {
public:
    ZoneTxn(ZoneCtx* z, std::int64_t now) : z_(z), now_(now) {}

    Entry* find(const std::string& key) {
        ngx_uint_t hash = ngx_crc32_short(reinterpret_cast<u_char*>(const_cast<char*>(key.data())), key.size());
        ngx_rbtree_node_t* node = z_->sh->rbtree.root;
        ngx_rbtree_node_t* sentinel = z_->sh->rbtree.sentinel;
        while (node != sentinel) {
            int c = compare(entry_of(node), hash, key);
            if (c == 0) return entry_of(node);
            node = c < 0 ? node->left : node->right;
        }
        return nullptr;
    }

    std::int64_t get(const std::string& key) override {
        Entry* e = find(key);
        return (e && e->expires > now_) ? e->value : 0;
    }

    bool incr(const std::string& key, std::int64_t delta, std::int64_t ttl) override {
        Entry* e = find_or_create(key, ttl);
        if (e == nullptr) return false;
        e->value = saturating_add(e->value, delta);
        return true;
    }

    bool raise(const std::string& key, std::int64_t value, std::int64_t ttl) {
        if (ttl > kMaxTtl) ttl = kMaxTtl;
        Entry* e = find_or_create(key, ttl);
        if (e == nullptr) return false;
        if (value > e->value) e->value = value;
        e->expires = now_ + ttl;
        return true;
    }

    void sweep(bool force) {
        if (!force && now_ - z_->sh->last_sweep < kSweepInterval) return;
        z_->sh->last_sweep = now_;
        remove_if([this](const Entry* e) { return e->expires <= now_; });
    }

    template <typename Pred>
    void remove_if(Pred pred) {
        ngx_queue_t* q = ngx_queue_head(&z_->sh->queue);
        while (q != ngx_queue_sentinel(&z_->sh->queue)) {
            Entry* e = ngx_queue_data(q, Entry, queue);
            q = ngx_queue_next(q);
            if (pred(e)) remove(e);
        }
    }

private:
    static std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
        std::int64_t out;
        if (__builtin_add_overflow(a, b, &out)) return b > 0 ? INT64_MAX : INT64_MIN;
        return out;
    }

    void remove(Entry* e) {
        ngx_queue_remove(&e->queue);
        ngx_rbtree_delete(&z_->sh->rbtree, &e->node);
        ngx_slab_free_locked(z_->shpool, e);
        z_->sh->entries--;
    }

    Entry* find_or_create(const std::string& key, std::int64_t ttl) {
        // Counters written here while a shared store is down carry its long
        // TTLs; shared memory keeps them at most 32 days.
        if (ttl > kMaxTtl) ttl = kMaxTtl;
        sweep(false);
        Entry* e = find(key);
        if (e != nullptr) {
            if (e->expires <= now_) {   // expired: a new window's counter
                e->value = 0;
                e->expires = now_ + ttl;
            }
            return e;
        }
        if (key.size() > 65535) return nullptr;
        std::size_t size = offsetof(Entry, key) + key.size();
        auto* n = static_cast<Entry*>(ngx_slab_alloc_locked(z_->shpool, size));
        if (n == nullptr) {
            sweep(true);   // expired entries go first
            n = static_cast<Entry*>(ngx_slab_alloc_locked(z_->shpool, size));
            if (n == nullptr) return nullptr;
        }
        n->node.key = ngx_crc32_short(reinterpret_cast<u_char*>(const_cast<char*>(key.data())), key.size());
        n->value = 0;
        n->expires = now_ + ttl;
        n->len = static_cast<u_short>(key.size());
        std::memcpy(n->key, key.data(), key.size());
        ngx_rbtree_insert(&z_->sh->rbtree, &n->node);
        ngx_queue_insert_tail(&z_->sh->queue, &n->queue);
        z_->sh->entries++;
        return n;
    }

    ZoneCtx* z_;
    std::int64_t now_;
};

class ShmStore : public CounterStore {
public:
    explicit ShmStore(ZoneCtx* z) : z_(z) {}
    const char* name() const override { return "shm"; }

    void admit(const AdmissionPlan& plan, AdmitDone done) override {
        AdmissionResult result;
        bool ok;
        {
            Locked lock(z_->shpool);
            ZoneTxn txn(z_, ngx_time());
            ok = execute_admission(txn, plan, result);
        }
        done(ok ? StoreReply{} : full(), result);
    }

    void write(const std::vector<Incr>& incrs, WriteDone done) override {
        bool ok = true;
        {
            Locked lock(z_->shpool);
            ZoneTxn txn(z_, ngx_time());
            for (const Incr& i : incrs) ok = txn.incr(i.key, i.delta, i.ttl) && ok;
        }
        if (done) done(ok ? StoreReply{} : full());
    }

    void read(const std::vector<std::string>& keys, ReadDone done) override {
        std::vector<std::int64_t> values;
        values.reserve(keys.size());
        {
            Locked lock(z_->shpool);
            ZoneTxn txn(z_, ngx_time());
            for (const auto& k : keys) values.push_back(txn.get(k));
        }
        done(StoreReply{}, values);
    }

    void touch(const std::string& key, std::int64_t value, std::int64_t ttl) override {
        Locked lock(z_->shpool);
        ZoneTxn txn(z_, ngx_time());
        if (!txn.raise(key, value, ttl)) log_full();
    }

    void remove_prefix(const std::string& prefix) {
        Locked lock(z_->shpool);
        ZoneTxn txn(z_, ngx_time());
        txn.remove_if([&](const Entry* e) {
            return e->len >= prefix.size() && std::memcmp(e->key, prefix.data(), prefix.size()) == 0;
        });
    }

private:
    StoreReply full() {
        log_full();
        return StoreReply{StoreStatus::Error, "llm_gateway zone \"" + std::string(reinterpret_cast<char*>(z_->name.data), z_->name.len) +
                                                  "\" is full"};
    }
    void log_full() {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      "llm_gateway: zone \"%V\" is full even after removing expired counters; "
                      "increase its size in llm_gateway_zone",
                      &z_->name);
    }

    ZoneCtx* z_;
};

ngx_int_t init_zone(ngx_shm_zone_t* shm_zone, void* data) {
    auto* ctx = static_cast<ZoneCtx*>(shm_zone->data);
    if (data) {   // reload: keep the counters of the previous cycle's zone
        auto* octx = static_cast<ZoneCtx*>(data);
        ctx->sh = octx->sh;
        ctx->shpool = octx->shpool;
        return NGX_OK;
    }
    ctx->shpool = reinterpret_cast<ngx_slab_pool_t*>(shm_zone->shm.addr);
    if (shm_zone->shm.exists) {
        ctx->sh = static_cast<Shared*>(ctx->shpool->data);
        return NGX_OK;
    }
    ctx->sh = static_cast<Shared*>(ngx_slab_alloc(ctx->shpool, sizeof(Shared)));
    if (ctx->sh == nullptr) return NGX_ERROR;
    ctx->shpool->data = ctx->sh;
    ngx_rbtree_init(&ctx->sh->rbtree, &ctx->sh->sentinel, insert_value);
    ngx_queue_init(&ctx->sh->queue);
    ctx->sh->last_sweep = ngx_time();
    ctx->sh->entries = 0;

    static const char prefix[] = " in llm_gateway zone \"";
    std::size_t len = sizeof(prefix) - 1 + shm_zone->shm.name.len + 2;
    ctx->shpool->log_ctx = static_cast<u_char*>(ngx_slab_alloc(ctx->shpool, len));
    if (ctx->shpool->log_ctx == nullptr) return NGX_ERROR;
    ngx_sprintf(ctx->shpool->log_ctx, " in llm_gateway zone \"%V\"%Z", &shm_zone->shm.name);
    ctx->shpool->log_nomem = 0;   // a full zone is reported by the gateway, once per failure
    return NGX_OK;
}

}  // namespace

ngx_shm_zone_t* add_shm_zone(ngx_conf_t* cf, ngx_str_t* name, size_t size) {
    ngx_shm_zone_t* zone = ngx_shared_memory_add(cf, name, size, &ngx_http_llm_gateway_module);
    if (zone == nullptr) return nullptr;
    if (zone->data != nullptr) return zone;   // declared twice: caller reports
    auto* ctx = static_cast<ZoneCtx*>(ngx_pcalloc(cf->pool, sizeof(ZoneCtx)));
    if (ctx == nullptr) return nullptr;
    ctx->name = *name;
    zone->init = init_zone;
    zone->data = ctx;
    return zone;
}

CounterStore* shm_store(ngx_shm_zone_t* zone) {
    // One store object per zone per process, owned by the cycle pool's
    // lifetime through a cleanup (workers never outlive their cycle).
    auto* ctx = static_cast<ZoneCtx*>(zone->data);
    static ZoneCtx* cached_ctx = nullptr;
    static ShmStore* cached = nullptr;
    if (cached_ctx == ctx && cached) return cached;
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(ngx_cycle->pool, sizeof(ShmStore));
    if (cln == nullptr) return nullptr;
    cached = new (cln->data) ShmStore(ctx);
    cln->handler = [](void* p) { static_cast<ShmStore*>(p)->~ShmStore(); };
    cached_ctx = ctx;
    return cached;
}

void shm_remove_prefix(ngx_shm_zone_t* zone, const std::string& prefix) {
    if (auto* s = static_cast<ShmStore*>(shm_store(zone))) s->remove_prefix(prefix);
}

}  // namespace llmgw
