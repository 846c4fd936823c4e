#include "ngx/shm_zone.h"

namespace llmgw {

ngx_shm_zone_t* shm_zone_add(ngx_conf_t* cf, ngx_str_t* name, std::size_t size, ngx_shm_zone_init_pt init,
                             std::uintptr_t arg) {
    ngx_shm_zone_t* zone = ngx_shared_memory_add(cf, name, size, &ngx_http_llm_gateway_module);
    if (zone == nullptr) return nullptr;
    if (zone->init == init) return zone;   // declared twice: the first one's set-up stands
    zone->init = init;
    zone->data = reinterpret_cast<void*>(arg);
    return zone;
}

}  // namespace llmgw
