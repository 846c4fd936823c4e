#!/usr/bin/perl
# Upstream answers that are not a well-formed final HTTP response: each row
# is a scripted upstream writing raw bytes, and what the caller must get.
# nginx 1.22's proxy has no 1xx support (it would relay 100/101/103 as the
# final status, 101 with "Connection: upgrade"); the gateway refuses them
# as 502 and never relays an informational status or a hop-by-hop header.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();

my $KEY = 'sk-bad-upstream-alice-5e6f7a';
my $ADMIN = 'sk-bad-upstream-root-8b9c0d';
my $T = JSON::PP::true;

my $mock = Gw::Mock->start();
my $ng = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port }, conf => GwConf::gateway(
    providers => [{ name => 'mock', key => 'sk-bad-upstream-provider', models => 'gpt-4o-mini', default => 1,
                    loc_extra => 'proxy_read_timeout 5s;' },
                  { name => 'gem', type => 'gemini', key => 'AIza-bad-upstream', models => 'gemini-embedding-001' }],
    http => "llm_gateway_user alice key=$KEY;\nllm_gateway_user root key=$ADMIN admin;\n",
    server => 'location /admin { llm_gateway_admin; }'));

my $INVALID = '{"error":{"message":"the upstream provider sent an invalid response","type":"upstream_error",'
            . '"code":"bad_gateway","param":null}}';
my $INVALID_EVENT = "event: error\ndata: $INVALID\n\n";

my $json = '{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":'
         . '{"role":"assistant","content":"hi"},"finish_reason":"stop"}],'
         . '"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}';
my $event = 'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]}'
          . "\n\n";
# Every scripted answer closes its connection (Connection: close), so none
# is kept for the next row.
my $head = sub { my ($status, @h) = @_; join('', "HTTP/1.1 $status\r\n", map({ "$_\r\n" } @h, 'Connection: close'), "\r\n") };
my $chunk = sub { sprintf("%x\r\n%s\r\n", length $_[0], $_[0]) };

# name, wire (string or list of pieces), stream request?, want status, want
# body, want log line (after "llm_gateway: provider "mock" ").
my @rows = (
    ['non-HTTP status line', "SSH-2.0-OpenSSH_9.6\r\n\r\n$json", 0, 502, $INVALID,
     'sent an invalid response: no valid HTTP status line'],
    ['100 Continue as the only answer', $head->('100 Continue') . $json, 0, 502, $INVALID,
     'sent an invalid response: status 100 is not a final HTTP status'],
    ['101 with Connection: upgrade',
     $head->('101 Switching Protocols', 'Connection: upgrade', 'Upgrade: websocket') . "\x81\x05hello", 0, 502,
     $INVALID, 'sent an invalid response: status 101 is not a final HTTP status'],
    ['103 Early Hints then 200',
     $head->('103 Early Hints', 'Link: </style.css>; rel=preload')
       . $head->('200 OK', 'Content-Type: application/json', 'Content-Length: ' . length $json) . $json,
     0, 502, $INVALID, 'sent an invalid response: status 103 is not a final HTTP status'],
    ['200 with invalid chunked encoding',
     $head->('200 OK', 'Content-Type: application/json', 'Transfer-Encoding: chunked') . "zz\r\n$json\r\n0\r\n\r\n",
     0, 502, $INVALID, 'sent an invalid response: invalid framing of the response body'],
    ['stream: 200 with invalid chunked encoding after one event',
     [$head->('200 OK', 'Content-Type: text/event-stream', 'Transfer-Encoding: chunked') . $chunk->($event),
      "zz\r\nnot a chunk\r\n"],
     1, 200, $event . $INVALID_EVENT, 'sent an invalid response: invalid framing of the stream'],
    ['status 000', $head->('000 Zero', 'Content-Type: application/json', 'Content-Length: ' . length $json) . $json,
     0, 502, $INVALID, 'sent an invalid response: status 0 is not a final HTTP status'],
    ['status 999', $head->('999 Odd', 'Content-Type: application/json', 'Content-Length: ' . length $json) . $json,
     0, 502, $INVALID, 'sent an invalid response: status 999 is not a final HTTP status'],
    ['headers never terminated, then close', "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Partial: y",
     0, 502, $INVALID, 'sent an invalid response: incomplete response header'],
    ['200 whose JSON body is truncated',
     $head->('200 OK', 'Content-Type: application/json', 'Content-Length: 20') . substr($json, 0, 20),
     0, 502, $INVALID, 'sent an invalid response: the response body is not valid JSON'],
);

for my $row (@rows) {
    my ($name, $wire, $stream, $status, $body, $log) = @$row;
    subtest $name => sub {
        $mock->reset;
        $mock->script({ wire => $wire, delay_ms => 100 });
        my $size = length $ng->error_log;
        my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                                   body => GwConf::chat_body('gpt-4o-mini', $stream ? (stream => $T) : ()),
                                   timeout => 10);
        is($r->{status}, $status, "status $status");
        ok($r->{complete}, 'a complete response') or diag($r->{error} // '');
        is($r->{body}, $body, 'body');
        is($r->{headers}{'content-type'}, $stream ? 'text/event-stream' : 'application/json', 'content type');
        ok(!defined $r->{headers}{upgrade}, 'no Upgrade header');
        unlike($r->{headers}{connection} // '', qr/upgrade/i, 'no Connection: upgrade');
        my $line = $ng->wait_log(qr/llm_gateway: provider "mock" \Q$log\E/);
        ok($line, "warn log: $log") or diag(substr($ng->error_log, $size));
        like($line // '', qr/\[warn\]/, 'at warn');
        is(scalar @{ $mock->requests }, 1, 'one upstream call');
    };
}

# Gemini's batchEmbedContents answers one vector per input, in order: another
# number of them answers some other request.
for my $n (0, 1, 3) {
    subtest "Gemini batch embeddings: $n vectors for 2 inputs" => sub {
        $mock->reset;
        my $answer = '{"embeddings":[' . join(',', map { '{"values":[0.5]}' } 1 .. $n) . ']}';
        $mock->script({ wire => $head->('200 OK', 'Content-Type: application/json', 'Content-Length: ' . length $answer)
                                . $answer });
        my $size = length $ng->error_log;
        my $r = Gw::stream_request(POST => $ng->url('/v1/embeddings'), headers => GwConf::bearer($KEY),
                                   body => { model => 'gem/gemini-embedding-001', input => ['a', 'b'] }, timeout => 10);
        is($r->{status}, 502, 'status 502');
        ok($r->{complete}, 'a complete response');
        is($r->{body}, $INVALID, 'body');
        is($r->{headers}{'content-type'}, 'application/json', 'content type');
        my $why = "the number of embeddings ($n) is not the number of inputs (2)";
        my $line = $ng->wait_log(qr/llm_gateway: provider "gem" sent an invalid response: \Q$why\E/);
        ok($line, 'warn log') or diag(substr($ng->error_log, $size));
        like($line // '', qr/\[warn\]/, 'at warn');
        my $ev = Gw::http(GET => $ng->url('/admin/api/events?limit=1'), headers => GwConf::bearer($ADMIN))->{json}{events}[0];
        is_deeply({ map { $_ => $ev->{$_} } qw(kind status message provider route) },
                  { kind => 'upstream', status => 502, message => $why, provider => 'gem', route => 'embeddings' },
                  'the upstream event');
        my $reqs = $mock->requests;
        is(scalar @$reqs, 1, 'one upstream call');
        like($reqs->[0]{path} // '', qr/:batchEmbedContents$/, 'to batchEmbedContents');
    };
}

subtest 'Gemini batch embeddings: 2 vectors for 2 inputs' => sub {
    $mock->reset;
    my $answer = '{"embeddings":[{"values":[0.5]},{"values":[-1]}]}';
    $mock->script({ wire => $head->('200 OK', 'Content-Type: application/json', 'Content-Length: ' . length $answer)
                            . $answer });
    my $r = Gw::http(POST => $ng->url('/v1/embeddings'), headers => GwConf::bearer($KEY),
                     body => { model => 'gem/gemini-embedding-001', input => ['a', 'b'] });
    is($r->{status}, 200, 'status 200');
    is_deeply([map { $_->{embedding} } @{ $r->{json}{data} // [] }], [[0.5], [-1]], 'both vectors, in order');
};

subtest 'the gateway still answers normally afterwards' => sub {
    $mock->reset;
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                     body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 200, 'status 200') or diag($r->{body}, substr($ng->error_log, -2000));
    is($r->{json}{object}, 'chat.completion', 'a chat completion');
};

$ng->stop;
done_testing();
