#!/usr/bin/perl
# Authentication: Bearer and x-api-key, Bearer winning over x-api-key, the
# 401 envelopes, the auth log lines, keys from env:/file:/key_sha256=, and
# the presented key never showing up in error.log or a response body.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Digest::SHA ();
use File::Temp ();
use Test::More;

Gw::need_module();

my %KEY = (
    alice => 'sk-alice-3f9a1c7e5b2d4a6c',       # literal in the config
    bob   => 'sk-bob-from-env-8e1d0c2b7a',      # env:BOB_KEY
    carol => 'sk-carol-from-file-51c9e7a3',     # file:... (with a trailing newline)
    dave  => 'sk-dave-by-digest-0b6f2e94d1',    # key_sha256=...
);
my $PROVIDER_KEY = 'sk-provider-secret-77c1d0';
my @WRONG = ('sk-wrong-key-4c8e2a9f0d1b', 'sk-also-wrong-91b7d3e5c2');

my $keydir = File::Temp::tempdir('llmgw-10auth-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $keydir;
my $keyfile = "$keydir/carol.key";
open my $fh, '>', $keyfile or die "$keyfile: $!";
print {$fh} "$KEY{carol}\n";
close $fh;
chmod 0644, $keyfile;
my $dave_sha = Digest::SHA::sha256_hex($KEY{dave});

my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [ { name => 'mock', key => $PROVIDER_KEY,
                     models => 'gpt-4o-mini,text-embedding-3-small', default => 1 } ],
    http => "llm_gateway_user alice key=$KEY{alice} group=eng;\n"
          . "llm_gateway_user bob key=env:BOB_KEY;\n"
          . "llm_gateway_user carol key=file:$keyfile group=eng;\n"
          . "llm_gateway_user dave key_sha256=$dave_sha;\n",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, env => { BOB_KEY => $KEY{bob} },
                          vars => { MOCK => $mock->port });

my @responses;    # every response body, checked for keys at the end
my $chat = sub {
    my (%h) = @_;
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => \%h,
                     body => GwConf::chat_body('gpt-4o-mini'));
    push @responses, $r;
    return $r;
};

subtest 'Authorization: Bearer' => sub {
    $mock->clear;
    my $r = $chat->(Authorization => "Bearer $KEY{alice}");
    is($r->{status}, 200, 'status 200');
    is($r->{json}{choices}[0]{message}{content}, 'Hello world', 'the provider answered');
    my $reqs = $mock->requests;
    is(scalar @$reqs, 1, 'one upstream request');
    is($reqs->[0]{headers}{authorization}, "Bearer $PROVIDER_KEY", 'upstream gets the provider key, not the caller key');
    ok(!exists $reqs->[0]{headers}{'x-api-key'}, 'no x-api-key upstream');
};

subtest 'x-api-key' => sub {
    $mock->clear;
    my $r = $chat->('x-api-key' => $KEY{alice});
    is($r->{status}, 200, 'status 200');
    is($r->{json}{object}, 'chat.completion', 'a completion');
    my $reqs = $mock->requests;
    is(scalar @$reqs, 1, 'one upstream request');
    ok(!exists $reqs->[0]{headers}{'x-api-key'}, 'x-api-key stripped before the provider call');
    is($reqs->[0]{headers}{authorization}, "Bearer $PROVIDER_KEY", 'provider key injected');
};

subtest 'Bearer wins when both are sent' => sub {
    $mock->clear;
    my $ok = $chat->(Authorization => "Bearer $KEY{alice}", 'x-api-key' => $WRONG[0]);
    is($ok->{status}, 200, 'right Bearer + wrong x-api-key: 200');
    my $bad = $chat->(Authorization => "Bearer $WRONG[1]", 'x-api-key' => $KEY{alice});
    GwConf::is_envelope($bad, 401, 'invalid_request_error', 'invalid_api_key',
                        'wrong Bearer + right x-api-key: 401 invalid_api_key');
    is(scalar @{ $mock->requests }, 1, 'only the accepted request went upstream');
};

subtest 'missing key: 401 missing_api_key' => sub {
    $mock->clear;
    my $r = $chat->();
    GwConf::is_envelope($r, 401, 'invalid_request_error', 'missing_api_key');
    my $e = $r->{json}{error} || {};
    is_deeply([sort keys %$e], [qw(code message param type)], 'error has exactly message, type, code, param');
    like($e->{message} // '', qr/^You didn't provide an API key\. /, 'message');
    ok(exists $e->{param} && !defined $e->{param}, 'param is null');

    my $empty = $chat->(Authorization => 'Bearer ');
    GwConf::is_envelope($empty, 401, 'invalid_request_error', 'missing_api_key', 'empty Bearer: missing_api_key');
    my $basic = $chat->(Authorization => 'Basic dXNlcjpwYXNz');
    GwConf::is_envelope($basic, 401, 'invalid_request_error', 'missing_api_key', 'Basic auth is no API key');
    is(scalar @{ $mock->requests }, 0, 'no upstream call');
};

subtest 'wrong key: 401 invalid_api_key' => sub {
    $mock->clear;
    my $r = $chat->(Authorization => "Bearer $WRONG[0]");
    GwConf::is_envelope($r, 401, 'invalid_request_error', 'invalid_api_key');
    is($r->{json}{error}{message}, 'Incorrect API key provided.', 'message');
    my $x = $chat->('x-api-key' => $WRONG[1]);
    GwConf::is_envelope($x, 401, 'invalid_request_error', 'invalid_api_key', 'wrong x-api-key: 401');
    # The provider's own key is not a caller key.
    my $p = $chat->(Authorization => "Bearer $PROVIDER_KEY");
    GwConf::is_envelope($p, 401, 'invalid_request_error', 'invalid_api_key', 'provider key is not a user key');
    # Nor is the digest of a user's key.
    my $d = $chat->(Authorization => "Bearer $dave_sha");
    GwConf::is_envelope($d, 401, 'invalid_request_error', 'invalid_api_key', 'key_sha256 value is not a key');
    is(scalar @{ $mock->requests }, 0, 'no upstream call');
};

subtest 'keys from env:, file: and key_sha256=' => sub {
    $mock->clear;
    for my $u (qw(bob carol dave)) {
        my $r = $chat->(Authorization => "Bearer $KEY{$u}");
        is($r->{status}, 200, "$u authenticates (Bearer)") or diag($r->{body});
        my $x = $chat->('x-api-key' => $KEY{$u});
        is($x->{status}, 200, "$u authenticates (x-api-key)") or diag($x->{body});
    }
    my $nl = $chat->(Authorization => "Bearer $KEY{carol}\\n");
    is($nl->{status}, 401, 'the file key with extra trailing characters is rejected');
    is(scalar @{ $mock->requests }, 6, 'six upstream calls');
    ok($ng->wait_log(qr/llm_gateway: authenticated user="$_" route="chat\/completions"/),
       "success log for $_") for qw(bob carol dave);
};

subtest 'other routes authenticate too' => sub {
    my $m = Gw::http(GET => $ng->url('/v1/models'), headers => { 'x-api-key' => $KEY{alice} });
    push @responses, $m;
    is($m->{status}, 200, 'GET /v1/models with a key: 200');
    my $m401 = Gw::http(GET => $ng->url('/v1/models'));
    push @responses, $m401;
    GwConf::is_envelope($m401, 401, 'invalid_request_error', 'missing_api_key', 'GET /v1/models without a key: 401');
    my $e = Gw::http(POST => $ng->url('/v1/embeddings'), headers => GwConf::bearer($KEY{bob}),
                     body => { model => 'text-embedding-3-small', input => 'x' });
    push @responses, $e;
    is($e->{status}, 200, 'embeddings with a key: 200');
    my $e401 = Gw::http(POST => $ng->url('/v1/embeddings'), headers => GwConf::bearer($WRONG[0]),
                        body => { model => 'text-embedding-3-small', input => 'x' });
    push @responses, $e401;
    GwConf::is_envelope($e401, 401, 'invalid_request_error', 'invalid_api_key', 'embeddings with a wrong key: 401');
    ok($ng->wait_log(qr/\[info\] .*llm_gateway: authenticated user="alice" route="models"/), 'route="models" logged');
    ok($ng->wait_log(qr/\[info\] .*llm_gateway: authenticated user="bob" route="embeddings"/), 'route="embeddings" logged');
    ok($ng->wait_log(qr/\[warn\] .*llm_gateway: authentication failed \(no key\): method=GET path=\/v1\/models client=127\.0\.0\.1/),
       'failure on GET /v1/models logged');
    ok($ng->wait_log(qr/\[warn\] .*llm_gateway: authentication failed \(unknown key\): method=POST path=\/v1\/embeddings client=127\.0\.0\.1/),
       'failure on POST /v1/embeddings logged');
};

subtest 'log lines' => sub {
    ok($ng->wait_log(qr/\[info\] .*llm_gateway: authenticated user="alice" route="chat\/completions"/),
       'info: authenticated user="alice" route="chat/completions"');
    ok($ng->wait_log(qr/\[warn\] .*llm_gateway: authentication failed \(no key\): method=POST path=\/v1\/chat\/completions client=127\.0\.0\.1(?:,|$)/),
       'warn: authentication failed (no key) with method, path, client');
    ok($ng->wait_log(qr/\[warn\] .*llm_gateway: authentication failed \(unknown key\): method=POST path=\/v1\/chat\/completions client=127\.0\.0\.1(?:,|$)/),
       'warn: authentication failed (unknown key) with method, path, client');
    my @success = GwConf::lines_matching($ng->error_log, qr/llm_gateway: authenticated /);
    ok(!(grep { !/\[info\]/ } @success), 'success lines are [info]');
    my @fail = GwConf::lines_matching($ng->error_log, qr/llm_gateway: authentication failed/);
    ok(!(grep { !/\[warn\]/ } @fail), 'failure lines are [warn]');
    # 401s so far: 2 (Bearer-wins + missing) ... count exactly per kind.
    is(scalar(grep { /\(no key\)/ } @fail), 4, 'four "(no key)" failures logged (none, empty Bearer, Basic, GET models)');
    is(scalar(grep { /\(unknown key\)/ } @fail), 7, 'seven "(unknown key)" failures logged');
};

subtest 'presented keys never appear in error.log or a response' => sub {
    my $log = $ng->error_log;
    ok(length $log > 0, 'error.log is not empty');
    for my $k ((map { [$_, $KEY{$_}] } sort keys %KEY), (map { ['wrong', $_] } @WRONG),
               ['provider', $PROVIDER_KEY]) {
        my ($who, $key) = @$k;
        ok(index($log, $key) < 0, "key of $who ($key) not in error.log");
        my @hits = grep { index($_->{body}, $key) >= 0 || index(Gw::json_encode($_->{headers}), $key) >= 0 }
            @responses;
        is(scalar @hits, 0, "key of $who not in any response (" . scalar(@responses) . " checked)");
    }
    ok(index($log, 'Bearer ') < 0 || $log !~ /Bearer sk-/, 'no Bearer credential in error.log');
};

$ng->stop;
$mock->stop;
done_testing;
