// A scope's limits as JSON: the one home of that shape (usage, consumers,
// config). Limits that are not set (0) are left out.
#pragma once
#include "core/json/writer.h"
#include "core/metering/limits.h"

namespace llmgw {

inline void write_limits(JsonWriter& w, const Limits* l, std::string_view key = "limits") {
    w.key(key).begin_object();
    if (l != nullptr) {
        auto add = [&](const char* n, std::int64_t v) {
            if (v > 0) w.field(n, v);
        };
        add("requestsPerMinute", l->requests_per_minute);
        add("requestsPerDay", l->requests_per_day);
        add("tokensPerDay", l->tokens_per_day);
        add("tokensPerMonth", l->tokens_per_month);
        add("costPerDayMicroUsd", l->cost_per_day_micros);
        add("costPerMonthMicroUsd", l->cost_per_month_micros);
    }
    w.end_object();
}

}  // namespace llmgw
