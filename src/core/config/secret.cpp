#include "core/config/secret.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace llmgw {

namespace {

constexpr std::size_t kMaxSecretFile = 64 * 1024;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool valid_env_name(std::string_view n) {
    if (n.empty()) return false;
    for (std::size_t i = 0; i < n.size(); ++i) {
        const char c = n[i];
        const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

SecretResult fail(std::string msg) {
    SecretResult r;
    r.error = std::move(msg);
    return r;
}

std::string quoted(std::string_view s) {
    std::string q;
    q.reserve(s.size() + 2);
    q.push_back('"');
    q.append(s);
    q.push_back('"');
    return q;
}

SecretResult from_env(std::string_view name, const GetEnv& getenv_fn) {
    // An invalid name is not echoed: it may well be a pasted secret.
    if (!valid_env_name(name)) return fail("secret reference \"env:...\" does not name a valid environment variable");
    const std::string n(name);
    const char* v = getenv_fn ? getenv_fn(n.c_str()) : ::getenv(n.c_str());
    if (v == nullptr) return fail("environment variable " + quoted(name) + " is not set");
    if (*v == '\0') return fail("environment variable " + quoted(name) + " is empty");
    SecretResult r;
    r.ok = true;
    r.value = v;
    return r;
}

SecretResult from_file(std::string_view path) {
    if (path.empty()) return fail("secret reference \"file:\" has no path");
    const std::string p(path);
    const std::string what = "secret file " + quoted(path);
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return fail(what + " cannot be read: " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        return fail(what + " cannot be read: " + std::strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        return fail(what + " is a directory");
    }
    // Read at most one byte past the limit (the size from fstat is not
    // trusted: pipes and /proc files report 0).
    std::string v(kMaxSecretFile + 1, '\0');
    std::size_t got = 0;
    while (got < v.size()) {
        const ssize_t n = ::read(fd, &v[got], v.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            ::close(fd);
            return fail(what + " cannot be read: " + std::strerror(e));
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (got > kMaxSecretFile) return fail(what + " is larger than 64 KiB");
    v.resize(got);
    if (!v.empty() && v.back() == '\n') {
        v.pop_back();
        if (!v.empty() && v.back() == '\r') v.pop_back();
    }
    if (v.empty()) return fail(what + " is empty");
    SecretResult r;
    r.ok = true;
    r.value = std::move(v);
    return r;
}

}  // namespace

SecretResult resolve_secret(std::string_view ref, const GetEnv& getenv_fn) {
    try {
        if (starts_with(ref, "env:")) return from_env(ref.substr(4), getenv_fn);
        if (starts_with(ref, "file:")) return from_file(ref.substr(5));
        std::string_view lit = starts_with(ref, "literal:") ? ref.substr(8) : ref;
        if (lit.empty()) return fail(lit.size() == ref.size() ? "secret is empty" : "secret \"literal:\" is empty");
        SecretResult r;
        r.ok = true;
        r.value.assign(lit.data(), lit.size());
        return r;
    } catch (...) {  // out of memory, or a throwing getenv_fn
        SecretResult r;
        try {
            r.error = "secret reference cannot be resolved";
        } catch (...) {
        }
        return r;
    }
}

std::string describe_secret_ref(std::string_view ref) {
    try {
        if (starts_with(ref, "env:")) {
            std::string_view n = ref.substr(4);
            return valid_env_name(n) ? std::string(ref) : std::string("env:(invalid name)");
        }
        if (starts_with(ref, "file:")) return std::string(ref);
        return "literal";
    } catch (const std::exception&) {
        return std::string();
    }
}

}  // namespace llmgw
