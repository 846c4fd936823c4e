// The route table.
#include "ngx/http/routes.h"

#include "core/http/route_match.h"
#include "ngx/module.h"

namespace llmgw {
namespace {

constexpr ngx_uint_t kGetHead = NGX_HTTP_GET | NGX_HTTP_HEAD;

const RouteRow kRoutes[] = {
    // mode        suffixes                 methods         allow        auth   body            name                   event route         codec                        metered handler
    {kModeApi,   {"/chat/completions"},   NGX_HTTP_POST,  "POST",      true,  BodyRule::Json, "chat/completions",   "chat/completions", CodecKind::OpenAIChat,       true,  start_provider_call},
    {kModeApi,   {"/messages"},           NGX_HTTP_POST,  "POST",      true,  BodyRule::Json, "messages",           "messages",         CodecKind::AnthropicMessages, true, start_provider_call},
    {kModeApi,   {"/embeddings"},         NGX_HTTP_POST,  "POST",      true,  BodyRule::Json, "embeddings",         "embeddings",       CodecKind::OpenAIEmbeddings, true,  start_provider_call},
    {kModeApi,   {"/models"},             kGetHead,       "GET, HEAD", true,  BodyRule::None, "models",             nullptr,            CodecKind::None,             false, models_handler},
    {kModeAdmin, {"/admin", "/admin/"},   kGetHead,       "GET, HEAD", false, BodyRule::None, "admin",              nullptr,            CodecKind::None,             false, admin_shell},
    {kModeAdmin, {"/admin/api/usage"},    kGetHead,       "GET, HEAD", true,  BodyRule::None, "admin/api/usage",    nullptr,            CodecKind::None,             true,  admin_usage},
    {kModeAdmin, {"/admin/api/overview"}, kGetHead,       "GET, HEAD", true,  BodyRule::None, "admin/api/overview", nullptr,            CodecKind::None,             true,  admin_overview},
};

}  // namespace

const RouteRow* find_route(ngx_uint_t mode, std::string_view path) {
    return match_route(kRoutes, static_cast<unsigned>(mode), path);
}

}  // namespace llmgw
