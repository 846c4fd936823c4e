#!/usr/bin/perl
# Self-test of the harness (t/lib/Gw.pm, t/mock/provider.mjs, t/js) WITHOUT
# the gateway module: a plain nginx proxy_passes /v1/ to the mock.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use File::Temp ();
use Test::More;

my $mock = Gw::Mock->start();
ok($mock->port > 0, 'mock listens on an ephemeral port');

my $conf = <<'CONF';
upstream mock {
    server 127.0.0.1:%%MOCK%%;
    keepalive 8;
}
server {
    listen 127.0.0.1:%%PORT%%;
    location /v1/ {
        proxy_pass http://mock;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_buffering off;
    }
    location = /ping {
        return 200 "pong\n";
    }
}
CONF

my $ng = Gw::Nginx->start(conf => $conf, workers => 2, no_module => 1,
                          vars => { MOCK => $mock->port });
is(scalar(my @w = $ng->worker_pids), 2, 'two workers up');
unlike($ng->conf_text, qr/load_module/, 'no_module => 1: no load_module line');
is(Gw::http(GET => $ng->url('/ping'))->{body}, "pong\n", 'nginx answers on its port');

subtest 'non-stream chat through the proxy' => sub {
    $mock->clear;
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'),
                     headers => { Authorization => 'Bearer sk-test' },
                     body => { model => 'gpt-4o-mini', messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 200, 'status 200');
    is($r->{headers}{'content-type'}, 'application/json', 'content-type');
    is($r->{json}{object}, 'chat.completion', 'object');
    is($r->{json}{model}, 'gpt-4o-mini', 'model echoed');
    is($r->{json}{choices}[0]{message}{content}, 'Hello world', 'content');
    is($r->{json}{choices}[0]{finish_reason}, 'stop', 'finish_reason');
    is_deeply($r->{json}{usage}, { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18 }, 'usage');

    my $reqs = $mock->requests;
    is(scalar @$reqs, 1, 'mock recorded one request');
    is($reqs->[0]{method}, 'POST', 'method');
    is($reqs->[0]{path}, '/v1/chat/completions', 'path');
    is($reqs->[0]{query}, '', 'query');
    is($reqs->[0]{json}{model}, 'gpt-4o-mini', 'body model');
    is($reqs->[0]{headers}{authorization}, 'Bearer sk-test', 'headers are lowercased and passed');
    ok($reqs->[0]{completed} && !$reqs->[0]{aborted}, 'completed, not aborted');
};

subtest 'scripted 429 with Retry-After passes through' => sub {
    $mock->clear;
    is($mock->script({ status => 429, headers => { 'Retry-After' => '7' },
                       json => { error => { message => 'Rate limit reached', type => 'rate_limit_error' } } }),
       1, 'one entry queued');
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'),
                     body => { model => 'gpt-4o-mini', messages => [] });
    is($r->{status}, 429, 'status 429');
    is($r->{headers}{'retry-after'}, '7', 'Retry-After');
    is($r->{json}{error}{message}, 'Rate limit reached', 'error body');
    is_deeply($mock->pending_script, [], 'script consumed');
    is($mock->requests->[0]{scripted}, JSON::PP::true, 'request marked as scripted');
    is(Gw::http(POST => $ng->url('/v1/chat/completions'),
                body => { model => 'm', messages => [] })->{status}, 200, 'next one is default again');
};

subtest 'keyed script entries' => sub {
    $mock->reset;
    $mock->script([
        { match => { model => 'b' }, status => 503, json => { error => { message => 'b down' } } },
        { match => { path => '/v1/embeddings' }, status => 500, body => 'emb down', times => 2 },
        { status => 418, body => 'teapot' },
    ]);
    my $chat = sub { Gw::http(POST => $ng->url('/v1/chat/completions'), body => { model => $_[0], messages => [] }) };
    is($chat->('a')->{status}, 418, 'model a takes the unkeyed entry');
    is($chat->('a')->{status}, 200, 'then the default');
    my $r = $chat->('b');
    is($r->{status}, 503, 'model b takes its keyed entry');
    is($r->{json}{error}{message}, 'b down', 'keyed body');
    for my $k (1, 2) {
        my $e = Gw::http(POST => $ng->url('/v1/embeddings'), body => { model => 'e', input => 'x' });
        is($e->{status}, 500, "embeddings scripted ($k/2)");
        is($e->{body}, 'emb down', "raw body ($k/2)");
    }
    is(Gw::http(POST => $ng->url('/v1/embeddings'), body => { model => 'e', input => 'x' })->{status},
       200, 'times => 2 used up');
};

subtest 'streaming arrives incrementally' => sub {
    $mock->clear;
    my @ev = map { qq(data: {"n":$_}) } 1 .. 4;
    $mock->script({ sse => \@ev, delay_ms => 150 });
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'),
                               body => { model => 'm', messages => [], stream => JSON::PP::true });
    is($r->{status}, 200, 'status 200');
    is($r->{headers}{'content-type'}, 'text/event-stream', 'content-type');
    ok($r->{complete}, 'response complete');
    is($r->{body}, join('', map { "$_\n\n" } @ev), 'body byte-exact');
    is(scalar @{ $r->{events} }, 4, 'four events');
    is_deeply([map { $_->{json}{n} } @{ $r->{events} }], [1 .. 4], 'event data in order');
    ok(@{ $r->{pieces} } >= 2, 'body came in several pieces');
    my ($first, $last) = ($r->{pieces}[0][0], $r->{pieces}[-1][0]);
    cmp_ok($first, '<', $last - 0.3, sprintf('first piece %.3fs before the last', $last - $first));
    cmp_ok($r->{events}[0]{t}, '<', $r->{events}[-1]{t} - 0.3, 'first event before the last');
};

subtest 'default OpenAI stream with usage' => sub {
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'),
                               body => { model => 'gpt-4o-mini', messages => [], stream => JSON::PP::true,
                                         stream_options => { include_usage => JSON::PP::true } });
    is($r->{status}, 200, 'status 200');
    my @ev = @{ $r->{events} };
    is(scalar @ev, 5, '3 chunks + usage chunk + [DONE]');
    is($ev[-1]{data}, '[DONE]', '[DONE] last');
    is(join('', map { $_->{json}{choices}[0]{delta}{content} // '' } @ev[0 .. 2]), 'Hello world', 'content');
    ok((grep { exists $_->{usage} && !defined $_->{usage} } map { $_->{json} } @ev[0 .. 2]) == 3,
       '"usage":null on each content chunk');
    is_deeply($ev[3]{json}{choices}, [], 'usage chunk has no choices');
    is($ev[3]{json}{usage}{total_tokens}, 18, 'usage chunk total');
};

for my $case ([cr => "\r"], [crlf => "\r\n"], [lf => "\n"]) {
    my ($name, $eol) = @$case;
    subtest "line_end $name arrives byte-exact" => sub {
        $mock->script({ sse => ['data: a', "event: x\ndata: b\ndata: c"], line_end => $name });
        my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'),
                                   body => { model => 'm', messages => [], stream => JSON::PP::true });
        is($r->{status}, 200, 'status 200');
        is($r->{body}, "data: a$eol$eol" . "event: x${eol}data: b${eol}data: c$eol$eol", 'body byte-exact');
        is(scalar @{ $r->{events} }, 2, 'two events parsed');
        is($r->{events}[1]{event}, 'x', 'event name');
        is($r->{events}[1]{data}, "b\nc", 'multi-line data');
    };
}

subtest 'client abort is seen by the mock' => sub {
    $mock->clear;
    $mock->script({ sse => ['data: 1', 'data: 2'], stall => JSON::PP::true });
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'),
                               body => { model => 'm', messages => [], stream => JSON::PP::true },
                               abort_after_events => 1, timeout => 5);
    ok($r->{aborted}, 'client aborted after the first event');
    ok(!$r->{complete}, 'response not complete');
    my $aborted = Gw::wait_until(sub { my $q = $mock->requests; @$q && $q->[0]{aborted} }, timeout => 5);
    ok($aborted, 'mock saw the upstream connection close');
};

subtest 'mock default formats (direct)' => sub {
    my $m = sub { Gw::http(POST => $mock->url($_[0]), body => $_[1]) };
    my $e = $m->('/v1/embeddings', { model => 'e', input => ['a', 'b', 'c'] });
    is($e->{status}, 200, 'embeddings 200');
    is(scalar @{ $e->{json}{data} }, 3, 'one embedding per input');
    is(scalar @{ $e->{json}{data}[2]{embedding} }, 8, '8 floats');
    is_deeply($e->{json}{usage}, { prompt_tokens => 5, total_tokens => 5 }, 'embeddings usage');

    my $bad = Gw::http(POST => $mock->url('/v1/chat/completions'), body => '{"model": ',
                       headers => { 'Content-Type' => 'application/json' });
    is($bad->{status}, 400, 'malformed JSON -> 400');
    is($bad->{json}{error}{type}, 'invalid_request_error', 'OpenAI error shape');

    my $models = Gw::http(GET => $mock->url('/v1/models'));
    is($models->{json}{object}, 'list', 'models list');
    ok((grep { $_->{id} eq 'gpt-4o-mini' } @{ $models->{json}{data} }), 'gpt-4o-mini listed');

    my $msg = $m->('/v1/messages', { model => 'claude-x', max_tokens => 10, messages => [] });
    is($msg->{json}{type}, 'message', 'anthropic message');
    is_deeply($msg->{json}{content}, [{ type => 'text', text => 'Hello world' }], 'anthropic content');
    is($msg->{json}{usage}{output_tokens}, 7, 'anthropic usage');

    my $as = Gw::stream_request(POST => $mock->url('/v1/messages'),
                                body => { model => 'claude-x', max_tokens => 10, messages => [], stream => JSON::PP::true });
    is_deeply([map { $_->{event} } @{ $as->{events} }],
              [qw(message_start content_block_start ping content_block_delta content_block_delta
                  content_block_stop message_delta message_stop)], 'anthropic event names');
    is($as->{events}[6]{json}{usage}{output_tokens}, 7, 'message_delta usage');

    my $g = $m->('/v1beta/models/gemini-2.5-flash:generateContent', { contents => [] });
    is($g->{json}{candidates}[0]{content}{parts}[0]{text}, 'Hello world', 'gemini text');
    is($g->{json}{usageMetadata}{thoughtsTokenCount}, 3, 'gemini thoughtsTokenCount');
    my $gs = Gw::stream_request(POST => $mock->url('/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse'),
                                body => { contents => [] });
    is(scalar @{ $gs->{events} }, 2, 'gemini stream: two events');
    like($gs->{body}, qr/\}\r\n\r\n\z/, 'gemini SSE uses CRLF');
    is($gs->{events}[1]{json}{usageMetadata}{totalTokenCount}, 21, 'gemini final usage');
    is($mock->requests->[-1]{query}, 'alt=sse', 'query recorded');

    is(Gw::http(GET => $mock->url('/nope'))->{status}, 404, 'unknown path -> 404');
};

subtest 'parallel requests' => sub {
    $mock->clear;
    my $n = 40;
    my @res = Gw::parallel($n, sub {
        my ($i) = @_;
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'),
                         body => { model => "p$i", messages => [] });
        return { status => $r->{status}, model => $r->{json}{model} };
    }, timeout => 60);
    is(scalar @res, $n, "$n results");
    is(scalar(grep { $_->{status} == 200 } @res), $n, 'all 200');
    is_deeply([map { $_->{model} } @res], [map { "p$_" } 0 .. $n - 1], 'results in order');
    is(scalar @{ $mock->requests }, $n, "mock saw $n requests");
    my @err = Gw::parallel(2, sub { die "boom\n" });
    is($err[1]{error}, "boom\n", 'a dying sub gives {error}');
};

subtest 'reload' => sub {
    my @old = sort $ng->worker_pids;
    ok($ng->reload, 'reload succeeded');
    my @new = sort $ng->worker_pids;
    is(scalar @new, 2, 'two new workers');
    ok(!(grep { my $o = $_; grep { $_ == $o } @new } @old), 'all workers replaced');
    is(Gw::http(GET => $ng->url('/ping'))->{status}, 200, 'serves after reload');
};

subtest 'check_logs catches bad lines' => sub {
    my $tmp = File::Temp->new;
    print $tmp join "\n",
        '2026/01/01 00:00:00 [notice] 1#1: start worker processes',
        '2026/01/01 00:00:00 [info] 2#2: *1 client closed connection',
        '2026/01/01 00:00:00 [error] 2#2: *1 upstream timed out',
        '2026/01/01 00:00:00 [emerg] 1#1: unknown directive "x"',
        '2026/01/01 00:00:00 [alert] 1#1: worker process 3 exited on signal 11',
        '2026/01/01 00:00:00 [crit] 1#1: open() failed',
        '==42==ERROR: AddressSanitizer: heap-use-after-free on address 0x1',
        '==42==ERROR: LeakSanitizer: detected memory leaks',
        'src/core/x.cpp:10:5: runtime error: signed integer overflow',
        'SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior src/core/x.cpp:10:5',
        '';
    close $tmp;
    my @bad = Gw::log_problems_in_file($tmp->filename);
    is(scalar @bad, 7, 'seven offending lines');
    like($bad[0], qr/\[emerg\]/, 'emerg caught');
    ok(!(grep { /\[(?:notice|info|error)\]/ } @bad), 'notice/info/error lines are not offending');
    is(scalar(Gw::log_problems_in_file($tmp->filename, allow => [qr/exited on signal 11/])), 6,
       'allow => filters');

    # On a live instance: a crafted [emerg] in its error.log is found.
    open my $fh, '>>', $ng->prefix . '/logs/error.log' or die $!;
    print $fh "2026/01/01 00:00:00 [emerg] 1#1: crafted by 00-harness.t\n";
    close $fh;
    my @live = $ng->log_problems;
    is(scalar @live, 1, 'one problem in the live error.log');
    like($live[0], qr/^error\.log: .*\[emerg\].*crafted by 00-harness\.t/, 'it is the crafted line');
    $ng->allow_log(qr/crafted by 00-harness\.t/);
    is_deeply([$ng->log_problems], [], 'allowed after allow_log');
};

subtest 'nginx -t reports file, line and message' => sub {
    my $bad = "server {\n    listen 127.0.0.1:%%PORT%%;\n    bogus_directive on;\n}\n";
    my ($exit, $out, $file, $first) = Gw::nginx_t($bad, no_module => 1);
    isnt($exit, 0, 'nginx -t fails');
    my $line = $first + 2;
    like($out, qr/\[emerg\] \d+#\d+: unknown directive "bogus_directive" in \Q$file\E:$line\b/,
         "message names $file:$line");
    my ($ok) = Gw::nginx_t("server { listen 127.0.0.1:%%PORT%%; }\n", no_module => 1);
    is($ok, 0, 'a good config passes');
};

SKIP: {
    Gw::skip('t/js/node_modules is absent: run `make js` (npm ci in t/js) for the openai SDK smoke test', 1)
        unless Gw::have_js_deps();
    subtest 'openai SDK smoke through the proxy' => sub {
        $mock->clear;
        my $r = Gw::run_node('openai_smoke.mjs', env => { GW_URL => $ng->url(''), GW_KEY => 'sk-smoke' },
                             timeout => 60);
        is($r->{exit}, 0, 'smoke script exits 0') or diag("stdout: $r->{stdout}\nstderr: $r->{stderr}");
        my $j = $r->{json} || {};
        ok($j->{ok}, 'ok');
        is($j->{chat}{content}, 'Hello world', 'chat content');
        is($j->{chat}{usage}{total_tokens}, 18, 'chat usage');
        is($j->{stream}{content}, 'Hello world', 'stream content');
        ok($j->{stream}{usage_seen}, 'stream usage chunk seen');
        is($j->{stream}{usage}{total_tokens}, 18, 'stream usage');
        is($j->{embeddings}{count}, 2, 'two embeddings');
        is($j->{embeddings}{dims}, 8, '8 dims');
        ok((grep { $_ eq 'gpt-4o-mini' } @{ $j->{models} || [] }), 'models listed');
        my @auth = map { $_->{headers}{authorization} } @{ $mock->requests };
        is_deeply(\@auth, [('Bearer sk-smoke') x 4], 'the SDK sent the key on all 4 requests');
    };
}

my $master = $ng->master_pid;
my @kids = $ng->worker_pids;
is_deeply([$ng->stop], [], 'stop: logs clean');
ok(!Gw::_alive($master) && !(grep { Gw::_alive($_) } @kids), 'nginx processes gone');
my $mpid = $mock->pid;
$mock->stop;
ok(!kill(0, $mpid), 'mock process gone');

done_testing;
