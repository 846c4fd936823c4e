// The one place nginx's C headers are included.
#pragma once

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
}

// The module itself (module.cpp); its address tags the shared memory zone.
extern "C" ngx_module_t ngx_http_llm_gateway_module;
