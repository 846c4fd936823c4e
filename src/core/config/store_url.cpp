// Store address parsing. Error messages name the part that is wrong but
// never quote the URL: a misplaced '@' or '?' can put the password where a
// host, port or parameter is expected, so nothing from the text is echoed.
#include "core/config/store_url.h"

#include <climits>
#include <utility>

#include "core/http/ascii.h"
#include "core/http/percent.h"

namespace llmgw {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c - 'A' + 10;
}

// %XX decoding; false on a bad escape or a NUL byte.
bool percent_decode(std::string_view in, std::string& out) {
    out.clear();
    for (std::size_t i = 0; i < in.size(); ++i) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= in.size()) return false;
            if (!is_hex(in[i + 1]) || !is_hex(in[i + 2])) return false;
            c = static_cast<char>(hex_value(in[i + 1]) * 16 + hex_value(in[i + 2]));
            i += 2;
        }
        if (c == '\0') return false;
        out.push_back(c);
    }
    return true;
}

// Decimal digits only, value in [lo, hi].
bool parse_uint(std::string_view s, long long lo, long long hi, long long& v) {
    if (s.empty() || s.size() > 18) return false;
    v = 0;
    for (char c : s) {
        if (!is_digit(c)) return false;
        v = v * 10 + (c - '0');
    }
    return v >= lo && v <= hi;
}

bool hostname_char(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-' || c == '_';
}

const char kDbRange[] = "the database must be a number from 0 to 2147483647";

struct Param {
    std::string_view name;
    std::string StoreUrl::*field;  // null: db / tls_verify
};

const Param kParams[] = {
    {"db", nullptr},
    {"tls_ca", &StoreUrl::ca_file},
    {"tls_cert", &StoreUrl::cert_file},
    {"tls_key", &StoreUrl::key_file},
    {"tls_sni", &StoreUrl::sni},
    {"tls_verify", nullptr},
};
constexpr std::size_t kParamCount = sizeof kParams / sizeof kParams[0];

bool parse_query(std::string_view q, StoreUrl& u, bool& db_given, std::string& err) {
    bool seen[kParamCount] = {};
    while (!q.empty()) {
        const std::size_t amp = q.find('&');
        const std::string_view item = q.substr(0, amp);
        q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
        if (item.empty()) continue;
        const std::size_t eq = item.find('=');
        const std::string_view name = item.substr(0, eq);
        std::size_t idx = kParamCount;
        for (std::size_t i = 0; i < kParamCount; ++i) {
            if (kParams[i].name == name) idx = i;
        }
        if (idx == kParamCount) {
            err = "the store URL has an unknown parameter (known: db, tls_ca, tls_cert, tls_key, tls_sni, tls_verify)";
            return false;
        }
        const std::string pname(kParams[idx].name);
        if (seen[idx]) {
            err = "the store URL gives the parameter " + pname + " twice";
            return false;
        }
        seen[idx] = true;
        std::string value;
        if (eq == std::string_view::npos || !percent_decode(item.substr(eq + 1), value)) {
            err = "the store URL parameter " + pname + " needs a value (percent-encoded, no NUL)";
            return false;
        }
        if (value.empty()) {
            err = "the store URL parameter " + pname + " has an empty value";
            return false;
        }
        if (pname == "db") {
            long long v = 0;
            if (!parse_uint(value, 0, INT_MAX, v)) {
                err = std::string("invalid db parameter in the store URL: ") + kDbRange;
                return false;
            }
            u.db = static_cast<int>(v);
            db_given = true;
        } else if (pname == "tls_verify") {
            if (value == "on") {
                u.verify = true;
            } else if (value == "off") {
                u.verify = false;
            } else {
                err = "the store URL parameter tls_verify must be on or off";
                return false;
            }
        } else {
            u.*(kParams[idx].field) = std::move(value);
        }
    }
    return true;
}

bool parse_impl(std::string_view text, StoreUrl& url, std::string& err) {
    StoreUrl u;
    const std::size_t sep = text.find("://");
    if (sep == std::string_view::npos) {
        err = "the store URL must begin with redis:// or rediss://";
        return false;
    }
    const std::string_view scheme = text.substr(0, sep);
    if (ascii_iequals(scheme, "redis")) {
        u.tls = false;
    } else if (ascii_iequals(scheme, "rediss")) {
        u.tls = true;
    } else {
        err = "the store URL must begin with redis:// or rediss://";
        return false;
    }
    std::string_view rest = text.substr(sep + 3);

    std::string_view query;
    const std::size_t qmark = rest.find('?');
    if (qmark != std::string_view::npos) {
        query = rest.substr(qmark + 1);
        rest = rest.substr(0, qmark);
        if (query.find('@') != std::string_view::npos) {
            err = "the store URL has '@' after '?': write '?' in a password as %3F and '@' in a parameter as %40";
            return false;
        }
    }

    // userinfo: up to the last '@' before the query
    const std::size_t at = rest.rfind('@');
    if (at != std::string_view::npos) {
        const std::string_view userinfo = rest.substr(0, at);
        rest = rest.substr(at + 1);
        const std::size_t colon = userinfo.find(':');
        if (!percent_decode(userinfo.substr(0, colon), u.user)) {
            err = "the store URL user has an invalid percent-encoding";
            return false;
        }
        if (colon != std::string_view::npos && !percent_decode(userinfo.substr(colon + 1), u.password)) {
            err = "the store URL password has an invalid percent-encoding";
            return false;
        }
    }

    // host
    std::string_view after;
    if (!rest.empty() && rest[0] == '[') {
        const std::size_t close = rest.find(']');
        if (close == std::string_view::npos) {
            err = "the store URL has an IPv6 address without its closing ']'";
            return false;
        }
        const std::string_view addr = rest.substr(1, close - 1);
        bool ok = !addr.empty() && addr.find(':') != std::string_view::npos;
        for (char c : addr) ok = ok && (is_hex(c) || c == ':' || c == '.');
        if (!ok) {
            err = "the store URL has an invalid IPv6 address in brackets";
            return false;
        }
        u.host = std::string(addr);
        after = rest.substr(close + 1);
        if (!after.empty() && after[0] != ':' && after[0] != '/') {
            err = "the store URL has unexpected text after the IPv6 address";
            return false;
        }
    } else {
        std::size_t end = 0;
        while (end < rest.size() && rest[end] != ':' && rest[end] != '/') ++end;
        const std::string_view host = rest.substr(0, end);
        after = rest.substr(end);
        const std::string_view port_part = after.substr(0, after.find('/'));
        if (!port_part.empty() && port_part.substr(1).find(':') != std::string_view::npos) {
            err = "the store URL host looks like an IPv6 address: write it in brackets, e.g. redis://[::1]:6379";
            return false;
        }
        if (host.empty()) {
            err = "the store URL has no host";
            return false;
        }
        for (char c : host) {
            if (!hostname_char(c)) {
                err = "the store URL has an invalid host name";
                return false;
            }
        }
        u.host = std::string(host);
    }

    // port
    if (!after.empty() && after[0] == ':') {
        const std::size_t slash = after.find('/');
        const std::string_view port = after.substr(1, slash == std::string_view::npos ? std::string_view::npos : slash - 1);
        long long v = 0;
        if (!parse_uint(port, 1, 65535, v)) {
            err = "the store URL has an invalid port: it must be a number from 1 to 65535";
            return false;
        }
        u.port = static_cast<int>(v);
        after = slash == std::string_view::npos ? std::string_view() : after.substr(slash);
    }

    // /db
    bool db_in_path = false;
    if (!after.empty()) {
        // after[0] == '/'
        const std::string_view db = after.substr(1);
        if (!db.empty()) {
            long long v = 0;
            if (!parse_uint(db, 0, INT_MAX, v)) {
                err = std::string("the store URL path must be the database number: ") + kDbRange;
                return false;
            }
            u.db = static_cast<int>(v);
            db_in_path = true;
        }
    }

    bool db_param = false;
    if (!parse_query(query, u, db_param, err)) return false;
    if (db_in_path && db_param) {
        err = "the store URL gives the database twice (in the path and as ?db=)";
        return false;
    }
    if (!u.tls && (!u.ca_file.empty() || !u.cert_file.empty() || !u.key_file.empty() || !u.sni.empty() || !u.verify)) {
        err = "the store URL has tls_* parameters but the redis:// scheme: use rediss:// for TLS";
        return false;
    }
    if (u.cert_file.empty() != u.key_file.empty()) {
        err = "the store URL parameters tls_cert and tls_key go together";
        return false;
    }
    url = std::move(u);
    return true;
}

}  // namespace

bool parse_store_url(std::string_view text, StoreUrl& url, std::string& err) {
    try {
        return parse_impl(text, url, err);
    } catch (...) {
        err = "out of memory parsing the store URL";
        return false;
    }
}

std::string redacted_store_url(const StoreUrl& url) {
    try {
        std::string out = url.tls ? "rediss://" : "redis://";
        if (!url.user.empty() || !url.password.empty()) {
            out += percent_encode(url.user, false);
            if (!url.password.empty()) out += ":[redacted]";
            out += '@';
        }
        if (url.host.find(':') != std::string::npos) {
            out += "[" + url.host + "]";
        } else {
            out += url.host;
        }
        out += ':' + std::to_string(url.port) + '/' + std::to_string(url.db);
        std::string q;
        auto add = [&q](const char* name, const std::string& v) {
            if (v.empty()) return;
            q += q.empty() ? '?' : '&';
            q += name;
            q += '=';
            q += percent_encode(v, true);
        };
        add("tls_ca", url.ca_file);
        add("tls_cert", url.cert_file);
        add("tls_key", url.key_file);
        add("tls_sni", url.sni);
        if (!url.verify) add("tls_verify", "off");
        return out + q;
    } catch (...) {
        return std::string();
    }
}

}  // namespace llmgw
