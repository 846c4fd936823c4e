#include "core/config/gwconfig.h"

#include <algorithm>

namespace llmgw {

namespace {

std::string digest_key(const Digest& d) {
    return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

std::string quoted(std::string_view s) {
    std::string out = "\"";
    out.append(s);
    out += '"';
    return out;
}

}  // namespace

std::string Directory::add_group(GroupConf g) {
    if (g.name.empty()) return "group name must not be empty";
    auto it = group_by_name_.find(g.name);
    if (it != group_by_name_.end()) {
        if (!groups_[it->second].implicit) return "duplicate group " + quoted(g.name);
        groups_[it->second] = std::move(g);   // a users file may give limits to a group inline users name
        return "";
    }
    group_by_name_.emplace(g.name, groups_.size());
    groups_.push_back(std::move(g));
    return "";
}

std::string Directory::add_user(UserConf u) {
    if (u.name.empty()) return "user name must not be empty";
    if (u.group.empty()) return "group of user " + quoted(u.name) + " must not be empty";
    if (by_name_.count(u.name)) return "duplicate user " + quoted(u.name);
    std::string dk = digest_key(u.key_digest);
    auto it = by_digest_.find(dk);
    if (it != by_digest_.end()) {
        return "user " + quoted(u.name) + " has the same key as user " + quoted(users_[it->second].name);
    }
    by_digest_.emplace(std::move(dk), users_.size());
    by_name_.emplace(u.name, users_.size());
    users_.push_back(std::move(u));
    return "";
}

void Directory::close() {
    for (const auto& u : users_) {
        if (!group_by_name_.count(u.group)) {
            GroupConf g;
            g.name = u.group;
            g.where = u.where;
            g.implicit = true;
            group_by_name_.emplace(g.name, groups_.size());
            groups_.push_back(std::move(g));
        }
    }
}

const UserConf* Directory::find_by_key(std::string_view presented_key) const {
    if (presented_key.empty()) return nullptr;
    Digest d = sha256(presented_key);
    // The map is keyed by digest, so lookup time says nothing about the key;
    // the final comparison is constant time all the same.
    auto it = by_digest_.find(digest_key(d));
    if (it == by_digest_.end()) return nullptr;
    const UserConf& u = users_[it->second];
    return digest_equal(u.key_digest, d) ? &u : nullptr;
}

const UserConf* Directory::find_user(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &users_[it->second];
}

const GroupConf* Directory::find_group(std::string_view name) const {
    auto it = group_by_name_.find(std::string(name));
    return it == group_by_name_.end() ? nullptr : &groups_[it->second];
}

bool GatewayConfig::valid_provider_name(std::string_view name) {
    if (name.empty()) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-';
    });
}

std::string GatewayConfig::add_provider(ProviderConf p) {
    if (!valid_provider_name(p.name)) {
        return "invalid provider name " + quoted(p.name) + ": it must match ^[A-Za-z0-9._-]+$";
    }
    if (p.name == "admin") return "provider name \"admin\" is reserved";
    if (find_provider(p.name)) return "duplicate provider " + quoted(p.name);
    if (p.location.empty() || p.location[0] != '/') {
        return "provider " + quoted(p.name) + " needs location=/internal/prefix (an absolute URI)";
    }
    while (p.location.size() > 1 && p.location.back() == '/') p.location.pop_back();
    if (p.is_default) {
        for (const auto& q : providers_) {
            if (q.is_default) return "providers " + quoted(q.name) + " and " + quoted(p.name) + " are both marked default";
        }
    }
    providers_.push_back(std::move(p));
    return "";
}

std::string GatewayConfig::add_alias(AliasConf a) {
    if (a.name.empty()) return "alias name must not be empty";
    if (alias_index_.count(a.name)) return "duplicate alias " + quoted(a.name);
    alias_index_.emplace(a.name, aliases_.size());
    aliases_.push_back(std::move(a));
    return "";
}

const ProviderConf* GatewayConfig::find_provider(std::string_view name) const {
    for (const auto& p : providers_) {
        if (p.name == name) return &p;
    }
    return nullptr;
}

std::string GatewayConfig::finalize() {
    model_index_.clear();
    default_provider_ = nullptr;
    for (std::size_t i = 0; i < providers_.size(); ++i) {
        const auto& p = providers_[i];
        if (p.is_default) default_provider_ = &p;
        for (const auto& m : p.models) model_index_.emplace(m, i);   // first declared wins
    }
    if (!default_provider_ && providers_.size() == 1) default_provider_ = &providers_[0];

    for (const auto& a : aliases_) {
        std::vector<const std::string*> all{&a.target};
        for (const auto& f : a.fallbacks) all.push_back(&f);
        for (std::size_t i = 0; i < all.size(); ++i) {
            const std::string& t = *all[i];
            auto slash = t.find('/');
            if (alias_index_.count(t)) {
                return "alias " + quoted(a.name) + " points to another alias " + quoted(t) +
                       "; aliases must name <provider>/<model> in " + a.where;
            }
            if (slash == std::string::npos || slash == 0 || slash + 1 == t.size()) {
                return "alias " + quoted(a.name) + " target " + quoted(t) +
                       " is not of the form <provider>/<model> in " + a.where;
            }
            std::string_view prov = std::string_view(t).substr(0, slash);
            if (!find_provider(prov)) {
                return "alias " + quoted(a.name) + " names unknown provider " + quoted(prov) + " in " + a.where;
            }
            for (std::size_t j = 0; j < i; ++j) {
                if (*all[j] == t) return "alias " + quoted(a.name) + " names " + quoted(t) + " twice in " + a.where;
            }
        }
    }
    for (const auto& pr : price_refs_) {
        std::string_view prov = std::string_view(pr.target).substr(0, pr.target.find('/'));
        if (find_provider(prov) != nullptr) continue;
        // Price lines name a provider, never a type: "openai/gpt-4o" prices
        // the provider named "openai" only (the built-in table is by type).
        const ProviderConf* of_type = nullptr;
        for (const auto& p : providers_) {
            if (!of_type && provider_type_name(p.type) == prov) of_type = &p;
        }
        std::string hint = of_type ? "; price lines name a provider, not a type: write " +
                                         quoted(of_type->name + pr.target.substr(prov.size()))
                                   : std::string();
        return "llm_gateway_price " + quoted(pr.target) + " names unknown provider " + quoted(prov) + hint +
               " in " + pr.where;
    }
    inline_.close();
    return "";
}

void GatewayConfig::add_price_ref(std::string canonical, std::string where) {
    price_refs_.push_back(AliasConf{"", std::move(canonical), std::move(where), {}});
}

bool GatewayConfig::resolve_model(std::string_view requested, Resolution& out, std::string& err) const {
    out.targets.clear();
    auto ai = alias_index_.find(std::string(requested));
    if (ai != alias_index_.end()) {
        const AliasConf& a = aliases_[ai->second];
        if (!resolve_one(a.target, requested, out, err)) return false;
        out.targets.push_back(out);
        for (const auto& f : a.fallbacks) {
            Target t;
            if (resolve_one(f, requested, t, err)) out.targets.push_back(std::move(t));
        }
        return true;
    }
    if (!resolve_one(requested, requested, out, err)) return false;
    out.targets.push_back(out);
    return true;
}

bool restrict_to_group(Resolution& r, std::string_view group) {
    std::vector<Target> kept;
    for (Target& t : r.targets) {
        if (t.provider != nullptr && t.provider->open_to(group)) kept.push_back(std::move(t));
    }
    r.targets = std::move(kept);
    if (r.targets.empty()) return false;
    static_cast<Target&>(r) = r.targets.front();
    return true;
}

bool GatewayConfig::resolve_one(std::string_view model, std::string_view requested, Target& out,
                                std::string& err) const {
    auto slash = model.find('/');
    if (slash != std::string_view::npos && slash > 0 && slash + 1 < model.size()) {
        if (const ProviderConf* p = find_provider(model.substr(0, slash))) {
            out.provider = p;
            out.upstream_model = std::string(model.substr(slash + 1));
            out.canonical = std::string(model);
            return true;
        }
    }
    const ProviderConf* p = nullptr;
    auto mi = model_index_.find(std::string(model));
    if (mi != model_index_.end()) p = &providers_[mi->second];
    if (!p) p = default_provider_;
    if (!p) {
        err = "The model `" + std::string(requested) + "` does not exist or you do not have access to it.";
        return false;
    }
    out.provider = p;
    out.upstream_model = std::string(model);
    out.canonical = p->name + "/" + out.upstream_model;
    return true;
}

}  // namespace llmgw
