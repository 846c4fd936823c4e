// Secret references: "env:NAME", "file:/path" or a literal value (a literal
// that itself starts with "env:" or "file:" can be written "literal:...").
// Resolved once, at configuration time.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace llmgw {

struct SecretResult {
    bool ok = false;
    std::string value;     // the secret (never log it)
    std::string error;     // a sentence naming the reference, never the value
};

using GetEnv = std::function<const char*(const char*)>;

// file: reads the whole file and strips one trailing "\n" or "\r\n"; an empty
// value is an error; files over 64 KiB are an error.
SecretResult resolve_secret(std::string_view ref, const GetEnv& getenv_fn = nullptr);

// How the reference may be shown in logs/admin views: "env:NAME",
// "file:/path" or "literal" (never the value).
std::string describe_secret_ref(std::string_view ref);

}  // namespace llmgw
