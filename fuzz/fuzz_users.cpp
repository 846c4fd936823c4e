// libFuzzer target: the users file (docs/users-file.md), as a reload reads
// it: load_users_file into a directory that already holds an inline user,
// with environment variables that resolve to a known value (env: keys);
// its limits (set_limit_number) and key references (resolve_secret) with it.
//
// Input: byte 0 picks which environment variables are set; the rest is the
// file. What must hold: no crash, no read past a bound; a refused file says
// why, and the reason never holds a key: never an env: key's value, and it
// is the same sentence when every literal key is replaced by another of the
// same shape (equal keys staying equal); a loaded file's users are
// found by their name and by their key, in a group that exists, with
// limits that are not negative, and their key's description is never the key.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "core/config/digest.h"
#include "core/config/users_file.h"
#include "fuzz_util.h"
#include "json_mutator.h"

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

namespace rj = rapidjson;

constexpr const char* kEnvValue = "envkey-VALUE-9f8e7d6c5b4a";
constexpr const char* kInlineKey = "inline-key-of-alice";
std::uint8_t g_env = 0;

const char* fake_getenv(const char* name) {
    if (std::strcmp(name, "EMPTY") == 0) return "";
    // set: names beginning with an uppercase letter (all of them, or none, by byte 0)
    if ((g_env & 1) != 0 && name[0] >= 'A' && name[0] <= 'Z') return kEnvValue;
    if ((g_env & 2) != 0 && std::strcmp(name, "KEY") == 0) return kEnvValue;
    return nullptr;
}

// Another key for a literal key: equal keys stay equal (distinct ones stay distinct),
// a "literal:" prefix and emptiness are kept, and it is never an env: or
// file: reference.
std::string other_key(const std::string& k) {
    std::string prefix, rest = k;
    if (rest.rfind("literal:", 0) == 0) {
        prefix = "literal:";
        rest.erase(0, 8);
    }
    if (rest.empty() || rest == kInlineKey) return k;   // (equal to the inline user's: kept so)
    const Digest d = sha256(rest);   // of the value: "literal:x" and "x" are one key
    std::string out = prefix + "Z";   // (its length differs: a key's length is never checked)
    for (std::size_t i = 0; i < 16; ++i) out += "0123456789abcdef"[d[i] & 15];
    return out;
}

bool written(const rj::Document& d, std::string& json) {
    rj::StringBuffer sb;
    rj::Writer<rj::StringBuffer> w(sb);
    if (!d.Accept(w)) return false;
    json.assign(sb.GetString(), sb.GetSize());
    return true;
}

// The file with each user's literal key (the "key" the loader reads: the
// first of that name) replaced by other_key; false when there is none.
bool with_other_keys(rj::Document& d, std::string& json) {
    bool any = false;
    if (!d.IsObject()) return false;
    auto users = d.FindMember("users");
    if (users == d.MemberEnd() || !users->value.IsArray()) return false;
    for (auto& u : users->value.GetArray()) {
        if (!u.IsObject()) continue;
        auto k = u.FindMember("key");
        if (k == u.MemberEnd() || !k->value.IsString()) continue;
        const std::string s(k->value.GetString(), k->value.GetStringLength());
        if (s.rfind("env:", 0) == 0 || s.rfind("file:", 0) == 0) continue;
        const std::string o = other_key(s);
        if (o == s) continue;
        k->value.SetString(o.data(), static_cast<rj::SizeType>(o.size()), d.GetAllocator());
        any = true;
    }
    return any && written(d, json);
}

// The literal keys of the file's users (a "key" that is no env:/file: reference).
std::vector<std::string> literal_keys(const rj::Document& d) {
    std::vector<std::string> keys;
    if (!d.IsObject()) return keys;
    auto users = d.FindMember("users");
    if (users == d.MemberEnd() || !users->value.IsArray()) return keys;
    for (const auto& u : users->value.GetArray()) {
        if (!u.IsObject()) continue;
        auto k = u.FindMember("key");
        if (k == u.MemberEnd() || !k->value.IsString()) continue;
        std::string s(k->value.GetString(), k->value.GetStringLength());
        if (s.rfind("env:", 0) == 0 || s.rfind("file:", 0) == 0) continue;
        if (s.rfind("literal:", 0) == 0) s.erase(0, 8);
        if (!s.empty()) keys.push_back(s);
    }
    return keys;
}

std::string load(const std::string& json) {
    Directory dir;
    UserConf inline_user;
    inline_user.name = "alice";
    inline_user.key_digest = sha256(kInlineKey);
    inline_user.key_source = "literal";
    FUZZ_CHECK(dir.add_user(inline_user).empty());
    return load_users_file(json, dir, fake_getenv);
}

}  // namespace

LLMGW_JSON_MUTATOR(1, "users", "groups", "name", "key", "keySha256", "group", "admin", "limits", "requestsPerMinute",
                   "requestsPerDay", "tokensPerDay", "tokensPerMonth", "costPerDayUSD", "costPerMonthUSD",
                   "env:KEY", "env:EMPTY", "env:lower", "env:1BAD", "literal:", "literal:env:x", "file:",
                   "file:/nonexistent", "file:/dev/null", "default", "alice", "sk-user-key-0123456789abcdef")

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    g_env = data[0];
    const std::string json(reinterpret_cast<const char*>(data) + 1, size - 1);

    Directory dir;
    UserConf inline_user;
    inline_user.name = "alice";
    inline_user.key_digest = sha256(kInlineKey);
    inline_user.key_source = "literal";
    FUZZ_CHECK(dir.add_user(inline_user).empty());
    const std::string err = load_users_file(json, dir, fake_getenv);
    FUZZ_CHECK_EQ(err, load(json));   // the same file, the same verdict

    rj::Document d;
    d.Parse(json.data(), json.size());
    if (!err.empty()) {
        if (!contains(json, kEnvValue)) FUZZ_CHECK(!contains(err, kEnvValue));
        // the reason does not depend on the literal keys: with other keys
        // of the same shape, the same sentence
        // (both written back from the parsed file: numbers may read back a
        // little differently, so the file as written back must give the
        // same sentence first)
        rj::Document copy;
        copy.Parse(json.data(), json.size());
        std::string same, other;
        if (!copy.HasParseError() && written(copy, same) && load(same) == err && with_other_keys(copy, other)) {
            FUZZ_CHECK_EQ(load(other), err);
        }
        return 0;
    }
    FUZZ_CHECK(!d.HasParseError());
    FUZZ_CHECK(dir.find_by_key(kInlineKey) == dir.find_user("alice"));
    for (const UserConf& u : dir.users()) {
        FUZZ_CHECK(!u.name.empty() && dir.find_user(u.name) == &u);
        FUZZ_CHECK(dir.find_group(u.group) != nullptr);
        const Limits& l = u.limits;
        FUZZ_CHECK(l.requests_per_minute >= 0 && l.requests_per_day >= 0 && l.tokens_per_day >= 0 &&
                   l.tokens_per_month >= 0 && l.cost_per_day_micros >= 0 && l.cost_per_month_micros >= 0);
        FUZZ_CHECK(!contains(u.key_source, kEnvValue));
    }
    for (const GroupConf& g : dir.groups()) {
        const Limits& l = g.limits;
        FUZZ_CHECK(l.requests_per_minute >= 0 && l.requests_per_day >= 0 && l.tokens_per_day >= 0 &&
                   l.tokens_per_month >= 0 && l.cost_per_day_micros >= 0 && l.cost_per_month_micros >= 0);
    }
    for (const std::string& k : literal_keys(d)) {
        const UserConf* u = dir.find_by_key(k);
        FUZZ_CHECK(u != nullptr && u->key_source == "literal");
    }
    if ((g_env & 3) != 0 && contains(json, "\"env:KEY\"")) {
        const UserConf* u = dir.find_by_key(kEnvValue);
        FUZZ_CHECK(u == nullptr || u->key_source.rfind("env:", 0) == 0);
    }
    return 0;
}
