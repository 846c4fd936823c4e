// The gateway's configuration model: providers, groups, users, aliases; its
// cross-validation and the two lookups the request path needs (model
// resolution and key -> user). No nginx: the shell feeds it directive by
// directive and reports errors with the directive's file and line.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/config/digest.h"
#include "core/metering/limits.h"
#include "core/codec/provider_type.h"
#include "core/discovery/model_list.h"

namespace llmgw {

// A provider's retries, backoff and breaker (llm_gateway_provider's
// retries=, retry_backoff=, breaker=off, breaker_failures=, breaker_open=);
// -1: the http level's (llm_gateway_retries, llm_gateway_retry_backoff,
// llm_gateway_breaker).
struct Resilience {
    std::int64_t retries = -1;
    std::int64_t backoff_base_ms = -1, backoff_max_ms = -1;
    std::int64_t breaker_failures = -1;   // 0: off
    std::int64_t breaker_open_ms = -1;
    // Each value of this one that is set, the others from defaults.
    Resilience over(const Resilience& defaults) const {
        Resilience r = defaults;
        if (retries >= 0) r.retries = retries;
        if (backoff_base_ms >= 0) r.backoff_base_ms = backoff_base_ms;
        if (backoff_max_ms >= 0) r.backoff_max_ms = backoff_max_ms;
        if (breaker_failures >= 0) r.breaker_failures = breaker_failures;
        if (breaker_open_ms >= 0) r.breaker_open_ms = breaker_open_ms;
        return r;
    }
};

struct ProviderConf {
    std::string name;             // ^[A-Za-z0-9._-]+$, not "admin"
    ProviderType type = ProviderType::OpenAI;
    std::string location;         // internal location prefix, e.g. "/_llm/openai"
    std::string key;              // resolved credential ("" = none injected)
    std::string key_ref;          // how it was given (env:X, file:/p, literal)
    std::vector<std::string> models;
    bool is_default = false;
    std::int64_t discover_ms = 0; // discover=: refresh interval of its model list (0: no discovery)
    // discover_max_page=, discover_max_total=, discover_timeout=: what one
    // refresh may read, and how long it may take.
    WalkBounds discover_bounds;
    std::int64_t discover_timeout_ms = kDiscoveryTimeoutMs;
    std::vector<std::string> groups;   // groups=: the groups that may use it (restricted only)
    bool restricted = false;           // false: every group may
    std::string where;            // "file:line" of the directive
    Resilience resilience;        // its own; the effective values are resilience.over(the http level's)

    bool open_to(std::string_view group) const {
        if (!restricted) return true;
        for (const auto& g : groups) {
            if (g == group) return true;
        }
        return false;
    }
};

struct GroupConf {
    std::string name;
    Limits limits;
    std::string where;
    bool implicit = false;        // created because a user named it; a declaration replaces it
};

struct UserConf {
    std::string name;
    std::string group = "default";
    Digest key_digest{};
    std::string key_source;       // env:X / file:/p / literal / sha256 (never the key)
    bool admin = false;
    Limits limits;
    std::string where;            // "file:line" or "users file"
};

struct AliasConf {
    std::string name;
    std::string target;           // "<provider>/<model>"
    std::string where;
    std::vector<std::string> fallbacks;   // more "<provider>/<model>" targets, tried in order (failover)
};

// One place a model can be served: a provider and its own model id.
struct Target {
    const ProviderConf* provider = nullptr;
    std::string upstream_model;   // the provider's own model id
    std::string canonical;        // "<provider>/<model>"
};

struct Resolution : Target {
    // Every target in failover order; the first is the Target part itself.
    std::vector<Target> targets;
};

// Drops the targets whose provider the group may not use (groups=); the
// first one left becomes the Target part. false when none is left.
bool restrict_to_group(Resolution& r, std::string_view group);

// Users and groups as one immutable snapshot: the inline ones plus, when a
// users file is configured, the file's. Swapped whole on reload.
class Directory {
public:
    // Returns "" or a sentence saying what is wrong.
    std::string add_group(GroupConf g);
    std::string add_user(UserConf u);
    // Creates the groups users name without declaring them (no limits).
    void close();

    const UserConf* find_by_key(std::string_view presented_key) const;
    const UserConf* find_user(std::string_view name) const;
    const GroupConf* find_group(std::string_view name) const;
    const std::vector<UserConf>& users() const { return users_; }
    const std::vector<GroupConf>& groups() const { return groups_; }

private:
    std::vector<UserConf> users_;
    std::vector<GroupConf> groups_;
    std::unordered_map<std::string, std::size_t> by_digest_;   // raw digest bytes
    std::unordered_map<std::string, std::size_t> by_name_;
    std::unordered_map<std::string, std::size_t> group_by_name_;
};

class GatewayConfig {
public:
    std::string add_provider(ProviderConf p);
    std::string add_alias(AliasConf a);
    // An llm_gateway_price line's "<provider>/<model>", checked by finalize
    // (a price line may come before its provider's line).
    void add_price_ref(std::string canonical, std::string where);
    Directory& inline_directory() { return inline_; }
    const Directory& inline_directory() const { return inline_; }

    // Cross-checks once every directive is read: aliases name a configured
    // provider and never another alias, at most one default provider; price
    // lines name a configured provider.
    // Returns "" or a sentence naming the offending directive's file:line.
    std::string finalize();

    // Resolution rule (docs/models.md): an alias is rewritten to its target
    // (an alias with fallbacks gives them as further targets, in order);
    // "<provider>/<model>" with a configured provider name goes there; a bare
    // id goes to the first provider listing it in models=; otherwise to the
    // default provider (the one marked default, or the only provider).
    // Returns false with err set when no provider serves the model.
    bool resolve_model(std::string_view requested, Resolution& out, std::string& err) const;

    const std::vector<ProviderConf>& providers() const { return providers_; }
    const std::vector<AliasConf>& aliases() const { return aliases_; }
    const ProviderConf* find_provider(std::string_view name) const;

    static bool valid_provider_name(std::string_view name);

private:
    // The rules after the alias step, for one name.
    bool resolve_one(std::string_view model, std::string_view requested, Target& out, std::string& err) const;

    std::vector<ProviderConf> providers_;
    std::vector<AliasConf> aliases_;
    std::vector<AliasConf> price_refs_;   // name unused; target = canonical id
    std::unordered_map<std::string, std::size_t> alias_index_;
    std::unordered_map<std::string, std::size_t> model_index_;   // bare id -> provider
    const ProviderConf* default_provider_ = nullptr;
    Directory inline_;
};

}  // namespace llmgw
