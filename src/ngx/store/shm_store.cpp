// The in-process counter store: a shared memory zone holding a chained hash
// table of entries keyed by their key string, with a queue for expiry
// sweeps. Exact across worker processes (every operation runs under the
// zone's mutex) and kept across "nginx -s reload" (the old zone is reused).
//
// Counter keys have the spec's shape, llmgw:<kind>:<id>:<metric>:<window>:<bucket>.
// The metrics of one scope, window and bucket share one entry (one slot per
// metric), so a request's dozens of counter updates are a few tree lookups.
// Other keys (last-seen stamps) are entries of their own.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <memory>

#include "core/metering/reservation.h"
#include "ngx/shm_zone.h"
#include "ngx/store/store.h"

namespace llmgw {
namespace {

constexpr std::int64_t kSweepInterval = 30;   // seconds
constexpr std::int64_t kMaxTtl = 32 * 86400;    // longest life of an entry in shared memory

// Slots of an entry: the metrics a scope counts (core/accounting.h's Metric);
// kOther holds the value of a key that is not a counter of a known metric.
enum Slot { kOther = kMetricCount, kSlotCount };

// The reserved counters of a scope (core/metering/reservation.h,
// "llmgw:<kind>:<id>:rtok:rsv:<slot>" and "...:rcost:rsv:<slot>") live in
// one ring entry per scope, "llmgw:<kind>:<id>:rsv": position slot % kRing
// holds {slot, expires, tokens, cost}. A check sums a scope's live slots
// from that one entry, under the zone's mutex, instead of looking up a
// mostly absent entry per slot.
constexpr int kRing = 8;                 // >= kReserveSlots: the live slots never share a position
constexpr std::size_t kRingValues = 4 * kRing;
static_assert(kRing >= kReserveSlots, "every live reservation slot needs its own ring position");

// Where a ring position keeps the amount of a measure.
constexpr std::size_t ring_amount(bool tokens) { return tokens ? 2 : 3; }
constexpr std::size_t ring_amount(Measure m) { return ring_amount(m == Measure::Tokens); }

struct ReservedKey {
    std::string_view scope;  // "llmgw:<kind>:<id>:"; the ring entry's key is this + "rsv"
    std::int64_t slot = 0;
    std::size_t amount = 0;  // ring_amount of its measure
};

bool parse_reserved(std::string_view key, ReservedKey& out) {
    bool tokens = false;
    if (!split_reserved_key(key, out.scope, out.slot, tokens)) return false;
    out.amount = ring_amount(tokens);
    return true;
}

// The tree part of an entry (node, key) is read by every lookup from both
// workers; the values are written by every request. They live on different
// cache lines, so increments do not invalidate other workers' copies of the
// tree path. Values sit at the first 64-byte boundary after the key.
struct Entry {
    Entry* next;               // hash chain
    std::uint32_t hash;        // crc32 of the key
    ngx_queue_t queue;
    std::int64_t expires;      // unix seconds
    std::int64_t* values;      // kSlotCount values (a reservation ring: kRingValues), cache-line aligned, same allocation
    u_short len;
    u_char stats;              // counted in Shared::stats_bytes
    u_char key[1];
};

constexpr std::size_t kLine = 64;

std::size_t values_offset(std::size_t key_len) {
    return (offsetof(Entry, key) + key_len + kLine - 1) / kLine * kLine;
}

std::size_t entry_size(std::size_t key_len, std::size_t nvalues = kSlotCount) {
    return values_offset(key_len) + nvalues * sizeof(std::int64_t);
}

// What the slab allocator takes for an allocation: a power of two up to
// half a page, whole pages above.
std::size_t slab_size(std::size_t size) {
    const std::size_t page = ngx_pagesize ? ngx_pagesize : 4096;
    if (size > page / 2) return (size + page - 1) / page * page;
    std::size_t n = 8;
    while (n < size) n <<= 1;
    return n;
}

// Splits a key into its entry key (the metric taken out) and slot; a key
// that is not a counter of a known metric is an entry of its own.
Slot entry_key(const std::string& key, std::string& out) {
    std::string_view metric;
    if (split_counter_key(key, out, metric)) {
        int slot = metric_from_name(metric);
        if (slot >= 0) return static_cast<Slot>(slot);
    }
    out = key;
    return kOther;
}

struct Shared {
    Entry** buckets;           // nbuckets chains (a power of two)
    ngx_uint_t nbuckets;
    ngx_queue_t queue;
    std::int64_t last_sweep;
    ngx_uint_t entries;
    // Statistics counters of caller-named ids (model, provmodel) may take
    // at most stats_budget bytes of the zone (a quarter), so that the
    // admission counters always find room. Past it, a new id is counted
    // under its overflow id ("<provider>/other").
    std::size_t stats_bytes;
    std::size_t stats_budget;

    static Shared* create(ngx_shm_zone_t& zone, ngx_slab_pool_t* shpool, std::uintptr_t);
    void reuse(ngx_slab_pool_t*) {}   // a reload keeps the counters of the previous cycle's zone
};

// A worker's view of the zone.
struct ZoneCtx {
    Shared* sh;
    ngx_slab_pool_t* shpool;
    ngx_str_t name;
};

// The same in every worker (one binary): libstdc++'s string hash reads
// eight bytes a step, several times faster than a byte-wise CRC here.
std::uint32_t hash_of(const std::string& key) {
    std::size_t h = std::hash<std::string_view>{}(key);
    return static_cast<std::uint32_t>(h ^ (h >> 32));
}

// An admission plan's counter keys as this store reads them
// (AdmissionPlan::store_view): the distinct entry keys with their hashes,
// and each key's entry and slot. The plan never changes while it lives, so
// its keys are found by address. A reserved counter's key is not in it.
struct PlanView {
    struct Key {
        const std::string* key;
        std::uint32_t entry;   // index in entries
        Slot slot;
    };
    std::vector<std::string> entries;
    std::vector<std::uint32_t> hashes;
    std::vector<Key> keys;     // sorted by address

    explicit PlanView(const AdmissionPlan& plan) {
        std::string ekey;
        auto add = [&](const std::string& key) {
            ReservedKey rk;
            if (parse_reserved(key, rk)) return;   // read through its ring entry
            const Slot slot = entry_key(key, ekey);
            std::size_t i = 0;
            while (i < entries.size() && entries[i] != ekey) ++i;
            if (i == entries.size()) {
                entries.push_back(ekey);
                hashes.push_back(hash_of(ekey));
            }
            keys.push_back(Key{&key, static_cast<std::uint32_t>(i), slot});
        };
        for (const Check& c : plan.checks) {
            for (const std::string& k : c.keys) add(k);
        }
        for (const Incr& in : plan.admit) add(in.key);
        for (const Incr& in : plan.reject) add(in.key);
        std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) { return std::less<>()(a.key, b.key); });
    }

    const Key* find(const std::string& key) const {
        auto it = std::lower_bound(keys.begin(), keys.end(), &key,
                                   [](const Key& k, const std::string* p) { return std::less<>()(k.key, p); });
        return it != keys.end() && it->key == &key ? &*it : nullptr;
    }
};

// The plan's view, made at its first admission in this worker.
const PlanView& plan_view(const AdmissionPlan& plan) {
    if (plan.store_view == nullptr) plan.store_view = std::make_shared<const PlanView>(plan);
    return *static_cast<const PlanView*>(plan.store_view.get());
}

// Operations on the zone; the caller holds the mutex.
class ZoneTxn : public KvTxn {
public:
    // Expired entries go at most every 30 s, at the start of a transaction,
    // so entries found during it stay put.
    ZoneTxn(ZoneCtx* z, std::int64_t now) : z_(z), now_(now) { sweep(false); }

    // A request's few entries (its scopes' windows) are asked for again and
    // again within one transaction: remember the last ones.
    Entry* find(const std::string& key) {
        for (Entry* e : cache_) {
            if (e && e->len == key.size() && std::memcmp(e->key, key.data(), key.size()) == 0) return e;
        }
        Entry* e = find_uncached(key, hash_of(key));
        if (e) remember(e);
        return e;
    }

    void remember(Entry* e) {
        cache_[cache_next_] = e;
        cache_next_ = (cache_next_ + 1) % kCache;
    }

    Entry* find_uncached(const std::string& key, std::uint32_t hash) {
        for (Entry* e = z_->sh->buckets[hash & (z_->sh->nbuckets - 1)]; e; e = e->next) {
            if (e->hash == hash && e->len == key.size() && std::memcmp(e->key, key.data(), key.size()) == 0) return e;
        }
        return nullptr;
    }

    // An admission's plan: its keys' entries are found through its view,
    // each entry once per transaction.
    void use(const PlanView* view) {
        view_ = view;
        std::fill(std::begin(resolved_), std::end(resolved_), nullptr);
    }

    std::int64_t get(const std::string& key) override {
        if (const PlanView::Key* k = view_ != nullptr ? view_->find(key) : nullptr) {
            Entry* e = resolved(*k);
            return (e && e->expires > now_) ? e->values[k->slot] : 0;
        }
        ReservedKey rk;
        if (parse_reserved(key, rk)) {   // the admin's usage read
            assign_reserved_record_key(ring_key_, rk.scope);
            const std::int64_t* v = ring_position(ring_key_, rk.slot, false, 0);
            return v != nullptr ? v[rk.amount] : 0;
        }
        Slot slot = entry_key(key, ekey_);
        Entry* e = find(ekey_);
        return (e && e->expires > now_) ? e->values[slot] : 0;
    }

    // A check's live reserved slots, from the scope's one ring entry.
    std::int64_t reserved(const Check& c) override {
        if (c.measure == Measure::Requests) return 0;   // held only by a shared store's leases
        Entry* e = find(c.reserved_record);
        if (e == nullptr || e->expires <= now_) return 0;
        const std::size_t at = ring_amount(c.measure);
        std::int64_t sum = 0;
        for (std::int64_t k = c.reserved_oldest; k < c.reserved_oldest + kReserveSlots; ++k) {
            const std::int64_t* v = ring_slot(e, k);
            if (slot_live(v, k)) sum = saturating_add(sum, v[at]);
        }
        return sum;
    }

    bool reserve(const Reservation& r, std::int64_t amount) override {
        std::int64_t* v = ring_position(r.record, r.slot, true, r.ttl);
        if (v == nullptr) return false;
        std::int64_t& held = v[ring_amount(r.measure)];
        held = saturating_add(held, amount);
        return true;
    }

    bool incr(const std::string& key, std::int64_t delta, std::int64_t ttl) override {
        Slot slot;
        Entry* e;
        if (const PlanView::Key* k = view_ != nullptr ? view_->find(key) : nullptr) {
            slot = k->slot;
            e = resolved(*k);
            if (e != nullptr) {
                renew(e, std::min(ttl, kMaxTtl));
            } else {
                e = find_or_create(view_->entries[k->entry], ttl);
                if (e != nullptr && k->entry < kResolved) resolved_[k->entry] = e;
            }
        } else {
            slot = entry_key(key, ekey_);
            e = find_or_create(ekey_, ttl);
        }
        if (e == nullptr) return false;
        e->values[slot] = saturating_add(e->values[slot], delta);
        return true;
    }

    // Takes amount from a reserved counter that still exists, never below 0.
    void release(const Reservation& r, std::int64_t amount) {
        std::int64_t* v = ring_position(r.record, r.slot, false, 0);
        if (v == nullptr) return;
        std::int64_t& held = v[ring_amount(r.measure)];
        held = held > amount ? held - amount : 0;
    }

    // A ring entry's position for a slot, and whether it holds that slot,
    // unexpired.
    static std::int64_t* ring_slot(Entry* e, std::int64_t slot) {
        return e->values + 4 * static_cast<std::size_t>(slot % kRing);
    }
    bool slot_live(const std::int64_t* v, std::int64_t slot) const { return v[0] == slot && v[1] > now_; }

    // The ring position of a reserved slot: {slot, expires, tokens, cost}.
    // Reading (create false): null when the slot holds nothing live. With
    // create, a position last used by another slot (or expired) starts
    // afresh with the slot's TTL, as a new key would.
    std::int64_t* ring_position(const std::string& record, std::int64_t slot, bool create, std::int64_t ttl) {
        Entry* e = create ? find_or_create(record, ttl, false, kRingValues) : find(record);
        if (e == nullptr || e->expires <= now_) return nullptr;
        std::int64_t* v = ring_slot(e, slot);
        const bool live = slot_live(v, slot);
        if (!create) return live ? v : nullptr;
        if (!live) {
            v[0] = slot;
            v[1] = now_ + std::min(ttl, kMaxTtl);
            v[2] = v[3] = 0;
        }
        if (e->expires < v[1]) e->expires = v[1];
        return v;
    }

    bool raise(const std::string& key, std::int64_t value, std::int64_t ttl) {
        if (ttl > kMaxTtl) ttl = kMaxTtl;
        Slot slot = entry_key(key, ekey_);
        Entry* e = find_or_create(ekey_, ttl);
        if (e == nullptr) return false;
        if (value > e->values[slot]) e->values[slot] = value;
        e->expires = now_ + ttl;
        return true;
    }

    // One request's accounting: the entry of every scope and window, keyed
    // "llmgw:<kind>:<id>:<window>:<bucket>" (a counter key without its
    // metric), gets every delta in its metric's slot.
    bool apply(const std::vector<ScopeDelta>& deltas) {
        bool ok = true;
        const WindowStamps at(now_, true);   // the windows' buckets and TTLs, once for every scope
        for (const ScopeDelta& d : deltas) {
            if (!d.any()) continue;
            std::string_view id = d.id;
            bool bounded = !d.overflow_id.empty();
            // A statistics scope's entries, found while checking the budget:
            // not looked up twice (the common case: they all exist).
            Entry* found[kWindowCount] = {};
            if (bounded && !stats_fit(d.kind, id, at, found)) {
                id = d.overflow_id;
                bounded = false;
                overflowed_ = true;
                std::fill(std::begin(found), std::end(found), nullptr);
            }
            std::size_t scope_len = 0;   // ekey_ holds the scope's part of its entry keys
            for (int i = 0; i < kWindowCount; ++i) {
                const Window w = static_cast<Window>(i);
                Entry* e = found[i];
                if (e != nullptr) {
                    renew(e, at.ttls[i]);
                } else {
                    // Each scope and window is one entry, found once per
                    // settle: not looked for among the remembered ones.
                    if (scope_len == 0) scope_len = assign_entry_scope(ekey_, d.kind, id);
                    assign_entry_window(ekey_, scope_len, w, at.buckets[i]);
                    e = find_or_create(ekey_, at.ttls[i], bounded, kSlotCount, false);
                }
                if (e == nullptr) {
                    ok = false;
                    continue;
                }
                for (int m = 0; m < kMetricCount; ++m) {
                    if (d.delta[m] != 0) e->values[m] = saturating_add(e->values[m], d.delta[m]);
                }
            }
        }
        return ok;
    }

    // Whether the statistics entries of (kind, id) for the current windows
    // exist or fit in the statistics budget; found: those that exist.
    bool stats_fit(std::string_view kind, std::string_view id, const WindowStamps& at, Entry* (&found)[kWindowCount]) {
        std::size_t need = 0;
        const std::size_t scope_len = assign_entry_scope(ekey_, kind, id);
        for (int i = 0; i < kWindowCount; ++i) {
            assign_entry_window(ekey_, scope_len, static_cast<Window>(i), at.buckets[i]);
            found[i] = find_uncached(ekey_, hash_of(ekey_));   // never among the remembered ones, as in apply
            if (found[i] == nullptr) need += slab_size(entry_size(ekey_.size()));
        }
        if (need == 0) return true;
        if (z_->sh->stats_bytes + need <= z_->sh->stats_budget) return true;
        sweep(true);   // expired statistics free their share (found ones among them: looked up again)
        std::fill(std::begin(found), std::end(found), nullptr);
        return z_->sh->stats_bytes + need <= z_->sh->stats_budget;
    }

    bool overflowed() const { return overflowed_; }

    // Zeroes one metric of every entry whose key starts with prefix.
    void reset_metric(const std::string& prefix, Slot slot) {
        ngx_queue_t* q = ngx_queue_head(&z_->sh->queue);
        while (q != ngx_queue_sentinel(&z_->sh->queue)) {
            Entry* e = ngx_queue_data(q, Entry, queue);
            q = ngx_queue_next(q);
            const std::string_view k(reinterpret_cast<const char*>(e->key), e->len);
            if (is_reserved_record_key(k)) continue;   // a reservation ring: no metric slots
            if (k.size() >= prefix.size() && std::memcmp(e->key, prefix.data(), prefix.size()) == 0) e->values[slot] = 0;
        }
    }

    void sweep(bool force) {
        if (!force && now_ - z_->sh->last_sweep < kSweepInterval) return;
        z_->sh->last_sweep = now_;
        for (auto& c : cache_) c = nullptr;
        for (auto& e : resolved_) e = nullptr;
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
        for (Entry** p = &z_->sh->buckets[e->hash & (z_->sh->nbuckets - 1)]; *p; p = &(*p)->next) {
            if (*p == e) {
                *p = e->next;
                break;
            }
        }
        if (e->stats) z_->sh->stats_bytes -= std::min(z_->sh->stats_bytes, slab_size(entry_size(e->len)));
        ngx_slab_free_locked(z_->shpool, e);
        z_->sh->entries--;
    }

    // An entry found again: expired, it is a new window's counter.
    void renew(Entry* e, std::int64_t ttl, std::size_t nvalues = kSlotCount) {
        if (e->expires > now_) return;
        if (ttl > kMaxTtl) ttl = kMaxTtl;
        std::memset(e->values, 0, nvalues * sizeof(std::int64_t));
        e->expires = now_ + ttl;
    }

    // remembered: look among the transaction's last entries first.
    Entry* find_or_create(const std::string& key, std::int64_t ttl, bool stats = false,
                          std::size_t nvalues = kSlotCount, bool remembered = true) {
        // Counters written here while a shared store is down carry its long
        // TTLs; shared memory keeps them at most 32 days.
        if (ttl > kMaxTtl) ttl = kMaxTtl;
        std::uint32_t hash = 0;
        Entry* e;
        if (remembered) {
            e = find(key);
        } else {
            hash = hash_of(key);
            e = find_uncached(key, hash);
        }
        if (e != nullptr) {
            renew(e, ttl, nvalues);
            return e;
        }
        if (key.size() > 65535) return nullptr;
        if (remembered) hash = hash_of(key);
        std::size_t size = entry_size(key.size(), nvalues);
        auto* n = static_cast<Entry*>(ngx_slab_alloc_locked(z_->shpool, size));
        if (n == nullptr) {
            sweep(true);   // expired entries go first
            n = static_cast<Entry*>(ngx_slab_alloc_locked(z_->shpool, size));
            if (n == nullptr) return nullptr;
        }
        n->hash = hash;
        n->values = reinterpret_cast<std::int64_t*>(reinterpret_cast<u_char*>(n) + values_offset(key.size()));
        std::memset(n->values, 0, nvalues * sizeof(std::int64_t));
        n->expires = now_ + ttl;
        n->len = static_cast<u_short>(key.size());
        n->stats = stats ? 1 : 0;
        if (stats) z_->sh->stats_bytes += slab_size(size);
        std::memcpy(n->key, key.data(), key.size());
        Entry*& head = z_->sh->buckets[hash & (z_->sh->nbuckets - 1)];
        n->next = head;
        head = n;
        ngx_queue_insert_tail(&z_->sh->queue, &n->queue);
        z_->sh->entries++;
        remember(n);
        return n;
    }

    // A plan key's entry, found (not created) once per transaction; null
    // when absent (an increment creates it).
    Entry* resolved(const PlanView::Key& k) {
        if (k.entry < kResolved && resolved_[k.entry] != nullptr) return resolved_[k.entry];
        Entry* e = find_uncached(view_->entries[k.entry], view_->hashes[k.entry]);
        if (e != nullptr && k.entry < kResolved) resolved_[k.entry] = e;
        return e;
    }

    static constexpr std::size_t kCache = 16;   // a request's counter entries and its scopes' reservation rings
    static constexpr std::size_t kResolved = 16;   // a plan's entries: its scopes' windows
    const PlanView* view_ = nullptr;
    Entry* resolved_[kResolved] = {};
    ZoneCtx* z_;
    std::int64_t now_;
    std::string ekey_;                 // scratch: the entry key of the current counter key
    std::string ring_key_;             // scratch: the ring entry key of a reserved counter
    Entry* cache_[kCache] = {};
    std::size_t cache_next_ = 0;
    bool overflowed_ = false;
};

class ShmStore : public CounterStore {
public:
    explicit ShmStore(const ZoneCtx& z) : z_(z) {}
    const char* name() const override { return "shm"; }
    bool in_process_ttls() const override { return true; }

    void settle(const std::vector<ScopeDelta>& deltas, HeldReservation releases, std::time_t,
                WriteDone done) override {
        bool ok, overflowed;
        {
            ShmLock lock(z_.shpool);
            ZoneTxn txn(&z_, ngx_time());
            if (releases.plan != nullptr) {
                for_each_reserved(releases.plan->reserve, releases.amounts,
                                  [&txn](const Reservation& r, std::int64_t amount) { txn.release(r, amount); });
            }
            ok = txn.apply(deltas);
            overflowed = txn.overflowed();
        }
        if (overflowed) log_stats_bound();
        if (done) done(ok ? StoreReply{} : full());
    }

    void admit(std::shared_ptr<const AdmissionPlan> plan, const ReserveAmounts& amounts, AdmitDone done) override {
        AdmissionResult result;
        bool ok;
        {
            const PlanView& view = plan_view(*plan);
            ShmLock lock(z_.shpool);
            ZoneTxn txn(&z_, ngx_time());
            txn.use(&view);
            ok = execute_admission(txn, *plan, result, amounts);
        }
        done(ok ? StoreReply{} : full(), result);
    }

    void read(const std::vector<std::string>& keys, ReadDone done) override {
        std::vector<std::int64_t> values;
        values.reserve(keys.size());
        {
            ShmLock lock(z_.shpool);
            ZoneTxn txn(&z_, ngx_time());
            for (const auto& k : keys) values.push_back(txn.get(k));
        }
        done(StoreReply{}, values);
    }

    void touch(const std::string& key, std::int64_t value, std::int64_t ttl) override {
        ShmLock lock(z_.shpool);
        ZoneTxn txn(&z_, ngx_time());
        if (!txn.raise(key, value, ttl)) log_full();
    }

    void reset_metric(const std::string& prefix, const std::string& metric) {
        int slot = metric_from_name(metric);
        if (slot < 0) return;
        ShmLock lock(z_.shpool);
        ZoneTxn txn(&z_, ngx_time());
        txn.reset_metric(prefix, static_cast<Slot>(slot));
    }

private:
    StoreReply full() {
        log_full();
        return StoreReply{StoreStatus::Error, "llm_gateway zone \"" + std::string(reinterpret_cast<char*>(z_.name.data), z_.name.len) +
                                                  "\" is full"};
    }
    // At most once a minute per worker.
    void log_stats_bound() {
        if (ngx_time() - last_bound_log_ < 60) return;
        last_bound_log_ = ngx_time();
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "llm_gateway: zone \"%V\": the statistics counters use their quarter of the zone; "
                      "new model ids are counted as \"<provider>/other\"",
                      &z_.name);
    }
    void log_full() {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      "llm_gateway: zone \"%V\" is full even after removing expired counters; "
                      "increase its size in llm_gateway_zone",
                      &z_.name);
    }

    ZoneCtx z_;
    std::time_t last_bound_log_ = 0;
};

Shared* Shared::create(ngx_shm_zone_t& zone, ngx_slab_pool_t* shpool, std::uintptr_t) {
    auto* sh = static_cast<Shared*>(ngx_slab_alloc(shpool, sizeof(Shared)));
    if (sh == nullptr) return nullptr;
    // One chain per 8 KiB of zone: a table small enough to stay in cache
    // (2048 heads for 10 MB), chains still a few entries long.
    ngx_uint_t n = 256;
    while (n < zone.shm.size / 8192) n <<= 1;
    sh->nbuckets = n;
    sh->buckets = static_cast<Entry**>(ngx_slab_calloc(shpool, n * sizeof(Entry*)));
    if (sh->buckets == nullptr) return nullptr;
    ngx_queue_init(&sh->queue);
    sh->last_sweep = ngx_time();
    sh->entries = 0;
    sh->stats_bytes = 0;
    sh->stats_budget = zone.shm.size / 4;

    static const char prefix[] = " in llm_gateway zone \"";
    std::size_t len = sizeof(prefix) - 1 + zone.shm.name.len + 2;
    shpool->log_ctx = static_cast<u_char*>(ngx_slab_alloc(shpool, len));
    if (shpool->log_ctx == nullptr) return nullptr;
    ngx_sprintf(shpool->log_ctx, " in llm_gateway zone \"%V\"%Z", &zone.shm.name);
    shpool->log_nomem = 0;   // a full zone is reported by the gateway, once per failure
    return sh;
}

}  // namespace

ngx_shm_zone_t* add_shm_zone(ngx_conf_t* cf, ngx_str_t* name, size_t size) {
    return add_shm_zone_of<Shared>(cf, name, size);
}

std::unique_ptr<CounterStore> make_shm_store(ngx_shm_zone_t* zone) {
    return std::make_unique<ShmStore>(ZoneCtx{shm_zone_data<Shared>(zone), shm_zone_pool(zone), zone->shm.name});
}

void shm_reset_metric(CounterStore* shm, const std::string& scope_prefix, const std::string& metric) {
    if (auto* s = static_cast<ShmStore*>(shm)) s->reset_metric(scope_prefix, metric);
}

}  // namespace llmgw
