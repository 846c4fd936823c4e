// Agent card URLs rewritten to the gateway's own path.
#include "core/targets/agent_card.h"

#include <cctype>

#include "core/json/text_checks.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace llmgw {
namespace {

namespace rj = rapidjson;
bool absolute_http(std::string_view url) {
    return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
}

bool rewrite_member(rj::Value& obj, rj::Document::AllocatorType& a, std::string_view target_path,
                    std::string_view base, std::string& err) {
    auto it = obj.FindMember("url");
    if (it == obj.MemberEnd()) return true;
    if (!it->value.IsString() || !absolute_http(std::string_view(it->value.GetString(), it->value.GetStringLength()))) {
        err = "the agent card has a url that is not an absolute http(s) URL";
        return false;
    }
    std::string u = gateway_url(std::string_view(it->value.GetString(), it->value.GetStringLength()), target_path, base);
    it->value.SetString(u.data(), static_cast<rj::SizeType>(u.size()), a);
    return true;
}

}  // namespace

std::string gateway_url(std::string_view url, std::string_view target_path, std::string_view base) {
    std::size_t scheme = url.find("://");
    std::size_t path_at = scheme == std::string_view::npos ? 0 : url.find_first_of("/?#", scheme + 3);
    std::string_view rest = path_at == std::string_view::npos ? std::string_view() : url.substr(path_at);
    rest = rest.substr(0, rest.find('#'));
    std::string_view path = rest.substr(0, rest.find('?'));
    std::string_view query = rest.substr(path.size());
    while (!target_path.empty() && target_path.back() == '/') target_path.remove_suffix(1);
    if (!target_path.empty() && path.rfind(target_path, 0) == 0 &&
        (path.size() == target_path.size() || path[target_path.size()] == '/')) {
        path.remove_prefix(target_path.size());
    }
    std::string out(base);
    while (!out.empty() && out.back() == '/') out.pop_back();
    if (path.empty() || path == "/") {
        out += '/';
    } else {
        out.append(path);
    }
    out.append(query);
    return out;
}

bool rewrite_agent_card(std::string_view card, std::string_view target_path, std::string_view base, std::string& out,
                        std::string& err) {
    if (card.size() > kMaxAgentCardBytes) {
        err = "the agent card is larger than 1 MiB";
        return false;
    }
    rj::Document doc;
    doc.Parse<rj::kParseValidateEncodingFlag | rj::kParseIterativeFlag>(card.data(), card.size());
    if (doc.HasParseError() || !doc.IsObject()) {
        err = "the agent card is not a JSON object";
        return false;
    }
    // Written back below: a card nesting deeper than an agent card ever does is refused.
    if (!json_text_depth_at_most(card, 64)) {
        err = "the agent card nests deeper than 64 levels";
        return false;
    }
    auto& a = doc.GetAllocator();
    if (!rewrite_member(doc, a, target_path, base, err)) return false;
    // A2A 0.3 lists further transports in additionalInterfaces; 1.0 lists
    // every endpoint in supportedInterfaces (and has no top-level url).
    for (const char* list : {"additionalInterfaces", "supportedInterfaces"}) {
        auto extra = doc.FindMember(list);
        if (extra == doc.MemberEnd() || !extra->value.IsArray()) continue;
        for (rj::Value& iface : extra->value.GetArray()) {
            if (iface.IsObject() && !rewrite_member(iface, a, target_path, base, err)) return false;
        }
    }
    rj::StringBuffer buf;
    rj::Writer<rj::StringBuffer> w(buf);
    doc.Accept(w);
    out.assign(buf.GetString(), buf.GetSize());
    return true;
}

bool public_base(std::string_view url, std::string& out, std::string& err) {
    constexpr std::size_t kMax = 2048;
    if (url.size() > kMax) {
        err = "the public URL is longer than 2048 bytes";
        return false;
    }
    std::string_view rest;
    if (url.substr(0, 7) == "http://") {
        rest = url.substr(7);
    } else if (url.substr(0, 8) == "https://") {
        rest = url.substr(8);
    } else {
        err = "the public URL must start with http:// or https://";
        return false;
    }
    const std::size_t slash = rest.find('/');
    const std::string_view host = rest.substr(0, slash);
    const std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    auto host_ok = [](std::string_view h) {
        if (h.empty()) return false;
        std::string_view name = h, port;
        if (h.front() == '[') {
            const std::size_t close = h.find(']');
            if (close == std::string_view::npos || close < 2) return false;
            for (char c : h.substr(1, close - 1)) {
                if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) return false;
            }
            const std::string_view after = h.substr(close + 1);
            if (!after.empty() && after.front() != ':') return false;
            port = after.empty() ? after : after.substr(1);
            name = {};
        } else {
            const std::size_t colon = h.find(':');
            if (colon != std::string_view::npos) {
                port = h.substr(colon + 1);
                name = h.substr(0, colon);
                if (port.empty()) return false;
            }
            if (name.empty()) return false;
            for (char c : name) {
                if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) return false;
            }
        }
        if (port.size() > 5) return false;
        for (char c : port) {
            if (c < '0' || c > '9') return false;
        }
        return true;
    };
    if (!host_ok(host)) {
        err = "the public URL has no valid host (a name, an address or [IPv6], with an optional :port)";
        return false;
    }
    for (char c : path) {
        const unsigned char u = static_cast<unsigned char>(c);
        if (u <= 0x20 || u >= 0x7f || c == '?' || c == '#' || c == '"' || c == '<' || c == '>' || c == '\\' ||
            c == '^' || c == '`' || c == '{' || c == '|' || c == '}') {
            err = "the public URL's path may not hold a query, a fragment, a space or that byte";
            return false;
        }
    }
    std::string_view base = url;
    while (!base.empty() && base.back() == '/' && base.size() > url.size() - path.size()) base.remove_suffix(1);
    out.assign(base);
    return true;
}

}  // namespace llmgw
