// The counter store's address (no nginx):
//
//   redis://[[user]:password@]host[:port][/db][?param=value&...]
//   rediss://...                                   (TLS)
//
// host is a name, an IPv4 address or an IPv6 address in brackets
// ([::1]); port defaults to 6379 (1-65535); db defaults to 0 (0-2147483647).
// user and password are percent-decoded; a password holding '?' must be
// written %3F ('@', '/', ':' and '#' may stay as they are: the userinfo ends
// at the last '@' before the query). "redis://alice@host" gives a user and no
// password (the password may come from elsewhere, e.g. a secret reference).
//
// Parameters (each at most once; values percent-decoded):
//   db=N               the database, instead of /N (not both)
//   tls_ca=/path       CA bundle to verify the server with
//   tls_cert=/path     client certificate  } together
//   tls_key=/path      client private key  }
//   tls_sni=name       SNI and certificate name (default: the host)
//   tls_verify=on|off  verify the server certificate (default on)
// tls_* parameters need rediss://.
//
// Error messages are sentences that never contain the password (nor the
// user), so they can be logged as they are.
#pragma once
#include <string>
#include <string_view>

namespace llmgw {

struct StoreUrl {
    bool tls = false;
    std::string host;       // without brackets: "::1"
    int port = 6379;
    int db = 0;
    std::string user, password;
    std::string ca_file, cert_file, key_file, sni;
    bool verify = true;
};

// Fills url from text; false and err (a sentence) when text is not a store
// address. url is only written on success. Never throws.
bool parse_store_url(std::string_view text, StoreUrl& url, std::string& err);

// For logs and the admin views: scheme, user, host, port, db and the TLS
// parameters that differ from the defaults; a non-empty password shows as
// "[redacted]":  rediss://:[redacted]@cache.internal:6380/2?tls_verify=off
std::string redacted_store_url(const StoreUrl& url);

}  // namespace llmgw
