#!/usr/bin/perl
# Answers the provider cuts short (docs/errors.md "Answers cut short"): a
# 200 whose Content-Length body ends early. When no byte has reached the
# caller (a whole answer, held until complete; audio whose head waits for
# its first bytes) the caller gets the 502 envelope of its API, the call is
# a failed attempt (event, failure counter, retried); when bytes have
# reached it, an SSE stream ends with its error event and relayed bytes end
# with a closed connection. A caller that leaves while its answer is held is
# none of this: no event, no failure, no retry. Each row is a scripted wire.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();

my $KEY = 'sk-cut-alice-7b8c9d';
my $ADMIN = 'sk-cut-root-1e2f3a';
my $T = JSON::PP::true;

my $mock = Gw::Mock->start();

sub gateway {
    my (%o) = @_;
    return Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port }, conf => GwConf::gateway(
        providers => [{ name => 'mock', key => 'sk-cut-provider', models => 'gpt-4o-mini', default => 1,
                        loc_extra => 'proxy_read_timeout 5s;' }],
        http => "llm_gateway_user alice key=$KEY;\n"
              . "llm_gateway_user root key=$ADMIN admin;\n"
              . "llm_gateway_retry_backoff 10ms 20ms;\n"
              . "log_format cut '\$request_uri \$status attempts=\$llm_gateway_attempts "
              . "in=\$llm_gateway_tokens_in out=\$llm_gateway_tokens_out';\n",
        server => "access_log logs/cut.log cut;\n"
                . "    location /admin { llm_gateway_admin; }\n"
                . "    location = /metrics { llm_gateway_metrics allow=127.0.0.0/8; }",
        %o));
}

my $INVALID = '{"error":{"message":"the upstream provider sent an invalid response","type":"upstream_error",'
            . '"code":"bad_gateway","param":null}}';
my $INVALID_ANTHROPIC = '{"type":"error","error":{"type":"api_error",'
                      . '"message":"the upstream provider sent an invalid response"}}';
my $CUT_EVENT = "event: error\ndata: "
              . '{"error":{"message":"the upstream stream ended before completion","type":"upstream_error",'
              . '"code":"stream_interrupted","param":null}}' . "\n\n";
my $REASON = 'the response body ended before completion';

my $json = '{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":'
         . '{"role":"assistant","content":"hi"},"finish_reason":"stop"}],'
         . '"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}';
my $image = '{"created":1,"data":[{"b64_json":"' . ('QUJD' x 50) . '"}]}';
my $event = 'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]}'
          . "\n\n";
my $audio = join '', map { chr($_ % 256) } 0 .. 299;

my $head = sub { my ($status, @h) = @_; join('', "HTTP/1.1 $status\r\n", map({ "$_\r\n" } @h, 'Connection: close'), "\r\n") };
# A 200 of this type that declares $full's length and sends $sent bytes of it.
my $short = sub {
    my ($type, $full, $sent) = @_;
    return $head->('200 OK', "Content-Type: $type", 'Content-Length: ' . length $full) . substr($full, 0, $sent);
};

my %route = (
    chat     => ['/v1/chat/completions', GwConf::chat_body('gpt-4o-mini')],
    stream   => ['/v1/chat/completions', GwConf::chat_body('gpt-4o-mini', stream => $T)],
    images   => ['/v1/images/generations', { model => 'gpt-4o-mini', prompt => 'a cat' }],
    speech   => ['/v1/audio/speech', { model => 'gpt-4o-mini', input => 'hello', voice => 'alloy' }],
    messages => ['/v1/messages', { model => 'gpt-4o-mini', max_tokens => 16,
                                   messages => [{ role => 'user', content => 'hi' }] }],
);
my %event_route = (chat => 'chat/completions', stream => 'chat/completions', images => 'images',
                   speech => 'audio/speech', messages => 'messages');

sub call_with_timeout {
    my ($ng, $what, $timeout) = @_;
    my ($path, $body) = @{ $route{$what} };
    return Gw::stream_request(POST => $ng->url($path), headers => GwConf::bearer($KEY), body => $body,
                              timeout => $timeout);
}

sub call { return call_with_timeout(@_, 10) }

sub events {
    my ($ng) = @_;
    return Gw::http(GET => $ng->url('/admin/api/events?limit=200'), headers => GwConf::bearer($ADMIN))->{json}{events} // [];
}

# The provider's attempt and failure counters, from the metrics.
sub provider_counts {
    my ($ng) = @_;
    my $text = Gw::http(GET => $ng->url('/metrics'))->{body};
    my ($att) = $text =~ /^llmgateway_provider_attempts_total\{provider="mock"\} (\d+)$/m;
    my ($fail) = $text =~ /^llmgateway_provider_failures_total\{provider="mock"\} (\d+)$/m;
    return ($att // 0, $fail // 0);
}

# The access log's lines (cut.log).
sub access_lines { my ($ng) = @_; return split /\n/, Gw::_slurp($ng->prefix . '/logs/cut.log') }

# The access log line of the next request to $path (after the $seen lines
# there were before it).
sub access_line {
    my ($ng, $seen, $path) = @_;
    my $line;
    Gw::wait_until(sub { my @l = access_lines($ng); ($line) = grep { index($_, "$path ") == 0 } @l[$seen .. $#l];
                         defined $line }, timeout => 5);
    return $line // '';
}

# ------------------------------------------------------------------ no byte sent: 502
my $ng = gateway();

# name, route, wire, the caller's body
my @rows = (
    ['chat completion cut short', 'chat', $short->('application/json', $json, 40), $INVALID],
    ['stream request answered with JSON cut short', 'stream', $short->('application/json', $json, 40), $INVALID],
    ['image generation cut short', 'images', $short->('application/json', $image, 60), $INVALID],
    ['speech cut before its first audio byte', 'speech', $short->('audio/mpeg', $audio, 0), $INVALID],
    ['messages (Anthropic caller) cut short', 'messages', $short->('application/json', $json, 40), $INVALID_ANTHROPIC],
);

for my $row (@rows) {
    my ($name, $what, $wire, $want) = @$row;
    subtest $name => sub {
        $mock->reset;
        $mock->script({ wire => $wire });
        my $size = length $ng->error_log;
        my $n_events = scalar @{ events($ng) };
        my ($att, $fail) = provider_counts($ng);
        my $seen = access_lines($ng);
        my $r = call($ng, $what);
        is($r->{status}, 502, 'status 502');
        ok($r->{complete}, 'a complete response') or diag($r->{error} // 'connection closed early');
        is($r->{body}, $want, "the caller's envelope");
        is($r->{headers}{'content-type'}, 'application/json', 'content type');
        my $line = $ng->wait_log(qr/llm_gateway: provider "mock" sent an invalid response: \Q$REASON\E/);
        ok($line, 'the log line') or diag(substr($ng->error_log, $size));
        like($line // '', qr/\[warn\]/, 'at warn');
        unlike(substr($ng->error_log, $size), qr/response ended before completion/, 'not logged as a cut relay');
        my $ev = events($ng);
        is(scalar @$ev, $n_events + 1, 'one event');
        is_deeply({ map { $_ => $ev->[0]{$_} } qw(kind status message provider route user) },
                  { kind => 'upstream', status => 502, message => $REASON, provider => 'mock',
                    route => $event_route{$what}, user => 'alice' }, 'the upstream event');
        my ($att2, $fail2) = provider_counts($ng);
        is($att2 - $att, 1, 'one provider attempt');
        is($fail2 - $fail, 1, 'counted as a failed attempt');
        is(access_line($ng, $seen, $route{$what}[0]), "$route{$what}[0] 502 attempts=1 in=- out=-",
           'access log: 502, nothing billed');
        is(scalar @{ $mock->requests }, 1, 'one upstream call');
    };
}

# ------------------------------------------------------------ bytes sent: as streams end

subtest 'SSE stream cut mid-way: the events so far, then the error event' => sub {
    $mock->reset;
    $mock->script({ wire => [$short->('text/event-stream', $event x 50, 0), $event], delay_ms => 100 });
    my $size = length $ng->error_log;
    my $n_events = scalar @{ events($ng) };
    my $r = call($ng, 'stream');
    is($r->{status}, 200, 'status 200: the stream had begun');
    ok($r->{complete}, 'a complete response');
    is($r->{body}, $event . $CUT_EVENT, 'the relayed event, then the error event');
    is($r->{headers}{'content-type'}, 'text/event-stream', 'content type');
    my $line = $ng->wait_log(qr/llm_gateway: provider "mock" stream ended before completion/);
    ok($line, 'the log line') or diag(substr($ng->error_log, $size));
    like($line // '', qr/\[error\]/, 'at error');
    my $ev = events($ng);
    is(scalar @$ev, $n_events + 1, 'one event');
    is_deeply({ map { $_ => $ev->[0]{$_} } qw(kind status message) },
              { kind => 'upstream', status => 502, message => 'the upstream stream ended before completion' },
              'the upstream event');
    is(scalar @{ $mock->requests }, 1, 'one upstream call: no retry after the first byte');
};

subtest 'speech cut after some audio: the bytes so far, then the connection closes' => sub {
    $mock->reset;
    $mock->script({ wire => [$short->('audio/mpeg', $audio, 0), substr($audio, 0, 100)], delay_ms => 100 });
    my $size = length $ng->error_log;
    my $r = call($ng, 'speech');
    is($r->{status}, 200, 'status 200: the audio had begun');
    ok(!$r->{complete}, 'never a complete-looking response');
    ok($r->{eof}, 'the connection was closed');
    is($r->{body}, substr($audio, 0, 100), 'the bytes relayed so far');
    is($r->{headers}{'content-type'}, 'audio/mpeg', 'content type');
    my $line = $ng->wait_log(qr/llm_gateway: provider "mock" response ended before completion/);
    ok($line, 'the log line') or diag(substr($ng->error_log, $size));
    like($line // '', qr/\[error\]/, 'at error');
};

subtest 'speech: a complete empty answer is a 200' => sub {
    $mock->reset;
    $mock->script({ wire => $short->('audio/mpeg', '', 0) });
    my $r = call($ng, 'speech');
    is($r->{status}, 200, 'status 200');
    ok($r->{complete}, 'a complete response');
    is($r->{body}, '', 'no bytes');
    is($r->{headers}{'content-type'}, 'audio/mpeg', 'content type');
};

$ng->stop;

# ---------------------------------------------------------------------- retried

$ng = gateway(retries => 1);

subtest 'retried: a cut whole answer, then a complete one' => sub {
    $mock->reset;
    $mock->script({ wire => $short->('application/json', $json, 40) }, { wire => $short->('application/json', $json, length $json) });
    my $seen = access_lines($ng);
    my $r = call($ng, 'chat');
    is($r->{status}, 200, 'the second attempt answers');
    is($r->{body}, $json, 'its body');
    is(scalar @{ $mock->requests }, 2, 'two upstream calls');
    is(access_line($ng, $seen, '/v1/chat/completions'), '/v1/chat/completions 200 attempts=2 in=3 out=1', 'access log');
};

subtest 'retried: speech cut before its first byte, then complete' => sub {
    $mock->reset;
    $mock->script({ wire => $short->('audio/mpeg', $audio, 0) }, { wire => $short->('audio/mpeg', $audio, length $audio) });
    my $r = call($ng, 'speech');
    is($r->{status}, 200, 'the second attempt answers');
    ok($r->{complete}, 'a complete response');
    ok($r->{body} eq $audio, 'every audio byte');
    is(scalar @{ $mock->requests }, 2, 'two upstream calls');
};

subtest 'retries exhausted: the last cut answer is the 502' => sub {
    $mock->reset;
    $mock->script({ wire => $short->('application/json', $json, 40), times => 2 });
    my $n_events = scalar @{ events($ng) };
    my ($att, $fail) = provider_counts($ng);
    my $seen = access_lines($ng);
    my $r = call($ng, 'chat');
    is($r->{status}, 502, 'status 502');
    ok($r->{complete}, 'a complete response');
    is($r->{body}, $INVALID, 'the envelope');
    is(scalar @{ $mock->requests }, 2, 'two upstream calls');
    my $ev = events($ng);
    is(scalar @$ev, $n_events + 2, 'an event per attempt');
    is_deeply([map { $_->{message} } @$ev[0, 1]], [$REASON, $REASON], 'both cut');
    my ($att2, $fail2) = provider_counts($ng);
    is($att2 - $att, 2, 'two attempts');
    is($fail2 - $fail, 2, 'two failures');
    is(access_line($ng, $seen, '/v1/chat/completions'), '/v1/chat/completions 502 attempts=2 in=- out=-', 'access log');
};

subtest 'a caller that leaves while its answer is held: a cancel, not a failure' => sub {
    $mock->reset;
    $mock->script({ wire => [$short->('application/json', $json, 40), substr($json, 40)], delay_ms => 1500 });
    my $size = length $ng->error_log;
    my $n_events = scalar @{ events($ng) };
    my ($att, $fail) = provider_counts($ng);
    my $seen = access_lines($ng);
    my $r = call_with_timeout($ng, 'chat', 0.5);
    like($r->{error} // '', qr/timeout/, 'the caller gave up');
    like(access_line($ng, $seen, '/v1/chat/completions'), qr{^/v1/chat/completions (?:000|499) attempts=1 in=- out=-$},
         'access log: no answer, nothing billed');
    is(scalar @{ events($ng) }, $n_events, 'no event');
    is_deeply([provider_counts($ng)], [$att, $fail], 'neither an attempt nor a failure of the provider');
    sleep 1;
    is(scalar @{ $mock->requests }, 1, 'not tried again');
    unlike(substr($ng->error_log, $size), qr/ended before completion|sent an invalid response/, 'not logged as a cut answer');
};

$ng->stop;
done_testing();
