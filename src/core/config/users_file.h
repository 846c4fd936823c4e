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

// How many users of the users file (where == "users file") give their key
// itself: literally or as literal: (not env:, file: or keySha256).
std::size_t users_file_keys(const Directory& dir);

// The warning for a users file holding keys that other users may read (its
// mode has the group or other read bit): "" when there is nothing to say.
// Names the file and its mode, never a key.
std::string users_file_exposure(std::string_view path, unsigned mode, std::size_t keys);

}  // namespace llmgw
