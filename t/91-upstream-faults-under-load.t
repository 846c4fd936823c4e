#!/usr/bin/perl
# Upstream, tool-server and client faults while a bounded load of mixed
# requests runs (issue 30's fault matrix; docs/testing.md#faults-under-load).
# Per provider type (OpenAI, Anthropic, Gemini), stream and not: a provider
# that hangs before its headers, after them, mid-stream; that closes
# mid-answer; that sends garbage; a stream that never sends usage. A tool
# server that hangs during an /mcp fan-out while the other answers. Clients
# that leave before the answer, mid-stream, during a retry wait and during an
# upload. For each: the documented status or SSE error event, the failure
# feed's event, and, for the load around them, counts equal to what the
# clients were answered; every worker alive, nothing at [alert] or worse.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwLoad;
use GwMeter;
use IO::Socket::INET;
use Test::More;

Gw::need_module();
Gw::need_js_deps();
Gw::watchdog(300);
Gw::wait_until(sub { GwMeter::secs_to_midnight() > 180 }, timeout => 200, interval => 1);

my %KEY = (load => 'sk-uf-load-91a', fault => 'sk-uf-fault-91b', admin => 'sk-uf-admin-91c');
my $mock = Gw::Mock->start();
sub backend { my (%env) = @_; return Gw::Mock->start(script => 't/js/mcp_backend.mjs', env => \%env) }
my %be = (good => backend(MCP_NAME => 'good', MCP_JSON => 1, MCP_TOOLS => 'echo,good_only'),
          hang => backend(MCP_NAME => 'hang', MCP_FAULT => 'hang'));
my $ng = Gw::Nginx->start(workers => 2, vars => { GOOD => $be{good}->port, HANG => $be{hang}->port },
    conf => GwConf::gateway(
        providers => [
            { name => 'oai',    type => 'openai',    key => 'sk-prov-uf-1', models => 'gpt-4o-mini,f-oai',
              loc_extra => 'proxy_read_timeout 1s;' },
            { name => 'claude', type => 'anthropic', key => 'sk-prov-uf-2', models => 'claude-sonnet-4-5,f-claude',
              loc_extra => 'proxy_read_timeout 1s;' },
            { name => 'gem',    type => 'gemini',    key => 'sk-prov-uf-3', models => 'gemini-2.5-flash,f-gem',
              loc_extra => 'proxy_read_timeout 1s;' },
            { name => 'flaky',  type => 'openai',    key => 'sk-prov-uf-4', models => 'f-retry',
              params => 'retries=1 retry_backoff=2s,2s' },
        ],
        http => "llm_gateway_user load key=$KEY{load} group=g;\nllm_gateway_user fault key=$KEY{fault} group=g;\n"
              . "llm_gateway_user admin key=$KEY{admin} admin;\n"
              . "llm_gateway_mcp_server good location=/_t/good groups=g;\nllm_gateway_mcp_server hang location=/_t/hang groups=g;\n",
        server => "location = /mcp { llm_gateway_mcp list_timeout=2s; }\n"
                . "    location /admin { llm_gateway_admin; }\n"
                . "    location /_t/good { internal; proxy_pass http://127.0.0.1:%%GOOD%%/mcp; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; }\n"
                . "    location /_t/hang { internal; proxy_pass http://127.0.0.1:%%HANG%%/mcp; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; }\n"),
    vars => { MOCK => $mock->port, GOOD => $be{good}->port, HANG => $be{hang}->port });
my @workers = sort { $a <=> $b } $ng->worker_pids;

my %STREAM_MODEL = (stream => 'gpt-4o-mini', xstream => 'claude-sonnet-4-5', gstream => 'gemini-2.5-flash');
sub load_one {
    my ($kind) = @_;
    if ($kind eq 'chat') {
        my $r = GwMeter::chat($ng, $KEY{load}, timeout => 10);
        return $r->{status} ? ($r->{status} == 200 ? 'ok' : $r->{status}) : 'error';
    }
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => GwMeter::auth($KEY{load}),
        body => { model => $STREAM_MODEL{$kind}, stream => JSON::PP::true(), messages => [{ role => 'user', content => 'hi' }] },
        timeout => 10);
    return 'error' unless $r->{status};
    return $r->{status} unless $r->{status} == 200;
    return ($r->{events}[-1]{data} // '') eq '[DONE]' && $r->{complete} ? 'ok' : 'incomplete';
}

sub fault_request {
    my ($model, $stream, %o) = @_;
    my $body = { model => $model, messages => [{ role => 'user', content => 'hi' }],
                 ($stream ? (stream => JSON::PP::true()) : ()) };
    return Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => GwMeter::auth($KEY{fault}),
                              body => $body, timeout => 10, %o);
}

# The wire of an answer's first SSE event, per provider type.
my %FIRST_EVENT = (
    'f-oai'    => { data => { id => 'c1', object => 'chat.completion.chunk', created => 1, model => 'f-oai',
                              choices => [{ index => 0, delta => { content => 'Hel' }, finish_reason => undef }] } },
    'f-claude' => { event => 'message_start', data => { type => 'message_start', message => { id => 'm1', type => 'message',
                              role => 'assistant', model => 'f-claude', content => [], usage => { input_tokens => 9, output_tokens => 1 } } } },
    'f-gem'    => { data => { candidates => [{ content => { role => 'model', parts => [{ text => 'Hel' }] }, index => 0 }] } },
);
my %TEXT_ONLY = (   # a complete stream without usage
    'f-oai'    => [ $FIRST_EVENT{'f-oai'},
                    { data => { id => 'c1', object => 'chat.completion.chunk', created => 1, model => 'f-oai',
                                choices => [{ index => 0, delta => {}, finish_reason => 'stop' }] } }, 'data: [DONE]' ],
    'f-claude' => [ { event => 'message_start', data => { type => 'message_start', message => { id => 'm1', type => 'message',
                                role => 'assistant', model => 'f-claude', content => [] } } },
                    { event => 'content_block_start', data => { type => 'content_block_start', index => 0, content_block => { type => 'text', text => '' } } },
                    { event => 'content_block_delta', data => { type => 'content_block_delta', index => 0, delta => { type => 'text_delta', text => 'Hello there' } } },
                    { event => 'content_block_stop', data => { type => 'content_block_stop', index => 0 } },
                    { event => 'message_delta', data => { type => 'message_delta', delta => { stop_reason => 'end_turn' } } },
                    { event => 'message_stop', data => { type => 'message_stop' } } ],
    'f-gem'    => [ { data => { candidates => [{ content => { role => 'model', parts => [{ text => 'Hello there' }] }, index => 0, finishReason => 'STOP' }] } } ],
);

my $load = GwLoad::start(6, 14, \&load_one, qw(chat stream xstream gstream));
sleep 1;

subtest 'provider faults per type, while the load runs' => sub {
    my @expect_events;
    for my $m (qw(f-oai f-claude f-gem)) {
        my $path_match = { model => $m };
        # hang before the headers: 504, a timeout event
        for my $stream (0, 1) {
            $mock->script({ match => $path_match, hang => 1 });
            my $r = fault_request($m, $stream);
            is($r->{status}, 504, "$m stream=$stream: hang before headers -> 504");
            is(($r->{json} || {})->{error}{code}, 'upstream_timeout', '  upstream_timeout envelope');
            push @expect_events, 'timeout 504';
        }
        # hang after the headers (a whole answer): 502, nothing relayed
        $mock->script({ match => $path_match, wire => "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"id\":", keep_open => 1 });
        my $r = fault_request($m, 0);
        is($r->{status}, 502, "$m: hang after headers -> 502");
        is(($r->{json} || {})->{error}{code}, 'bad_gateway', '  bad_gateway envelope');
        push @expect_events, 'upstream 502';
        # hang mid-stream: the head went out, the stream ends with the error event
        $mock->script({ match => $path_match, sse => [ $FIRST_EVENT{$m} ], stall => 1 });
        $r = fault_request($m, 1);
        is($r->{status}, 200, "$m: hang mid-stream -> 200 head");
        my $last = ($r->{events} || [])->[-1] || {};
        is((($last->{json} || {})->{error} || {})->{code}, 'stream_interrupted', '  then the SSE error event')
            or diag(Gw::json_encode($last));
        push @expect_events, 'upstream 502';
        # closed mid-answer, and garbage: 502
        $mock->script({ match => $path_match, wire => "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 300\r\n\r\n{\"choices\":[" });
        $r = fault_request($m, 0);
        is($r->{status}, 502, "$m: closed mid-answer -> 502");
        push @expect_events, 'upstream 502';
        $mock->script({ match => $path_match, wire => "garbage\r\n\r\n" });
        $r = fault_request($m, 1);
        is($r->{status}, 502, "$m: garbage -> 502");
        push @expect_events, 'upstream 502';
        # a stream without usage: answered, its usage estimated
        $mock->script({ match => $path_match, sse => $TEXT_ONLY{$m} });
        $r = fault_request($m, 1);
        is($r->{status}, 200, "$m: a stream without usage -> 200");
        is(($r->{events}[-1] || {})->{data}, '[DONE]', '  complete');
        ok($ng->wait_log(qr/llm_gateway: usage user="fault" model="\w+\/\Q$m\E" .*estimated/), '  usage estimated');
    }
    my $ev;
    Gw::wait_until(sub {
        my $r = Gw::http(GET => $ng->url('/admin/api/events?limit=200'), headers => GwMeter::auth($KEY{admin}));
        $ev = [grep { ($_->{user} // '') eq 'fault' } @{ ($r->{json} || {})->{events} || [] }];
        @$ev >= @expect_events;
    }, timeout => 5);
    is_deeply([sort map { "$_->{kind} $_->{status}" } @$ev], [sort @expect_events], 'one event per failed call, of the right kind');
};

subtest 'a tool server hangs during an /mcp fan-out while the other answers' => sub {
    my $t0 = Time::HiRes::time();
    my $r = Gw::http(POST => $ng->url('/mcp'), headers => { %{ GwMeter::auth($KEY{fault}) }, Accept => 'application/json, text/event-stream' },
                     body => { jsonrpc => '2.0', id => 1, method => 'tools/list' }, timeout => 15);
    my $dt = Time::HiRes::time() - $t0;
    is($r->{status}, 200, 'tools/list answered');
    my @names = sort map { $_->{name} } @{ (($r->{json} || {})->{result} || {})->{tools} || [] };
    ok(scalar(grep { /good_only/ } @names), 'the answering server\'s tools are listed') or diag(Gw::json_encode(\@names));
    ok($dt < 5, sprintf('within list_timeout=2s and a little (%.1f s)', $dt));
    ok($ng->wait_log(qr/\[warn\] .*llm_gateway: MCP server "hang" failed in tools\/list: no answer within 2000 ms/),
       'the hanging server is logged at warn');
    my $ev = Gw::http(GET => $ng->url('/admin/api/events?limit=200'), headers => GwMeter::auth($KEY{admin}));
    my @t = grep { ($_->{route} // '') eq 'mcp-federated' } @{ ($ev->{json} || {})->{events} || [] };
    is_deeply([map { "$_->{kind} $_->{status} $_->{provider}" } @t], ['timeout 504 hang'], 'and recorded in the feed');
};

subtest 'clients that leave: before the answer, mid-stream, during a retry wait, during an upload' => sub {
    # before the answer: the provider hangs, the client leaves after 300 ms
    $mock->script({ match => { model => 'f-oai' }, hang => 1 });
    my $r = fault_request('f-oai', 0, timeout => 0.3);
    ok(!$r->{status}, 'left before the answer');
    # mid-stream
    $mock->script({ match => { model => 'f-oai' }, delay_ms => 200, sse => [ ($FIRST_EVENT{'f-oai'}) x 5, 'data: [DONE]' ] });
    $r = fault_request('f-oai', 1, abort_after_events => 1);
    ok($r->{aborted}, 'left mid-stream');
    # during a retry wait: the first attempt 503 with a 2 s backoff, the client leaves at 0.5 s
    $mock->script({ match => { model => 'f-retry' }, status => 503, json => { error => { message => 'busy', type => 'server_error' } } });
    $r = fault_request('f-retry', 0, timeout => 0.5);
    ok(!$r->{status}, 'left during the retry wait');
    # during an upload: a Content-Length of 100000, 10 bytes sent, then gone
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ng->port, Proto => 'tcp') or die "connect: $!";
    print {$s} "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $KEY{fault}\r\n"
             . "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"model\":";
    select(undef, undef, undef, 0.2);
    close $s;
    sleep 3;   # the retry wait ends; nothing else may follow
    my @recs = grep { ($_->{json} || {})->{model} && $_->{json}{model} eq 'f-retry' } @{ $mock->requests };
    is(scalar @recs, 1, 'no retry after the client left during the wait');
    my $ev = Gw::http(GET => $ng->url('/admin/api/events?limit=200'), headers => GwMeter::auth($KEY{admin}));
    my @cancel = grep { ($_->{user} // '') eq 'fault' && ($_->{model} // '') =~ /f-retry/ } @{ ($ev->{json} || {})->{events} || [] };
    is(scalar @cancel, 1, 'the 503 is the one event (the leaving is no failure)');
};

my $sum = GwLoad::finish($load);
diag('load outcomes: ' . Gw::json_encode($sum));
my @kinds = qw(chat stream xstream gstream);
my $ok = GwLoad::ok_of($sum, @kinds);
ok($ok > 50, "the load was answered ($ok requests)");
is(GwLoad::failed_of($sum, @kinds), 0, 'none of the load failed');
my $row;
Gw::wait_until(sub { $row = GwMeter::row(GwMeter::usage($ng, key => $KEY{admin}), user => 'load'); $row && $row->{tokensInPerDay} >= 11 * $ok },
               timeout => 5, interval => 0.1);
is($row->{requestsPerDay}, $ok, 'the load\'s requests counted exactly');
is($row->{tokensInPerDay}, 11 * $ok, 'its input tokens');
is($row->{tokensOutPerDay}, (7 * ($ok - GwLoad::count($sum, 'gstream', 'ok'))) + 10 * GwLoad::count($sum, 'gstream', 'ok'),
   'its output tokens (Gemini\'s include 3 thinking tokens)');
is_deeply([sort { $a <=> $b } $ng->worker_pids], \@workers, 'the same two workers served it all');
is_deeply([$ng->log_problems], [], 'no [alert], [crit] or [emerg]');
$ng->stop;
done_testing();
