// The catalog, consumers and configuration documents.
#include "core/admin/config_views.h"

#include "core/admin/limits_json.h"
#include "core/json/writer.h"

namespace llmgw {
namespace {

// USD per million tokens from the table's micro-USD per million.
double usd(std::int64_t micros_per_mtok) { return static_cast<double>(micros_per_mtok) / 1e6; }

const char* price_source(const Price* p) {
    if (p == nullptr) return "unpriced";
    if (p->free) return "free";
    return p->source == "config" ? "override" : "builtin";
}

void provider_access(JsonWriter& w, const ProviderConf& p) {
    w.key("groups");
    if (!p.restricted) {
        w.null();   // every group
        return;
    }
    w.begin_array();
    for (const auto& g : p.groups) w.str(g);
    w.end_array();
}

}  // namespace

std::string render_catalog(const GatewayConfig& cfg, const PriceTable& prices, bool allow_unpriced,
                           std::string_view builtin_date) {
    JsonWriter w;
    w.begin_object().field("builtinPricesChecked", builtin_date).field("allowUnpriced", allow_unpriced);
    w.key("models").begin_array();
    for (const auto& p : cfg.providers()) {
        for (const auto& m : p.models) {
            const Price* price = prices.find(p.name, provider_type_name(p.type), m);
            w.begin_object().field("id", p.name + "/" + m).field("provider", p.name);
            w.field("source", price_source(price));
            if (price != nullptr) {
                w.key("inputUsdPerMTok").real(usd(price->input_micros_per_mtok));
                w.key("outputUsdPerMTok").real(usd(price->output_micros_per_mtok));
                w.field("free", price->free);
            } else {
                w.key("inputUsdPerMTok").null().key("outputUsdPerMTok").null().field("free", false);
            }
            w.end_object();
        }
    }
    w.end_array().end_object();
    return w.take();
}

std::string render_consumers(const GatewayConfig& cfg, const Directory& dir) {
    JsonWriter w;
    w.begin_object().key("consumers").begin_array();
    for (const auto& u : dir.users()) {
        w.begin_object().field("user", u.name).field("group", u.group);
        w.field("keySource", u.key_source).field("admin", u.admin);
        w.field("definedIn", u.where);
        write_limits(w, &u.limits);
        const GroupConf* g = dir.find_group(u.group);
        write_limits(w, g ? &g->limits : nullptr, "groupLimits");
        w.key("providers").begin_array();
        for (const auto& p : cfg.providers()) {
            if (p.open_to(u.group)) w.str(p.name);
        }
        w.end_array().end_object();
    }
    w.end_array().end_object();
    return w.take();
}

std::string render_config(const GatewayConfig& cfg, const Directory& dir, const ConfigSettings& s) {
    JsonWriter w;
    w.begin_object();
    w.key("providers").begin_array();
    for (const auto& p : cfg.providers()) {
        w.begin_object().field("name", p.name).field("type", provider_type_name(p.type)).field("location", p.location);
        w.key("key");
        if (p.key.empty()) {
            w.null();
        } else {
            w.str(p.key_ref.empty() ? std::string("set") : p.key_ref);
        }
        w.key("models").begin_array();
        for (const auto& m : p.models) w.str(m);
        w.end_array();
        w.field("default", p.is_default).field("discoverSeconds", p.discover_ms / 1000);
        write_resilience(w, p.resilience.over(resilience_of(s)));
        provider_access(w, p);
        w.field("definedIn", p.where).end_object();
    }
    w.end_array();
    w.key("aliases").begin_array();
    for (const auto& a : cfg.aliases()) {
        w.begin_object().field("name", a.name).key("targets").begin_array().str(a.target);
        for (const auto& f : a.fallbacks) w.str(f);
        w.end_array().end_object();
    }
    w.end_array();
    w.key("groups").begin_array();
    for (const auto& g : dir.groups()) {
        w.begin_object().field("name", g.name);
        write_limits(w, &g.limits);
        w.end_object();
    }
    w.end_array();
    w.key("users").begin_array();
    for (const auto& u : dir.users()) {
        w.begin_object().field("name", u.name).field("group", u.group).field("admin", u.admin);
        w.field("keySource", u.key_source);
        write_limits(w, &u.limits);
        w.end_object();
    }
    w.end_array();
    w.key("settings").begin_object();
    w.field("replica", s.replica).field("instance", s.instance);
    w.key("store");
    if (s.store_url.empty()) {
        w.begin_object().field("type", "shm").end_object();
    } else {
        w.begin_object().field("type", "redis").field("url", s.store_url).field("failOpen", s.fail_open).end_object();
    }
    w.key("usersFile");
    if (s.users_file.empty()) {
        w.null();
    } else {
        w.str(s.users_file);
    }
    write_resilience(w, resilience_of(s));
    w.field("allowUnpriced", s.allow_unpriced).field("maxTokensPerRequest", s.max_tokens_per_request);
    w.end_object();
    w.end_object();
    return w.take();
}

Resilience resilience_of(const ConfigSettings& s) {
    Resilience r;
    r.retries = s.retries;
    r.backoff_base_ms = s.backoff_base_ms;
    r.backoff_max_ms = s.backoff_max_ms;
    r.breaker_failures = s.breaker_failures;
    r.breaker_open_ms = s.breaker_open_ms;
    return r;
}

void write_resilience(JsonWriter& w, const Resilience& r) {
    w.field("retries", r.retries).field("retryBackoffMs", r.backoff_base_ms).field("retryBackoffMaxMs", r.backoff_max_ms);
    w.key("breaker");
    if (r.breaker_failures <= 0) {
        w.null();
    } else {
        w.begin_object().field("failures", r.breaker_failures).field("openMs", r.breaker_open_ms).end_object();
    }
}

}  // namespace llmgw
