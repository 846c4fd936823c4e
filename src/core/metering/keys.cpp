#include "core/metering/keys.h"

#include <charconv>
#include <cstring>

namespace llmgw {

namespace {

KeyLayout g_layout = KeyLayout::Plain;

constexpr std::string_view kStatsTag = "{stats}:";

// The scopes of the cluster's one {stats} slot: all but users and groups
// (the scopes there are many of). The statistics scopes callers name (model,
// provmodel, usermodel, lat) must share the slot of the one set of their
// ids, which the accounting script reads with their counters; the total,
// providers and tool servers and agents join them, so that an accounting
// batch is one call for the user, one for the group and one for the rest.
bool stats_tagged(std::string_view kind) { return kind != "user" && kind != "group"; }

// What the cluster layout adds to a key of kind: "{stats}:" or the two
// braces around "kind:id".
std::size_t tag_extra(std::string_view kind) {
    if (g_layout == KeyLayout::Plain) return 0;
    return stats_tagged(kind) ? kStatsTag.size() : 2;
}

void append_scope(std::string& out, std::string_view kind, std::string_view id) {
    out.append("llmgw:");
    const bool tagged = g_layout == KeyLayout::Cluster;
    if (tagged && stats_tagged(kind)) {
        out.append(kStatsTag);
    } else if (tagged) {
        out.append(1, '{').append(kind).append(":").append(id).append("}:");
        return;
    }
    out.append(kind).append(":").append(id).append(":");
}

constexpr std::string_view kReservedRecord = "rsv";   // a scope's reserved counters as one record

// "llmgw:" and the parts (kind, id, then the key's own) joined by ':': its
// size, its bytes at p, or written into out at its exact size (out may be a
// reused buffer): an accounting names dozens of these keys. The cluster
// layout tags the scope: "llmgw:{kind:id}:..." or "llmgw:{stats}:kind:id:...".
template <std::size_t N>
std::size_t key_size(const std::string_view (&parts)[N]) {
    std::size_t n = 6 + (N - 1) + tag_extra(parts[0]);   // "llmgw:" and the ':' between the parts
    for (const std::string_view part : parts) n += part.size();
    return n;
}

// p has room for key_size(parts) bytes; returns the end.
template <std::size_t N>
char* put_key(char* p, const std::string_view (&parts)[N]) {
    std::memcpy(p, "llmgw:", 6);
    p += 6;
    const bool tagged = g_layout == KeyLayout::Cluster;
    const bool stats = tagged && stats_tagged(parts[0]);
    if (stats) {
        std::memcpy(p, kStatsTag.data(), kStatsTag.size());
        p += kStatsTag.size();
    } else if (tagged) {
        *p++ = '{';
    }
    for (std::size_t i = 0; i < N; ++i) {
        if (!parts[i].empty()) std::memcpy(p, parts[i].data(), parts[i].size());
        p += parts[i].size();
        if (i == 1 && tagged && !stats) *p++ = '}';
        if (i + 1 < N) *p++ = ':';
    }
    return p;
}

template <std::size_t N>
void write_key(std::string& out, const std::string_view (&parts)[N]) {
    out.resize(key_size(parts));
    put_key(&out[0], parts);
}

}  // namespace

std::string counter_key(std::string_view kind, std::string_view id, std::string_view metric, Window w,
                        std::string_view bucket_str) {
    std::string key;
    counter_key_into(key, kind, id, metric, w, bucket_str);
    return key;
}

void counter_key_into(std::string& out, std::string_view kind, std::string_view id, std::string_view metric, Window w,
                      std::string_view bucket_str) {
    const std::string_view parts[] = {kind, id, metric, window_name(w), bucket_str};
    write_key(out, parts);
}

std::size_t counter_key_size(std::string_view kind, std::string_view id, std::string_view metric, Window w,
                             std::string_view bucket_str) {
    const std::string_view parts[] = {kind, id, metric, window_name(w), bucket_str};
    return key_size(parts);
}

char* put_counter_key(char* p, std::string_view kind, std::string_view id, std::string_view metric, Window w,
                      std::string_view bucket_str) {
    const std::string_view parts[] = {kind, id, metric, window_name(w), bucket_str};
    return put_key(p, parts);
}

std::string seen_key(std::string_view kind, std::string_view id) {
    std::string key;
    assign_seen_key(key, kind, id);
    return key;
}

void assign_seen_key(std::string& out, std::string_view kind, std::string_view id) {
    const std::string_view parts[] = {kind, id, "seen"};
    write_key(out, parts);
}

std::string scope_prefix(std::string_view kind, std::string_view id) {
    std::string key;
    append_scope(key, kind, id);
    return key;
}

void assign_entry_key(std::string& out, std::string_view kind, std::string_view id, Window w,
                      std::string_view bucket_str) {
    const std::string_view parts[] = {kind, id, window_name(w), bucket_str};
    write_key(out, parts);
}

std::size_t assign_entry_scope(std::string& out, std::string_view kind, std::string_view id) {
    const std::string_view parts[] = {kind, id, {}};
    write_key(out, parts);
    return out.size();
}

void assign_entry_window(std::string& out, std::size_t scope_len, Window w, std::string_view bucket_str) {
    const std::string_view name = window_name(w);
    out.resize(scope_len + name.size() + 1 + bucket_str.size());
    char* p = &out[scope_len];
    std::memcpy(p, name.data(), name.size());
    p += name.size();
    *p++ = ':';
    if (!bucket_str.empty()) std::memcpy(p, bucket_str.data(), bucket_str.size());
}

bool split_counter_key(std::string_view key, std::string& entry, std::string_view& metric) {
    std::size_t b = key.rfind(':');
    std::size_t w = b == std::string_view::npos || b == 0 ? std::string_view::npos : key.rfind(':', b - 1);
    std::size_t m = w == std::string_view::npos || w == 0 ? std::string_view::npos : key.rfind(':', w - 1);
    if (m == std::string_view::npos) return false;
    metric = key.substr(m + 1, w - m - 1);
    entry.assign(key.data(), m);
    entry.append(key.substr(w));
    return true;
}

void append_usage_keys(std::string_view kind, std::string_view id, std::time_t now, std::vector<std::string>& out) {
    const std::string m = bucket(Window::Min, now), d = bucket(Window::Day, now), mo = bucket(Window::Month, now);
    out.push_back(counter_key(kind, id, "req", Window::Min, m));
    out.push_back(counter_key(kind, id, "req", Window::Day, d));
    out.push_back(counter_key(kind, id, "tokin", Window::Day, d));
    out.push_back(counter_key(kind, id, "tokout", Window::Day, d));
    out.push_back(counter_key(kind, id, "tokin", Window::Month, mo));
    out.push_back(counter_key(kind, id, "tokout", Window::Month, mo));
    out.push_back(counter_key(kind, id, "cost", Window::Day, d));
    out.push_back(counter_key(kind, id, "cost", Window::Month, mo));
    out.push_back(counter_key(kind, id, "rej", Window::Day, d));
    out.push_back(seen_key(kind, id));
}

std::string reserved_key(std::string_view kind, std::string_view id, bool tokens, std::int64_t slot) {
    return reserved_key_in(scope_prefix(kind, id), tokens, slot);
}

std::string reserved_key_in(std::string_view scope, bool tokens, std::int64_t slot) {
    std::string key;
    key.reserve(scope.size() + 30);
    key.append(scope).append(tokens ? "rtok:rsv:" : "rcost:rsv:").append(std::to_string(slot));
    return key;
}

bool split_reserved_key(std::string_view key, std::string_view& scope, std::int64_t& slot, bool& tokens) {
    const std::size_t b = key.rfind(':');
    if (b == std::string_view::npos || b + 1 >= key.size() || b + 19 < key.size()) return false;   // 1..18 digits
    if (b < 4 || key.substr(b - 4, 4) != ":rsv") return false;   // most keys a store sees: counters
    std::int64_t n = 0;
    for (std::size_t i = b + 1; i < key.size(); ++i) {
        if (key[i] < '0' || key[i] > '9') return false;
        n = n * 10 + (key[i] - '0');
    }
    const std::string_view head = key.substr(0, b + 1);   // ...:rtok:rsv:
    for (const std::string_view tail : {std::string_view("rtok:rsv:"), std::string_view("rcost:rsv:")}) {
        if (head.size() > tail.size() && head.substr(head.size() - tail.size()) == tail) {
            scope = key.substr(0, head.size() - tail.size());
            slot = n;
            tokens = tail[1] == 't';
            return true;
        }
    }
    return false;
}

bool reserved_hash_field(std::string_view key, std::string& hash, std::string& field) {
    std::string_view scope;
    std::int64_t slot = 0;
    bool tokens = false;
    if (!split_reserved_key(key, scope, slot, tokens)) return false;
    assign_reserved_record_key(hash, scope);
    assign_reserved_field(field, tokens ? kReservedTokensTag : kReservedCostTag, slot);
    return true;
}

char* put_reserved_field(char* p, char tag, std::int64_t slot) {
    *p = tag;
    return std::to_chars(p + 1, p + kReservedFieldMax, slot).ptr;   // 20 chars at most
}

void assign_reserved_field(std::string& out, char tag, std::int64_t slot) {
    char buf[kReservedFieldMax];
    out.assign(buf, static_cast<std::size_t>(put_reserved_field(buf, tag, slot) - buf));
}

void assign_reserved_record_key(std::string& out, std::string_view scope) {
    out.assign(scope).append(kReservedRecord);
}

std::string reserved_record_key(std::string_view kind, std::string_view id) {
    std::string out;
    assign_reserved_record_key(out, scope_prefix(kind, id));
    return out;
}

bool is_reserved_record_key(std::string_view key) {
    const std::size_t n = kReservedRecord.size();
    return key.size() > n && key.substr(key.size() - n) == kReservedRecord && key[key.size() - n - 1] == ':';
}

std::string_view reserved_record_scope(std::string_view record) {
    if (!is_reserved_record_key(record)) return std::string_view();
    return record.substr(0, record.size() - kReservedRecord.size());
}

std::string op_key(std::string_view unique, std::string_view near) {
    std::string key = "llmgw:";
    const std::string_view tag = hash_tag(near);
    if (!tag.empty()) key.append(1, '{').append(tag).append("}:");
    key.append("op:").append(unique);
    return key;
}

std::string_view hash_tag(std::string_view key) {
    const std::size_t open = key.find('{');
    if (open == std::string_view::npos) return {};
    const std::size_t close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return {};
    return key.substr(open + 1, close - open - 1);
}

void set_key_layout(KeyLayout layout) { g_layout = layout; }
KeyLayout key_layout() { return g_layout; }

std::string_view stats_ids_key() {
    return g_layout == KeyLayout::Cluster ? std::string_view("llmgw:{stats}:ids") : std::string_view(kStatsIdsKey);
}

}  // namespace llmgw
