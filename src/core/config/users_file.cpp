#include "core/config/users_file.h"

#include <cstdio>

#include <rapidjson/document.h>

namespace llmgw {
namespace {

std::string load_limits(const rapidjson::Value& v, Limits& limits, const std::string& who) {
    if (!v.IsObject()) return who + ": limits must be an object";
    for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
        std::string name(it->name.GetString(), it->name.GetStringLength());
        if (!it->value.IsNumber()) return who + ": limit " + name + " must be a number";
        bool is_int = it->value.IsInt64() || it->value.IsUint64();
        double d = it->value.GetDouble();
        std::string err = set_limit_number(limits, name, d, is_int);
        if (!err.empty()) return who + ": " + err;
    }
    return "";
}

bool get_string(const rapidjson::Value& obj, const char* name, std::string& out, std::string& err,
                const std::string& who) {
    auto it = obj.FindMember(name);
    if (it == obj.MemberEnd()) return true;
    if (!it->value.IsString()) {
        err = who + ": " + name + " must be a string";
        return false;
    }
    out.assign(it->value.GetString(), it->value.GetStringLength());
    return true;
}

std::string load_group(const rapidjson::Value& g, Directory& dir, std::size_t index) {
    std::string who = "groups[" + std::to_string(index) + "]";
    if (!g.IsObject()) return who + " must be an object";
    GroupConf gc;
    std::string err;
    if (!get_string(g, "name", gc.name, err, who)) return err;
    if (gc.name.empty()) return who + ": name is required";
    who = "group \"" + gc.name + "\"";
    gc.where = "users file";
    auto lim = g.FindMember("limits");
    if (lim != g.MemberEnd()) {
        err = load_limits(lim->value, gc.limits, who);
        if (!err.empty()) return err;
    }
    return dir.add_group(std::move(gc));
}

std::string load_user(const rapidjson::Value& u, Directory& dir, std::size_t index, const GetEnv& getenv_fn) {
    std::string who = "users[" + std::to_string(index) + "]";
    if (!u.IsObject()) return who + " must be an object";
    UserConf uc;
    uc.where = "users file";
    std::string err, key_ref, key_hex;
    if (!get_string(u, "name", uc.name, err, who)) return err;
    if (uc.name.empty()) return who + ": name is required";
    who = "user \"" + uc.name + "\"";
    if (!get_string(u, "group", uc.group, err, who)) return err;
    if (uc.group.empty()) uc.group = "default";
    if (!get_string(u, "key", key_ref, err, who)) return err;
    if (!get_string(u, "keySha256", key_hex, err, who)) return err;
    if (!key_ref.empty() && !key_hex.empty()) return who + ": give key or keySha256, not both";
    if (!key_ref.empty()) {
        SecretResult s = resolve_secret(key_ref, getenv_fn);
        if (!s.ok) return who + ": " + s.error;
        uc.key_digest = sha256(s.value);
        uc.key_source = describe_secret_ref(key_ref);
    } else if (!key_hex.empty()) {
        if (!from_hex(key_hex, uc.key_digest)) return who + ": keySha256 must be 64 hex digits";
        uc.key_source = "sha256";
    } else {
        return who + ": key or keySha256 is required";
    }
    auto adm = u.FindMember("admin");
    if (adm != u.MemberEnd()) {
        if (!adm->value.IsBool()) return who + ": admin must be true or false";
        uc.admin = adm->value.GetBool();
    }
    auto lim = u.FindMember("limits");
    if (lim != u.MemberEnd()) {
        err = load_limits(lim->value, uc.limits, who);
        if (!err.empty()) return err;
    }
    return dir.add_user(std::move(uc));
}

}  // namespace

std::size_t users_file_keys(const Directory& dir) {
    std::size_t n = 0;
    for (const UserConf& u : dir.users()) n += u.where == "users file" && u.key_source == "literal" ? 1 : 0;
    return n;
}

std::string users_file_exposure(std::string_view path, unsigned mode, std::size_t keys) {
    constexpr unsigned kGroupRead = 040, kOtherRead = 04;
    if (keys == 0 || (mode & (kGroupRead | kOtherRead)) == 0) return "";
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", mode & 07777);
    const char* who = (mode & kOtherRead) ? ((mode & kGroupRead) ? "its group and every other user" : "every other user")
                                          : "its group";
    return "users file \"" + std::string(path) + "\" holds " + std::to_string(keys) + (keys == 1 ? " key" : " keys") +
           " and can be read by " + who + " (mode " + octal +
           "): make it readable by the user nginx's workers run as only (chmod 600, owned by that user), or give "
           "the keys as keySha256, env: or file:";
}

std::string load_users_file(std::string_view json, Directory& dir, const GetEnv& getenv_fn) {
    try {
        rapidjson::Document doc;
        doc.Parse(json.data(), json.size());
        if (doc.HasParseError()) {
            return "not valid JSON (error at offset " + std::to_string(doc.GetErrorOffset()) + ")";
        }
        if (!doc.IsObject()) return "the top level must be an object with \"users\" and \"groups\"";
        auto groups = doc.FindMember("groups");
        if (groups != doc.MemberEnd()) {
            if (!groups->value.IsArray()) return "\"groups\" must be an array";
            for (rapidjson::SizeType i = 0; i < groups->value.Size(); ++i) {
                std::string err = load_group(groups->value[i], dir, i);
                if (!err.empty()) return err;
            }
        }
        auto users = doc.FindMember("users");
        if (users == doc.MemberEnd() || !users->value.IsArray()) return "\"users\" must be an array";
        for (rapidjson::SizeType i = 0; i < users->value.Size(); ++i) {
            std::string err = load_user(users->value[i], dir, i, getenv_fn);
            if (!err.empty()) return err;
        }
        dir.close();
        return "";
    } catch (const std::exception& e) {
        return std::string("cannot be loaded: ") + e.what();
    }
}

}  // namespace llmgw
