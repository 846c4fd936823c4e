// The ids the gateway gives the answers it writes itself (translated
// answers: chatcmpl-..., call_..., msg_..., toolu_...). They only need to be
// unique enough to tell answers apart in logs; never secrets.
#pragma once
#include <string>
#include <string_view>

namespace llmgw {

// prefix followed by 24 random base62 characters.
std::string response_id(std::string_view prefix);

}  // namespace llmgw
