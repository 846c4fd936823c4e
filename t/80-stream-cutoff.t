# The mid-stream budget cutoff (llm_gateway_stream_cutoff on): a streamed
# answer whose running usage would cross what remained of the caller's token
# or cost budget at admission ends with one error event in the caller's
# format (OpenAI's for chat completions, Anthropic's for messages), the
# provider call is closed, and what was relayed is billed: the request / 4
# and the relayed completion text / 4 when the provider reported no usage
# (a native Anthropic provider's input count from its message_start, a
# Gemini provider's running usageMetadata, when they report them).
# Off (the default), the same stream is relayed whole; a stream under its
# budget is never touched (docs/metering.md#mid-stream-cutoff). The
# directive's configuration error is in t/14-config.t.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use Test::More;

Gw::need_module();

my $mock = Gw::Mock->start();
my $CHAT = '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"count to twenty"}]}';
my $MSGS = '{"model":"gpt-4o-mini","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"count to twenty"}]}';
my $WORD = 'abcdefgh';   # 8 bytes of completion text per chunk: 2 tokens
my $N = 20;

my @USERS = (
    # the request / 4 and 10 chunks of text fit; the 11th crosses
    'llm_gateway_user tok key=sk-cut-tok tokens_per_day=' . (int(length($CHAT) / 4) + 20) . ';',
    'llm_gateway_user msg key=sk-cut-msg tokens_per_day=' . (int(length($MSGS) / 4) + 20) . ';',
    # 1000 USD per million tokens: 1000 micro-USD a token; 0.04 USD: 40 tokens
    'llm_gateway_user cost key=sk-cut-cost cost_per_day=0.04;',
    'llm_gateway_user off key=sk-cut-off tokens_per_day=' . (int(length($CHAT) / 4) + 20) . ';',
    'llm_gateway_user under key=sk-cut-under tokens_per_day=100000;',
    # a native Anthropic provider reports 40 input tokens at the start: 40 and
    # 10 chunks of text fit, where the request / 4 (29) would have let 15 through
    'llm_gateway_user nat key=sk-cut-nat tokens_per_day=60;',
    # the same with a Gemini provider, whose every chunk carries the running usage
    'llm_gateway_user gem key=sk-cut-gem tokens_per_day=60;',
);
my $NAT_IN = 40;
my $NMSGS = '{"model":"claude-sonnet-4-5","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"count to twenty"}]}';
my $GCHAT = '{"model":"gemini-2.5-flash","stream":true,"messages":[{"role":"user","content":"count to twenty"}]}';
my $NATIVE = "llm_gateway_provider claude type=anthropic location=/_llm/claude/ key=sk-ant-cut models=claude-sonnet-4-5;\n"
           . "llm_gateway_provider gem type=gemini location=/_llm/gem/ key=AIzaCutKey models=gemini-2.5-flash;\n";
my $NATIVE_LOCS = join '', map { "    location /_llm/$_/ {\n        internal;\n        proxy_pass http://mock_up/;\n"
                               . "        proxy_http_version 1.1;\n        proxy_set_header Connection \"\";\n        proxy_buffering off;\n    }\n" }
                          qw(claude gem);

sub gateway {
    my ($on) = @_;
    my $http = "llm_gateway_price mock/gpt-4o-mini input=1000 output=1000;\n" . $NATIVE
             . ($on ? "llm_gateway_stream_cutoff on;\n" : '');
    return Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port },
                            conf => GwMeter::conf(users => \@USERS, http => $http, server => $NATIVE_LOCS));
}

sub chunk {
    my ($text) = @_;
    return 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"'
         . $text . '"},"finish_reason":null}]}';
}
my $STOP = 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}';

sub script_stream {
    my ($n) = @_;
    $mock->reset;
    $mock->script({ sse => [map({ chunk($WORD) } 1 .. $n), $STOP, 'data: [DONE]'], delay_ms => 60 });
}

sub stream {
    my ($ng, $path, $key, $body) = @_;
    return Gw::stream_request(POST => $ng->url($path), headers => { Authorization => "Bearer $key", 'Content-Type' => 'application/json',
                                                                    'anthropic-version' => '2023-06-01' },
                              body => $body, timeout => 15);
}

# The completion text of a chat-completions stream's events.
sub chat_text {
    my ($r) = @_;
    return join '', map { $_->{json}{choices}[0]{delta}{content} // '' }
                    grep { $_->{json} && $_->{json}{choices} } @{ $r->{events} };
}

sub user_row {
    my ($ng, $user) = @_;
    my $row;
    Gw::wait_until(sub { $row = GwMeter::row(GwMeter::usage($ng), user => $user); $row && $row->{tokensInPerDay} }, timeout => 10);
    return $row || {};
}

my $ng = gateway(1);

subtest 'chat completions: cut at the token budget with an OpenAI error event' => sub {
    script_stream($N);
    my $from = length $ng->error_log;
    my $r = stream($ng, '/v1/chat/completions', 'sk-cut-tok', $CHAT);
    is($r->{status}, 200, 'status 200: the stream had begun');
    ok($r->{complete}, 'the response ended properly (chunked end)') or diag($r->{error} // '');
    my @ev = @{ $r->{events} };
    my @content = grep { $_->{json} && $_->{json}{choices} } @ev;
    ok(@content > 0 && @content < $N, sprintf('fewer content chunks than the provider sent (%d of %d)', scalar @content, $N));
    my @err = grep { $_->{json} && $_->{json}{error} } @ev;
    is(scalar @err, 1, 'exactly one error event');
    is($ev[-1], $err[0], 'the error event is the last one: no [DONE] after it');
    is($err[0]{json}{error}{code}, 'budget_exceeded', 'code budget_exceeded');
    is($err[0]{json}{error}{type}, 'insufficient_quota', 'type insufficient_quota');
    like($err[0]{json}{error}{message}, qr/^budget exceeded: user "tok" tokensPerDay \d+$/, 'the budget rejection\'s words');
    unlike($r->{body}, qr/\[DONE\]/, 'no [DONE]');
    my $text = chat_text($r);
    is(length($text) % length($WORD), 0, 'whole chunks only');
    ok(Gw::wait_until(sub { my $q = $mock->requests; @$q && $q->[-1]{aborted} }, timeout => 10),
       'the provider call was closed before its end');
    my $u = user_row($ng, 'tok');
    is_deeply([@$u{qw(tokensInPerDay tokensOutPerDay)}], [int(length($CHAT) / 4), int(length($text) / 4)],
              'billed: the request / 4 and the relayed text / 4');
    my @cut = GwMeter::log_lines($ng, qr/\[warn\].*llm_gateway: stream cut off for user "tok": budget exceeded: user "tok" tokensPerDay \d+ \(\d+ tokens relayed\)/, $from);
    is(scalar @cut, 1, 'one warn line says so');
    is(scalar(GwMeter::log_lines($ng, qr/\[info\].*upstream timed out/, $from)), 1,
       "nginx's line for the closed call is at info");
    is(scalar(GwMeter::log_lines($ng, qr/\[error\]/, $from)), 0, 'no error line');
    my @usage = GwMeter::log_lines($ng, qr/llm_gateway: usage user="tok" .* \(estimated\) \(cut off at the budget\)/, $from);
    is(scalar @usage, 1, 'the usage line is marked as cut off');
    my $ev = Gw::http(GET => $ng->url('/admin/api/events'), headers => GwMeter::auth($GwMeter::ADMIN_KEY))->{json};
    is_deeply([grep { ($_->{kind} // '') eq 'upstream' } @{ $ev->{events} || [] }], [], 'no upstream failure event');
};

subtest 'chat completions: cut at the cost budget' => sub {
    script_stream($N);
    my $r = stream($ng, '/v1/chat/completions', 'sk-cut-cost', $CHAT);
    ok($r->{complete}, 'the response ended properly');
    my @err = grep { $_->{json} && $_->{json}{error} } @{ $r->{events} };
    is(scalar @err, 1, 'one error event');
    like($err[0]{json}{error}{message} // '', qr/^budget exceeded: user "cost" costPerDayUSD 0\.04$/, 'the cost budget named');
    my $text = chat_text($r);
    ok(length($text) < $N * length($WORD), 'part of the answer');
    my $tokens = int(length($CHAT) / 4) + int(length($text) / 4);
    ok($tokens <= 40, "what was relayed fits the budget ($tokens tokens)");
    my $u = user_row($ng, 'cost');
    is($u->{costPerDayMicroUsd}, 1000 * $tokens, 'billed the relayed part at the price');
};

subtest 'messages translated to an OpenAI provider: an Anthropic error event' => sub {
    script_stream($N);
    my $r = stream($ng, '/v1/messages', 'sk-cut-msg', $MSGS);
    is($r->{status}, 200, 'status 200: the stream had begun');
    ok($r->{complete}, 'the response ended properly') or diag($r->{error} // '');
    my @ev = @{ $r->{events} };
    my @err = grep { ($_->{event} // '') eq 'error' } @ev;
    is(scalar @err, 1, 'exactly one event: error');
    is($ev[-1], $err[0], 'it is the last event (no message_stop)');
    is($err[0]{json}{type}, 'error', 'data type error');
    is($err[0]{json}{error}{type}, 'rate_limit_error', 'the type a 429 budget answer has');
    like($err[0]{json}{error}{message} // '', qr/^budget exceeded: user "msg" tokensPerDay \d+$/, 'the message');
    my $text = join '', map { $_->{json}{delta}{text} // '' } grep { ($_->{event} // '') eq 'content_block_delta' } @ev;
    ok(length($text) > 0 && length($text) < $N * length($WORD), 'part of the answer');
    my $u = user_row($ng, 'msg');
    is_deeply([@$u{qw(tokensInPerDay tokensOutPerDay)}], [int(length($MSGS) / 4), int(length($text) / 4)],
              'billed: the request / 4 and the relayed text / 4');
};

subtest 'messages on a native Anthropic provider: its own input count is the input' => sub {
    my $ev = sub { my ($event, $data) = @_; return { event => $event, data => { type => $event, %$data } } };
    $mock->reset;
    $mock->script({ delay_ms => 60, sse => [
        $ev->('message_start', { message => { id => 'msg_cut', type => 'message', role => 'assistant', model => 'claude-sonnet-4-5',
                                               content => [], stop_reason => undef, stop_sequence => undef,
                                               usage => { input_tokens => $NAT_IN, output_tokens => 1 } } }),
        $ev->('content_block_start', { index => 0, content_block => { type => 'text', text => '' } }),
        map({ $ev->('content_block_delta', { index => 0, delta => { type => 'text_delta', text => $WORD } }) } 1 .. $N),
        $ev->('content_block_stop', { index => 0 }),
        $ev->('message_delta', { delta => { stop_reason => 'end_turn', stop_sequence => undef }, usage => { output_tokens => 2 * $N } }),
        $ev->('message_stop', {}),
    ] });
    my $from = length $ng->error_log;
    my $r = stream($ng, '/v1/messages', 'sk-cut-nat', $NMSGS);
    is($r->{status}, 200, 'status 200: the stream had begun');
    ok($r->{complete}, 'the response ended properly') or diag($r->{error} // '');
    my $reqs = $mock->requests;
    is($reqs->[-1]{path}, '/v1/messages', 'the provider was called natively') if @$reqs;
    my @ev = @{ $r->{events} };
    is(($ev[0] // {})->{json}{message}{usage}{input_tokens}, $NAT_IN, "the provider's message_start relayed");
    my @err = grep { ($_->{event} // '') eq 'error' } @ev;
    is(scalar @err, 1, 'exactly one event: error');
    is($ev[-1], $err[0], 'it is the last event (no message_stop)');
    is($err[0]{json}{error}{type}, 'rate_limit_error', 'the type a 429 budget answer has');
    like($err[0]{json}{error}{message} // '', qr/^budget exceeded: user "nat" tokensPerDay 60$/, 'the message');
    my $text = join '', map { $_->{json}{delta}{text} // '' } grep { ($_->{event} // '') eq 'content_block_delta' } @ev;
    my $chunks = length($text) / length($WORD);
    my $by_estimate = int((60 - int(length($NMSGS) / 4)) / 2);
    ok($chunks >= 1 && $chunks <= 10 && $by_estimate > 10,
       "at most the 10 chunks that fit beside the provider's $NAT_IN input tokens ($chunks relayed; the request / 4, "
       . int(length($NMSGS) / 4) . ", would have let $by_estimate through)");
    my $u = user_row($ng, 'nat');
    is_deeply([@$u{qw(tokensInPerDay tokensOutPerDay)}], [$NAT_IN, int(length($text) / 4)],
              "billed: the provider's input count and the relayed text / 4");
    my @cut = GwMeter::log_lines($ng, qr/llm_gateway: stream cut off for user "nat": budget exceeded: user "nat" tokensPerDay 60 \(\d+ tokens relayed\)/, $from);
    is(scalar @cut, 1, 'one warn line says so');
};

subtest 'chat completions on a Gemini provider: its running usage is the usage' => sub {
    my $chunk = sub {
        my ($k) = @_;
        return 'data: ' . Gw::json_encode({ candidates => [{ content => { parts => [{ text => $WORD }], role => 'model' }, index => 0 }],
                                             usageMetadata => { promptTokenCount => $NAT_IN, candidatesTokenCount => 2 * $k,
                                                                totalTokenCount => $NAT_IN + 2 * $k },
                                             modelVersion => 'gemini-2.5-flash', responseId => 'r-cut' });
    };
    $mock->reset;
    $mock->script({ delay_ms => 60, line_end => 'crlf', sse => [map { $chunk->($_) } 1 .. $N] });
    my $r = stream($ng, '/v1/chat/completions', 'sk-cut-gem', $GCHAT);
    is($r->{status}, 200, 'status 200: the stream had begun');
    ok($r->{complete}, 'the response ended properly') or diag($r->{error} // '');
    my $reqs = $mock->requests;
    like($reqs->[-1]{path} // '', qr{^/v1beta/models/gemini-2\.5-flash:streamGenerateContent}, 'the provider was called as Gemini') if @$reqs;
    my @err = grep { $_->{json} && $_->{json}{error} } @{ $r->{events} };
    is(scalar @err, 1, 'exactly one error event, OpenAI-style');
    is($err[0]{json}{error}{code}, 'budget_exceeded', 'code budget_exceeded');
    like($err[0]{json}{error}{message} // '', qr/^budget exceeded: user "gem" tokensPerDay 60$/, 'the message');
    my $text = chat_text($r);
    my $chunks = length($text) / length($WORD);
    my $by_estimate = int((60 - int(length($GCHAT) / 4)) / 2);
    ok($chunks >= 1 && $chunks <= 10 && $by_estimate > 10,
       "at most the 10 chunks that fit beside the provider's $NAT_IN prompt tokens ($chunks relayed; by the request / 4, $by_estimate)");
    my $u = user_row($ng, 'gem');
    is_deeply([@$u{qw(tokensInPerDay tokensOutPerDay)}], [$NAT_IN, 2 * $chunks], "billed: the provider's running usage of what was relayed");
};

subtest 'a stream under its budget is untouched' => sub {
    script_stream(3);
    my $r = stream($ng, '/v1/chat/completions', 'sk-cut-under', $CHAT);
    ok($r->{complete}, 'complete');
    is(chat_text($r), $WORD x 3, 'all of it');
    like($r->{body}, qr/data: \[DONE\]\n\n\z/, 'ends with [DONE]');
    is(scalar(grep { $_->{json} && $_->{json}{error} } @{ $r->{events} }), 0, 'no error event');
};
$ng->stop;

subtest 'off (the default): the same stream is relayed whole' => sub {
    my $off = gateway(0);
    script_stream($N);
    my $from = length $off->error_log;
    my $r = stream($off, '/v1/chat/completions', 'sk-cut-off', $CHAT);
    ok($r->{complete}, 'complete');
    is(chat_text($r), $WORD x $N, 'all of it');
    like($r->{body}, qr/data: \[DONE\]\n\n\z/, 'ends with [DONE]');
    is(scalar(GwMeter::log_lines($off, qr/stream cut off/, $from)), 0, 'nothing cut');
    $off->stop;
};

done_testing();
