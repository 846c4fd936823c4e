#!/usr/bin/perl
# Hostile tool servers behind the federated /mcp: a server answering
# tools/list with pages larger than max_response=, and one whose pages
# together pass max_total=. Each time that server's reading is stopped at
# the bound (no further page asked), it is dropped with its event and warn
# line, the other server's tools are still listed, and the single worker's
# peak memory (VmHWM) grows by no more than the bounds plus 24 MiB
# (docs/mcp.md#backend-calls). Then the bounds as configured, and nginx -t
# refusing bad ones.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();
Gw::need_js_deps();
Gw::watchdog(240);

my $MiB = 1024 * 1024;
my %KEY = (one => 'sk-bts-one-1a2b3c', two => 'sk-bts-two-4d5e6f', plain => 'sk-bts-plain-7a8b9c',
           admin => 'sk-bts-admin-0d1e2f');

sub backend { my (%env) = @_; return Gw::Mock->start(script => 't/js/mcp_backend.mjs', env => \%env) }
my %be = (
    honest => backend(MCP_NAME => 'honest', MCP_JSON => 1, MCP_TOOLS => 'echo,honest_only'),
    # pages over max_response= (4 MiB by default)
    big    => backend(MCP_NAME => 'big', MCP_FAULT => 'big-pages', MCP_PAGES => 8, MCP_PAGE_BYTES => 6 * $MiB),
    # pages under max_response= that pass max_total= (8 MiB by default) at the third
    many   => backend(MCP_NAME => 'many', MCP_FAULT => 'big-pages', MCP_PAGES => 8, MCP_PAGE_BYTES => 3 * $MiB),
);

sub internal_location {
    my ($name, $var) = @_;
    return "    location /_t/$name { internal; proxy_pass http://127.0.0.1:%%$var%%/mcp; "
         . "proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; }\n";
}

sub conf {
    my ($mcp_args) = @_;
    my $http = join('', map { "llm_gateway_user $_ key=$KEY{$_}" . ($_ eq 'admin' ? ' admin' : " group=$_") . ";\n" }
                        sort keys %KEY)
             . "llm_gateway_mcp_server honest location=/_t/honest groups=one,two,plain;\n"
             . "llm_gateway_mcp_server big location=/_t/big groups=one;\n"
             . "llm_gateway_mcp_server many location=/_t/many groups=two;\n";
    my $server = "location = /mcp { llm_gateway_mcp list_timeout=30s$mcp_args; }\n"
               . "    location /admin { llm_gateway_admin; }\n"
               . internal_location('honest', 'HONEST') . internal_location('big', 'BIG')
               . internal_location('many', 'MANY');
    return GwConf::gateway(http => $http, server => $server);
}
my %vars = (HONEST => $be{honest}->port, BIG => $be{big}->port, MANY => $be{many}->port,
            MOCK => $be{honest}->port);   # the default provider, unused here

sub list_tools {
    my ($ng, $who) = @_;
    my $r = Gw::http(POST => $ng->url('/mcp'), timeout => 60,
                     headers => { 'Content-Type' => 'application/json', Accept => 'application/json, text/event-stream',
                                  Authorization => "Bearer $KEY{$who}" },
                     body => Gw::json_encode({ jsonrpc => '2.0', id => 1, method => 'tools/list', params => {} }));
    return $r;
}
sub tool_names { my ($r) = @_; return [ sort map { $_->{name} } @{ ($r->{json}{result} // {})->{tools} // [] } ] }

sub events {
    my ($ng) = @_;
    my $r = Gw::http(GET => $ng->url('/admin/api/events?limit=200'), headers => GwConf::bearer($KEY{admin}));
    return [ grep { $_->{route} eq 'mcp-federated' } @{ $r->{json}{events} // [] } ];
}

sub list_requests { my ($m) = @_; return scalar grep { ($_->{rpc_method} // '') eq 'tools/list' } @{ $m->requests } }

# The single worker's memory (kB) from /proc: VmHWM is its peak so far.
sub worker_mem {
    my ($ng) = @_;
    my ($pid) = $ng->worker_pids;
    my $status = Gw::_slurp("/proc/$pid/status");
    my %kb = $status =~ /^(VmHWM|VmRSS):\s+(\d+)\s+kB/mg;
    return \%kb;
}

# One hostile list on a fresh one-worker gateway (the default bounds) after
# a warm-up list of the honest server alone: the list's answer, and how much
# the worker's peak memory grew over it.
my $ng;
sub hostile_list {
    my ($who, $label) = @_;
    $ng = Gw::Nginx->start(conf => conf(''), workers => 1, vars => \%vars);
    is_deeply(tool_names(list_tools($ng, 'plain')), [qw(echo honest_only)], 'warm-up: the honest server alone');
    $_->reset for values %be;
    my $before = worker_mem($ng);
    my $r = list_tools($ng, $who);
    my $after = worker_mem($ng);
    my $grew = $after->{VmHWM} - $before->{VmHWM};
    diag(sprintf('%s: worker VmHWM %d kB -> %d kB (+%d kB), VmRSS %d kB', $label, $before->{VmHWM}, $after->{VmHWM},
                 $grew, $after->{VmRSS}));
    return ($r, $grew);
}

subtest 'pages over max_response: that server dropped, the other listed, memory bounded' => sub {
    my ($r, $grew) = hostile_list('one', 'max_response');
    is($r->{status}, 200, '/mcp: 200');
    is_deeply(tool_names($r), [qw(echo honest_only)], "the honest server's tools, none of the big server's");
    is(list_requests($be{big}), 1, 'the big server was asked one page: its reading stopped, no next page asked');
    ok($ng->wait_log(qr/MCP server "big" failed in tools\/list: the reply is larger than max_response \(4194304 bytes\)/),
       'warn line: the server, the method, the bound');
    ok((grep { $_->{provider} eq 'big' && $_->{kind} eq 'upstream' && $_->{status} == 502
               && $_->{message} eq 'mcp-federated upstream response too large' } @{ events($ng) }),
       'event: mcp-federated upstream response too large (502), provider big');
    cmp_ok($grew, '<', (8 + 24) * 1024 + Gw::sanitizer_slack_kb(), 'the worker grew by less than max_total (8 MiB) + 24 MiB');
    $ng->stop;
};

subtest 'pages passing max_total together: that server dropped at the page that crosses' => sub {
    my ($r, $grew) = hostile_list('two', 'max_total');
    is($r->{status}, 200, '/mcp: 200');
    is_deeply(tool_names($r), [qw(echo honest_only)], "the honest server's tools, none of the paginating server's");
    is(list_requests($be{many}), 3, 'the server was asked 3 pages of 3 MiB: the third crossed 8 MiB, no fourth asked');
    ok($ng->wait_log(qr/MCP server "many" failed in tools\/list: the replies of this request are larger together than max_total \(8388608 bytes\)/),
       'warn line: the server, the method, the bound');
    ok((grep { $_->{provider} eq 'many' && $_->{status} == 502
               && $_->{message} eq 'mcp-federated upstream response too large' } @{ events($ng) }),
       'event: provider many');
    cmp_ok($grew, '<', (8 + 24) * 1024 + Gw::sanitizer_slack_kb(), 'the worker grew by less than max_total (8 MiB) + 24 MiB');
    $_->reset for values %be;
    is_deeply(tool_names(list_tools($ng, 'plain')), [qw(echo honest_only)], 'a list within the bounds after it: whole');
    $ng->stop;
};

subtest 'configured bounds: max_response=64k max_total=1m' => sub {
    my $small = Gw::Nginx->start(conf => conf(' max_response=64k max_total=1m'), workers => 1, vars => \%vars);
    $_->reset for values %be;
    my $r = list_tools($small, 'one');
    is_deeply(tool_names($r), [qw(echo honest_only)], "the honest server's tools");
    ok($small->wait_log(qr/MCP server "big" failed in tools\/list: the reply is larger than max_response \(65536 bytes\)/),
       'the configured max_response in the warn line');
    $small->stop;
};

subtest 'nginx -t refuses bad bounds, with file and line' => sub {
    for my $case (['max_response=0', 'max_response'], ['max_total=300m', 'max_total'], ['max_response=lots', 'max_response'],
                  ['max_total=512', 'max_total']) {
        my ($exit, $out) = Gw::nginx_t(conf(" $case->[0]"), vars => \%vars);
        isnt($exit, 0, "$case->[0]: refused");
        like($out, qr/\[emerg\] \d+#\d+: \Q$case->[1]\E= of llm_gateway_mcp must be a size from 1k to 256m in \S+:\d+/,
             '... with the sentence, file and line');
    }
};

done_testing();
