// libFuzzer target: the paths and URLs the gateway builds or checks from
// what a caller or an operator wrote. The first byte picks the check:
//  0 a passthrough or per-target proxy URI: the name and path split off
//    (split_proxy_uri) and the path check (proxy_path_problem); an accepted
//    path goes through the passthrough codec with a query (build_request);
//  1 a query without its "key" parameter (strip_key_param);
//  2 a target's url=, location= and card= (TargetTable::add, url_path,
//    legacy_sse, sanitize_url);
//  3 percent-encoding (percent_encode) and a Gemini model path
//    (gemini_model_path).
// What must hold: no crash, no read past a bound; an accepted path begins
// with one '/', holds no control byte, '\', '?', '#', "://", ':' in its
// first segment, nor a "." or ".." segment, so it cannot leave the
// provider's base; what goes upstream is that path and the query without
// any key=; a sanitized URL keeps no userinfo, query or fragment; an
// encoded value holds only unreserved bytes and %XX and decodes back; a
// Gemini model stays one path segment.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>

#include "core/codec/codec.h"
#include "core/codec/gemini_wire.h"
#include "core/http/percent.h"
#include "core/http/proxy_path.h"
#include "core/targets/target.h"
#include "fuzz_util.h"

namespace llmgw {
std::string strip_key_param(std::string_view query);   // core/codec/codec_impl.h
}

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

bool unreserved(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}

bool hexdigit(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

// Only unreserved bytes (and '/' when kept) and %XX with uppercase hex.
void check_encoded(const std::string& e, bool keep_slash) {
    for (std::size_t i = 0; i < e.size(); ++i) {
        if (e[i] == '%') {
            FUZZ_CHECK(i + 2 < e.size() && hexdigit(e[i + 1]) && hexdigit(e[i + 2]));
            i += 2;
        } else {
            FUZZ_CHECK(unreserved(e[i]) || (keep_slash && e[i] == '/'));
        }
    }
}

bool has_key_param(std::string_view q) {
    while (true) {
        const std::size_t amp = q.find('&');
        const std::string_view p = q.substr(0, amp);
        if (p.substr(0, p.find('=')) == "key") return true;
        if (amp == std::string_view::npos) return false;
        q.remove_prefix(amp + 1);
    }
}

void check_proxy(FuzzedDataProvider& in) {
    const std::size_t prefix_len = in.ConsumeIntegralInRange<std::size_t>(0, 16);
    const std::string query = in.ConsumeRandomLengthString(256);
    const std::string uri = in.ConsumeRemainingBytesAsString();
    std::string_view name, path;
    split_proxy_uri(uri, prefix_len, name, path);
    FUZZ_CHECK(name.find('/') == std::string_view::npos);
    FUZZ_CHECK(path.empty() || path[0] == '/');
    if (!name.empty()) FUZZ_CHECK(name.data() >= uri.data() && name.data() + name.size() <= uri.data() + uri.size());
    if (!path.empty()) FUZZ_CHECK(path.data() >= uri.data() && path.data() + path.size() <= uri.data() + uri.size());
    if (*proxy_path_problem(path) != '\0') return;
    FUZZ_CHECK(!path.empty() && path[0] == '/' && (path.size() == 1 || path[1] != '/'));
    FUZZ_CHECK(!contains(path, "://"));
    for (char c : path) {
        const auto u = static_cast<unsigned char>(c);
        FUZZ_CHECK(u >= 0x20 && u != 0x7f && c != '\\' && c != '?' && c != '#');
    }
    const std::string_view first = path.substr(1, path.find('/', 1) == std::string_view::npos ? path.npos
                                                                                             : path.find('/', 1) - 1);
    FUZZ_CHECK(first.find(':') == std::string_view::npos);
    for (std::size_t i = 1; i <= path.size();) {   // no dot segment: resolving it changes nothing
        std::size_t j = path.find('/', i);
        if (j == std::string_view::npos) j = path.size();
        const std::string_view seg = path.substr(i, j - i);
        FUZZ_CHECK(seg != "." && seg != "..");
        i = j + 1;
    }

    // what the passthrough sends: this path, the query without key=
    CodecOptions opt;
    opt.provider = static_cast<ProviderType>(prefix_len % 3);
    auto codec = make_codec(CodecKind::Passthrough, opt);
    CallerRequest req;
    req.path = path;
    req.query = query;
    req.method = "GET";
    req.provider_key = "PROVIDERKEY";
    UpstreamRequest up;
    std::string err;
    FUZZ_CHECK(codec->build_request(req, up, err));
    FUZZ_CHECK(up.path.compare(0, path.size(), path) == 0);
    const std::string_view sent_query = std::string_view(up.path).substr(path.size());
    FUZZ_CHECK(sent_query.empty() || sent_query[0] == '?');
    if (!sent_query.empty()) FUZZ_CHECK(!has_key_param(sent_query.substr(1)));
    FUZZ_CHECK(up.caller_body && up.splice_len == 0 && up.body.empty());
}

void check_query(const std::string& q) {
    const std::string out = strip_key_param(q);
    FUZZ_CHECK(out.size() <= q.size());
    if (!out.empty()) FUZZ_CHECK(!has_key_param(out));
    FUZZ_CHECK(!contains(out, "&&") && (out.empty() || (out.front() != '&' && out.back() != '&')));
}

void check_target(FuzzedDataProvider& in) {
    TargetConf t;
    t.kind = in.ConsumeBool() ? TargetKind::Mcp : TargetKind::Agent;
    t.name = in.ConsumeRandomLengthString(32);
    t.location = in.ConsumeRandomLengthString(128);
    t.card_path = in.ConsumeRandomLengthString(128);
    t.url = in.ConsumeRemainingBytesAsString();
    const std::string url = t.url;
    (void)t.url_path();
    (void)t.legacy_sse();
    const std::string s = sanitize_url(url);
    FUZZ_CHECK(s.size() <= url.size());
    if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
        FUZZ_CHECK(s.find_first_of("?#") == std::string::npos);
        const std::size_t authority = url.find("://") + 3;
        const std::size_t end = s.find('/', authority);
        FUZZ_CHECK(s.substr(authority, end == std::string::npos ? std::string::npos : end - authority).find('@') ==
                   std::string::npos);
    }
    TargetTable table;
    if (!table.add(t).empty()) return;
    const TargetConf& got = table.all().front();
    FUZZ_CHECK(GatewayConfig::valid_provider_name(got.name) && got.name != "." && got.name != "..");
    FUZZ_CHECK(!got.location.empty() && got.location[0] == '/');
    FUZZ_CHECK(got.location.find_first_of("?# \t") == std::string::npos);
    FUZZ_CHECK(got.location.size() == 1 || got.location.back() != '/');
    FUZZ_CHECK(got.upstream.location == got.location && got.upstream.name == got.name);
    (void)got.url_path();
    (void)got.legacy_sse();
    FUZZ_CHECK(table.find(got.kind, got.name) == &got);
    FUZZ_CHECK(!table.add(t).empty());   // defined twice
}

void check_encoding(FuzzedDataProvider& in) {
    const bool keep_slash = in.ConsumeBool();
    const std::uint8_t action = in.ConsumeIntegral<std::uint8_t>();
    const std::string s = in.ConsumeRemainingBytesAsString();
    const std::string e = percent_encode(s, keep_slash);
    check_encoded(e, keep_slash);
    FUZZ_CHECK(percent_decode(e) == s);
    static const char* const kActions[] = {"generateContent", "streamGenerateContent?alt=sse", "embedContent",
                                           "batchEmbedContents", "other"};
    const std::string act = kActions[action % 5];
    const std::string p = gemini_model_path(s, act);
    if (p.empty()) return;
    const std::string prefix = "/v1beta/models/";
    FUZZ_CHECK(p.compare(0, prefix.size(), prefix) == 0 && act != "other");
    FUZZ_CHECK(p.size() >= prefix.size() + 1 + act.size() && p.compare(p.size() - act.size(), act.size(), act) == 0);
    const std::string seg = p.substr(prefix.size(), p.size() - prefix.size() - act.size() - 1);
    FUZZ_CHECK(p[prefix.size() + seg.size()] == ':');
    check_encoded(seg, false);
    FUZZ_CHECK(percent_decode(seg) == s);
    FUZZ_CHECK(seg != "." && seg != "..");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    FuzzedDataProvider in(data + 1, size - 1);
    switch (data[0] % 4) {
    case 0: check_proxy(in); break;
    case 1: check_query(in.ConsumeRemainingBytesAsString()); break;
    case 2: check_target(in); break;
    default: check_encoding(in); break;
    }
    return 0;
}
