// The targets view.
#include "core/admin/targets_view.h"

#include <algorithm>

#include "core/json/writer.h"
#include "core/metering/keys.h"
#include "core/metering/windows.h"

namespace llmgw {

std::vector<const TargetConf*> targets_in_view_order(const std::vector<TargetConf>& all) {
    std::vector<const TargetConf*> out;
    for (const auto& t : all) out.push_back(&t);
    std::sort(out.begin(), out.end(), [](const TargetConf* a, const TargetConf* b) {
        std::string_view ka = target_kind_name(a->kind), kb = target_kind_name(b->kind);
        return ka != kb ? ka < kb : a->name < b->name;
    });
    return out;
}

void append_target_keys(const std::vector<const TargetConf*>& targets, std::time_t now, std::vector<std::string>& out) {
    for (const TargetConf* t : targets) {
        for (int w = 0; w < kWindowCount; ++w) {
            const Window win = static_cast<Window>(w);
            out.push_back(counter_key(target_kind_name(t->kind), t->name, "req", win, bucket(win, now)));
        }
    }
}

std::string render_targets(const std::vector<const TargetConf*>& targets, const std::vector<std::int64_t>& values) {
    JsonWriter w;
    w.begin_object().key("targets").begin_array();
    std::size_t i = 0;
    for (const TargetConf* t : targets) {
        w.begin_object();
        w.field("kind", target_kind_name(t->kind)).field("name", t->name);
        w.field("url", t->url.empty() ? t->location : sanitize_url(t->url));
        w.field("location", t->location);
        if (t->kind == TargetKind::Agent) w.field("card", t->card_path);
        if (t->kind == TargetKind::Mcp) w.field("federated", !t->legacy_sse());
        w.key("access");
        if (!t->restricted) {
            w.null();
        } else {
            w.begin_array();
            for (const auto& g : t->groups) w.str(g);
            w.end_array();
        }
        w.key("requests").begin_object();
        for (int win = 0; win < kWindowCount; ++win, ++i) {
            w.field(window_name(static_cast<Window>(win)), i < values.size() ? values[i] : 0);
        }
        w.end_object();
        w.end_object();
    }
    w.end_array().end_object();
    return w.take();
}

}  // namespace llmgw
