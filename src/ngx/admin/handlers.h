// The admin location's routes (ngx/phases/routes.cpp names them) and the
// metrics location's.
#pragma once
#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

// ui.cpp: the dashboard page and the files it loads.
ngx_int_t admin_page(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_ui_file(ngx_http_request_t* r, RequestCtx* ctx);
// admin.cpp: GET /admin/api/usage, /overview, /targets.
ngx_int_t admin_usage(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_overview(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_targets(ngx_http_request_t* r, RequestCtx* ctx);
// usage_reads.cpp: GET /admin/api/usage/history, /usage/models,
// /usage/series, /usage/totals, /performance.
ngx_int_t admin_history(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_ranking(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_series(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_totals(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_performance(ngx_http_request_t* r, RequestCtx* ctx);
// config_routes.cpp: GET /admin/api/catalog, /consumers, /config.
ngx_int_t admin_catalog(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_consumers(ngx_http_request_t* r, RequestCtx* ctx);
ngx_int_t admin_config(ngx_http_request_t* r, RequestCtx* ctx);
// events_route.cpp: GET /admin/api/events.
ngx_int_t admin_events(ngx_http_request_t* r, RequestCtx* ctx);
// metrics.cpp: the Prometheus text exposition.
ngx_int_t metrics_handler(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace llmgw
