// The dashboard: the page at <admin> and <admin>/ (no key: it asks for one)
// and the files it loads from <admin>/ui/<name>, all built into the module
// (core/admin/ui_assets). Each answer carries a strong ETag and is
// revalidated on every use (Cache-Control: no-cache), so nginx's
// not-modified filter answers a browser's If-None-Match with 304.
#include "core/admin/ui_assets.h"
#include "ngx/admin/admin_http.h"
#include "ngx/admin/handlers.h"
#include "ngx/http/respond.h"
#include "ngx/request/ctx.h"

namespace llmgw {
namespace {

// What the page may load: its own files, and its own JSON API; nothing
// inline, nothing evaluated, no other host, never framed.
constexpr std::string_view kPagePolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'self'; form-action 'none'; frame-ancestors 'none'";

ngx_int_t send_ui(ngx_http_request_t* r, const UiAsset& a) {
    if (add_header(r, "X-Content-Type-Options", "nosniff") != NGX_OK ||
        add_header(r, "Content-Security-Policy", kPagePolicy) != NGX_OK ||
        add_header(r, "Referrer-Policy", "no-referrer") != NGX_OK ||
        add_header(r, "Cache-Control", "no-cache") != NGX_OK || add_header(r, "ETag", a.etag) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    // The last header pushed is the ETag: nginx's not-modified filter reads it there.
    ngx_list_part_t* part = &r->headers_out.headers.part;
    while (part->next != nullptr) part = part->next;
    r->headers_out.etag = static_cast<ngx_table_elt_t*>(part->elts) + (part->nelts - 1);
    // The module's read-only data, never copied: it outlives every request.
    return send_whole(r, NGX_HTTP_OK, a.content_type, a.body, false);
}

}  // namespace

ngx_int_t admin_page(ngx_http_request_t* r, RequestCtx*) {
    bool slash = r->uri.len > 0 && r->uri.data[r->uri.len - 1] == '/';
    return send_ui(r, ui_page(slash));
}

ngx_int_t admin_ui_file(ngx_http_request_t* r, RequestCtx*) {
    std::string_view uri = sv(r->uri);
    const UiAsset* a = find_ui_asset(uri.substr(uri.rfind('/') + 1));
    if (a == nullptr) {
        return send_error(r, NGX_HTTP_NOT_FOUND, "Unknown request URL: " + std::string(uri), "invalid_request_error",
                          "unknown_url");
    }
    return send_ui(r, *a);
}

}  // namespace llmgw
