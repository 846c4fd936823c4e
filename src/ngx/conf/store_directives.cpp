// llm_gateway_store, llm_gateway_replica, llm_gateway_instance: where the
// counters live when several replicas share them, and who this replica is.
#include "core/config/secret.h"
#include "core/metering/keys.h"
#include "ngx/conf/conf_util.h"
#include "ngx/conf/directives.h"
#include "ngx/http/respond.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"

namespace llmgw {
namespace {

std::string_view arg(ngx_conf_t* cf, ngx_uint_t i) { return conf_arg(cf, i); }

ngx_str_t cfstr(ngx_conf_t* cf, const std::string& s) { return pstr(cf->pool, s); }

#if (NGX_SSL)
char* setup_tls(ngx_conf_t* cf, StoreSettings& st) {
    auto* ssl = static_cast<ngx_ssl_t*>(ngx_pcalloc(cf->pool, sizeof(ngx_ssl_t)));
    if (ssl == nullptr) return static_cast<char*>(NGX_CONF_ERROR);
    ssl->log = cf->log;
    if (ngx_ssl_create(ssl, NGX_SSL_TLSv1_2 | NGX_SSL_TLSv1_3, nullptr) != NGX_OK) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == nullptr) {
        ngx_ssl_cleanup_ctx(ssl);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    cln->handler = ngx_ssl_cleanup_ctx;
    cln->data = ssl;
    const StoreUrl& u = st.redis.url;
    if (!u.ca_file.empty()) {
        ngx_str_t ca = cfstr(cf, u.ca_file);
        if (ngx_ssl_trusted_certificate(cf, ssl, &ca, 4) != NGX_OK) {
            return conf_error(cf, "llm_gateway_store: cannot load the CA file \"" + u.ca_file + "\"");
        }
    } else if (SSL_CTX_set_default_verify_paths(ssl->ctx) != 1) {
        return conf_error(cf, "llm_gateway_store: cannot load the system CA certificates");
    }
    if (!u.cert_file.empty() || !u.key_file.empty()) {
        if (u.cert_file.empty() || u.key_file.empty()) {
            return conf_error(cf, "llm_gateway_store: tls_cert and tls_key go together");
        }
        ngx_str_t cert = cfstr(cf, u.cert_file), key = cfstr(cf, u.key_file);
        if (ngx_ssl_certificate(cf, ssl, &cert, &key, nullptr) != NGX_OK) {
            return conf_error(cf, "llm_gateway_store: cannot load the client certificate \"" + u.cert_file + "\"");
        }
    }
    st.redis.ssl = ssl;
    return NGX_CONF_OK;
}
#endif

// seeds=host:port,...: a cluster's other first addresses, resolved now.
char* resolve_seeds(ngx_conf_t* cf, StoreSettings& st, const std::string& list) {
    std::size_t from = 0;
    while (from < list.size()) {
        std::size_t comma = list.find(',', from);
        if (comma == std::string::npos) comma = list.size();
        const std::string item = list.substr(from, comma - from);
        from = comma + 1;
        StoreUrl u;
        std::string err;
        if (item.empty() || !parse_store_url("redis://" + item, u, err) || item.find('/') != std::string::npos ||
            item.find('@') != std::string::npos) {
            return conf_error(cf, "llm_gateway_store: invalid seed \"" + item + "\" (want host:port)");
        }
        if (st.seeds.size() >= 16) return conf_error(cf, "llm_gateway_store: more than 16 seeds");
        StoreSettings::Seed seed;
        seed.host = u.host;
        seed.port = u.port;
        seed.addr_text = (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) + ":" +
                         std::to_string(u.port);
        ngx_url_t url{};
        url.url = cfstr(cf, seed.addr_text);
        url.default_port = static_cast<in_port_t>(u.port);
        if (ngx_parse_url(cf->pool, &url) != NGX_OK || url.naddrs == 0) {
            return conf_error(cf, "llm_gateway_store: cannot resolve the seed \"" + seed.addr_text + "\"" +
                                      (url.err ? std::string(": ") + url.err : std::string()));
        }
        seed.addr = url.addrs[0];
        st.seeds.push_back(std::move(seed));
    }
    return NGX_CONF_OK;
}

char* store(ngx_conf_t* cf, MainConf* mcf) {
    GatewayState& gs = *mcf->state;
    if (gs.store) return const_cast<char*>("is duplicate");
    auto st = std::make_unique<StoreSettings>();
    std::string err, seeds;
    if (!parse_store_url(arg(cf, 1), st->redis.url, err)) return conf_error(cf, "llm_gateway_store: " + err);
    st->redis.password = st->redis.url.password;
    for (ngx_uint_t i = 2; i < cf->args->nelts; ++i) {
        std::string_view a = arg(cf, i);
        if (a.rfind("password=", 0) == 0) {
            SecretResult s = resolve_secret(a.substr(9));
            if (!s.ok) return conf_error(cf, "llm_gateway_store: " + s.error);
            st->redis.password = s.value;
        } else if (a == "fail_open=on" || a == "fail_open=off") {
            st->fail_open = a == "fail_open=on";
        } else if (a.rfind("timeout=", 0) == 0) {
            ngx_msec_t ms = 0;
            if (!conf_time(a.substr(8), ms) || ms == 0) {
                return conf_error(cf, "llm_gateway_store: invalid timeout \"" + std::string(a.substr(8)) + "\"");
            }
            st->redis.timeout = ms;
        } else if (a == "cluster=on" || a == "cluster=off") {
            st->cluster = a == "cluster=on";
        } else if (a.rfind("seeds=", 0) == 0) {
            if (!seeds.empty()) return conf_error(cf, "llm_gateway_store: seeds= is given twice");
            seeds = std::string(a.substr(6));
            if (seeds.empty()) return conf_error(cf, "llm_gateway_store: seeds= names no address");
        } else if (a.rfind("flush=", 0) == 0) {
            ngx_msec_t ms = 0;
            if (!conf_time(a.substr(6), ms) || ms > 1000) {
                return conf_error(cf, "llm_gateway_store: flush= must be a time from 0 to 1s (e.g. flush=10ms), not \"" +
                                          std::string(a.substr(6)) + "\"");
            }
            st->flush_ms = ms;
        } else {
            return conf_error(cf, "invalid parameter \"" + std::string(a.substr(0, a.find('='))) +
                                      "\" of llm_gateway_store");
        }
    }
    const StoreUrl& u = st->redis.url;
    if (!seeds.empty() && !st->cluster) return conf_error(cf, "llm_gateway_store: seeds= needs cluster=on");
    if (st->cluster && u.db != 0) {
        return conf_error(cf, "llm_gateway_store: a Redis Cluster has only database 0, not " + std::to_string(u.db));
    }
    // The password in effect, from the URL or password=, shows as [redacted].
    StoreUrl shown = u;
    shown.password = st->redis.password;
    st->redacted_url = redacted_store_url(shown);

    // Resolved once here, like an upstream server address.
    std::string hostport = (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) + ":" +
                           std::to_string(u.port);
    ngx_url_t url{};
    url.url = cfstr(cf, hostport);
    url.default_port = static_cast<in_port_t>(u.port);
    url.no_resolve = 0;
    if (ngx_parse_url(cf->pool, &url) != NGX_OK || url.naddrs == 0) {
        return conf_error(cf, "llm_gateway_store: cannot resolve \"" + hostport + "\"" +
                                  (url.err ? std::string(": ") + url.err : std::string()));
    }
    st->redis.addr = url.addrs[0];
    st->redis.addr_text = cfstr(cf, hostport);
    st->redis.tls_name = cfstr(cf, u.sni.empty() ? u.host : u.sni);
    if (u.tls) {
#if (NGX_SSL)
        char* rv = setup_tls(cf, *st);
        if (rv != NGX_CONF_OK) return rv;
#else
        return conf_error(cf, "llm_gateway_store: rediss:// needs nginx built with SSL");
#endif
    }
    if (st->cluster) {
        char* rv = resolve_seeds(cf, *st, seeds);
        if (rv != NGX_CONF_OK) return rv;
        set_key_layout(KeyLayout::Cluster);   // the workers set it again from their configuration
    }
    gs.store = std::move(st);
    return NGX_CONF_OK;
}

}  // namespace

char* set_store(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    return guarded_setter(cf, store, static_cast<MainConf*>(conf));
}

char* set_replica(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    auto* mcf = static_cast<MainConf*>(conf);
    if (!mcf->state->replica.empty()) return const_cast<char*>("is duplicate");
    mcf->state->replica = std::string(arg(cf, 1));
    return NGX_CONF_OK;
}

char* set_instance(ngx_conf_t* cf, ngx_command_t*, void* conf) {
    auto* mcf = static_cast<MainConf*>(conf);
    if (!mcf->state->instance.empty()) return const_cast<char*>("is duplicate");
    mcf->state->instance = std::string(arg(cf, 1));
    return NGX_CONF_OK;
}

}  // namespace llmgw
