# A client that goes away mid-stream is billed from the provider's real
# usage: the gateway reads the rest of the answer (dropping it) until its
# final usage chunk, within llm_gateway_cancel_drain's time and bytes. When
# the answer carries no usage, or a bound ends the drain first, the estimate
# is billed and the log says so. The cancel is neither a provider success nor
# a failure: no breaker verdict, no event, no retry (docs/metering.md). The
# directive's configuration errors are in t/14-config.t.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use Test::More;
use Time::HiRes ();

Gw::need_module();

my $T = \1;
my $mock = Gw::Mock->start();

sub gateway {
    my ($drain, @users) = @_;
    my $conf = GwConf::gateway(
        providers => [{ name => 'oai', type => 'openai', key => 'sk-prov-drain', models => 'gpt-4o-mini', default => 1 },
                      { name => 'claude', type => 'anthropic', key => 'sk-ant-drain', models => 'claude-sonnet-4-5' }],
        http => join('', map { "$_\n" } "llm_gateway_user root key=sk-drain-admin admin;", @users,
                     ($drain ? "llm_gateway_cancel_drain $drain;" : ())),
        server => 'location /admin { llm_gateway_admin; }',
    );
    return Gw::Nginx->start(conf => $conf, workers => 1, vars => { MOCK => $mock->port });
}

my $chunk = sub {
    my ($text) = @_;
    return 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"'
         . $text . '"},"finish_reason":null}]}';
};
my $USAGE = 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":21,"completion_tokens":13,"total_tokens":34}}';

sub abort_stream {
    my ($ng, $key) = @_;
    return Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => { Authorization => "Bearer $key" },
                              body => GwConf::chat_body('gpt-4o-mini', stream => $T), abort_after_events => 1, timeout => 10);
}

sub user_row {
    my ($ng, $user) = @_;
    my $u = Gw::http(GET => $ng->url('/admin/api/usage'), headers => { 'x-api-key' => 'sk-drain-admin' })->{json};
    return GwMeter::row($u, user => $user) || {};
}

sub wait_usage_line {
    my ($ng, $user, $from) = @_;
    my @l;
    Gw::wait_until(sub { @l = GwMeter::log_lines($ng, qr/llm_gateway: usage user="\Q$user\E"/, $from); @l }, timeout => 40);
    return $l[0] // '';
}

subtest 'the final usage is read after the client left, and billed' => sub {
    my $ng = gateway(undef, 'llm_gateway_user ann key=sk-drain-ann;');
    $mock->reset;
    $mock->script({ sse => [map({ $chunk->("w$_ ") } 1 .. 5), $USAGE, 'data: [DONE]'], delay_ms => 200 });
    my $from = length $ng->error_log;
    my $r = abort_stream($ng, 'sk-drain-ann');
    ok($r->{aborted}, 'the client left after the first event');
    my $line = wait_usage_line($ng, 'ann', $from);
    like($line, qr/prompt_tokens=21 completion_tokens=13 cost_micro_usd=\d+ \(client cancelled\) while/,
         "billed the provider's own usage, marked as a cancel");
    unlike($line, qr/estimated/, 'not an estimate');
    my $rec = $mock->requests->[-1];
    ok($rec->{completed} && !$rec->{aborted}, 'the provider sent its whole answer: it was read to the end');
    my $u = user_row($ng, 'ann');
    is_deeply([@$u{qw(tokensInPerDay tokensOutPerDay)}], [21, 13], 'the counters: the real usage');
    is(scalar(GwMeter::log_lines($ng, qr/client closed the connection mid-stream; reading the provider's answer/, $from)), 1,
       'one line says the answer is being drained');
    my $ev = Gw::http(GET => $ng->url('/admin/api/events'), headers => { 'x-api-key' => 'sk-drain-admin' })->{json};
    is_deeply($ev->{events}, [], 'no event: a cancel is not a failure');
    $ng->stop;
};

subtest 'translated: an Anthropic stream to a chat-completions client' => sub {
    my $ng = gateway(undef, 'llm_gateway_user fay key=sk-drain-fay;');
    $mock->reset;
    my @ev = ({ event => 'message_start', data => { type => 'message_start', message => { id => 'msg_1', type => 'message',
                 role => 'assistant', model => 'claude-sonnet-4-5', content => [], stop_reason => undef,
                 usage => { input_tokens => 25, output_tokens => 1 } } } },
              { event => 'content_block_start', data => { type => 'content_block_start', index => 0,
                 content_block => { type => 'text', text => '' } } },
              (map { { event => 'content_block_delta', data => { type => 'content_block_delta', index => 0,
                 delta => { type => 'text_delta', text => "w$_ " } } } } 1 .. 4),
              { event => 'content_block_stop', data => { type => 'content_block_stop', index => 0 } },
              { event => 'message_delta', data => { type => 'message_delta', delta => { stop_reason => 'end_turn' },
                 usage => { output_tokens => 9 } } },
              { event => 'message_stop', data => { type => 'message_stop' } });
    $mock->script({ sse => \@ev, delay_ms => 150 });
    my $from = length $ng->error_log;
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => { Authorization => 'Bearer sk-drain-fay' },
                               body => GwConf::chat_body('claude/claude-sonnet-4-5', stream => $T),
                               abort_after_events => 1, timeout => 10);
    ok($r->{aborted}, 'the client left after the first event');
    like(wait_usage_line($ng, 'fay', $from), qr/prompt_tokens=25 completion_tokens=9 cost_micro_usd=\d+ \(client cancelled\) while/,
         "billed Anthropic's own usage, read after the client left");
    $ng->stop;
};

subtest 'no usage in the answer: the estimate, logged as estimated' => sub {
    my $ng = gateway(undef, 'llm_gateway_user bea key=sk-drain-bea;');
    $mock->reset;
    $mock->script({ sse => [map({ $chunk->("w$_ ") } 1 .. 4), 'data: [DONE]'], delay_ms => 150 });
    my $from = length $ng->error_log;
    my $r = abort_stream($ng, 'sk-drain-bea');
    ok($r->{aborted}, 'the client left');
    my $line = wait_usage_line($ng, 'bea', $from);
    # four deltas of 3 bytes: 12 bytes of completion text, / 4
    like($line, qr/prompt_tokens=\d+ completion_tokens=3 cost_micro_usd=\d+ \(estimated\) \(client cancelled\) while/,
         'billed the estimate: the request / 4 and the completion text / 4; the log says so');
    ok($mock->requests->[-1]{completed}, 'the answer was read to its end');
    $ng->stop;
};

subtest 'the time bound ends a drain' => sub {
    my $ng = gateway('1s', 'llm_gateway_user cid key=sk-drain-cid;');
    $mock->reset;
    $mock->script({ sse => [$chunk->('a'), $chunk->('b')], stall => $T });
    my $from = length $ng->error_log;
    my $t0 = Time::HiRes::time();
    my $r = abort_stream($ng, 'sk-drain-cid');
    ok($r->{aborted}, 'the client left');
    ok(Gw::wait_until(sub { my $q = $mock->requests; @$q && $q->[-1]{aborted} }, timeout => 10), 'the provider call was closed');
    my $took = Time::HiRes::time() - $t0;
    ok($took >= 0.9 && $took < 5, sprintf('after the 1 s bound (%.1f s)', $took));
    like(wait_usage_line($ng, 'cid', $from), qr/\(estimated\)/, 'billed the estimate');
    is(scalar(GwMeter::log_lines($ng, qr/the drain of a cancelled stream reached its bound/, $from)), 1, 'the bound is logged');
    is(scalar(GwMeter::log_lines($ng, qr/\[info\].*upstream timed out/, $from)), 1,
       "nginx's line for the closed call is at info");
    is(scalar(GwMeter::log_lines($ng, qr/\[error\]/, $from)), 0, 'no error line');
    $ng->stop;
};

subtest 'the byte bound ends a drain' => sub {
    my $ng = gateway('30s 2k', 'llm_gateway_user dan key=sk-drain-dan;');
    $mock->reset;
    my $big = 'x' x 700;
    $mock->script({ sse => [map({ $chunk->("$big$_") } 1 .. 40), $USAGE, 'data: [DONE]'], delay_ms => 100 });
    my $from = length $ng->error_log;
    my $t0 = Time::HiRes::time();
    my $r = abort_stream($ng, 'sk-drain-dan');
    ok($r->{aborted}, 'the client left');
    ok(Gw::wait_until(sub { my $q = $mock->requests; @$q && $q->[-1]{aborted} }, timeout => 10),
       'the provider call was closed before its end');
    ok(Time::HiRes::time() - $t0 < 3, 'soon after 2 KiB, long before the 30 s bound');
    like(wait_usage_line($ng, 'dan', $from), qr/\(estimated\)/, 'billed the estimate (the usage never came)');
    is(scalar(GwMeter::log_lines($ng, qr/\[error\]/, $from)), 0, 'no error line');
    $ng->stop;
};

subtest 'off: the call ends with its client' => sub {
    my $ng = gateway('off', 'llm_gateway_user eve key=sk-drain-eve;');
    $mock->reset;
    $mock->script({ sse => [map({ $chunk->("w$_ ") } 1 .. 5), $USAGE, 'data: [DONE]'], delay_ms => 300 });
    my $from = length $ng->error_log;
    my $r = abort_stream($ng, 'sk-drain-eve');
    ok($r->{aborted}, 'the client left');
    ok(Gw::wait_until(sub { my $q = $mock->requests; @$q && $q->[-1]{aborted} }, timeout => 3),
       'the provider call was closed at once');
    like(wait_usage_line($ng, 'eve', $from), qr/\(estimated\).*|\(client cancelled\)/, 'billed what was seen');
    $ng->stop;
};

done_testing();
