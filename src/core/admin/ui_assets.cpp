// The dashboard's files, embedded by the assembler (.incbin) from the folder
// LLMGW_UI_DIR names (set by the module's config and the Makefile), so the
// bytes served are the files kept in src/admin-ui/, unchanged.
#include "core/admin/ui_assets.h"

#include <array>
#include <string>

#include "core/config/digest.h"

#ifndef LLMGW_UI_DIR
#error "LLMGW_UI_DIR must name the folder of the dashboard's files (src/admin-ui); the module's config sets it"
#endif

// sym: the file's first byte; sym_end: one past its last. Hidden: the
// symbols stay inside the module.
#define LLMGW_EMBED(sym, file)                                                  \
    __asm__(".pushsection .rodata\n"                                            \
            ".global " #sym "\n.hidden " #sym "\n.balign 16\n" #sym ":\n"        \
            ".incbin \"" LLMGW_UI_DIR "/" file "\"\n"                           \
            ".global " #sym "_end\n.hidden " #sym "_end\n" #sym "_end:\n"        \
            ".byte 0\n.popsection\n");                                          \
    extern "C" __attribute__((visibility("hidden"))) const char sym[];          \
    extern "C" __attribute__((visibility("hidden"))) const char sym##_end[];

LLMGW_EMBED(llmgw_ui_index_html, "index.html")
LLMGW_EMBED(llmgw_ui_app_js, "app.js")
LLMGW_EMBED(llmgw_ui_app_css, "app.css")
LLMGW_EMBED(llmgw_ui_api_js, "api.js")
LLMGW_EMBED(llmgw_ui_format_js, "format.js")
LLMGW_EMBED(llmgw_ui_chart_js, "chart.js")
LLMGW_EMBED(llmgw_ui_table_js, "table.js")
LLMGW_EMBED(llmgw_ui_views_js, "views.js")
LLMGW_EMBED(llmgw_ui_icon_svg, "icon.svg")

namespace llmgw {
namespace {

constexpr std::string_view kJs = "text/javascript; charset=utf-8";
constexpr std::string_view kCss = "text/css; charset=utf-8";
constexpr std::string_view kHtml = "text/html; charset=utf-8";
constexpr std::string_view kSvg = "image/svg+xml";

struct Embedded {
    std::string_view name;
    std::string_view type;
    const char* begin;
    const char* end;
};

const Embedded kFiles[] = {
    {"app.js", kJs, llmgw_ui_app_js, llmgw_ui_app_js_end},
    {"app.css", kCss, llmgw_ui_app_css, llmgw_ui_app_css_end},
    {"api.js", kJs, llmgw_ui_api_js, llmgw_ui_api_js_end},
    {"format.js", kJs, llmgw_ui_format_js, llmgw_ui_format_js_end},
    {"chart.js", kJs, llmgw_ui_chart_js, llmgw_ui_chart_js_end},
    {"table.js", kJs, llmgw_ui_table_js, llmgw_ui_table_js_end},
    {"views.js", kJs, llmgw_ui_views_js, llmgw_ui_views_js_end},
    {"icon.svg", kSvg, llmgw_ui_icon_svg, llmgw_ui_icon_svg_end},
};
constexpr std::size_t kCount = sizeof(kFiles) / sizeof(kFiles[0]);

std::string etag_of(std::string_view body) {
    return "\"" + to_hex(sha256(body)).substr(0, 20) + "\"";
}

// Built once per process, on first use: bodies point into the module's
// read-only data; the ETags and the page's second form are kept here.
struct Table {
    std::array<std::string, kCount> etags;
    std::array<UiAsset, kCount> assets;
    std::string page_base_body;   // the page with <base href="admin/">
    std::string page_etag;
    std::string page_base_etag;
    UiAsset page;
    UiAsset page_base;

    Table() {
        for (std::size_t i = 0; i < kCount; ++i) {
            std::string_view body(kFiles[i].begin, static_cast<std::size_t>(kFiles[i].end - kFiles[i].begin));
            etags[i] = etag_of(body);
            assets[i] = UiAsset{kFiles[i].name, kFiles[i].type, body, etags[i]};
        }
        std::string_view html(llmgw_ui_index_html,
                              static_cast<std::size_t>(llmgw_ui_index_html_end - llmgw_ui_index_html));
        page_etag = etag_of(html);
        page = UiAsset{"index.html", kHtml, html, page_etag};
        // The base goes first in <head>, before any reference it must govern.
        page_base_body = std::string(html);
        const std::string head = "<head>";
        std::size_t at = page_base_body.find(head);
        if (at != std::string::npos) page_base_body.insert(at + head.size(), "<base href=\"admin/\">");
        page_base_etag = etag_of(page_base_body);
        page_base = UiAsset{"index.html", kHtml, page_base_body, page_base_etag};
    }
};

const Table& table() {
    static const Table t;
    return t;
}

}  // namespace

const UiAsset* find_ui_asset(std::string_view name) {
    for (const UiAsset& a : table().assets) {
        if (a.name == name) return &a;
    }
    return nullptr;
}

const UiAsset& ui_page(bool trailing_slash) { return trailing_slash ? table().page : table().page_base; }

}  // namespace llmgw
