#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config/secret.h"

using llmgw::describe_secret_ref;
using llmgw::resolve_secret;

namespace {

class SecretFiles : public ::testing::Test {
protected:
    std::string dir;
    void SetUp() override {
        char tmpl[] = "/tmp/llmgw_secret_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
    }
    void TearDown() override {
        for (const auto& f : files) std::remove(f.c_str());
        rmdir(dir.c_str());
    }
    std::string write(const std::string& name, const std::string& content) {
        std::string path = dir + "/" + name;
        std::ofstream(path, std::ios::binary) << content;
        files.push_back(path);
        return path;
    }
    std::vector<std::string> files;
};

llmgw::GetEnv env_of(std::map<std::string, std::string> m) {
    return [m](const char* name) -> const char* {
        auto it = m.find(name);
        return it == m.end() ? nullptr : it->second.c_str();
    };
}

}  // namespace

TEST(Secret, EnvSet) {
    auto r = resolve_secret("env:OPENAI_KEY", env_of({{"OPENAI_KEY", "sk-test-123456"}}));
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.value, "sk-test-123456");
    EXPECT_EQ(r.error, "");
}

TEST(Secret, EnvUnsetAndEmpty) {
    auto g = env_of({{"EMPTY", ""}});
    auto r = resolve_secret("env:MISSING_1", g);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.value, "");
    EXPECT_EQ(r.error, "environment variable \"MISSING_1\" is not set");
    r = resolve_secret("env:EMPTY", g);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "environment variable \"EMPTY\" is empty");
}

TEST(Secret, EnvInvalidNames) {
    auto g = env_of({{"1A", "v"}, {"A-B", "v"}, {"", "v"}});
    for (const char* ref : {"env:", "env:1A", "env:A-B", "env:A B", "env:sk-live-abcdef123456"}) {
        auto r = resolve_secret(ref, g);
        EXPECT_FALSE(r.ok) << ref;
        EXPECT_FALSE(r.error.empty()) << ref;
        // The "name" may be a secret pasted in the wrong place: not echoed.
        EXPECT_EQ(r.error.find("sk-live"), std::string::npos) << r.error;
    }
    EXPECT_TRUE(resolve_secret("env:_a1", env_of({{"_a1", "v"}})).ok);
}

TEST(Secret, EnvDefaultGetenv) {
    ASSERT_EQ(setenv("LLMGW_TEST_SECRET_XYZ", "value-from-env", 1), 0);
    auto r = resolve_secret("env:LLMGW_TEST_SECRET_XYZ");
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.value, "value-from-env");
    unsetenv("LLMGW_TEST_SECRET_XYZ");
    r = resolve_secret("env:LLMGW_TEST_SECRET_XYZ");
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "environment variable \"LLMGW_TEST_SECRET_XYZ\" is not set");
}

TEST_F(SecretFiles, TrailingNewlines) {
    EXPECT_EQ(resolve_secret("file:" + write("a", "s3cret\n")).value, "s3cret");
    EXPECT_EQ(resolve_secret("file:" + write("b", "s3cret\r\n")).value, "s3cret");
    EXPECT_EQ(resolve_secret("file:" + write("c", "s3cret")).value, "s3cret");
    EXPECT_EQ(resolve_secret("file:" + write("d", "s3cret\n\n")).value, "s3cret\n") << "only one stripped";
    EXPECT_EQ(resolve_secret("file:" + write("e", "s3cret\r")).value, "s3cret\r");
    EXPECT_EQ(resolve_secret("file:" + write("f", " spaced \n")).value, " spaced ");
    auto r = resolve_secret("file:" + write("g", "line1\nline2\n"));
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.value, "line1\nline2");
}

TEST_F(SecretFiles, EmptyFile) {
    for (const char* content : {"", "\n", "\r\n"}) {
        const std::string path = write("empty", content);
        auto r = resolve_secret("file:" + path);
        EXPECT_FALSE(r.ok);
        EXPECT_EQ(r.error, "secret file \"" + path + "\" is empty");
    }
}

TEST_F(SecretFiles, MissingFileAndDirectory) {
    auto r = resolve_secret("file:/nonexistent/llmgw/x");
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "secret file \"/nonexistent/llmgw/x\" cannot be read: No such file or directory");
    r = resolve_secret("file:" + dir);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find(dir), std::string::npos);
    r = resolve_secret("file:");
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.error.empty());
}

// Root reads every file: as root, the file is read by a child process that
// has become nobody (65534), so the test runs (not skips) under CI as root.
TEST_F(SecretFiles, Unreadable) {
    const std::string path = write("noperm", "topsecretvalue\n");
    ASSERT_EQ(chmod(path.c_str(), 0), 0);
    if (geteuid() != 0) {
        auto r = resolve_secret("file:" + path);
        EXPECT_FALSE(r.ok);
        EXPECT_EQ(r.error, "secret file \"" + path + "\" cannot be read: Permission denied");
        return;
    }
    ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
        auto r = resolve_secret("file:" + path);
        const std::string out = (r.ok ? "ok:" : "error:") + r.error;
        const ssize_t n = ::write(fds[1], out.data(), out.size());
        _exit(n == static_cast<ssize_t>(out.size()) ? 0 : 3);
    }
    close(fds[1]);
    std::string got;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child could not become nobody";
    EXPECT_EQ(got, "error:secret file \"" + path + "\" cannot be read: Permission denied");
}

TEST_F(SecretFiles, SizeLimit) {
    std::string big(64 * 1024, 'k');
    auto r = resolve_secret("file:" + write("max", big));
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.value.size(), 64u * 1024);
    r = resolve_secret("file:" + write("maxnl", big + "\n"));
    EXPECT_FALSE(r.ok) << "the limit is on the file, newline included";
    const std::string path = write("huge", big + "kk");
    r = resolve_secret("file:" + path);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "secret file \"" + path + "\" is larger than 64 KiB");
    EXPECT_EQ(r.error.find("kkkk"), std::string::npos);
}

TEST(Secret, Literals) {
    auto r = resolve_secret("sk-plain-value");
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.value, "sk-plain-value");
    r = resolve_secret("literal:env:NOT_A_VAR");
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.value, "env:NOT_A_VAR");
    r = resolve_secret("literal:file:/etc/passwd");
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.value, "file:/etc/passwd");
    r = resolve_secret("literal:literal:x");
    EXPECT_EQ(r.value, "literal:x");
    r = resolve_secret("literal:");
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.error.empty());
    r = resolve_secret("");
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.error.empty());
    r = resolve_secret("Env:X");  // prefixes are case-sensitive
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.value, "Env:X");
}

TEST_F(SecretFiles, ErrorsNeverContainTheValue) {
    const std::string value = "sk-very-secret-value-0123456789";
    std::vector<llmgw::SecretResult> rs;
    rs.push_back(resolve_secret("file:" + write("big", value + std::string(70000, 'x'))));
    rs.push_back(resolve_secret("literal:"));
    rs.push_back(resolve_secret("env:" + value, env_of({{value, value}})));
    for (const auto& r : rs) {
        EXPECT_FALSE(r.ok);
        EXPECT_EQ(r.error.find("very-secret"), std::string::npos) << r.error;
        EXPECT_EQ(r.value, "");
    }
    auto ok = resolve_secret("file:" + write("ok", value + "\n"));
    EXPECT_TRUE(ok.ok);
    EXPECT_EQ(ok.error, "");
}

TEST(Secret, Describe) {
    EXPECT_EQ(describe_secret_ref("env:OPENAI_API_KEY"), "env:OPENAI_API_KEY");
    EXPECT_EQ(describe_secret_ref("file:/run/secrets/openai"), "file:/run/secrets/openai");
    EXPECT_EQ(describe_secret_ref("sk-abcdef123456"), "literal");
    EXPECT_EQ(describe_secret_ref("literal:env:X"), "literal");
    EXPECT_EQ(describe_secret_ref(""), "literal");
    const std::string d = describe_secret_ref("env:sk-abcdef123456");
    EXPECT_EQ(d.find("abcdef"), std::string::npos) << d;
    EXPECT_EQ(d.rfind("env:", 0), 0u);
}
