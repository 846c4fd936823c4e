#!/usr/bin/perl
# Streaming relay: events reach the client as they come (never buffered
# whole), stream_options.include_usage forced upstream, the usage-only chunk
# suppressed unless the client asked for it, [DONE] relayed, CR / LF / CRLF
# upstream line ends, a truncated stream ending with the SSE error event, and
# the usage log lines (reported and estimated).

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use IO::Select;
use IO::Socket::INET;
use JSON::PP ();
use Time::HiRes ();
use Test::More;

Gw::need_module();

my %KEY = (alice => 'sk-stream-alice-1a2b3c', sue => 'sk-stream-sue-4d5e6f', nina => 'sk-stream-nina-7a8b9c',
           est => 'sk-stream-est-0d1e2f', estn => 'sk-stream-estn-3a4b5c', ustream => 'sk-stream-ustream-6c7d8e');
my $T = JSON::PP::true;
my $F = JSON::PP::false;

my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [
        { name => 'mock', key => 'sk-stream-provider', models => 'gpt-4o-mini', default => 1 },
        { name => 'slow', key => 'sk-stream-slow', models => 'slow-model', loc_extra => 'proxy_read_timeout 1s;' },
    ],
    http => join('', map { "llm_gateway_user $_ key=$KEY{$_};\n" } sort keys %KEY) . "llm_gateway_cancel_drain 1s;\n",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, vars => { MOCK => $mock->port });

my $stream = sub {
    my ($user, $body, %o) = @_;
    return Gw::stream_request(POST => $ng->url('/v1/chat/completions'),
                              headers => GwConf::bearer($KEY{$user}), body => $body, timeout => 10, %o);
};
my $chunk = sub {
    my ($content, $finish) = @_;
    return 'data: ' . Gw::json_encode({ id => 'chatcmpl-s', object => 'chat.completion.chunk', created => 1,
                                        model => 'gpt-4o-mini',
                                        choices => [{ index => 0, delta => { content => $content },
                                                      finish_reason => $finish }] });
};

subtest 'events are relayed as they arrive' => sub {
    $mock->reset;
    my @ev = ($chunk->('one', undef), $chunk->('two', undef), $chunk->('three', 'stop'), 'data: [DONE]');
    $mock->script({ sse => \@ev, delay_ms => 300 });
    my $r = $stream->(alice => GwConf::chat_body('gpt-4o-mini', stream => $T));
    is($r->{status}, 200, 'status 200');
    is($r->{headers}{'content-type'}, 'text/event-stream', 'Content-Type: text/event-stream');
    is($r->{headers}{'cache-control'}, 'no-cache', 'Cache-Control: no-cache');
    is($r->{headers}{'x-accel-buffering'}, 'no', 'X-Accel-Buffering: no');
    ok(!defined $r->{headers}{'content-length'}, 'no Content-Length');
    ok($r->{complete}, 'response complete');
    is(scalar @{ $r->{events} }, 4, 'four events');
    is($r->{body}, join('', map { "$_\n\n" } @ev), 'body byte-exact');
    my ($first, $last) = ($r->{events}[0]{t}, $r->{events}[-1]{t});
    cmp_ok($last - $first, '>=', 0.6, sprintf('first event %.3fs before the last', $last - $first));
    ok(@{ $r->{pieces} } >= 4, 'the body came in ' . scalar(@{ $r->{pieces} }) . ' pieces (>= 4)');
    cmp_ok($r->{events}[0]{t} - $r->{t_start}, '<', 0.9, 'the first event came before the second was sent');
};

subtest 'include_usage forced upstream; usage chunk suppressed for a client that did not ask' => sub {
    $mock->reset;
    my $body = GwConf::chat_body('gpt-4o-mini', stream => $T, temperature => 0.5);
    my $r = $stream->(sue => $body);
    is($r->{status}, 200, 'status 200');
    ok($r->{complete}, 'complete');
    my $q = $mock->requests->[0] || {};
    is_deeply($q->{json}{stream_options}, { include_usage => $T }, 'upstream: stream_options.include_usage=true');
    my %want = (%$body, model => 'gpt-4o-mini', stream_options => { include_usage => $T });
    is_deeply($q->{json}, \%want, 'upstream body otherwise unchanged');
    my @ev = @{ $r->{events} };
    is(scalar @ev, 4, 'three chunks and [DONE] (usage chunk suppressed)');
    is(join('', map { $_->{json}{choices}[0]{delta}{content} // '' } @ev[0 .. 2]), 'Hello world', 'content');
    ok(!(grep { $_->{json} && ref $_->{json}{choices} eq 'ARRAY' && !@{ $_->{json}{choices} } } @ev),
       'no usage-only chunk (choices: [])');
    ok(!(grep { $_->{json} && $_->{json}{usage} } @ev), 'no usage object reaches the client');
    is($ev[-1]{data}, '[DONE]', 'data: [DONE] last');
    like($r->{body}, qr/data: \[DONE\]\n\n\z/, 'body ends with data: [DONE]');

    $mock->clear;
    my $r2 = $stream->(sue => GwConf::chat_body('gpt-4o-mini', stream => $T,
                                                stream_options => { include_usage => $F }));
    my $q2 = $mock->requests->[0] || {};
    is_deeply($q2->{json}{stream_options}, { include_usage => $T }, 'include_usage false -> true upstream');
    is(scalar @{ $r2->{events} }, 4, 'client that said false: usage chunk suppressed');
    is($r2->{events}[-1]{data}, '[DONE]', '[DONE] last');
};

subtest 'usage chunk passed through for a client that asked' => sub {
    $mock->reset;
    my $r = $stream->(sue => GwConf::chat_body('gpt-4o-mini', stream => $T,
                                               stream_options => { include_usage => $T }));
    is($r->{status}, 200, 'status 200');
    my $q = $mock->requests->[0] || {};
    is_deeply($q->{json}{stream_options}, { include_usage => $T }, 'upstream include_usage true');
    my @ev = @{ $r->{events} };
    is(scalar @ev, 5, 'three chunks, usage chunk, [DONE]');
    is_deeply($ev[3]{json}{choices}, [], 'usage chunk: choices []');
    is_deeply($ev[3]{json}{usage}, { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18 },
              'usage chunk: usage 11/7/18');
    is($ev[4]{data}, '[DONE]', '[DONE] last');
};

for my $case ([lf => "\n"], [cr => "\r"], [crlf => "\r\n"]) {
    my ($name, $eol) = @$case;
    subtest "upstream line end $name" => sub {
        $mock->reset;
        $mock->script({ sse => [$chunk->('a', undef), "event: note\ndata: b\ndata: c", ': comment',
                                $chunk->('d', 'stop'), 'data: [DONE]'], line_end => $name });
        my $r = $stream->(alice => GwConf::chat_body('gpt-4o-mini', stream => $T));
        is($r->{status}, 200, 'status 200');
        ok($r->{complete}, 'complete');
        is($r->{body}, $chunk->('a', undef) . "\n\nevent: note\ndata: b\ndata: c\n\n: comment\n\n"
                       . $chunk->('d', 'stop') . "\n\ndata: [DONE]\n\n", 'relayed with LF line ends');
        my @ev = @{ $r->{events} };
        is(scalar @ev, 5, 'five events');
        is($ev[1]{event}, 'note', 'event name');
        is($ev[1]{data}, "b\nc", 'multi-line data');
        unlike($r->{body}, qr/\r/, 'no CR in the client body');
        ok(!(grep { ($_->{event} // '') eq 'error' } @ev), 'no error event');
    };
}

subtest 'events split across upstream writes' => sub {
    $mock->reset;
    my $c = $chunk->('split', 'stop');
    my $half = int(length($c) / 2);
    $mock->script({ sse => [{ raw => substr($c, 0, $half) }, { raw => substr($c, $half) . "\r" },
                            { raw => "\n\r\n" }, 'data: [DONE]'], delay_ms => 50 });
    my $r = $stream->(alice => GwConf::chat_body('gpt-4o-mini', stream => $T));
    is($r->{status}, 200, 'status 200');
    is($r->{body}, "$c\n\ndata: [DONE]\n\n", 'reassembled events, LF line ends');
};

subtest 'a large stream to a slow reader arrives whole' => sub {
    $mock->reset;
    my @ev = map { $chunk->(('x' x 1000) . "#$_", undef) } 1 .. 1500;
    push @ev, $chunk->('y' x 200_000, 'stop'), 'data: [DONE]';
    $mock->script({ sse => \@ev });
    my $body = Gw::json_encode(GwConf::chat_body('gpt-4o-mini', stream => $T));
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ng->port, Proto => 'tcp', Timeout => 5)
        or return fail("connect: $!");
    binmode $sock;
    print {$sock} "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        . "Authorization: Bearer $KEY{alice}\r\nContent-Type: application/json\r\n"
        . 'Content-Length: ' . length($body) . "\r\n\r\n$body";
    Time::HiRes::sleep(1.0);    # do not read while the provider sends everything
    my ($all, $sel, $deadline) = ('', IO::Select->new($sock), Time::HiRes::time() + 15);
    while (Time::HiRes::time() < $deadline) {
        next unless $sel->can_read(0.5);
        my $n = sysread($sock, my $buf, 65536);
        last unless $n;
        $all .= $buf;
    }
    close $sock;
    my ($head, $rest) = split /\r\n\r\n/, $all, 2;
    like($head // '', qr{^HTTP/1\.1 200 }, 'status 200');
    like($head // '', qr/^Transfer-Encoding: chunked\r?$/mi, 'chunked');
    my ($out, $terminated) = ('', 0);
    $rest //= '';
    while ($rest =~ s/\A([0-9a-fA-F]+)\r\n//) {
        my $len = hex $1;
        if (!$len) { $terminated = 1; last }
        $out .= substr($rest, 0, $len, '');
        $rest =~ s/\A\r\n//;
    }
    ok($terminated, 'terminating chunk received');
    is(length($out), length(join '', map { "$_\n\n" } @ev), 'every byte arrived');
    ok($out eq join('', map { "$_\n\n" } @ev), 'body identical to what the provider sent');
};

subtest 'truncated stream ends with the SSE error event' => sub {
    $mock->reset;
    my $size = -s $ng->prefix . '/logs/error.log';
    $mock->script({ sse => [$chunk->('partial', undef), $chunk->(' answer', undef)], truncate => $T });
    my $r = $stream->(alice => GwConf::chat_body('gpt-4o-mini', stream => $T));
    is($r->{status}, 200, 'status 200 (headers were sent)');
    ok($r->{complete}, 'the response is properly terminated');
    my @ev = @{ $r->{events} };
    is(scalar @ev, 3, 'two relayed events and the error event');
    is($ev[0]{json}{choices}[0]{delta}{content}, 'partial', 'first event relayed');
    is($ev[1]{json}{choices}[0]{delta}{content}, ' answer', 'second event relayed');
    is($ev[2]{event}, 'error', 'event: error');
    is_deeply($ev[2]{json}, { error => { message => 'the upstream stream ended before completion',
                                         type => 'upstream_error', code => 'stream_interrupted', param => undef } },
              'error event data');
    like($r->{body}, qr/\nevent: error\ndata: \{.*\}\n\n\z/, 'error event is the last thing in the body');
    ok(!(grep { ($_->{data} // '') eq '[DONE]' } @ev), 'no [DONE]');
    my $line = $ng->wait_log(qr/llm_gateway: provider "mock" stream ended before completion/);
    ok($line, 'error log: stream ended before completion') or diag(substr($ng->error_log, $size));
    like($line // '', qr/\[error\]/, 'logged at [error]');
};

subtest 'upstream stalls mid-stream (read timeout): SSE error event' => sub {
    $mock->reset;
    $mock->script({ sse => [$chunk->('stalled', undef)], stall => $T });
    my $r = $stream->(alice => GwConf::chat_body('slow-model', stream => $T));
    is($r->{status}, 200, 'status 200');
    ok($r->{complete}, 'the response is properly terminated');
    my @ev = @{ $r->{events} };
    is(scalar @ev, 2, 'the relayed event and the error event');
    is($ev[0]{json}{choices}[0]{delta}{content}, 'stalled', 'first event relayed');
    is($ev[1]{event}, 'error', 'event: error');
    is($ev[1]{json}{error}{code}, 'stream_interrupted', 'code stream_interrupted');
    ok($ng->wait_log(qr/llm_gateway: provider "slow" stream ended before completion/), 'error log line');
};

subtest 'stream without [DONE] but cleanly ended is also interrupted' => sub {
    $mock->reset;
    $mock->script({ sse => [$chunk->('x', 'stop')] });
    my $r = $stream->(alice => GwConf::chat_body('gpt-4o-mini', stream => $T));
    is($r->{status}, 200, 'status 200');
    ok($r->{complete}, 'complete');
    my @ev = @{ $r->{events} };
    is(scalar @ev, 2, 'the event and the error event');
    is($ev[-1]{event}, 'error', 'event: error');
    is($ev[-1]{json}{error}{code}, 'stream_interrupted', 'code stream_interrupted');
};

subtest 'stream request, upstream error before the stream: relayed JSON error' => sub {
    $mock->reset;
    my $raw = '{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}';
    $mock->script({ status => 429, headers => { 'Retry-After' => '3', 'content-type' => 'application/json' },
                    body => $raw });
    my $r = $stream->(alice => GwConf::chat_body('gpt-4o-mini', stream => $T));
    is($r->{status}, 429, 'status 429');
    is($r->{body}, $raw, 'the provider error body, unchanged');
    is($r->{headers}{'retry-after'}, '3', 'Retry-After: 3');
    like($r->{headers}{'content-type'} // '', qr{^application/json}, 'Content-Type application/json');
};

subtest 'upstream error event mid-stream is relayed, no extra error event' => sub {
    $mock->reset;
    my $err = 'data: {"error":{"message":"server overloaded","type":"server_error","param":null,"code":null}}';
    $mock->script({ sse => [$chunk->('par', undef), $err], truncate => $T });
    my $r = $stream->(alice => GwConf::chat_body('gpt-4o-mini', stream => $T));
    is($r->{status}, 200, 'status 200');
    ok($r->{complete}, 'complete');
    is($r->{body}, $chunk->('par', undef) . "\n\n$err\n\n", "the provider's error event ends the stream");
};

subtest 'client abort closes the upstream stream (after a 1 s drain: llm_gateway_cancel_drain 1s)' => sub {
    $mock->reset;
    $mock->script({ sse => [$chunk->('1', undef), $chunk->('2', undef)], stall => $T });
    my $r = $stream->(alice => GwConf::chat_body('gpt-4o-mini', stream => $T), abort_after_events => 1, timeout => 5);
    ok($r->{aborted}, 'client aborted after the first event');
    my $aborted = Gw::wait_until(sub { my $q = $mock->requests; @$q && $q->[0]{aborted} }, timeout => 5);
    ok($aborted, 'the mock saw the upstream connection close within 5 s');
    # The gateway still serves.
    my $ok = $stream->(alice => GwConf::chat_body('gpt-4o-mini', stream => $T));
    is($ok->{status}, 200, 'next stream 200');
    is($ok->{events}[-1]{data}, '[DONE]', 'and complete');
};

subtest 'usage log: stream and non-stream' => sub {
    $mock->reset;
    my $s = $stream->(ustream => GwConf::chat_body('gpt-4o-mini', stream => $T));
    is($s->{status}, 200, 'stream 200');
    my $re_s = qr/\[info\] .*llm_gateway: usage user="ustream" model="mock\/gpt-4o-mini" prompt_tokens=11 completion_tokens=7 cost_micro_usd=6\b/;
    my $ls = $ng->wait_log($re_s);
    ok($ls, 'stream: usage user="ustream" ... prompt_tokens=11 completion_tokens=7 logged');
    unlike($ls // '', qr/estimated/, 'not estimated');

    my $n = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY{nina}),
                     body => GwConf::chat_body('gpt-4o-mini'));
    is($n->{status}, 200, 'non-stream 200');
    my $ln = $ng->wait_log(qr/\[info\] .*llm_gateway: usage user="nina" model="mock\/gpt-4o-mini" prompt_tokens=11 completion_tokens=7 cost_micro_usd=6\b/);
    ok($ln, 'non-stream: usage user="nina" ... prompt_tokens=11 completion_tokens=7 logged');
    unlike($ln // '', qr/estimated/, 'not estimated');
};

subtest 'stream without a usage chunk: estimated usage' => sub {
    $mock->reset;
    $mock->script({ sse => [$chunk->('no usage here', 'stop'), 'data: [DONE]'] });
    my $raw = '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"'
            . ('x' x 101) . '"}]}';
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'),
                               headers => { %{ GwConf::bearer($KEY{est}) }, 'Content-Type' => 'application/json' },
                               body => $raw, timeout => 10);
    is($r->{status}, 200, 'status 200');
    is($r->{events}[-1]{data}, '[DONE]', 'complete stream');
    my $want = int(length($raw) / 4);
    my $cost = int(($want * 15 + 50) / 100);    # gpt-4o-mini: 0.15 USD per Mtok in
    my $line = $ng->wait_log(qr/llm_gateway: usage user="est" /);
    ok($line, 'usage line for user est');
    like($line // '', qr/llm_gateway: usage user="est" model="mock\/gpt-4o-mini" prompt_tokens=$want completion_tokens=0 cost_micro_usd=$cost \(estimated\)(?: |,|$)/,
         "estimated: prompt_tokens=$want (body " . length($raw) . " bytes / 4), completion_tokens=0");

    # The same for a non-stream answer without usage.
    $mock->script({ json => { id => 'x', object => 'chat.completion', model => 'gpt-4o-mini',
                              choices => [{ index => 0, message => { role => 'assistant', content => 'hi' },
                                            finish_reason => 'stop' }] } });
    my $raw2 = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"' . ('y' x 57) . '"}]}';
    my $n = Gw::http(POST => $ng->url('/v1/chat/completions'),
                     headers => { %{ GwConf::bearer($KEY{estn}) }, 'Content-Type' => 'application/json' },
                     body => $raw2);
    is($n->{status}, 200, 'non-stream without usage: 200');
    my $want2 = int(length($raw2) / 4);
    my $cost2 = int(($want2 * 15 + 50) / 100);
    my $line2 = $ng->wait_log(qr/llm_gateway: usage user="estn" /);
    like($line2 // '', qr/prompt_tokens=$want2 completion_tokens=0 cost_micro_usd=$cost2 \(estimated\)(?: |,|$)/,
         "non-stream estimated: prompt_tokens=$want2");
};

$ng->stop;
$mock->stop;
done_testing;
