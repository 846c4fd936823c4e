// The users file (docs/users-file.md): JSON with "groups" and "users".
//   {"groups": [{"name": "eng", "limits": {"requestsPerMinute": 50}}],
//    "users":  [{"name": "bob", "key": "env:BOB_KEY", "group": "eng",
//                "admin": false, "limits": {"costPerDayUSD": 2.5}},
//               {"name": "eve", "keySha256": "<64 hex digits>"}]}
#pragma once
#include <string>
#include <string_view>

#include "core/config/gwconfig.h"
#include "core/config/secret.h"

namespace llmgw {

// Adds the file's groups and users to dir (which already holds the inline
// ones) and closes it. Returns "" or a sentence saying what is wrong, naming
// the entry (never a key).
std::string load_users_file(std::string_view json, Directory& dir, const GetEnv& getenv_fn = nullptr);

}  // namespace llmgw
