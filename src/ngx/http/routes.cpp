// The route table.
#include "ngx/http/routes.h"

#include "core/http/route_match.h"
#include "ngx/module.h"

namespace llmgw {
namespace {

constexpr ngx_uint_t kGetHead = NGX_HTTP_GET | NGX_HTTP_HEAD;

const RouteRow kRoutes[] = {
    // id                    mode        suffixes                 methods         allow        auth   body            name                   event route         codec                        metered handler
    {Route::ChatCompletions, kModeApi,   {"/chat/completions"},   NGX_HTTP_POST,  "POST",      true,  BodyRule::Json, "chat/completions",   "chat/completions", CodecKind::OpenAIChat,       true,  start_provider_call},
    {Route::Embeddings,      kModeApi,   {"/embeddings"},         NGX_HTTP_POST,  "POST",      true,  BodyRule::Json, "embeddings",         "embeddings",       CodecKind::OpenAIEmbeddings, true,  start_provider_call},
    {Route::Models,          kModeApi,   {"/models"},             kGetHead,       "GET, HEAD", true,  BodyRule::None, "models",             nullptr,            CodecKind::None,             false, models_handler},
    {Route::AdminShell,      kModeAdmin, {"/admin", "/admin/"},   kGetHead,       "GET, HEAD", false, BodyRule::None, "admin",              nullptr,            CodecKind::None,             false, admin_shell},
    {Route::AdminUsage,      kModeAdmin, {"/admin/api/usage"},    kGetHead,       "GET, HEAD", true,  BodyRule::None, "admin/api/usage",    nullptr,            CodecKind::None,             true,  admin_usage},
    {Route::AdminOverview,   kModeAdmin, {"/admin/api/overview"}, kGetHead,       "GET, HEAD", true,  BodyRule::None, "admin/api/overview", nullptr,            CodecKind::None,             true,  admin_overview},
};

}  // namespace

const RouteRow* find_route(ngx_uint_t mode, std::string_view path) {
    return match_route(kRoutes, static_cast<unsigned>(mode), path);
}

const RouteRow* route_row(Route id) {
    for (const RouteRow& row : kRoutes) {
        if (row.id == id) return &row;
    }
    return nullptr;
}

const char* route_name(Route id) {
    const RouteRow* row = route_row(id);
    return row ? row->name : "unknown";
}

}  // namespace llmgw
