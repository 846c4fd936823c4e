// The dashboard's files (src/admin-ui/), built into the module: the page and
// what it loads, each with its media type and a validator (ETag) derived
// from its bytes. Nothing here reads the disk at run time.
#pragma once
#include <string_view>

namespace llmgw {

struct UiAsset {
    std::string_view name;           // file name, as the page refers to it (app.js)
    std::string_view content_type;   // text/javascript; charset=utf-8 ...
    std::string_view body;
    std::string_view etag;           // "<hex>": strong, quoted, from the bytes
};

// A file the page loads from <admin>/ui/<name>; nullptr for any other name
// (index.html is the page itself, served at <admin> and <admin>/ only).
const UiAsset* find_ui_asset(std::string_view name);

// The page. Served at ".../admin/" its relative references resolve as they
// are; served at ".../admin" (no slash) it carries <base href="admin/"> so
// that they resolve under the same folder. Each form has its own ETag.
const UiAsset& ui_page(bool trailing_slash);

}  // namespace llmgw
