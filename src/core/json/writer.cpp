#include "core/json/writer.h"

#include <ctime>

namespace llmgw {

void JsonWriter::write_string(std::string_view s, bool is_key) {
    std::string fixed;
    if (!is_valid_utf8(s)) {
        fixed = to_valid_utf8(s);
        s = fixed;
    }
    const auto len = static_cast<rapidjson::SizeType>(s.size());
    if (is_key) {
        w_.Key(s.data(), len, true);
    } else {
        w_.String(s.data(), len, true);
    }
}

JsonWriter& JsonWriter::time(std::int64_t unix_seconds) {
    if (unix_seconds <= 0) return null();
    std::time_t tt = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[32];
    std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return str(std::string_view(buf, n));
}

}  // namespace llmgw
