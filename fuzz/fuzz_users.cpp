// libFuzzer target: the users file (docs/users-file.md), as a reload reads
// it: load_users_file into a directory that already holds an inline user,
// with environment variables that resolve to a known value (env: keys);
// its limits (set_limit_number) and key references (resolve_secret) with it.
//
// Input: byte 0 picks which environment variables are set; the rest is the
// file. What must hold: no crash, no read past a bound; a refused file says
// why, and the reason never holds a key (neither an env: key's value nor a
// literal key, whatever the file around it); a loaded file's users are
// found by their name and by their key, in a group that exists, with
// limits that are not negative, and their key's description is never the key.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "core/config/digest.h"
#include "core/config/users_file.h"
#include "fuzz_util.h"
#include "json_mutator.h"

using namespace llmgw;
using namespace llmgw::fuzz;

namespace {

namespace rj = rapidjson;

constexpr const char* kEnvValue = "envkey-VALUE-9f8e7d6c5b4a";
std::uint8_t g_env = 0;

const char* fake_getenv(const char* name) {
    if (std::strcmp(name, "EMPTY") == 0) return "";
    // set: names beginning with an uppercase letter (all of them, or none, by byte 0)
    if ((g_env & 1) != 0 && name[0] >= 'A' && name[0] <= 'Z') return kEnvValue;
    if ((g_env & 2) != 0 && std::strcmp(name, "KEY") == 0) return kEnvValue;
    return nullptr;
}

// Every string of the document, names and values (decoded).
void strings_of(const rj::Value& v, std::vector<std::string>& out) {
    std::vector<const rj::Value*> stack{&v};
    while (!stack.empty()) {
        const rj::Value* n = stack.back();
        stack.pop_back();
        if (n->IsString()) {
            out.emplace_back(n->GetString(), n->GetStringLength());
        } else if (n->IsObject()) {
            for (const auto& m : n->GetObject()) {
                out.emplace_back(m.name.GetString(), m.name.GetStringLength());
                stack.push_back(&m.value);
            }
        } else if (n->IsArray()) {
            for (const auto& e : n->GetArray()) stack.push_back(&e);
        }
    }
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
    inline_user.key_digest = sha256("inline-key-of-alice");
    inline_user.key_source = "literal";
    FUZZ_CHECK(dir.add_user(inline_user).empty());
    const std::string err = load_users_file(json, dir, fake_getenv);

    rj::Document d;
    d.Parse(json.data(), json.size());
    std::vector<std::string> strings;
    if (!d.HasParseError()) strings_of(d, strings);
    auto only_in_itself = [&](const std::string& k) {
        std::size_t holders = 0;
        for (const std::string& s : strings) holders += contains(s, k) ? 1 : 0;
        return holders <= 1;
    };
    if (!err.empty()) {
        if (!contains(json, kEnvValue)) FUZZ_CHECK(!contains(err, kEnvValue));
        if (!d.HasParseError()) {
            for (const std::string& k : literal_keys(d)) {
                if (k.size() >= 8 && only_in_itself(k)) FUZZ_CHECK(!contains(err, k));
            }
        }
        return 0;
    }
    FUZZ_CHECK(!d.HasParseError());
    FUZZ_CHECK(dir.find_by_key("inline-key-of-alice") == dir.find_user("alice"));
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
