// GET /admin/api/targets (no nginx): tool servers and agents sorted by kind
// and name, each with its request counters of the current minute, hour, day
// and month, its sanitized URL and its access list (null: every group;
// []: none; else the groups).
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "core/targets/target.h"

namespace llmgw {

// The targets in the view's order (kind "agent" before "mcp", then name).
std::vector<const TargetConf*> targets_in_view_order(const std::vector<TargetConf>& all);
// Four keys per target, in that order: req of min, hour, day, month.
void append_target_keys(const std::vector<const TargetConf*>& targets, std::time_t now, std::vector<std::string>& out);
std::string render_targets(const std::vector<const TargetConf*>& targets, const std::vector<std::int64_t>& values);

}  // namespace llmgw
