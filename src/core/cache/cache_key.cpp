// The response cache's key: SHA-256 over the call's parts.
#include "core/cache/cache_key.h"

#include <openssl/evp.h>

#include <cstdint>
#include <memory>

namespace llmgw {
namespace {

struct CtxFree {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

void part(EVP_MD_CTX* c, std::string_view s) {
    std::uint8_t len[8];
    std::uint64_t n = s.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(n >> (8 * i));
    EVP_DigestUpdate(c, len, sizeof len);
    if (!s.empty()) EVP_DigestUpdate(c, s.data(), s.size());
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::string cache_key(const CacheKeyParts& p) {
    std::unique_ptr<EVP_MD_CTX, CtxFree> c(EVP_MD_CTX_new());
    if (!c || EVP_DigestInit_ex(c.get(), EVP_sha256(), nullptr) != 1) return std::string();
    part(c.get(), "llmgw-cache-1");
    part(c.get(), p.provider);
    part(c.get(), p.upstream_model);
    part(c.get(), p.method);
    part(c.get(), p.path);
    part(c.get(), p.scope);
    part(c.get(), std::to_string(p.headers.size()));
    for (const auto& [name, value] : p.headers) {
        std::string low(name);
        for (char& ch : low) ch = lower(ch);
        part(c.get(), low);
        part(c.get(), value);
    }
    std::uint64_t total = 0;
    for (std::string_view b : p.body) total += b.size();
    part(c.get(), std::to_string(total));
    for (std::string_view b : p.body) {
        if (!b.empty()) EVP_DigestUpdate(c.get(), b.data(), b.size());
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(c.get(), md, &n) != 1) return std::string();
    static const char hex[] = "0123456789abcdef";
    std::string out(2 * n, '0');
    for (unsigned i = 0; i < n; ++i) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    return out;
}

bool cache_keyed_header(std::string_view name) {
    static const std::string_view names[] = {"anthropic-beta", "anthropic-version", "openai-beta"};
    for (std::string_view n : names) {
        if (n.size() != name.size()) continue;
        bool same = true;
        for (std::size_t i = 0; i < n.size() && same; ++i) same = lower(name[i]) == n[i];
        if (same) return true;
    }
    return false;
}

}  // namespace llmgw
