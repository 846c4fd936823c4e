#!/usr/bin/perl
# Edges found while reviewing: a misspelt parameter never echoes a key in
# nginx -t; allow/deny run before the gateway counts anything; a stream has
# one Cache-Control; a users file may give limits to a group inline users name;
# a number above the largest double is refused, not parsed (it aborted a
# worker: RapidJSON's rounding asserts there); so is one whose digits wrap
# RapidJSON's 64-bit significand to zero (read as a garbage value).

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use File::Temp ();
use Test::More;

Gw::need_module();

subtest 'a misspelt key= parameter is not echoed' => sub {
    my $secret = 'sk-misspelt-secret-0f1e2d3c4b5a6978';
    my $conf = GwConf::gateway(http => "llm_gateway_user alice kye=$secret;\n");
    my ($exit, $out) = Gw::nginx_t($conf, vars => { MOCK => 1 });
    isnt($exit, 0, 'nginx -t fails');
    like($out, qr/\[emerg\] .*invalid parameter "kye" of llm_gateway_user in /, 'names the parameter');
    ok(index($out, $secret) < 0, 'the value is not printed') or diag($out);
};

my $mock = Gw::Mock->start();

subtest 'deny runs before the gateway: refused requests are not counted' => sub {
    my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwConf::gateway(
        http => "llm_gateway_user alice key=sk-alice-16 requests_per_minute=1;\n"
              . "llm_gateway_user root key=sk-root-16 admin;\n",
        server => "location /admin { llm_gateway_admin; }\n    location /v1/denied/ { deny all; llm_gateway; }",
    ));
    GwMeter::wait_second_below(55);    # the minute's count is read back below
    my $r = Gw::http('POST', $ng->url('/v1/denied/chat/completions'),
                     headers => GwConf::bearer('sk-alice-16'), body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 403, 'deny answers 403');
    is($r->{json}{error}{type}, 'invalid_request_error', 'in the gateway envelope');
    $r = Gw::http('POST', $ng->url('/v1/denied/chat/completions'), body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 403, 'even without a key (deny comes first)');
    unlike($ng->error_log, qr/authenticated user="alice"/, 'the gateway never saw the denied request');
    $r = Gw::http('POST', $ng->url('/v1/chat/completions'),
                  headers => GwConf::bearer('sk-alice-16'), body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 200, 'the one allowed request of the minute still passes: nothing was counted before');
    my $u = Gw::http('GET', $ng->url('/admin/api/usage'), headers => { 'x-api-key' => 'sk-root-16' });
    my ($alice) = grep { $_->{name} eq 'alice' } @{ $u->{json}{users} };
    is($alice->{requestsPerMinute}, 1, 'alice counted once');
    is($alice->{rejectionsPerDay}, 0, 'and never rejected');
    $ng->stop;
};

subtest 'a stream carries one Cache-Control header' => sub {
    my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwConf::gateway(
        http => "llm_gateway_user alice key=sk-alice-16;\n"));
    $mock->script({ headers => { 'cache-control' => 'no-cache, must-revalidate' },
                    sse => ['data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]}',
                            'data: [DONE]'] });
    my $r = Gw::http('POST', $ng->url('/v1/chat/completions'), headers => GwConf::bearer('sk-alice-16'),
                     body => GwConf::chat_body('gpt-4o-mini', stream => JSON::PP::true()));
    is($r->{status}, 200, 'stream answered');
    my $cc = $r->{headers}{'cache-control'};
    ok(!ref $cc, 'one Cache-Control header') or diag(explain $cc);
    is($cc, 'no-cache', 'the gateway\'s own value');
    $ng->stop;
};

subtest 'a users file gives limits to the implicit default group' => sub {
    my $dir = File::Temp::tempdir('llmgw-16-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    chmod 0755, $dir;
    my $file = "$dir/users.json";
    open my $fh, '>', $file or die $!;
    print {$fh} '{"groups":[{"name":"default","limits":{"requestsPerMinute":1}}],"users":[]}';
    close $fh;
    chmod 0644, $file;
    my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwConf::gateway(
        http => "llm_gateway_user bob key=sk-bob-16;\nllm_gateway_users_file $file;\n"));
    my @s = map { Gw::http('POST', $ng->url('/v1/chat/completions'), headers => GwConf::bearer('sk-bob-16'),
                           body => GwConf::chat_body('gpt-4o-mini'))->{status} } 1 .. 2;
    is_deeply(\@s, [200, 429], 'the file\'s limit on group "default" applies to the inline user');
    $ng->stop;
};

subtest 'a number above the largest double: 400, the worker lives' => sub {
    my $mock = Gw::Mock->start();
    my $ng = Gw::Nginx->start(conf => GwConf::gateway(http => "llm_gateway_user h key=sk-hard-dbl-1234;\n"),
                              vars => { MOCK => $mock->port });
    for my $n ('3.769e308', '-1.7976931348623158e308', '1e309') {
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer('sk-hard-dbl-1234'),
                         body => '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":' . $n . '}');
        GwConf::is_envelope($r, 400, 'invalid_request_error', 'invalid_request', "temperature $n: 400");
        like($r->{json}{error}{message} // '', qr/out of the range of a double/, "temperature $n: the message says why");
    }
    my $ok = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer('sk-hard-dbl-1234'),
                      body => '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":1.7976931348623157e308}');
    isnt($ok->{status}, 400, 'the largest double itself is read (the provider judges it)');
    is(scalar @{ $mock->requests }, 1, 'only that one reached the provider');
    $ng->stop;   # fails on [alert] "worker process exited on signal 6"
};

subtest 'digits that wrap RapidJSON\'s significand: 400, nothing sent on' => sub {
    my $mock = Gw::Mock->start();
    my $ng = Gw::Nginx->start(conf => GwConf::gateway(http => "llm_gateway_user h key=sk-hard-wrap-1234;\n"),
                              vars => { MOCK => $mock->port });
    # read as -2.5e263 and -2.0e264 by RapidJSON 1.1 (core/json/text_checks.h)
    for my $n ('18446744073709551615.73709551615', '184467440737095516155') {
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer('sk-hard-wrap-1234'),
                         body => '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":' . $n . '}');
        GwConf::is_envelope($r, 400, 'invalid_request_error', 'invalid_request', "temperature $n: 400");
    }
    my $ok = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer('sk-hard-wrap-1234'),
                      body => '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":18446744073709551615.4}');
    isnt($ok->{status}, 400, 'its neighbour that rounds down is read (the provider judges it)');
    is(scalar @{ $mock->requests }, 1, 'only that one reached the provider');
    $ng->stop;
};

done_testing;
