# Billing against hostile or broken provider answers ("Hardening, second
# round"), each table row one answer and the exact counters it must leave:
#   1. a client that leaves mid-stream is held to llm_gateway_stream_cutoff
#      as one that stays: the drain ends the provider call where the cutoff
#      would have and bills what the cutoff bills (every codec);
#   2. the drain's byte bound counts the bytes read from the provider (not
#      the bytes the client would have got) and is held exactly, however
#      fast the provider sends;
#   3. a usage count out of range or not an integer (1e30, 2^63, 10.7), in
#      any reader, whole or streamed, native or translated, is unread usage:
#      the estimate is billed and the implausible-usage warning logged;
#   4. a streamed answer that turns invalid bills the usage it reported, else
#      the estimate, on every codec (docs/metering.md#accounting).
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use Test::More;

Gw::need_module();

my $T = JSON::PP::true;
my $mock = Gw::Mock->start();
my $ADMIN = 'sk-hostile-admin';

sub gateway {
    my (%o) = @_;
    my $conf = GwConf::gateway(
        providers => [{ name => 'oai', type => 'openai', key => 'sk-prov-hostile', models => 'gpt-4o-mini', default => 1 },
                      { name => 'claude', type => 'anthropic', key => 'sk-ant-hostile', models => 'claude-sonnet-4-5' },
                      { name => 'gem', type => 'gemini', key => 'AIzaHostileKey', models => 'gemini-2.5-flash' }],
        http => join('', map { "$_\n" } "llm_gateway_user root key=$ADMIN admin;", @{ $o{users} || [] },
                     @{ $o{http} || [] }),
        server => 'location /admin { llm_gateway_admin; }',
    );
    return Gw::Nginx->start(conf => $conf, workers => 1, vars => { MOCK => $mock->port });
}

# ------------------------------------------------------------ wire pieces

my $WORD = 'abcdefgh';   # 8 bytes of completion text: 2 tokens
sub oai_chunk {
    my ($text) = @_;
    return 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"'
         . $text . '"},"finish_reason":null}]}';
}
my $OAI_STOP = 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}';
sub oai_usage {
    my ($usage) = @_;   # the usage object's JSON text
    return qq(data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":$usage});
}

sub anth {
    my ($event, $data) = @_;   # $data: a hash, or the data line's JSON text
    return { event => $event, data => ref $data ? { type => $event, %$data } : $data };
}
sub anth_start {
    my ($usage) = @_;   # JSON text
    return anth('message_start', qq({"type":"message_start","message":{"id":"msg_h","type":"message","role":"assistant",)
                                . qq("model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":$usage}}));
}
my $ANTH_BLOCK = anth('content_block_start', { index => 0, content_block => { type => 'text', text => '' } });
sub anth_delta { return anth('content_block_delta', { index => 0, delta => { type => 'text_delta', text => $_[0] } }) }
sub anth_end {
    my ($usage) = @_;   # JSON text of message_delta's usage
    return (anth('content_block_stop', { index => 0 }),
            anth('message_delta', qq({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":$usage})),
            anth('message_stop', {}));
}

sub gem_chunk {
    my ($text, $usage, $finish) = @_;   # $usage: JSON text of usageMetadata
    my $cand = '{"content":{"parts":[{"text":"' . $text . '"}],"role":"model"},"index":0'
             . ($finish ? ',"finishReason":"STOP"' : '') . '}';
    return qq(data: {"candidates":[$cand],"usageMetadata":$usage,"modelVersion":"gemini-2.5-flash","responseId":"r-h"});
}
sub gem_usage { my ($p, $c) = @_; return qq({"promptTokenCount":$p,"candidatesTokenCount":$c,"totalTokenCount":) . ($p + $c) . '}' }

my $CHAT = '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"count to forty"}]}';
my $CCHAT = '{"model":"claude-sonnet-4-5","stream":true,"messages":[{"role":"user","content":"count to forty"}]}';
my $GCHAT = '{"model":"gemini-2.5-flash","stream":true,"messages":[{"role":"user","content":"count to forty"}]}';
my $MSGS = '{"model":"gpt-4o-mini","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"count to forty"}]}';
my $NMSGS = '{"model":"claude-sonnet-4-5","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"count to forty"}]}';

sub est { return int(length($_[0]) / 4) }

sub stream {
    my ($ng, $path, $key, $body, %o) = @_;
    return Gw::stream_request(POST => $ng->url($path), headers => { Authorization => "Bearer $key", 'Content-Type' => 'application/json',
                                                                    'anthropic-version' => '2023-06-01' },
                              body => $body, timeout => $o{timeout} // 20, %o);
}

sub user_row {
    my ($ng, $user) = @_;
    my $u = Gw::http(GET => $ng->url('/admin/api/usage'), headers => { 'x-api-key' => $ADMIN })->{json};
    return GwMeter::row($u, user => $user) || {};
}

sub usage_line {
    my ($ng, $user, $from) = @_;
    my @l;
    Gw::wait_until(sub { @l = GwMeter::log_lines($ng, qr/llm_gateway: usage user="\Q$user\E"/, $from); @l }, timeout => 40);
    return ($l[0] // '') =~ s/^.*?(llm_gateway: usage )/$1/r =~ s/(?: while [^,]*)?, client: .*//r;
}

sub provider_aborted {
    return Gw::wait_until(sub { my $q = $mock->requests; @$q && $q->[-1]{aborted} }, timeout => 10);
}

# ================================================ 1. the cutoff holds in a drain

# The provider's answer: 40 chunks of 8 bytes of text (2 tokens each), then
# a final usage far over the budget. Each budget is the input and 10 chunks
# (20 tokens): the 11th crosses. The input is the provider's own count when
# it reports one first (Anthropic's message_start, Gemini's usageMetadata),
# else the request / 4.
my $N = 40;
my $BIG_OUT = 1000;
my @CUT = (
    # name, path, body, input counted, provider's events
    ['chat completions, native OpenAI', '/v1/chat/completions', $CHAT, est($CHAT),
     [map({ oai_chunk($WORD) } 1 .. $N), $OAI_STOP, oai_usage(qq({"prompt_tokens":10,"completion_tokens":$BIG_OUT})), 'data: [DONE]']],
    ['messages, native Anthropic', '/v1/messages', $NMSGS, 40,
     [anth_start('{"input_tokens":40,"output_tokens":1}'), $ANTH_BLOCK, map({ anth_delta($WORD) } 1 .. $N),
      anth_end(qq({"output_tokens":$BIG_OUT}))]],
    ['chat completions to an Anthropic provider', '/v1/chat/completions', $CCHAT, 40,
     [anth_start('{"input_tokens":40,"output_tokens":1}'), $ANTH_BLOCK, map({ anth_delta($WORD) } 1 .. $N),
      anth_end(qq({"output_tokens":$BIG_OUT}))]],
    ['chat completions to a Gemini provider', '/v1/chat/completions', $GCHAT, 40,
     [map({ gem_chunk($WORD, gem_usage(40, 2 * $_)) } 1 .. $N - 1), gem_chunk($WORD, gem_usage(40, $BIG_OUT), 1)]],
    ['messages to an OpenAI provider', '/v1/messages', $MSGS, est($MSGS),
     [map({ oai_chunk($WORD) } 1 .. $N), $OAI_STOP, oai_usage(qq({"prompt_tokens":10,"completion_tokens":$BIG_OUT})), 'data: [DONE]']],
);

subtest 'the stream cutoff holds for a client that leaves mid-stream (drain), on every codec' => sub {
    my @users;
    for my $i (0 .. $#CUT) {
        my $limit = $CUT[$i][3] + 20;
        push @users, "llm_gateway_user stay$i key=sk-h-stay$i tokens_per_day=$limit;",
                     "llm_gateway_user gone$i key=sk-h-gone$i tokens_per_day=$limit;";
    }
    my $ng = gateway(users => \@users, http => ['llm_gateway_stream_cutoff on;']);
    for my $i (0 .. $#CUT) {
        my ($name, $path, $body, $in, $events) = @{ $CUT[$i] };
        my $script = { sse => $events, delay_ms => 50, ($name =~ /Gemini/ ? (line_end => 'crlf') : ()) };
        # the client that stays: cut off after 10 chunks
        $mock->reset;
        $mock->script($script);
        my $from = length $ng->error_log;
        my $r = stream($ng, $path, "sk-h-stay$i", $body);
        ok($r->{complete} && $r->{body} =~ /budget_exceeded|budget exceeded/, "$name, client stays: cut off at the budget")
            or diag(substr($r->{body} // '', -400));
        like(usage_line($ng, "stay$i", $from), qr/ \(cut off at the budget\)$/, "$name, client stays: the usage line");
        is_deeply([@{ user_row($ng, "stay$i") }{qw(tokensInPerDay tokensOutPerDay)}], [$in, 20],
                  "$name, client stays: billed the input and 10 chunks");
        # the client that leaves after the first event: the same bill
        $mock->reset;
        $mock->script($script);
        $from = length $ng->error_log;
        $r = stream($ng, $path, "sk-h-gone$i", $body, abort_after_events => 1);
        ok($r->{aborted}, "$name, client leaves: it left after the first event");
        ok(provider_aborted(), "$name, client leaves: the provider call was closed before its end");
        like(usage_line($ng, "gone$i", $from), qr/ \(client cancelled\) \(cut off at the budget\)$/,
             "$name, client leaves: the usage line says cancelled and cut off");
        is_deeply([@{ user_row($ng, "gone$i") }{qw(tokensInPerDay tokensOutPerDay)}], [$in, 20],
                  "$name, client leaves: billed as the client that stayed");
        is(scalar(GwMeter::log_lines($ng, qr/\[warn\].*stream cut off for user "gone$i": budget exceeded/, $from)), 1,
           "$name, client leaves: the cut is logged");
    }
    is(scalar(GwMeter::log_lines($ng, qr/\[error\]/)), 0, 'no error line');
    $ng->stop;
};

# ====================================== 2. the drain's byte bound is exact

subtest "the drain's byte bound counts the provider's bytes and is held exactly" => sub {
    my $ng = gateway(users => [map { "llm_gateway_user drain$_ key=sk-h-drain$_;" } 0 .. 2]);
    my $pad = 'p' x 65536;
    my @rows = (
        # events that give the client nothing (Anthropic pings translated to
        # chat completions; usage-only chunks the client did not ask for):
        # 2.6 MB read, never a byte of the client's. Billed: the usage read
        # before the bound, not the final one after it.
        ['pings of an Anthropic provider, translated', '/v1/chat/completions', $CCHAT,
         { delay_ms => 10, sse => [anth_start('{"input_tokens":25,"output_tokens":1}'),
                                   map({ anth('ping', qq({"type":"ping","pad":"$pad"})) } 1 .. 40),
                                   $ANTH_BLOCK, anth_delta('late'), anth_end('{"output_tokens":7}')] },
         qr/ prompt_tokens=25 completion_tokens=1 cost_micro_usd=\d+ \(client cancelled\)$/],
        ['hidden usage chunks of an OpenAI provider', '/v1/chat/completions', $CHAT,
         { delay_ms => 10, sse => [oai_chunk('first'),
                                   map({ oai_usage(qq({"prompt_tokens":1,"completion_tokens":1},"pad":"$pad")) } 1 .. 40),
                                   $OAI_STOP, oai_usage('{"prompt_tokens":21,"completion_tokens":7}'), 'data: [DONE]'] },
         qr/ prompt_tokens=1 completion_tokens=1 cost_micro_usd=\d+ \(client cancelled\)$/],
        # 3 MB of text in one write after the first event: nginx reads all
        # that has arrived before the end it posts can run. Billed: the
        # estimate, with no text past the bound.
        ['a burst of text', '/v1/chat/completions', $CHAT,
         { delay_ms => 300, sse => [oai_chunk('first'),
                                    { raw => join('', map { oai_chunk('t' x 8000) . "\n\n" } 1 .. 375) },
                                    $OAI_STOP, oai_usage('{"prompt_tokens":21,"completion_tokens":7}'), 'data: [DONE]'] },
         qr/ \(estimated\) \(client cancelled\)$/],
    );
    for my $i (0 .. $#rows) {
        my ($name, $path, $body, $script, $billed) = @{ $rows[$i] };
        $mock->reset;
        $mock->script($script);
        my $from = length $ng->error_log;
        my $r = stream($ng, $path, "sk-h-drain$i", $body, abort_after_events => 1);
        ok($r->{aborted}, "$name: the client left after the first event");
        ok(provider_aborted(), "$name: the provider call was closed before its end");
        my @bound = GwMeter::log_lines($ng, qr/the drain of a cancelled stream reached its bound/, $from);
        Gw::wait_until(sub { @bound = GwMeter::log_lines($ng, qr/the drain of a cancelled stream reached its bound/, $from) },
                       timeout => 10);
        is(scalar @bound, 1, "$name: the bound is logged once");
        like($bound[0] // '', qr/reached its bound \(1048576 bytes read\)/, "$name: at exactly 1 MiB read from the provider");
        my $line = usage_line($ng, "drain$i", $from);
        like($line, $billed, "$name: billed what was read before the bound");
        my ($out) = $line =~ /completion_tokens=(\d+)/;
        cmp_ok($out // -1, '<=', 1048576 / 4, "$name: the estimate counts no text past the bound");
    }
    is(scalar(GwMeter::log_lines($ng, qr/\[error\]/)), 0, 'no error line');
    $ng->stop;
};

# ============================== 3. usage out of range: estimated, with a warning

# name, path, body, provider answer (a script entry)
my $MSGS_WHOLE = '{"model":"claude-sonnet-4-5","max_tokens":200,"messages":[{"role":"user","content":"count to forty"}]}';
my $GCHAT_WHOLE = '{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"count to forty"}]}';
my $CHAT_WHOLE = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"count to forty"}]}';
my $anth_stream = sub {
    my ($start, $end) = @_;
    return { sse => [anth_start($start), $ANTH_BLOCK, anth_delta('hello'), anth_end($end)] };
};
my $oai_stream = sub { return { sse => [oai_chunk('hello'), $OAI_STOP, oai_usage($_[0]), 'data: [DONE]'] } };
my $gem_stream = sub { return { line_end => 'crlf', sse => [gem_chunk('hel', gem_usage(40, 1)), gem_chunk('lo', $_[0], 1)] } };
my $anth_whole = sub {
    return { headers => { 'content-type' => 'application/json' },
             body => '{"id":"msg_w","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hello"}],'
                   . qq("stop_reason":"end_turn","stop_sequence":null,"usage":$_[0]}) };
};
my $oai_whole = sub {
    return { headers => { 'content-type' => 'application/json' },
             body => '{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":'
                   . qq({"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":$_[0]}) };
};
my $gem_whole = sub {
    return { headers => { 'content-type' => 'application/json' },
             body => '{"candidates":[{"content":{"parts":[{"text":"hello"}],"role":"model"},"finishReason":"STOP","index":0}],'
                   . qq("usageMetadata":$_[0],"modelVersion":"gemini-2.5-flash"}) };
};
my @RANGE = (
    ['native messages stream, message_start input_tokens 1e30', '/v1/messages', $NMSGS,
     $anth_stream->('{"input_tokens":1e30,"output_tokens":1}', '{"output_tokens":5}')],
    ['native messages stream, message_delta output_tokens 2^63', '/v1/messages', $NMSGS,
     $anth_stream->('{"input_tokens":25,"output_tokens":1}', '{"output_tokens":9223372036854775808}')],
    ['native messages stream, message_delta output_tokens 10.7', '/v1/messages', $NMSGS,
     $anth_stream->('{"input_tokens":25,"output_tokens":1}', '{"output_tokens":10.7}')],
    ['native messages, whole, input_tokens 2^63', '/v1/messages', $MSGS_WHOLE,
     $anth_whole->('{"input_tokens":9223372036854775808,"output_tokens":5}')],
    ['chat stream to Anthropic, input_tokens 1e30', '/v1/chat/completions', $CCHAT,
     $anth_stream->('{"input_tokens":1e30,"output_tokens":1}', '{"output_tokens":5}')],
    ['chat stream to Gemini, candidatesTokenCount 10.7', '/v1/chat/completions', $GCHAT,
     $gem_stream->('{"promptTokenCount":40,"candidatesTokenCount":10.7,"totalTokenCount":50}')],
    ['chat to Gemini, whole, promptTokenCount 1e30', '/v1/chat/completions', $GCHAT_WHOLE,
     $gem_whole->('{"promptTokenCount":1e30,"candidatesTokenCount":5,"totalTokenCount":5}')],
    ['messages stream to OpenAI, prompt_tokens 2^63', '/v1/messages', $MSGS,
     $oai_stream->('{"prompt_tokens":9223372036854775808,"completion_tokens":5}')],
    ['native chat stream, completion_tokens 10.7', '/v1/chat/completions', $CHAT,
     $oai_stream->('{"prompt_tokens":21,"completion_tokens":10.7}')],
    ['native chat, whole, prompt_tokens 1e30', '/v1/chat/completions', $CHAT_WHOLE,
     $oai_whole->('{"prompt_tokens":1e30,"completion_tokens":5}')],
    ['native chat, whole, completion_tokens -3', '/v1/chat/completions', $CHAT_WHOLE,
     $oai_whole->('{"prompt_tokens":21,"completion_tokens":-3}')],
);

subtest 'usage out of range or not an integer is estimated, with a warning, in every reader' => sub {
    my $ng = gateway(users => [map { "llm_gateway_user range$_ key=sk-h-range$_;" } 0 .. $#RANGE]);
    for my $i (0 .. $#RANGE) {
        my ($name, $path, $body, $script) = @{ $RANGE[$i] };
        $mock->reset;
        $mock->script($script);
        my $from = length $ng->error_log;
        my $r = stream($ng, $path, "sk-h-range$i", $body);
        is($r->{status}, 200, "$name: 200");
        like(usage_line($ng, "range$i", $from), qr/ prompt_tokens=@{[est($body)]} completion_tokens=0 cost_micro_usd=\d+ \(estimated\)$/,
             "$name: the usage line: the estimate");
        is_deeply([@{ user_row($ng, "range$i") }{qw(tokensInPerDay tokensOutPerDay)}], [est($body), 0],
                  "$name: the counters: the request / 4, no output");
        my @warn = GwMeter::log_lines($ng, qr/\[warn\].*llm_gateway: implausible usage from the provider/, $from);
        is(scalar @warn, 1, "$name: one warning");
        like($warn[0] // '', qr/implausible usage from the provider for model "[^"]+" \(a token count that is not an integer from 0 to 9223372036854775807\); estimating/,
             "$name: the warning says why");
    }
    $ng->stop;
};

# ============================ 4. a stream that turns invalid bills what it reported

my @INVALID = (
    # name, path, body, provider's events, billed in, billed out
    ['chat stream to Anthropic, invalid after message_start', '/v1/chat/completions', $CCHAT,
     { sse => [anth_start('{"input_tokens":25,"output_tokens":3}'), $ANTH_BLOCK, anth_delta('hello'),
               anth('content_block_delta', '{"type":"content_block_delta","index":0,"delta":'),
               anth_delta('more'), anth_end('{"output_tokens":9}')] }, 25, 3],
    ['messages stream to OpenAI, invalid after the usage chunk', '/v1/messages', $MSGS,
     { sse => [oai_chunk('hello'), $OAI_STOP, oai_usage('{"prompt_tokens":21,"completion_tokens":7}'),
               'data: {"choices":"not an array"}', 'data: [DONE]'] }, 21, 7],
    ['chat stream to Gemini, invalid after its usage', '/v1/chat/completions', $GCHAT,
     { line_end => 'crlf', sse => [gem_chunk('hello', gem_usage(40, 6)), 'data: {"candidates":7}',
                                   gem_chunk('more', gem_usage(40, 9), 1)] }, 40, 6],
    ['chat stream to Anthropic, invalid before any usage: the estimate', '/v1/chat/completions', $CCHAT,
     { sse => [anth('message_start', '{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[]}}'),
               $ANTH_BLOCK, anth_delta('hello'), anth('content_block_delta', '{"type":"content_block_delta","index":0,"delta":'),
               anth_end('{"output_tokens":9}')] }, est($CCHAT), 0],
);

subtest 'a translated stream that turns invalid bills the usage it reported, else the estimate' => sub {
    my $ng = gateway(users => [map { "llm_gateway_user inv$_ key=sk-h-inv$_;" } 0 .. $#INVALID]);
    for my $i (0 .. $#INVALID) {
        my ($name, $path, $body, $script, $in, $out) = @{ $INVALID[$i] };
        $mock->reset;
        $mock->script($script);
        my $from = length $ng->error_log;
        my $r = stream($ng, $path, "sk-h-inv$i", $body);
        is($r->{status}, 200, "$name: 200 (the stream had begun)");
        like($r->{body}, qr/the upstream provider sent an invalid response/, "$name: the stream ends with the invalid-response event");
        is(scalar(GwMeter::log_lines($ng, qr/\[warn\].*llm_gateway: provider "\w+" sent an invalid response: invalid upstream stream event/, $from)), 1,
           "$name: logged as an invalid response");
        like(usage_line($ng, "inv$i", $from), qr/ prompt_tokens=$in completion_tokens=$out cost_micro_usd=\d+/,
             "$name: the usage line");
        is_deeply([@{ user_row($ng, "inv$i") }{qw(tokensInPerDay tokensOutPerDay)}], [$in, $out], "$name: the counters");
    }
    $ng->stop;
};

$mock->stop;
done_testing();
