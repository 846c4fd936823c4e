// Target configuration: validation, access lists, sanitized URLs.
#include "core/targets/target.h"

namespace llmgw {

std::string_view target_kind_name(TargetKind k) { return k == TargetKind::Mcp ? "mcp" : "agent"; }

bool TargetConf::open_to(std::string_view group) const {
    if (!restricted) return true;
    for (const auto& g : groups) {
        if (g == group) return true;
    }
    return false;
}

namespace {

// [scheme://][userinfo@]host[:port][path][?query][#fragment] -> the offsets
// of the authority's start and the path's start.
void split_url(std::string_view url, std::size_t& authority, std::size_t& path) {
    std::size_t s = url.find("://");
    authority = s == std::string_view::npos ? 0 : s + 3;
    path = url.find_first_of("/?#", authority);
    if (path == std::string_view::npos) path = url.size();
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string TargetConf::url_path() const {
    if (url.empty()) return {};
    std::size_t authority = 0, path = 0;
    split_url(url, authority, path);
    std::string_view p = std::string_view(url).substr(path);
    p = p.substr(0, p.find_first_of("?#"));
    return std::string(p);
}

bool TargetConf::legacy_sse() const {
    std::string p = url.empty() ? location : url_path();
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return ends_with(p, "/sse");
}

std::string sanitize_url(std::string_view url) {
    std::size_t authority = 0, path = 0;
    split_url(url, authority, path);
    std::string out(url.substr(0, authority));
    std::string_view host = url.substr(authority, path - authority);
    if (std::size_t at = host.rfind('@'); at != std::string_view::npos) host.remove_prefix(at + 1);
    out.append(host);
    std::string_view rest = url.substr(path);
    out.append(rest.substr(0, rest.find_first_of("?#")));
    return out;
}

std::string TargetTable::add(TargetConf t) {
    const std::string what = t.kind == TargetKind::Mcp ? "llm_gateway_mcp_server" : "llm_gateway_agent";
    // The name is a path segment of the proxy routes: "." and ".." could never be reached.
    if (!GatewayConfig::valid_provider_name(t.name) || t.name == "." || t.name == "..") {
        return what + " name must match ^[A-Za-z0-9._-]+$ (and not be \".\" or \"..\")";
    }
    if (t.location.empty() || t.location[0] != '/') return what + " \"" + t.name + "\" needs location=/uri";
    while (t.location.size() > 1 && t.location.back() == '/') t.location.pop_back();
    if (t.location.find_first_of("?# \t") != std::string::npos) {
        return what + " \"" + t.name + "\" location= must be a plain path";
    }
    if (t.kind == TargetKind::Agent && (t.card_path.empty() || t.card_path[0] != '/' ||
                                        t.card_path.find_first_of("?# \t") != std::string::npos)) {
        return what + " \"" + t.name + "\" card= must be a path beginning with /";
    }
    if (!t.url.empty()) {
        const std::string_view u = t.url;
        if (u.rfind("http://", 0) != 0 && u.rfind("https://", 0) != 0) {
            return what + " \"" + t.name + "\" url= must begin with http:// or https://";
        }
    }
    if (find(t.kind, t.name) != nullptr) return what + " \"" + t.name + "\" is defined twice";
    t.upstream.name = t.name;
    t.upstream.location = t.location;
    t.upstream.where = t.where;
    targets_.push_back(std::move(t));
    return {};
}

const TargetConf* TargetTable::find(TargetKind kind, std::string_view name) const {
    for (const auto& t : targets_) {
        if (t.kind == kind && t.name == name) return &t;
    }
    return nullptr;
}

std::vector<std::size_t> TargetTable::federated_for(std::string_view group) const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < targets_.size(); ++i) {
        const TargetConf& t = targets_[i];
        if (t.kind == TargetKind::Mcp && !t.legacy_sse() && t.open_to(group)) out.push_back(i);
    }
    return out;
}

}  // namespace llmgw
