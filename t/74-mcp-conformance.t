#!/usr/bin/perl
# The official MCP conformance suite (@modelcontextprotocol/conformance,
# on Node 22 from t/conformance) against the gateway's federated /mcp,
# fronting one SDK-built server that provides the suite's fixture tools.
# The scenarios the federation serves must pass; those it does not
# (subscriptions, logging, and the server-to-client messages that need a
# channel back to the client) are listed in
# docs/testing.md and must fail for the reason given there, so a change in
# either direction is seen.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();
my $HERE = "$Gw::ROOT/t/conformance";
Gw::need(-x "$HERE/node_modules/node/bin/node" && -d "$HERE/node_modules/\@modelcontextprotocol/conformance",
         't/conformance/node_modules is absent: run `make conformance-deps` (npm ci in t/conformance)');

my $KEY = 'sk-conformance-0a1b2c3d4e';
my $fixture = Gw::Mock->start(script => 't/conformance/fixture_server.mjs', env => { FIXTURE_MODE => 'stateless' });
my $conf = GwConf::gateway(
    http => "llm_gateway_user suite key=$KEY;\n"
          . "llm_gateway_mcp_server everything location=/_t/everything;\n"
          # Host checking is nginx's: unknown names reach the default server.
          . "server { listen 127.0.0.1:%%PORT%% default_server; return 421; }\n",
    server => "server_name localhost 127.0.0.1;\n"
            . "    location = /mcp { llm_gateway_mcp; }\n"
            . "    location /_t/everything { internal; proxy_pass http://127.0.0.1:%%FIXTURE%%/mcp; proxy_http_version 1.1; "
            . "proxy_set_header Connection \"\"; proxy_buffering off; }\n",
);
my $ng = Gw::Nginx->start(conf => $conf, vars => { FIXTURE => $fixture->port, MOCK => $fixture->port });

my $r = Gw::run(["$HERE/run.sh", $ng->url('/mcp'), '--bearer', $KEY],
                env => { CONFORMANCE_QUIET => 1, CONFORMANCE_TIMEOUT_S => 600 }, timeout => 660);
is($r->{exit}, 0, 'the suite ran') or diag($r->{stderr});
my %verdict;
for (split /\n/, $r->{stdout}) {
    $verdict{$1} = 'PASS' if /^PASS (\S+)/;
    $verdict{$1} = "FAIL $2" if /^FAIL (\S+): ?(.*)/;
}
diag(join "\n", map { "$_: $verdict{$_}" } sort keys %verdict);

my @pass = qw(server-initialize ping tools-list tools-call-simple-text tools-call-image tools-call-audio
              tools-call-embedded-resource tools-call-mixed-content tools-call-error server-sse-multiple-streams
              dns-rebinding-protection resources-list resources-read-text resources-read-binary
              resources-templates-read prompts-list prompts-get-simple prompts-get-with-args
              prompts-get-embedded-resource prompts-get-with-image completion-complete);
my @not_served = qw(resources-subscribe resources-unsubscribe logging-set-level
                    tools-call-with-logging tools-call-with-progress tools-call-sampling tools-call-elicitation
                    elicitation-sep1034-defaults elicitation-sep1330-enums);
is($verdict{$_}, 'PASS', "$_ passes through the federation") for @pass;
like($verdict{$_} // '', qr/^FAIL/, "$_ fails: not federated (docs/testing.md)") for @not_served;

done_testing();
