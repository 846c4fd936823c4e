// Store URL parsing and its redacted form; the password never shows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/config/store_url.h"

using namespace llmgw;

namespace {

StoreUrl ok(const std::string& text) {
    StoreUrl u;
    std::string err;
    EXPECT_TRUE(parse_store_url(text, u, err)) << text << ": " << err;
    EXPECT_EQ(err, "") << text;
    return u;
}

std::string bad(const std::string& text) {
    StoreUrl u;
    u.host = "untouched";
    std::string err;
    EXPECT_FALSE(parse_store_url(text, u, err)) << text;
    EXPECT_FALSE(err.empty()) << text;
    EXPECT_EQ(u.host, "untouched") << "url written on failure: " << text;
    return err;
}

}  // namespace

TEST(StoreUrl, Minimal) {
    StoreUrl u = ok("redis://localhost");
    EXPECT_FALSE(u.tls);
    EXPECT_EQ(u.host, "localhost");
    EXPECT_EQ(u.port, 6379);
    EXPECT_EQ(u.db, 0);
    EXPECT_EQ(u.user, "");
    EXPECT_EQ(u.password, "");
    EXPECT_TRUE(u.verify);
    EXPECT_EQ(u.ca_file, "");
    EXPECT_EQ(u.sni, "");
    EXPECT_EQ(ok("redis://localhost/").db, 0);
    EXPECT_EQ(ok("redis://127.0.0.1:6380").port, 6380);
    EXPECT_EQ(ok("REDIS://h").host, "h");
}

TEST(StoreUrl, AllParts) {
    StoreUrl u = ok("rediss://alice:s3cret@cache.internal:6390/7");
    EXPECT_TRUE(u.tls);
    EXPECT_EQ(u.user, "alice");
    EXPECT_EQ(u.password, "s3cret");
    EXPECT_EQ(u.host, "cache.internal");
    EXPECT_EQ(u.port, 6390);
    EXPECT_EQ(u.db, 7);
}

TEST(StoreUrl, PasswordOnlyAndUserOnly) {
    StoreUrl p = ok("redis://:pw@h:1/2");
    EXPECT_EQ(p.user, "");
    EXPECT_EQ(p.password, "pw");
    EXPECT_EQ(p.port, 1);
    EXPECT_EQ(p.db, 2);
    StoreUrl u = ok("redis://bob@h");
    EXPECT_EQ(u.user, "bob");
    EXPECT_EQ(u.password, "");
    StoreUrl e = ok("redis://@h");
    EXPECT_EQ(e.user, "");
    EXPECT_EQ(e.password, "");
    StoreUrl colon = ok("redis://bob:@h");
    EXPECT_EQ(colon.user, "bob");
    EXPECT_EQ(colon.password, "");
}

TEST(StoreUrl, PasswordSpecialCharacters) {
    // '@', '/', ':' and '#' may stay raw: the userinfo ends at the last '@'.
    StoreUrl u = ok("redis://:p@ss/w:rd#1@h:6379/3");
    EXPECT_EQ(u.password, "p@ss/w:rd#1");
    EXPECT_EQ(u.host, "h");
    EXPECT_EQ(u.db, 3);
    StoreUrl enc = ok("redis://us%3Aer:a%3Fb%40c%25d@h");
    EXPECT_EQ(enc.user, "us:er");
    EXPECT_EQ(enc.password, "a?b@c%d");
}

TEST(StoreUrl, Ipv6) {
    StoreUrl u = ok("redis://[::1]:6380/1");
    EXPECT_EQ(u.host, "::1");
    EXPECT_EQ(u.port, 6380);
    EXPECT_EQ(u.db, 1);
    EXPECT_EQ(ok("redis://[2001:db8::7]").host, "2001:db8::7");
    EXPECT_EQ(ok("redis://[2001:db8::7]").port, 6379);
    EXPECT_EQ(ok("rediss://:pw@[::ffff:10.0.0.1]/4").host, "::ffff:10.0.0.1");
    EXPECT_EQ(ok("redis://[::1]/").db, 0);
    bad("redis://[::1");
    bad("redis://[]:6379");
    bad("redis://[zz::1]");
    bad("redis://[::1]x");
    const std::string err = bad("redis://::1:6379");
    EXPECT_NE(err.find("brackets"), std::string::npos) << err;
    bad("redis://fe80::1");
}

TEST(StoreUrl, QueryParameters) {
    StoreUrl u = ok("rediss://h:6380?db=5&tls_ca=/etc/ssl/ca.pem&tls_cert=/c.pem&tls_key=/k.pem&tls_sni=cache.example&tls_verify=off");
    EXPECT_EQ(u.db, 5);
    EXPECT_EQ(u.ca_file, "/etc/ssl/ca.pem");
    EXPECT_EQ(u.cert_file, "/c.pem");
    EXPECT_EQ(u.key_file, "/k.pem");
    EXPECT_EQ(u.sni, "cache.example");
    EXPECT_FALSE(u.verify);
    EXPECT_TRUE(ok("rediss://h?tls_verify=on").verify);
    EXPECT_EQ(ok("redis://h/?db=3").db, 3);
    EXPECT_EQ(ok("redis://h?db=3&").db, 3);
    EXPECT_EQ(ok("rediss://h?tls_ca=/a%20b/c%40d.pem").ca_file, "/a b/c@d.pem");
    EXPECT_EQ(ok("redis://h?").db, 0);
}

TEST(StoreUrl, BadQueryParameters) {
    bad("redis://h?tls_verify=maybe");
    bad("redis://h?db=1&db=2");
    bad("rediss://h?tls_ca=");
    bad("rediss://h?tls_ca");
    bad("rediss://h?tls_ca=%zz");
    bad("rediss://h?tls_ca=/a%00b");
    bad("redis://h?password=x");
    bad("redis://h?DB=1");
    std::string err = bad("redis://h/1?db=1");
    EXPECT_NE(err.find("twice"), std::string::npos) << err;
    err = bad("redis://h?tls_ca=/ca.pem");
    EXPECT_NE(err.find("rediss://"), std::string::npos) << err;
    bad("redis://h?tls_verify=off");
    err = bad("rediss://h?tls_cert=/c.pem");
    EXPECT_NE(err.find("together"), std::string::npos) << err;
    bad("rediss://h?tls_key=/k.pem");
    bad("redis://h?db=-1");
    bad("redis://h?db=x");
    bad("redis://h?db=2147483648");
}

TEST(StoreUrl, BadPorts) {
    for (const char* t : {"redis://h:0", "redis://h:65536", "redis://h:-1", "redis://h:", "redis://h:/0",
                          "redis://h:abc", "redis://h:6379x", "redis://h: 6379", "redis://h:99999999999999999999"}) {
        const std::string err = bad(t);
        EXPECT_NE(err.find("port"), std::string::npos) << t << ": " << err;
    }
    EXPECT_EQ(ok("redis://h:65535").port, 65535);
    EXPECT_EQ(ok("redis://h:00080").port, 80);
}

TEST(StoreUrl, BadDb) {
    for (const char* t : {"redis://h/x", "redis://h/-1", "redis://h/1/2", "redis://h/2147483648", "redis://h/1x",
                          "redis://h//"}) {
        const std::string err = bad(t);
        EXPECT_NE(err.find("database"), std::string::npos) << t << ": " << err;
    }
    EXPECT_EQ(ok("redis://h/2147483647").db, 2147483647);
}

TEST(StoreUrl, BadSchemeAndHost) {
    bad("");
    bad("localhost:6379");
    bad("http://h");
    bad("redis:/h");
    bad("rediss//h");
    bad("redis://");
    bad("redis:///0");
    bad("redis://:6379");
    bad("redis://h h");
    bad("redis://h#frag");
    bad("redis://:pw@");
    bad("redis://us%zzer@h");
}

TEST(StoreUrl, PasswordNeverInErrors) {
    const std::string pw = "Zq9Secret";
    const std::vector<std::string> urls = {
        "redis://:" + pw + "@h:0",
        "redis://:" + pw + "@h:abc",
        "redis://:" + pw + "@h/x",
        "redis://:" + pw + "@[::1",
        "redis://:" + pw + "@h?bogus=1",
        "redis://:" + pw + "@h?tls_ca=/x",
        "redis://:" + pw + "%zz@h",
        "redis://user:" + pw,                  // no '@': the password is where the host/port goes
        "redis://:" + pw,
        "redis://" + pw,                       // host is fine here; now with a bad port
        "redis://" + pw + ":" + pw,
        "redis://:Zq9?" + pw + "@h",           // raw '?' in the password
        "redis://:Zq9?db=" + pw + "@h",
        "redis://:Zq9?tls_ca=" + pw + "@h",
        "redis://:Zq9&" + pw + "@h?db=x",
        "redis://:" + pw + "@h h",
        "redis://:" + pw + "@/1",
        "redis://:" + pw + "@h/1?db=2",
        "http://:" + pw + "@h",
        "rediss://:" + pw + "@h?tls_cert=/c",
        "redis://:" + pw + "@h#" + pw,
    };
    for (const std::string& u : urls) {
        StoreUrl out;
        std::string err;
        if (parse_store_url(u, out, err)) {
            // accepted forms must not be here, except a bare host name
            EXPECT_EQ(u, "redis://" + pw) << u;
            continue;
        }
        EXPECT_EQ(err.find(pw), std::string::npos) << u << " -> " << err;
        EXPECT_EQ(err.find("Zq9"), std::string::npos) << u << " -> " << err;
        EXPECT_EQ(err.find("Secret"), std::string::npos) << u << " -> " << err;
    }
}

TEST(StoreUrl, Redacted) {
    EXPECT_EQ(redacted_store_url(ok("rediss://:s3cret@cache:6380/2")), "rediss://:[redacted]@cache:6380/2");
    EXPECT_EQ(redacted_store_url(ok("redis://localhost")), "redis://localhost:6379/0");
    EXPECT_EQ(redacted_store_url(ok("redis://alice:pw@h")), "redis://alice:[redacted]@h:6379/0");
    EXPECT_EQ(redacted_store_url(ok("redis://alice@h")), "redis://alice@h:6379/0");
    EXPECT_EQ(redacted_store_url(ok("redis://[::1]:7000/3")), "redis://[::1]:7000/3");
    EXPECT_EQ(redacted_store_url(ok("rediss://h?db=4&tls_verify=off&tls_ca=/etc/a%20b.pem&tls_sni=x.example")),
              "rediss://h:6379/4?tls_ca=/etc/a%20b.pem&tls_sni=x.example&tls_verify=off");
    EXPECT_EQ(redacted_store_url(ok("redis://us%40er:pw@h")), "redis://us%40er:[redacted]@h:6379/0");

    // a password set separately (secret reference) is redacted too
    StoreUrl u = ok("rediss://cache");
    u.password = "from-a-secret";
    const std::string r = redacted_store_url(u);
    EXPECT_EQ(r, "rediss://:[redacted]@cache:6379/0");
    EXPECT_EQ(r.find("from-a-secret"), std::string::npos);
}

TEST(StoreUrl, RedactedParsesBackWithoutThePassword) {
    for (const char* t : {"rediss://bob:pw@[2001:db8::1]:6390/9?tls_ca=/ca.pem&tls_verify=off", "redis://h",
                          "rediss://h?tls_cert=/c&tls_key=/k&tls_sni=s"}) {
        const StoreUrl a = ok(t);
        const std::string red = redacted_store_url(a);
        EXPECT_EQ(red.find(":pw"), std::string::npos) << red;
        const StoreUrl b = ok(red);
        EXPECT_EQ(b.tls, a.tls);
        EXPECT_EQ(b.host, a.host);
        EXPECT_EQ(b.port, a.port);
        EXPECT_EQ(b.db, a.db);
        EXPECT_EQ(b.user, a.user);
        EXPECT_EQ(b.ca_file, a.ca_file);
        EXPECT_EQ(b.cert_file, a.cert_file);
        EXPECT_EQ(b.key_file, a.key_file);
        EXPECT_EQ(b.sni, a.sni);
        EXPECT_EQ(b.verify, a.verify);
    }
}
