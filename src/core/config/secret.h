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
// value is an error; files over 64 KiB are an error. env: NAME must match
// [A-Za-z_][A-Za-z0-9_]* and be set and non-empty; an invalid NAME is not
// echoed in the error (it may be a secret pasted in the wrong place).
// "literal:" or a plain literal must be non-empty.
SecretResult resolve_secret(std::string_view ref, const GetEnv& getenv_fn = nullptr);

// How the reference may be shown in logs/admin views: "env:NAME",
// "file:/path" or "literal" (never the value); "env:(invalid name)" when NAME
// is not a valid variable name.
std::string describe_secret_ref(std::string_view ref);

}  // namespace llmgw
