// The module's shared memory zones (the counter store, the providers'
// breakers, the discovered model lists, the failure feed): what they do
// alike, once. A zone holds one struct T in its slab pool, which
// zone->data points at once nginx ran the zone's init:
//
//   static T* create(ngx_shm_zone_t& zone, ngx_slab_pool_t* pool, std::uintptr_t arg);
//       the first start (or a reload that changed the zone's size): T made
//       in the new pool; nullptr when it does not fit. arg is what
//       add_shm_zone_of was given.
//   void reuse(ngx_slab_pool_t* pool);
//       a reload that keeps the zone (same name and size): the previous
//       cycle's T, under the zone's lock (old workers still use it).
//
// The workers reach T under the zone's lock (with_shm_zone, with_shm_slot).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ngx/ngx_incl.h"

namespace llmgw {

// The lock of a zone's slab pool, held for the object's life.
class ShmLock {
public:
    explicit ShmLock(ngx_slab_pool_t* pool) : pool_(pool) { ngx_shmtx_lock(&pool_->mutex); }
    ~ShmLock() { ngx_shmtx_unlock(&pool_->mutex); }
    ShmLock(const ShmLock&) = delete;
    ShmLock& operator=(const ShmLock&) = delete;

private:
    ngx_slab_pool_t* pool_;
};

// Registers the zone name of size bytes for this module, init run by nginx
// once the zone exists, arg kept in zone->data until then. A zone that
// init already sets up (declared twice) is returned as it is.
ngx_shm_zone_t* shm_zone_add(ngx_conf_t* cf, ngx_str_t* name, std::size_t size, ngx_shm_zone_init_pt init,
                             std::uintptr_t arg);

inline ngx_slab_pool_t* shm_zone_pool(const ngx_shm_zone_t* zone) {
    return reinterpret_cast<ngx_slab_pool_t*>(zone->shm.addr);
}

// The init callback of a zone holding a T.
template <class T>
ngx_int_t shm_zone_init(ngx_shm_zone_t* zone, void* old) {
    ngx_slab_pool_t* pool = shm_zone_pool(zone);
    if (old != nullptr) {
        T* t = static_cast<T*>(old);
        {
            ShmLock lock(pool);
            t->reuse(pool);
        }
        zone->data = t;
        return NGX_OK;
    }
    if (zone->shm.exists) {   // Windows: the zone a master made before
        zone->data = pool->data;
        return NGX_OK;
    }
    T* t = T::create(*zone, pool, reinterpret_cast<std::uintptr_t>(zone->data));
    if (t == nullptr) return NGX_ERROR;
    pool->data = t;
    zone->data = t;
    return NGX_OK;
}

template <class T>
ngx_shm_zone_t* add_shm_zone_of(ngx_conf_t* cf, ngx_str_t* name, std::size_t size, std::uintptr_t arg = 0) {
    return shm_zone_add(cf, name, size, shm_zone_init<T>, arg);
}

// The zone's T; nullptr without the zone or before its init.
template <class T>
T* shm_zone_data(const ngx_shm_zone_t* zone) {
    if (zone == nullptr || zone->shm.addr == nullptr) return nullptr;
    return static_cast<T*>(zone->data);
}

// f(T&) or f(T&, ngx_slab_pool_t*) under the zone's lock; false (f not
// called) without the zone's T.
template <class T, class F>
bool with_shm_zone(const ngx_shm_zone_t* zone, F&& f) {
    T* t = shm_zone_data<T>(zone);
    if (t == nullptr) return false;
    ngx_slab_pool_t* pool = shm_zone_pool(zone);
    ShmLock lock(pool);
    if constexpr (std::is_invocable_v<F, T&, ngx_slab_pool_t*>) {
        std::forward<F>(f)(*t, pool);
    } else {
        std::forward<F>(f)(*t);
    }
    return true;
}

// A zone of count slots S (one per provider, in configuration order), made
// zeroed, each passed to reset (under the lock) when a reload keeps them:
// the zone's size follows count, so a kept zone has as many slots.
template <class S, void (*reset)(S&, ngx_slab_pool_t*)>
struct ShmSlots {
    std::size_t count;
    S slots[1];   // count of them

    static ShmSlots* create(ngx_shm_zone_t&, ngx_slab_pool_t* pool, std::uintptr_t count) {
        auto* z = static_cast<ShmSlots*>(ngx_slab_calloc(pool, bytes(count)));
        if (z == nullptr) return nullptr;
        z->count = count;
        for (std::size_t i = 0; i < count; ++i) reset(z->slots[i], pool);
        return z;
    }
    void reuse(ngx_slab_pool_t* pool) {
        for (std::size_t i = 0; i < count; ++i) reset(slots[i], pool);
    }
    static std::size_t bytes(std::size_t count) { return sizeof(ShmSlots) + sizeof(S) * (count ? count - 1 : 0); }
};

// f(S&) or f(S&, ngx_slab_pool_t*) on slot i of a ShmSlots zone Z, under
// the zone's lock; false without the zone or the slot.
template <class Z, class F>
bool with_shm_slot(const ngx_shm_zone_t* zone, std::size_t i, F&& f) {
    Z* z = shm_zone_data<Z>(zone);
    if (z == nullptr || i >= z->count) return false;
    return with_shm_zone<Z>(zone, [&](Z& zz, ngx_slab_pool_t* pool) {
        if constexpr (std::is_invocable_v<F, decltype(zz.slots[0]), ngx_slab_pool_t*>) {
            f(zz.slots[i], pool);
        } else {
            f(zz.slots[i]);
        }
    });
}

}  // namespace llmgw
