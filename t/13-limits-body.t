#!/usr/bin/perl
# llm_gateway_max_body_size: a body over the bound gets the 413 envelope
# (request_too_large), with Content-Length and with chunked transfer
# encoding, and no provider call; bodies at or just under the bound pass.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();

my $KEY = 'sk-body-alice-5e6f7a';
my $AUTH = GwConf::bearer($KEY);

my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    http      => "llm_gateway_user alice key=$KEY;\nllm_gateway_max_body_size 1k;\n",
    # A second gateway location with a larger bound (the body goes to a temp file).
    server    => "location /big/v1/ { llm_gateway; llm_gateway_max_body_size 300k; client_body_buffer_size 8k; }",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, vars => { MOCK => $mock->port });

# A chat body of exactly $n bytes (JSON, ASCII).
sub body_of {
    my ($n) = @_;
    my $head = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"';
    my $tail = '"}]}';
    my $pad = $n - length($head) - length($tail);
    die "body_of($n): too small" if $pad < 0;
    return $head . ('a' x $pad) . $tail;
}

# Sends $body chunked in pieces of $size bytes over a raw socket.
sub chunked_post {
    my ($path, $body, $size, %h) = @_;
    my $wire = '';
    for (my $i = 0; $i < length $body; $i += $size) {
        my $piece = substr($body, $i, $size);
        $wire .= sprintf("%x\r\n", length $piece) . $piece . "\r\n";
    }
    $wire .= "0\r\n\r\n";
    return Gw::stream_request(POST => $ng->url($path), body => $wire, timeout => 10,
                              headers => { %$AUTH, 'Content-Type' => 'application/json',
                                           'Transfer-Encoding' => 'chunked', %h });
}

is(length(body_of(1024)), 1024, 'body_of makes exact sizes');

subtest 'Content-Length over the bound: 413' => sub {
    $mock->clear;
    for my $n (1025, 4096, 100_000) {
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'),
                         headers => { %$AUTH, 'Content-Type' => 'application/json' }, body => body_of($n));
        GwConf::is_envelope($r, 413, 'invalid_request_error', 'request_too_large', "$n bytes: 413 request_too_large");
        is($r->{headers}{'content-length'}, length($r->{body}), 'Content-Length matches the envelope');
    }
    my $e = Gw::http(POST => $ng->url('/v1/embeddings'),
                     headers => { %$AUTH, 'Content-Type' => 'application/json' },
                     body => '{"model":"text-embedding-3-small","input":"' . ('b' x 2000) . '"}');
    GwConf::is_envelope($e, 413, 'invalid_request_error', 'request_too_large', 'embeddings: 413 too');
    is(scalar @{ $mock->requests }, 0, 'the mock got no request');
};

subtest 'chunked over the bound: 413' => sub {
    $mock->clear;
    my $r = chunked_post('/v1/chat/completions', body_of(3000), 400);
    is($r->{status}, 413, 'status 413');
    ok(!GwConf::envelope_problems($r->{json}, 'invalid_request_error', 'request_too_large'),
       'request_too_large envelope') or diag($r->{body});
    like($r->{headers}{'content-type'} // '', qr{^application/json}, 'content-type');
    my $one = chunked_post('/v1/chat/completions', body_of(2048), 4096);
    is($one->{status}, 413, 'one big chunk: 413');
    ok(!GwConf::envelope_problems($one->{json}, 'invalid_request_error', 'request_too_large'),
       'request_too_large envelope') or diag($one->{body});
    is(scalar @{ $mock->requests }, 0, 'the mock got no request');
};

subtest 'at and just under the bound: served' => sub {
    for my $n (1000, 1024) {
        $mock->clear;
        my $body = body_of($n);
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'),
                         headers => { %$AUTH, 'Content-Type' => 'application/json' }, body => $body);
        is($r->{status}, 200, "$n bytes (Content-Length): 200") or diag($r->{body});
        my $q = $mock->requests->[0] || {};
        is($q->{body}, $body, 'the provider got the body unchanged');

        $mock->clear;
        my $c = chunked_post('/v1/chat/completions', $body, 300);
        is($c->{status}, 200, "$n bytes (chunked): 200") or diag($c->{body});
        $q = $mock->requests->[0] || {};
        is($q->{body}, $body, 'the provider got the body unchanged');
        is($q->{headers}{'content-length'}, length($body), 'with a Content-Length');
        ok(!exists $q->{headers}{'transfer-encoding'}, 'not chunked upstream');
    }
};

subtest 'a larger bound in another location; body buffered to a file' => sub {
    $mock->clear;
    my $body = body_of(200_000);
    my $r = Gw::http(POST => $ng->url('/big/v1/chat/completions'),
                     headers => { %$AUTH, 'Content-Type' => 'application/json' }, body => $body);
    is($r->{status}, 200, '200 KB under a 300k bound: 200') or diag($r->{body});
    my $q = $mock->requests->[0] || {};
    is($q->{body}, $body, 'the provider got the whole body');
    is($q->{headers}{'content-length'}, length($body), 'Content-Length');
    my $over = Gw::http(POST => $ng->url('/big/v1/chat/completions'),
                        headers => { %$AUTH, 'Content-Type' => 'application/json' }, body => body_of(310_000));
    GwConf::is_envelope($over, 413, 'invalid_request_error', 'request_too_large', '310 KB: 413');
    is(scalar @{ $mock->requests }, 1, 'no second upstream request');
};

$ng->stop;
$mock->stop;
done_testing;
