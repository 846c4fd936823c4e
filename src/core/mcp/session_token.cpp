// Sealed MCP session ids: AES-256-GCM (OpenSSL).
#include "core/mcp/session_token.h"

#include <memory>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "core/config/digest.h"

namespace llmgw {
namespace {

constexpr std::string_view kPrefix = "g1.";
constexpr std::string_view kAad = "g1";
constexpr std::size_t kNonce = 12, kTag = 16;
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

struct CtxFree {
    void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

const unsigned char* bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

std::string base64url_encode(std::string_view in) {
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                     static_cast<unsigned char>(in[i + 2]);
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += kAlphabet[v & 63];
    }
    if (i < in.size()) {
        unsigned v = static_cast<unsigned char>(in[i]) << 16;
        if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        if (i + 1 < in.size()) out += kAlphabet[(v >> 6) & 63];
    }
    return out;
}

bool base64url_decode(std::string_view in, std::string& out) {
    if (in.size() % 4 == 1) return false;
    out.clear();
    unsigned v = 0;
    int bits = 0;
    for (char c : in) {
        int d;
        if (c >= 'A' && c <= 'Z') d = c - 'A';
        else if (c >= 'a' && c <= 'z') d = c - 'a' + 26;
        else if (c >= '0' && c <= '9') d = c - '0' + 52;
        else if (c == '-') d = 62;
        else if (c == '_') d = 63;
        else return false;
        v = (v << 6) | static_cast<unsigned>(d);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((v >> bits) & 0xff);
        }
    }
    return true;
}

SessionSealer::SessionSealer(std::string_view secret) {
    Digest d = sha256(std::string("llm-gateway mcp session v1\n").append(secret));
    for (std::size_t i = 0; i < key_.size(); ++i) key_[i] = d[i];
}

std::string SessionSealer::seal(const McpSession& s) const {
    const std::string payload = "1\n" + std::to_string(s.issued) + "\n" + s.protocol + "\n" + s.user;
    std::string raw(kNonce + payload.size() + kTag, '\0');
    auto* p = reinterpret_cast<unsigned char*>(&raw[0]);
    if (RAND_bytes(p, static_cast<int>(kNonce)) != 1) return {};
    CipherCtx ctx(EVP_CIPHER_CTX_new());
    int n = 0;
    if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(kNonce), nullptr) != 1 ||
        EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, key_.data(), p) != 1 ||
        EVP_EncryptUpdate(ctx.get(), nullptr, &n, bytes(kAad), static_cast<int>(kAad.size())) != 1 ||
        EVP_EncryptUpdate(ctx.get(), p + kNonce, &n, bytes(payload), static_cast<int>(payload.size())) != 1 ||
        EVP_EncryptFinal_ex(ctx.get(), p + kNonce + n, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTag), p + kNonce + payload.size()) != 1) {
        return {};
    }
    std::string token = std::string(kPrefix) + base64url_encode(raw);
    return token.size() <= kMaxTokenBytes ? token : std::string();
}

bool SessionSealer::open(std::string_view token, McpSession& out) const {
    if (token.size() > kMaxTokenBytes || token.substr(0, kPrefix.size()) != kPrefix) return false;
    std::string raw;
    if (!base64url_decode(token.substr(kPrefix.size()), raw) || raw.size() < kNonce + kTag + 2) return false;
    const std::size_t len = raw.size() - kNonce - kTag;
    std::string payload(len, '\0');
    auto* p = reinterpret_cast<unsigned char*>(&raw[0]);
    auto* q = reinterpret_cast<unsigned char*>(&payload[0]);
    CipherCtx ctx(EVP_CIPHER_CTX_new());
    int n = 0;
    if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(kNonce), nullptr) != 1 ||
        EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, key_.data(), p) != 1 ||
        EVP_DecryptUpdate(ctx.get(), nullptr, &n, bytes(kAad), static_cast<int>(kAad.size())) != 1 ||
        EVP_DecryptUpdate(ctx.get(), q, &n, p + kNonce, static_cast<int>(len)) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTag), p + kNonce + len) != 1 ||
        EVP_DecryptFinal_ex(ctx.get(), q + n, &n) != 1) {
        return false;
    }
    // "1\n" issued "\n" protocol "\n" user
    std::string_view rest = payload;
    if (rest.substr(0, 2) != "1\n") return false;
    rest.remove_prefix(2);
    std::size_t a = rest.find('\n');
    if (a == std::string_view::npos || a == 0 || a > 19) return false;
    std::int64_t issued = 0;
    for (char c : rest.substr(0, a)) {
        if (c < '0' || c > '9') return false;
        issued = issued * 10 + (c - '0');
    }
    rest.remove_prefix(a + 1);
    std::size_t b = rest.find('\n');
    if (b == std::string_view::npos) return false;
    out.issued = issued;
    out.protocol.assign(rest.substr(0, b));
    out.user.assign(rest.substr(b + 1));
    return true;
}

}  // namespace llmgw
