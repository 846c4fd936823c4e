#include "core/routing/retry.h"

#include <cstring>

#include "core/http/ascii.h"

namespace llmgw {
namespace {

bool digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
    if (pos + n > s.size()) return false;
    int v = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    out = v;
    return true;
}

int month_of(std::string_view m) {
    static const char* names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    for (int i = 0; i < 12; ++i) {
        if (m == names[i]) return i + 1;
    }
    return 0;
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool clock(std::string_view s, std::size_t pos, int& h, int& mi, int& se) {
    return pos + 8 <= s.size() && digits(s, pos, 2, h) && s[pos + 2] == ':' && digits(s, pos + 3, 2, mi) &&
           s[pos + 5] == ':' && digits(s, pos + 6, 2, se) && h < 24 && mi < 60 && se < 61;
}

// An HTTP-date as unix seconds; -1 when it is not one.
std::int64_t http_date(std::string_view s) {
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
    const std::size_t comma = s.find(',');
    if (comma != std::string_view::npos) {
        std::string_view rest = s.substr(comma + 1);
        if (rest.size() == 25 && rest[0] == ' ' && rest[3] == ' ' && rest[7] == ' ' && rest[12] == ' ' &&
            rest.substr(21) == " GMT") {   // " 06 Nov 1994 08:49:37 GMT"
            if (!digits(rest, 1, 2, d) || !(mo = month_of(rest.substr(4, 3))) || !digits(rest, 8, 4, y) ||
                !clock(rest, 13, h, mi, se))
                return -1;
        } else if (rest.size() == 23 && rest[0] == ' ' && rest[3] == '-' && rest[7] == '-' && rest[10] == ' ' &&
                   rest.substr(19) == " GMT") {   // " 06-Nov-94 08:49:37 GMT"
            if (!digits(rest, 1, 2, d) || !(mo = month_of(rest.substr(4, 3))) || !digits(rest, 8, 2, y) ||
                !clock(rest, 11, h, mi, se))
                return -1;
            y += y < 70 ? 2000 : 1900;
        } else {
            return -1;
        }
    } else if (s.size() == 24 && s[3] == ' ' && s[7] == ' ' && s[10] == ' ' && s[19] == ' ') {
        // "Sun Nov  6 08:49:37 1994"
        if (!(mo = month_of(s.substr(4, 3)))) return -1;
        if (s[8] == ' ') {
            if (!digits(s, 9, 1, d)) return -1;
        } else if (!digits(s, 8, 2, d)) {
            return -1;
        }
        if (!clock(s, 11, h, mi, se) || !digits(s, 20, 4, y)) return -1;
    } else {
        return -1;
    }
    if (d < 1 || d > 31) return -1;
    return days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 + mi * 60 + se;
}

}  // namespace

std::int64_t parse_retry_after_ms(std::string_view v, std::int64_t now_unix) {
    v = trim_ows(v);
    if (v.empty()) return -1;
    if (v[0] >= '0' && v[0] <= '9') {
        std::int64_t secs = 0;
        for (char c : v) {
            if (c < '0' || c > '9') return -1;
            secs = secs * 10 + (c - '0');
            if (secs > 10'000'000) return -1;   // > 115 days: not a wait anyone means
        }
        return secs * 1000;
    }
    std::int64_t at = http_date(v);
    if (at < 0) return -1;
    return at <= now_unix ? 0 : (at - now_unix) * 1000;
}

std::int64_t backoff_ms(const Backoff& b, unsigned k, double u) {
    if (k == 0) k = 1;
    std::int64_t d = b.base_ms;
    for (unsigned i = 1; i < k && d < b.max_ms; ++i) d *= 2;
    if (d > b.max_ms) d = b.max_ms;
    if (u < 0) u = 0;
    if (u >= 1) u = 0.999999;
    const std::int64_t lo = d / 2;
    return lo + static_cast<std::int64_t>(static_cast<double>(d - lo) * u);
}

}  // namespace llmgw
