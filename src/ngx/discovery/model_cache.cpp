#include "ngx/discovery/model_cache.h"

#include <cstring>
#include <utility>

#include "ngx/call/health.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/shm_zone.h"

namespace llmgw {
namespace {

struct ModelSlot {
    std::int64_t fresh_until_ms;   // 0: never fetched
    std::int64_t claim_until_ms;   // a refresh runs until then
    std::uint32_t len;
    u_char* blob;                  // ids joined by '\n' (slab memory), len bytes
};

// Same size as before (a reload with as many providers and discovering
// ones): the slots are reused, emptied (the providers behind them may have
// changed).
void reset_slot(ModelSlot& s, ngx_slab_pool_t* shpool) {
    if (s.blob != nullptr) ngx_slab_free_locked(shpool, s.blob);
    s = ModelSlot{0, 0, 0, nullptr};
}

using ModelZone = ShmSlots<ModelSlot, reset_slot>;

template <class F>
bool with_slot(MainConf* mcf, std::size_t i, F&& f) {
    return mcf != nullptr && with_shm_slot<ModelZone>(mcf->models_zone, i, std::forward<F>(f));
}

}  // namespace

ngx_shm_zone_t* add_model_cache_zone(ngx_conf_t* cf, std::size_t providers, std::size_t discovering) {
    ngx_str_t name = ngx_string("llm_gateway_models");
    const std::size_t size = 8 * ngx_pagesize + providers * sizeof(ModelSlot) + discovering * (kModelCacheBytes + 4096);
    return add_shm_zone_of<ModelZone>(cf, &name, size, providers);
}

bool model_cache_claim(MainConf* mcf, std::size_t i) {
    bool claimed = false;
    const std::int64_t now = now_ms();
    with_slot(mcf, i, [&](ModelSlot& s, ngx_slab_pool_t*) {
        if (now < s.fresh_until_ms || now < s.claim_until_ms) return;
        s.claim_until_ms = now + 60000;
        claimed = true;
    });
    return claimed;
}

void model_cache_store(MainConf* mcf, std::size_t i, const std::vector<std::string>& ids, std::int64_t interval_ms) {
    std::string joined;
    for (const std::string& id : ids) {
        if (joined.size() + id.size() + 1 > kModelCacheBytes) break;
        if (!joined.empty()) joined += '\n';
        joined += id;
    }
    const std::int64_t now = now_ms();
    bool stored = false;
    with_slot(mcf, i, [&](ModelSlot& s, ngx_slab_pool_t* shpool) {
        u_char* blob = nullptr;
        if (!joined.empty()) {
            blob = static_cast<u_char*>(ngx_slab_alloc_locked(shpool, joined.size()));
            if (blob == nullptr) return;   // keeps the last good list
            std::memcpy(blob, joined.data(), joined.size());
        }
        if (s.blob != nullptr) ngx_slab_free_locked(shpool, s.blob);
        s.blob = blob;
        s.len = static_cast<std::uint32_t>(joined.size());
        s.fresh_until_ms = now + interval_ms;
        s.claim_until_ms = 0;
        stored = true;
    });
    if (!stored) model_cache_fail(mcf, i, interval_ms);
}

void model_cache_fail(MainConf* mcf, std::size_t i, std::int64_t interval_ms) {
    const std::int64_t now = now_ms();
    with_slot(mcf, i, [&](ModelSlot& s, ngx_slab_pool_t*) {
        s.fresh_until_ms = now + (interval_ms < 60000 ? interval_ms : 60000);
        s.claim_until_ms = 0;
    });
}

std::vector<std::string> model_cache_read(MainConf* mcf, std::size_t i) {
    std::string joined;
    with_slot(mcf, i, [&](ModelSlot& s, ngx_slab_pool_t*) {
        if (s.blob != nullptr) joined.assign(reinterpret_cast<const char*>(s.blob), s.len);
    });
    std::vector<std::string> ids;
    std::size_t start = 0;
    while (start < joined.size()) {
        std::size_t nl = joined.find('\n', start);
        if (nl == std::string::npos) nl = joined.size();
        ids.emplace_back(joined, start, nl - start);
        start = nl + 1;
    }
    return ids;
}

}  // namespace llmgw
