#include "core/config/digest.h"

#include <exception>

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace llmgw {

namespace {

// Every request's key is hashed: the algorithm is fetched once and one
// context per thread is reused (OpenSSL 3 would otherwise look the
// algorithm up and allocate a context for each digest).
struct Sha256Ctx {
    EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Sha256Ctx() {
        EVP_MD_CTX_free(ctx);
        EVP_MD_free(md);
    }
};

}  // namespace

Digest sha256(std::string_view data) {
    Digest d{};
    unsigned int len = 0;
    thread_local Sha256Ctx s;
    // Only an allocation failure makes these fail; d then stays all zero.
    if (s.md == nullptr || s.ctx == nullptr || EVP_DigestInit_ex(s.ctx, s.md, nullptr) != 1 ||
        EVP_DigestUpdate(s.ctx, data.data(), data.size()) != 1 || EVP_DigestFinal_ex(s.ctx, d.data(), &len) != 1 ||
        len != d.size()) {
        d.fill(0);
    }
    return d;
}

std::string to_hex(const Digest& d) {
    static const char hex[] = "0123456789abcdef";
    char buf[64];
    for (std::size_t i = 0; i < d.size(); ++i) {
        buf[2 * i] = hex[d[i] >> 4];
        buf[2 * i + 1] = hex[d[i] & 15];
    }
    try {
        return std::string(buf, sizeof buf);
    } catch (const std::exception&) {  // out of memory
        return std::string();
    }
}

namespace {

int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

bool from_hex(std::string_view hex, Digest& out) {
    if (hex.size() != 2 * out.size()) return false;
    Digest d;
    for (std::size_t i = 0; i < d.size(); ++i) {
        const int hi = hex_val(hex[2 * i]), lo = hex_val(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        d[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    out = d;
    return true;
}

bool digest_equal(const Digest& a, const Digest& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace llmgw
