// The post-response accounting batch (no nginx).
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "core/limits.h"
#include "core/openai.h"

namespace llmgw {

struct AccountingInput {
    std::vector<Scope> scopes;     // user, group, total
    std::string model;             // canonical <provider>/<model> that answered
    Usage usage;                   // possibly estimated
    bool estimated = false;        // usage = body size / 4, all to tokin
    std::int64_t cost_micros = 0;
};

// For every scope and for the model scope: tokin (prompt) and tokout
// (completion) in all four windows, a zero direction skipped; cost when > 0.
// The model scope also gets req (the served model's request counter).
std::vector<Incr> build_accounting(const AccountingInput& in, std::time_t now, bool in_process);

}  // namespace llmgw
