// The dashboard's files as built into the module (core/admin/ui_assets):
// every file of src/admin-ui is there byte for byte, with its type and a
// validator, and the page keeps to its Content-Security-Policy (nothing
// inline, nothing evaluated, nothing from another host).
#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/admin/ui_assets.h"

namespace llmgw {
namespace {

std::set<std::string> files_on_disk() {
    std::set<std::string> out;
    DIR* d = opendir(LLMGW_UI_DIR);
    if (d == nullptr) return out;
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out.insert(n);
    }
    closedir(d);
    return out;
}

std::string read(const std::string& name) {
    std::ifstream in(std::string(LLMGW_UI_DIR) + "/" + name, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(UiAssets, EveryFileIsBuiltInUnchanged) {
    std::set<std::string> names = files_on_disk();
    ASSERT_GE(names.size(), 9u);
    for (const std::string& n : names) {
        SCOPED_TRACE(n);
        if (n == "index.html") {
            EXPECT_EQ(ui_page(true).body, read(n));
            continue;
        }
        const UiAsset* a = find_ui_asset(n);
        ASSERT_NE(a, nullptr) << "a file of src/admin-ui is not in ui_assets.cpp's list";
        EXPECT_EQ(a->body, read(n));
        EXPECT_EQ(a->name, n);
    }
}

TEST(UiAssets, TypesAndValidators) {
    EXPECT_EQ(find_ui_asset("app.js")->content_type, "text/javascript; charset=utf-8");
    EXPECT_EQ(find_ui_asset("app.css")->content_type, "text/css; charset=utf-8");
    EXPECT_EQ(find_ui_asset("icon.svg")->content_type, "image/svg+xml");
    EXPECT_EQ(ui_page(true).content_type, "text/html; charset=utf-8");
    std::regex etag("\"[0-9a-f]{20}\"");
    std::set<std::string_view> seen;
    for (const char* n : {"app.js", "app.css", "api.js", "format.js", "chart.js", "table.js", "views.js", "icon.svg"}) {
        const UiAsset* a = find_ui_asset(n);
        ASSERT_NE(a, nullptr) << n;
        EXPECT_TRUE(std::regex_match(std::string(a->etag), etag)) << a->etag;
        EXPECT_TRUE(seen.insert(a->etag).second) << "two files share an ETag: " << n;
    }
    EXPECT_NE(ui_page(true).etag, ui_page(false).etag);
    EXPECT_EQ(find_ui_asset("app.js"), find_ui_asset("app.js"));   // built once
}

TEST(UiAssets, OnlyItsOwnNames) {
    for (const char* n : {"", "index.html", "../app.js", "app.js/", "APP.JS", "app", "app.js.map", "x.js", "%2e%2e"}) {
        EXPECT_EQ(find_ui_asset(n), nullptr) << n;
    }
}

TEST(UiAssets, ThePageWithoutTheSlashGetsABase) {
    std::string_view with = ui_page(true).body;
    std::string_view without = ui_page(false).body;
    EXPECT_EQ(with.find("<base"), std::string_view::npos);
    std::size_t head = without.find("<head>");
    ASSERT_NE(head, std::string_view::npos);
    EXPECT_EQ(without.substr(head, 27), "<head><base href=\"admin/\">\n");
    EXPECT_EQ(without.size(), with.size() + std::string_view("<base href=\"admin/\">").size());
}

TEST(UiAssets, ThePageKeepsToItsPolicy) {
    std::string html(ui_page(true).body);
    // Every script is a file of its own; no inline style, no handler attribute.
    std::smatch m;
    std::regex script("<script([^>]*)>([^<]*)</script>");
    int scripts = 0;
    for (auto it = std::sregex_iterator(html.begin(), html.end(), script); it != std::sregex_iterator(); ++it) {
        ++scripts;
        EXPECT_NE((*it)[1].str().find("src=\"ui/"), std::string::npos) << (*it)[0];
        EXPECT_EQ((*it)[2].str(), "");
    }
    EXPECT_EQ(scripts, 1);
    EXPECT_FALSE(std::regex_search(html, std::regex("<style", std::regex::icase)));
    EXPECT_FALSE(std::regex_search(html, std::regex("\\sstyle\\s*=", std::regex::icase)));
    EXPECT_FALSE(std::regex_search(html, std::regex("\\son[a-z]+\\s*=", std::regex::icase)));
    // Nothing from another host, in the page or in any file it loads.
    for (const char* n : {"app.js", "app.css", "api.js", "format.js", "chart.js", "table.js", "views.js"}) {
        std::string body(find_ui_asset(n)->body);
        SCOPED_TRACE(n);
        // The SVG namespace is a name, not an address.
        body = std::regex_replace(body, std::regex("'http://www\\.w3\\.org/2000/svg'"), "''");
        EXPECT_FALSE(std::regex_search(body, std::regex("https?://")));
        EXPECT_FALSE(std::regex_search(body, std::regex("\\beval\\s*\\(|new Function|innerHTML|outerHTML|"
                                                        "insertAdjacentHTML|document\\.write|setAttribute\\('style'")));
        EXPECT_FALSE(std::regex_search(body, std::regex("localStorage\\s*[.\\[]"))) << "the key is never kept beyond the tab";
        EXPECT_EQ(body.find("@import"), std::string::npos);
    }
    EXPECT_FALSE(std::regex_search(html, std::regex("https?://")));
    EXPECT_NE(std::string(find_ui_asset("api.js")->body).find("sessionStorage"), std::string::npos);
}

}  // namespace
}  // namespace llmgw
