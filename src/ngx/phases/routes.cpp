// The route table.
#include "ngx/phases/routes.h"

#include "ngx/admin/handlers.h"
#include "ngx/call/relay.h"
#include "ngx/discovery/models.h"
#include "ngx/main_conf.h"
#include "ngx/mcp/endpoint.h"
#include "ngx/ngx_incl.h"
#include "ngx/request/route.h"
#include "ngx/targets/target_proxy.h"

#include "core/http/route_match.h"

namespace llmgw {
namespace {

constexpr ngx_uint_t kGetHead = NGX_HTTP_GET | NGX_HTTP_HEAD;
constexpr ngx_uint_t kAnyMethod = NGX_HTTP_GET | NGX_HTTP_HEAD | NGX_HTTP_POST | NGX_HTTP_PUT | NGX_HTTP_DELETE |
                                  NGX_HTTP_PATCH | NGX_HTTP_OPTIONS;
constexpr const char* kAnyAllow = "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS";

const RouteRow kRoutes[] = {
    // mode           suffixes                    methods         allow        auth   body                 name                    event route             codec                          metered tally          handler
    {kModeApi,        {"/chat/completions"},      NGX_HTTP_POST,  "POST",      true,  BodyRule::Json,      "chat/completions",     "chat/completions",     CodecKind::OpenAIChat,          true,  Tally::Tokens,   start_provider_call},
    {kModeApi,        {"/messages"},              NGX_HTTP_POST,  "POST",      true,  BodyRule::Json,      "messages",             "messages",             CodecKind::AnthropicMessages,   true,  Tally::Tokens,   start_provider_call},
    {kModeApi,        {"/responses"},             NGX_HTTP_POST,  "POST",      true,  BodyRule::Json,      "responses",            "responses",            CodecKind::OpenAIResponses,     true,  Tally::Tokens,   start_provider_call},
    {kModeApi,        {"/embeddings"},            NGX_HTTP_POST,  "POST",      true,  BodyRule::Json,      "embeddings",           "embeddings",           CodecKind::OpenAIEmbeddings,    true,  Tally::Tokens,   start_provider_call},
    {kModeApi,        {"/images/generations"},    NGX_HTTP_POST,  "POST",      true,  BodyRule::Json,      "images/generations",   "images",               CodecKind::OpenAIImages,        true,  Tally::Requests, start_provider_call},
    {kModeApi,        {"/audio/speech"},          NGX_HTTP_POST,  "POST",      true,  BodyRule::Json,      "audio/speech",         "audio/speech",         CodecKind::OpenAISpeech,        true,  Tally::Requests, start_provider_call},
    {kModeApi,        {"/audio/transcriptions"},  NGX_HTTP_POST,  "POST",      true,  BodyRule::Multipart, "audio/transcriptions", "audio/transcriptions", CodecKind::OpenAITranscription, true,  Tally::Requests, start_provider_call},
    {kModeApi,        {"/models"},                kGetHead,       "GET, HEAD", true,  BodyRule::None,      "models",               nullptr,                CodecKind::None,                false, Tally::None,     models_handler},
    {kModePassthrough, {},                        kAnyMethod,     kAnyAllow,   true,  BodyRule::Raw,       "passthrough",          "passthrough",          CodecKind::Passthrough,         true,  Tally::Sniffed,  start_provider_call},
    {kModeMcp,        {},                         NGX_HTTP_POST,  "POST",      true,  BodyRule::Rpc,       "mcp",                  "mcp-federated",        CodecKind::None,                false, Tally::None,     mcp_handler},
    {kModeMcpProxy,   {},                         kAnyMethod,     kAnyAllow,   true,  BodyRule::Raw,       "mcp proxy",            "mcp",                  CodecKind::Relay,               false, Tally::None,     start_target_call},
    {kModeAgentProxy, {},                         kAnyMethod,     kAnyAllow,   true,  BodyRule::Raw,       "a2a proxy",            "a2a",                  CodecKind::Relay,               false, Tally::None,     start_target_call},
    {kModeMetrics,    {},                         kGetHead,       "GET, HEAD", true,  BodyRule::None,      "metrics",              nullptr,                CodecKind::None,                false, Tally::None,     metrics_handler},
    {kModeAdmin,      {"/admin", "/admin/"},      kGetHead,       "GET, HEAD", false, BodyRule::None,      "admin",                nullptr,                CodecKind::None,                false, Tally::None,     admin_page},
    {kModeAdmin,      {"/admin/ui/*"},            kGetHead,       "GET, HEAD", false, BodyRule::None,      "admin/ui",             nullptr,                CodecKind::None,                false, Tally::None,     admin_ui_file},
    {kModeAdmin,      {"/admin/api/usage"},       kGetHead,       "GET, HEAD", true,  BodyRule::None,      "admin/api/usage",      nullptr,                CodecKind::None,                true,  Tally::None,     admin_usage},
    {kModeAdmin,      {"/admin/api/overview"},    kGetHead,       "GET, HEAD", true,  BodyRule::None,      "admin/api/overview",   nullptr,                CodecKind::None,                true,  Tally::None,     admin_overview},
    {kModeAdmin,      {"/admin/api/usage/history"}, kGetHead,     "GET, HEAD", true,  BodyRule::None,      "admin/api/usage/history", nullptr,             CodecKind::None,                true,  Tally::None,     admin_history},
    {kModeAdmin,      {"/admin/api/usage/models"}, kGetHead,      "GET, HEAD", true,  BodyRule::None,      "admin/api/usage/models", nullptr,              CodecKind::None,                true,  Tally::None,     admin_ranking},
    {kModeAdmin,      {"/admin/api/usage/series"}, kGetHead,      "GET, HEAD", true,  BodyRule::None,      "admin/api/usage/series", nullptr,              CodecKind::None,                true,  Tally::None,     admin_series},
    {kModeAdmin,      {"/admin/api/usage/totals"}, kGetHead,      "GET, HEAD", true,  BodyRule::None,      "admin/api/usage/totals", nullptr,              CodecKind::None,                true,  Tally::None,     admin_totals},
    {kModeAdmin,      {"/admin/api/performance"}, kGetHead,       "GET, HEAD", true,  BodyRule::None,      "admin/api/performance", nullptr,               CodecKind::None,                true,  Tally::None,     admin_performance},
    {kModeAdmin,      {"/admin/api/targets"},     kGetHead,       "GET, HEAD", true,  BodyRule::None,      "admin/api/targets",    nullptr,                CodecKind::None,                true,  Tally::None,     admin_targets},
    {kModeAdmin,      {"/admin/api/catalog"},     kGetHead,       "GET, HEAD", true,  BodyRule::None,      "admin/api/catalog",    nullptr,                CodecKind::None,                true,  Tally::None,     admin_catalog},
    {kModeAdmin,      {"/admin/api/consumers"},   kGetHead,       "GET, HEAD", true,  BodyRule::None,      "admin/api/consumers",  nullptr,                CodecKind::None,                true,  Tally::None,     admin_consumers},
    {kModeAdmin,      {"/admin/api/config"},      kGetHead,       "GET, HEAD", true,  BodyRule::None,      "admin/api/config",     nullptr,                CodecKind::None,                true,  Tally::None,     admin_config},
    {kModeAdmin,      {"/admin/api/events"},      kGetHead,       "GET, HEAD", true,  BodyRule::None,      "admin/api/events",     nullptr,                CodecKind::None,                true,  Tally::None,     admin_events},
};

}  // namespace

const RouteRow* find_route(ngx_uint_t mode, std::string_view path) {
    return match_route(kRoutes, static_cast<unsigned>(mode), path);
}

}  // namespace llmgw
