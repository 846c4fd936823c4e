#include <gtest/gtest.h>

#include "core/config/gwconfig.h"
#include "core/config/users_file.h"

using namespace llmgw;

namespace {

ProviderConf prov(const std::string& name, std::vector<std::string> models = {}, bool dflt = false) {
    ProviderConf p;
    p.name = name;
    p.location = "/_llm/" + name;
    p.models = std::move(models);
    p.is_default = dflt;
    p.where = "test.conf:1";
    return p;
}

UserConf user(const std::string& name, const std::string& key, const std::string& group = "default") {
    UserConf u;
    u.name = name;
    u.group = group;
    u.key_digest = sha256(key);
    return u;
}

}  // namespace

TEST(GatewayConfig, ProviderNamesAreValidated) {
    GatewayConfig c;
    EXPECT_NE(c.add_provider(prov("bad name")), "");
    EXPECT_NE(c.add_provider(prov("")), "");
    EXPECT_EQ(c.add_provider(prov("admin")), "provider name \"admin\" is reserved");
    EXPECT_EQ(c.add_provider(prov("open.ai_1-x")), "");
    EXPECT_EQ(c.add_provider(prov("open.ai_1-x")), "duplicate provider \"open.ai_1-x\"");
    ProviderConf p = prov("noloc");
    p.location = "relative";
    EXPECT_NE(c.add_provider(p), "");
}

TEST(GatewayConfig, TwoDefaultsRejected) {
    GatewayConfig c;
    EXPECT_EQ(c.add_provider(prov("a", {}, true)), "");
    EXPECT_EQ(c.add_provider(prov("b", {}, true)), "providers \"a\" and \"b\" are both marked default");
}

TEST(GatewayConfig, AliasValidation) {
    {
        GatewayConfig c;
        c.add_provider(prov("openai"));
        c.add_alias({"fast", "nope/gpt-4o-mini", "x.conf:7", {}});
        EXPECT_EQ(c.finalize(), "alias \"fast\" names unknown provider \"nope\" in x.conf:7");
    }
    {
        GatewayConfig c;
        c.add_provider(prov("openai"));
        c.add_alias({"fast", "openai/gpt-4o-mini", "x.conf:7", {}});
        c.add_alias({"quick", "fast", "x.conf:8", {}});
        EXPECT_EQ(c.finalize(),
                  "alias \"quick\" points to another alias \"fast\"; aliases must name <provider>/<model> in x.conf:8");
    }
    {
        GatewayConfig c;
        c.add_provider(prov("openai"));
        EXPECT_EQ(c.add_alias({"fast", "openai/a", "x:1", {}}), "");
        EXPECT_EQ(c.add_alias({"fast", "openai/b", "x:2", {}}), "duplicate alias \"fast\"");
        EXPECT_EQ(c.finalize(), "");
    }
}

TEST(GatewayConfig, ResolutionRule) {
    GatewayConfig c;
    c.add_provider(prov("openai", {"gpt-4o-mini", "text-embedding-3-small"}));
    c.add_provider(prov("local", {"llama3"}, true));
    c.add_alias({"fast", "openai/gpt-4o-mini", "x:1", {}});
    ASSERT_EQ(c.finalize(), "");
    Resolution r;
    std::string err;
    ASSERT_TRUE(c.resolve_model("fast", r, err));
    EXPECT_EQ(r.provider->name, "openai");
    EXPECT_EQ(r.upstream_model, "gpt-4o-mini");
    EXPECT_EQ(r.canonical, "openai/gpt-4o-mini");
    ASSERT_TRUE(c.resolve_model("local/anything", r, err));
    EXPECT_EQ(r.provider->name, "local");
    EXPECT_EQ(r.upstream_model, "anything");
    ASSERT_TRUE(c.resolve_model("text-embedding-3-small", r, err));
    EXPECT_EQ(r.provider->name, "openai");
    // unlisted bare id and an unknown "owner/model" id go to the default
    ASSERT_TRUE(c.resolve_model("mistral-7b", r, err));
    EXPECT_EQ(r.canonical, "local/mistral-7b");
    ASSERT_TRUE(c.resolve_model("meta-llama/Llama-3-8b", r, err));
    EXPECT_EQ(r.provider->name, "local");
    EXPECT_EQ(r.upstream_model, "meta-llama/Llama-3-8b");
}

TEST(GatewayConfig, NoDefaultMeansNotFound) {
    GatewayConfig c;
    c.add_provider(prov("a", {"m1"}));
    c.add_provider(prov("b", {"m2"}));
    ASSERT_EQ(c.finalize(), "");
    Resolution r;
    std::string err;
    EXPECT_FALSE(c.resolve_model("m3", r, err));
    EXPECT_EQ(err, "The model `m3` does not exist or you do not have access to it.");
    EXPECT_TRUE(c.resolve_model("m2", r, err));
    EXPECT_EQ(r.provider->name, "b");
}

TEST(GatewayConfig, SingleProviderIsDefault) {
    GatewayConfig c;
    c.add_provider(prov("only"));
    ASSERT_EQ(c.finalize(), "");
    Resolution r;
    std::string err;
    ASSERT_TRUE(c.resolve_model("whatever", r, err));
    EXPECT_EQ(r.canonical, "only/whatever");
}

TEST(Directory, KeysAndGroups) {
    Directory d;
    EXPECT_EQ(d.add_group({"eng", {}, "x"}), "");
    EXPECT_EQ(d.add_group({"eng", {}, "x"}), "duplicate group \"eng\"");
    EXPECT_EQ(d.add_user(user("alice", "k1", "eng")), "");
    EXPECT_EQ(d.add_user(user("alice", "k2")), "duplicate user \"alice\"");
    EXPECT_EQ(d.add_user(user("bob", "k1")), "user \"bob\" has the same key as user \"alice\"");
    EXPECT_EQ(d.add_user(user("carol", "k3", "ops")), "");
    d.close();
    ASSERT_NE(d.find_by_key("k1"), nullptr);
    EXPECT_EQ(d.find_by_key("k1")->name, "alice");
    EXPECT_EQ(d.find_by_key("k2"), nullptr);
    EXPECT_EQ(d.find_by_key(""), nullptr);
    ASSERT_NE(d.find_group("ops"), nullptr);   // named by a user: exists without limits
    EXPECT_FALSE(d.find_group("ops")->limits.any());
}

TEST(UsersFile, LoadsUsersGroupsAndKeys) {
    Directory d;
    d.add_user(user("inline", "k-inline"));
    std::string json = R"({"groups":[{"name":"eng","limits":{"requestsPerMinute":5,"costPerDayUSD":1.5}}],
      "users":[{"name":"bob","key":"sk-bob","group":"eng","admin":true,"limits":{"tokensPerDay":100}},
               {"name":"eve","keySha256":")" + to_hex(sha256("sk-eve")) + R"("},
               {"name":"env","key":"env:LLMGW_TEST_KEY"}]})";
    auto getenv_fn = [](const char* n) -> const char* {
        return std::string(n) == "LLMGW_TEST_KEY" ? "sk-from-env" : nullptr;
    };
    ASSERT_EQ(load_users_file(json, d, getenv_fn), "");
    ASSERT_NE(d.find_by_key("sk-bob"), nullptr);
    EXPECT_TRUE(d.find_by_key("sk-bob")->admin);
    EXPECT_EQ(d.find_by_key("sk-bob")->limits.tokens_per_day, 100);
    EXPECT_EQ(d.find_by_key("sk-eve")->name, "eve");
    EXPECT_EQ(d.find_by_key("sk-eve")->group, "default");
    EXPECT_EQ(d.find_by_key("sk-from-env")->name, "env");
    EXPECT_EQ(d.find_by_key("k-inline")->name, "inline");
    EXPECT_EQ(d.find_group("eng")->limits.requests_per_minute, 5);
    EXPECT_EQ(d.find_group("eng")->limits.cost_per_day_micros, 1500000);
}

TEST(UsersFile, Errors) {
    auto load = [](const std::string& json) {
        Directory d;
        return load_users_file(json, d);
    };
    EXPECT_EQ(load("{"), "not valid JSON (error at offset 1)");
    EXPECT_EQ(load("[]"), "the top level must be an object with \"users\" and \"groups\"");
    EXPECT_EQ(load(R"({"users":{}})"), "\"users\" must be an array");
    EXPECT_EQ(load(R"({"users":[{"name":"a"}]})"), "user \"a\": key or keySha256 is required");
    EXPECT_EQ(load(R"({"users":[{"name":"a","keySha256":"zz"}]})"), "user \"a\": keySha256 must be 64 hex digits");
    EXPECT_EQ(load(R"({"users":[{"name":"a","key":"k","limits":{"requestsPerMinute":-1}}]})").rfind("user \"a\": ", 0), 0u);
    EXPECT_EQ(load(R"({"users":[{"name":"a","key":"k","admin":"yes"}]})"), "user \"a\": admin must be true or false");
    std::string secret_err = load(R"({"users":[{"name":"a","key":"file:/nonexistent/secret"}]})");
    EXPECT_NE(secret_err.find("/nonexistent/secret"), std::string::npos);
    // a key never appears in an error
    std::string dup = load(R"({"users":[{"name":"a","key":"sk-secret-1"},{"name":"b","key":"sk-secret-1"}]})");
    EXPECT_EQ(dup.find("sk-secret-1"), std::string::npos);
    EXPECT_EQ(dup, "user \"b\" has the same key as user \"a\"");
}

// A users file that gives keys themselves (not env:, file: or keySha256)
// and that its group or other users may read is warned about at load.
TEST(UsersFile, KeysOthersMayReadAreWarnedAbout) {
    Directory d;
    d.add_user(user("inline", "k-inline"));   // inline users are nginx.conf's, not the file's
    const std::string json = R"({"users":[{"name":"a","key":"sk-a-secret"},{"name":"b","key":"literal:env:x"},
      {"name":"c","key":"env:LLMGW_TEST_KEY"},{"name":"d","keySha256":")" + to_hex(sha256("sk-d")) + R"("}]})";
    auto getenv_fn = [](const char*) -> const char* { return "sk-from-env-c"; };
    ASSERT_EQ(load_users_file(json, d, getenv_fn), "");
    EXPECT_EQ(llmgw::users_file_keys(d), 2u) << "a (literal) and b (literal:), not c (env:) nor d (keySha256)";

    const std::string path = "/etc/nginx/users.json";
    EXPECT_EQ(llmgw::users_file_exposure(path, 0100600, 2), "");
    EXPECT_EQ(llmgw::users_file_exposure(path, 0100400, 2), "");
    EXPECT_EQ(llmgw::users_file_exposure(path, 0100622, 2), "") << "write bits are not read bits";
    EXPECT_EQ(llmgw::users_file_exposure(path, 0100644, 0), "") << "no key in the file: nothing to read";
    EXPECT_EQ(llmgw::users_file_exposure(path, 0100644, 2),
              "users file \"/etc/nginx/users.json\" holds 2 keys and can be read by its group and every other user "
              "(mode 0644): make it readable by the user nginx's workers run as only (chmod 600, owned by that "
              "user), or give the keys as keySha256, env: or file:");
    EXPECT_NE(llmgw::users_file_exposure(path, 0100640, 1).find("holds 1 key and can be read by its group (mode 0640)"),
              std::string::npos);
    EXPECT_NE(llmgw::users_file_exposure(path, 0100604, 3).find("can be read by every other user (mode 0604)"),
              std::string::npos);
    EXPECT_EQ(llmgw::users_file_exposure(path, 0100644, 2).find("sk-a-secret"), std::string::npos);
}

TEST(GatewayConfig, PriceLinesNameAConfiguredProvider) {
    {
        GatewayConfig c;
        c.add_price_ref("openai/gpt-4o", "x.conf:3");   // before the provider line
        c.add_provider(prov("openai"));
        EXPECT_EQ(c.finalize(), "");
    }
    {
        GatewayConfig c;
        c.add_provider(prov("openai"));
        c.add_price_ref("openai/gpt-4o", "x.conf:3");
        c.add_price_ref("opneai/gpt-4o", "x.conf:4");
        EXPECT_EQ(c.finalize(), "llm_gateway_price \"opneai/gpt-4o\" names unknown provider \"opneai\" in x.conf:4");
    }
    {
        // A provider's type is not a provider name: a line naming the type
        // would price nothing.
        GatewayConfig c;
        c.add_provider(prov("azure-eu"));   // type openai
        c.add_price_ref("openai/my-model", "x.conf:9");
        EXPECT_EQ(c.finalize(),
                  "llm_gateway_price \"openai/my-model\" names unknown provider \"openai\"; price lines name a "
                  "provider, not a type: write \"azure-eu/my-model\" in x.conf:9");
    }
    {
        // The provider part is everything before the first slash.
        GatewayConfig c;
        c.add_provider(prov("local"));
        c.add_price_ref("local/org/model-7b", "x.conf:2");
        EXPECT_EQ(c.finalize(), "");
    }
}
