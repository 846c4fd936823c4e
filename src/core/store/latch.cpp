// Store-down latch.
#include "core/store/latch.h"

namespace llmgw {

bool StoreLatch::may_try(std::int64_t now_ms) const {
    if (!open_) return true;
    if (probing_ && now_ms - probe_start_ms_ < kProbeStaleMs) return false;
    return now_ms - last_error_ms_ >= kOpenMs;
}

bool StoreLatch::should_try(std::int64_t now_ms) {
    if (!may_try(now_ms)) return false;
    if (!open_) return true;
    probing_ = true;
    probe_start_ms_ = now_ms;
    return true;
}

void StoreLatch::on_success(std::int64_t /*now_ms*/) {
    open_ = false;
    probing_ = false;
}

bool StoreLatch::on_failure(std::int64_t now_ms, const std::string& msg) {
    open_ = true;
    probing_ = false;
    has_error_ = true;
    last_error_ms_ = now_ms;
    try {
        last_error_ = msg;
    } catch (...) {
        // keep the previous message; the time still moves
    }
    if (logged_ && now_ms - last_log_ms_ < kLogIntervalMs) return false;
    logged_ = true;
    last_log_ms_ = now_ms;
    return true;
}

}  // namespace llmgw
