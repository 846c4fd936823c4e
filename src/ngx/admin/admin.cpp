// The admin location: the HTML shell (no key) and the JSON API behind the
// admin gate (the access phase already answered 401/403 where needed).
#include <ctime>

#include "core/json/envelope.h"
#include "ngx/module.h"

namespace llmgw {
namespace {

// Keys read per scope, in this order.
enum Slot { kReqMin, kReqDay, kInDay, kOutDay, kInMonth, kOutMonth, kCostDay, kCostMonth, kRejDay, kSeen, kSlots };

void scope_keys(const std::string& kind, const std::string& id, std::time_t now, std::vector<std::string>& out) {
    std::string m = bucket(Window::Min, now), d = bucket(Window::Day, now), mo = bucket(Window::Month, now);
    out.push_back(counter_key(kind, id, "req", Window::Min, m));
    out.push_back(counter_key(kind, id, "req", Window::Day, d));
    out.push_back(counter_key(kind, id, "tokin", Window::Day, d));
    out.push_back(counter_key(kind, id, "tokout", Window::Day, d));
    out.push_back(counter_key(kind, id, "tokin", Window::Month, mo));
    out.push_back(counter_key(kind, id, "tokout", Window::Month, mo));
    out.push_back(counter_key(kind, id, "cost", Window::Day, d));
    out.push_back(counter_key(kind, id, "cost", Window::Month, mo));
    out.push_back(counter_key(kind, id, "rej", Window::Day, d));
    out.push_back("llmgw:" + kind + ":" + id + ":seen");
}

void append_time(std::string& out, std::int64_t t) {
    if (t <= 0) {
        out += "null";
        return;
    }
    std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "\"%Y-%m-%dT%H:%M:%SZ\"", &tm);
    out += buf;
}

void append_num(std::string& out, const char* name, std::int64_t v) {
    out += '"';
    out += name;
    out += "\":";
    out += std::to_string(v);
    out += ',';
}

void append_limits(std::string& out, const Limits* l) {
    out += "\"limits\":{";
    if (l != nullptr) {
        std::string inner;
        auto add = [&](const char* n, std::int64_t v) {
            if (v > 0) append_num(inner, n, v);
        };
        add("requestsPerMinute", l->requests_per_minute);
        add("requestsPerDay", l->requests_per_day);
        add("tokensPerDay", l->tokens_per_day);
        add("tokensPerMonth", l->tokens_per_month);
        add("costPerDayMicroUsd", l->cost_per_day_micros);
        add("costPerMonthMicroUsd", l->cost_per_month_micros);
        if (!inner.empty()) inner.pop_back();
        out += inner;
    }
    out += '}';
}

void append_entry(std::string& out, const char* kind, const std::string& id, const std::string* group,
                  const Limits* limits, const std::int64_t* v) {
    out += "{\"kind\":\"";
    out += kind;
    out += "\",\"name\":\"";
    json_escape_append(out, id);
    out += "\",";
    if (group) {
        out += "\"group\":\"";
        json_escape_append(out, *group);
        out += "\",";
    }
    append_num(out, "requestsPerMinute", v[kReqMin]);
    append_num(out, "requestsPerDay", v[kReqDay]);
    append_num(out, "tokensInPerDay", v[kInDay]);
    append_num(out, "tokensOutPerDay", v[kOutDay]);
    append_num(out, "tokensInPerMonth", v[kInMonth]);
    append_num(out, "tokensOutPerMonth", v[kOutMonth]);
    append_num(out, "costPerDayMicroUsd", v[kCostDay]);
    append_num(out, "costPerMonthMicroUsd", v[kCostMonth]);
    append_num(out, "rejectionsPerDay", v[kRejDay]);
    out += "\"lastSeen\":";
    append_time(out, v[kSeen]);
    out += ',';
    append_limits(out, limits);
    out += '}';
}

// Every admin response: no sniffing, nothing loaded or framed.
ngx_int_t content_headers(ngx_http_request_t* r) {
    if (add_header(r, "X-Content-Type-Options", "nosniff") != NGX_OK ||
        add_header(r, "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'") != NGX_OK) {
        return NGX_ERROR;
    }
    return NGX_OK;
}

// The JSON routes are never cached either.
ngx_int_t secure_headers(ngx_http_request_t* r) {
    if (content_headers(r) != NGX_OK || add_header(r, "Cache-Control", "no-store") != NGX_OK) return NGX_ERROR;
    return NGX_OK;
}

std::string render_usage(const Directory& dir, std::time_t now, const std::vector<std::int64_t>& values,
                         const std::string& replica) {
    std::string out = "{\"time\":";
    append_time(out, now);
    out += ",\"replica\":\"";
    json_escape_append(out, replica);
    out += "\",\"users\":[";
    const std::int64_t* v = values.data();
    for (std::size_t i = 0; i < dir.users().size(); ++i, v += kSlots) {
        const auto& u = dir.users()[i];
        if (i) out += ',';
        append_entry(out, "user", u.name, &u.group, &u.limits, v);
    }
    out += "],\"groups\":[";
    for (std::size_t i = 0; i < dir.groups().size(); ++i, v += kSlots) {
        const auto& g = dir.groups()[i];
        if (i) out += ',';
        append_entry(out, "group", g.name, nullptr, &g.limits, v);
    }
    out += "],\"total\":";
    append_entry(out, "total", "all", nullptr, nullptr, v);
    out += '}';
    return out;
}

ngx_int_t answer_usage(ngx_http_request_t* r, RequestCtx* ctx, std::time_t now, std::size_t nkeys,
                       const StoreReply& reply, const std::vector<std::int64_t>& values) {
    if (secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (reply.status != StoreStatus::Ok || values.size() != nkeys) {
        // An outage, never zeros.
        return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the limit store could not be read", "server_error",
                          "limit_store_unavailable");
    }
    return send_json(r, NGX_HTTP_OK, render_usage(*ctx->directory, now, values, main_conf(r)->state->replica));
}

ngx_int_t usage(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    const Directory& dir = *ctx->directory;
    std::time_t now = ngx_time();
    std::vector<std::string> keys;
    for (const auto& u : dir.users()) scope_keys("user", u.name, now, keys);
    for (const auto& g : dir.groups()) scope_keys("group", g.name, now, keys);
    scope_keys("total", "all", now, keys);

    CounterStore* store = counter_store(mcf);
    if (store == nullptr) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    struct Wait {
        bool pending = true, async = false;
        ngx_int_t rc = NGX_OK;
    };
    auto wait = std::make_shared<Wait>();
    std::weak_ptr<bool> alive = ctx->alive;
    std::size_t nkeys = keys.size();
    store->read(keys, [r, ctx, now, nkeys, wait, alive](const StoreReply& rep, const std::vector<std::int64_t>& v) {
        auto token = alive.lock();
        if (!token || !*token) return;
        wait->pending = false;
        ngx_int_t rc;
        try {
            rc = answer_usage(r, ctx, now, nkeys, rep, v);
        } catch (const std::exception&) {
            rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (!wait->async) {
            wait->rc = rc;
            return;
        }
        ngx_connection_t* c = r->connection;
        ngx_http_finalize_request(r, rc);
        ngx_http_run_posted_requests(c);
    });
    if (wait->pending) {
        wait->async = true;
        r->main->count++;   // released by the finalize in the callback
        return NGX_DONE;
    }
    return wait->rc;
}

void append_str(std::string& out, const char* name, std::string_view v) {
    out += '"';
    out += name;
    out += "\":\"";
    json_escape_append(out, v);
    out += "\",";
}

// Configuration and health of this replica. Secrets are never included:
// providers show how their key was given (env:NAME, file:/path, literal),
// the store its redacted URL.
ngx_int_t overview(ngx_http_request_t* r, RequestCtx* ctx) {
    MainConf* mcf = main_conf(r);
    const GatewayState& st = *mcf->state;
    std::string out = "{";
    append_str(out, "replica", st.replica);
    if (!st.instance.empty()) append_str(out, "instance", st.instance);
    out += "\"providers\":[";
    bool first = true;
    for (const auto& p : st.config.providers()) {
        if (!first) out += ',';
        first = false;
        out += '{';
        append_str(out, "name", p.name);
        append_str(out, "type", provider_type_name(p.type));
        append_str(out, "location", p.location);
        append_str(out, "key", p.key.empty() ? std::string("none") : p.key_ref);
        out += "\"models\":[";
        for (std::size_t i = 0; i < p.models.size(); ++i) {
            if (i) out += ',';
            out += '"';
            json_escape_append(out, p.models[i]);
            out += '"';
        }
        out += "],\"default\":";
        out += p.is_default ? "true" : "false";
        out += '}';
    }
    out += "],\"groups\":[";
    first = true;
    for (const auto& g : ctx->directory->groups()) {
        if (!first) out += ',';
        first = false;
        out += '"';
        json_escape_append(out, g.name);
        out += '"';
    }
    out += "],\"users\":";
    out += std::to_string(ctx->directory->users().size());
    out += ",\"store\":{";
    if (st.store) {
        const StoreLatch& l = st.store->latch;
        append_str(out, "type", "redis");
        append_str(out, "url", st.store->redacted_url);
        out += "\"up\":";
        out += l.open() ? "false" : "true";
        out += ",\"failOpen\":";
        out += st.store->fail_open ? "true" : "false";
        out += ",\"lastError\":";
        if (l.has_error()) {
            out += '"';
            json_escape_append(out, l.last_error());
            out += "\",\"lastErrorTime\":";
            append_time(out, l.last_error_time_ms() / 1000);
        } else {
            out += "null,\"lastErrorTime\":null";
        }
        out += ",\"telemetryDropped\":" + std::to_string(st.store->telemetry_dropped);
    } else {
        append_str(out, "type", "shm");
        out += "\"up\":true";
    }
    out += "},\"pricing\":{\"builtinDate\":\"";
    json_escape_append(out, PriceTable::builtin_date());
    out += "\",\"models\":" + std::to_string(st.prices.size());
    out += ",\"allowUnpriced\":";
    out += mcf->allow_unpriced ? "true" : "false";
    out += "},\"features\":{\"usersFile\":";
    out += st.users_file.empty() ? "false" : "true";
    out += ",\"sharedStore\":";
    out += st.store ? "true" : "false";
    out += "},\"warnings\":[]}";
    if (secure_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    return send_json(r, NGX_HTTP_OK, out);
}

const char kShell[] =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>LLM gateway</title></head><body>"
    "<h1>LLM gateway</h1><p>The admin API is under <code>admin/api/</code>; send an admin key in "
    "<code>x-api-key</code>.</p><ul><li><a href=\"admin/api/usage\">usage</a></li></ul></body></html>";

ngx_int_t shell(ngx_http_request_t* r) {
    if (content_headers(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    return send_body(r, NGX_HTTP_OK, "text/html; charset=utf-8", std::string_view(kShell, sizeof(kShell) - 1));
}

}  // namespace

ngx_int_t admin_handler(ngx_http_request_t* r, RequestCtx* ctx) {
    if (ngx_http_discard_request_body(r) != NGX_OK) r->keepalive = 0;
    switch (ctx->route) {
    case Route::AdminShell: return shell(r);
    case Route::AdminUsage: return usage(r, ctx);
    case Route::AdminOverview: return overview(r, ctx);
    default: break;
    }
    return send_error(r, NGX_HTTP_NOT_FOUND, "Unknown request URL", "invalid_request_error", "unknown_url");
}

}  // namespace llmgw
