#!/usr/bin/perl
# Translation both ways through the official clients (t/js/translate.mjs):
# the openai client reaching Anthropic- and Gemini-type providers, the
# @anthropic-ai/sdk client reaching OpenAI-, Gemini- and Anthropic-type
# providers, stream and non-stream, with what each provider received and
# what was accounted.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();
Gw::need_js_deps();

my $KEY = 'sk-tr-alice-5e6f7a8b';
my %PKEY = (oai => 'sk-prov-oai-111', claude => 'sk-ant-prov-222', gem => 'AIzaProvGem333');

my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [
        { name => 'oai',    type => 'openai',    key => $PKEY{oai},    models => 'gpt-4o-mini' },
        { name => 'claude', type => 'anthropic', key => $PKEY{claude}, models => 'claude-sonnet-4-5' },
        { name => 'gem',    type => 'gemini',    key => $PKEY{gem},    models => 'gemini-2.5-flash,text-embedding-004' },
    ],
    http => "llm_gateway_user alice key=$KEY;\n"
          . "llm_gateway_alias sonnet claude/claude-sonnet-4-5;\n"
          . "llm_gateway_price claude/claude-sonnet-4-5 input=3 output=15;\n"
          . "llm_gateway_price gem/gemini-2.5-flash input=0.3 output=2.5;\n"
          . "llm_gateway_price oai/gpt-4o-mini input=0.15 output=0.6;\n",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, vars => { MOCK => $mock->port });

sub run_steps {
    my (@steps) = @_;
    my $r = Gw::run_node('translate.mjs', timeout => 60,
                         env => { GW_URL => $ng->url(''), GW_KEY => $KEY, STEPS => Gw::json_encode(\@steps) });
    is($r->{exit}, 0, 'client script exits 0') or diag("stdout: $r->{stdout}\nstderr: $r->{stderr}");
    return ($r->{json} || {})->{steps} || {};
}

sub usage_line {
    my ($model, $p, $c, $cost) = @_;
    my $m = quotemeta $model;
    return qr/\[info\] .*llm_gateway: usage user="alice" model="$m" prompt_tokens=$p completion_tokens=$c cost_micro_usd=$cost\b/;
}

sub log_count { my ($re) = @_; return scalar(grep { $_ =~ $re } split /\n/, $ng->error_log) }

subtest 'openai client -> anthropic provider' => sub {
    $mock->reset;
    my $s = run_steps(
        { name => 'chat',   client => 'openai', op => 'chat',   model => 'sonnet' },
        { name => 'stream', client => 'openai', op => 'stream', model => 'claude-sonnet-4-5' },
        { name => 'su',     client => 'openai', op => 'stream', model => 'claude-sonnet-4-5', include_usage => 1 },
    );
    my $c = $s->{chat} || {};
    ok($c->{ok}, 'chat ok') or diag(Gw::json_encode($c));
    is($c->{object}, 'chat.completion', 'object');
    is($c->{model}, 'sonnet', 'the model the caller named (an alias) is reported');
    is($c->{id}, 'msg_mock1', 'the provider id is kept');
    is($c->{content}, 'Hello world', 'content');
    is($c->{finish_reason}, 'stop', 'end_turn -> stop');
    is_deeply($c->{usage}, { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18,
                             prompt_tokens_details => { cached_tokens => 0 },
                             completion_tokens_details => { reasoning_tokens => 0 } }, 'usage');

    my $st = $s->{stream} || {};
    ok($st->{ok}, 'stream ok') or diag(Gw::json_encode($st));
    is($st->{content}, 'Hello world', 'stream content');
    is($st->{finish_reason}, 'stop', 'stream finish');
    is($st->{usage}, undef, 'no usage chunk for a client that did not ask');
    is($st->{empty_choice_chunks}, 0, 'no chunk without choices');
    is($st->{model}, 'claude-sonnet-4-5', 'stream model');

    my $su = $s->{su} || {};
    ok($su->{ok}, 'stream with include_usage ok') or diag(Gw::json_encode($su));
    is($su->{content}, 'Hello world', 'content');
    is($su->{empty_choice_chunks}, 1, 'one usage-only chunk');
    is_deeply([@{ $su->{usage} || {} }{qw(prompt_tokens completion_tokens total_tokens)}], [11, 7, 18], 'usage');

    my $reqs = $mock->requests;
    is(scalar @$reqs, 3, 'three provider calls');
    is_deeply([map { "$_->{method} $_->{path}" } @$reqs], [('POST /v1/messages') x 3], 'Messages API paths');
    is_deeply([map { $_->{headers}{'x-api-key'} } @$reqs], [($PKEY{claude}) x 3], 'provider key as x-api-key');
    is_deeply([map { $_->{headers}{'anthropic-version'} } @$reqs], [('2023-06-01') x 3], 'anthropic-version');
    ok(!(grep { exists $_->{headers}{authorization} } @$reqs), 'no Authorization header upstream');
    ok(!(grep { ($_->{body} // '') =~ /\Q$KEY\E/ || join(' ', values %{ $_->{headers} }) =~ /\Q$KEY\E/ } @$reqs),
       'the caller key never reaches the provider');
    is($reqs->[0]{body},
       '{"model":"claude-sonnet-4-5","system":"Be brief.","messages":[{"role":"user","content":"Say hello"}],"max_tokens":64}',
       'translated request, byte-exact');
    is($reqs->[1]{json}{stream}, JSON::PP::true(), 'stream asked upstream');

    ok($ng->wait_log(usage_line('claude/claude-sonnet-4-5', 11, 7, 138)), 'usage and cost accounted (11*3 + 7*15)');
    is(log_count(usage_line('claude/claude-sonnet-4-5', 11, 7, 138)), 3, 'each of the three requests accounted once');
};

subtest 'openai client -> gemini provider' => sub {
    $mock->reset;
    my $s = run_steps(
        { name => 'chat',   client => 'openai', op => 'chat',   model => 'gemini-2.5-flash' },
        { name => 'su',     client => 'openai', op => 'stream', model => 'gem/gemini-2.5-flash', include_usage => 1 },
        { name => 'emb1',   client => 'openai', op => 'embeddings', model => 'text-embedding-004', input => 'hello' },
        { name => 'emb2',   client => 'openai', op => 'embeddings', model => 'text-embedding-004', input => ['a', 'b'] },
    );
    my $c = $s->{chat} || {};
    ok($c->{ok}, 'chat ok') or diag(Gw::json_encode($c));
    is($c->{content}, 'Hello world', 'content');
    is($c->{finish_reason}, 'stop', 'STOP -> stop');
    is_deeply([@{ $c->{usage} || {} }{qw(prompt_tokens completion_tokens total_tokens)}], [11, 10, 21],
              'thinking tokens count as completion tokens');
    is($c->{usage}{completion_tokens_details}{reasoning_tokens}, 3, 'reasoning tokens reported');

    my $su = $s->{su} || {};
    ok($su->{ok}, 'stream ok') or diag(Gw::json_encode($su));
    is($su->{content}, 'Hello world', 'stream content');
    is($su->{finish_reason}, 'stop', 'stream finish');
    is_deeply([@{ $su->{usage} || {} }{qw(prompt_tokens completion_tokens)}], [11, 10], 'stream usage');

    my $e1 = $s->{emb1} || {};
    ok($e1->{ok}, 'embeddings (one input) ok') or diag(Gw::json_encode($e1));
    is($e1->{count}, 1, 'one vector');
    is($e1->{dims}, 8, '8 dims (base64 decoded by the SDK)');
    ok(abs(($e1->{first}[0] // 99) - 0.841471) < 1e-5, 'first value');
    my $e2 = $s->{emb2} || {};
    ok($e2->{ok}, 'embeddings (two inputs) ok') or diag(Gw::json_encode($e2));
    is($e2->{count}, 2, 'two vectors');

    my $reqs = $mock->requests;
    is_deeply([map { "$_->{method} $_->{path}?$_->{query}" } @$reqs],
              ['POST /v1beta/models/gemini-2.5-flash:generateContent?',
               'POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
               'POST /v1beta/models/text-embedding-004:embedContent?',
               'POST /v1beta/models/text-embedding-004:batchEmbedContents?'], 'Gemini paths');
    is_deeply([map { $_->{headers}{'x-goog-api-key'} } @$reqs], [($PKEY{gem}) x 4], 'provider key as x-goog-api-key');
    ok(!(grep { exists $_->{headers}{authorization} } @$reqs), 'no Authorization header upstream');
    is($reqs->[0]{body},
       '{"contents":[{"role":"user","parts":[{"text":"Say hello"}]}],"systemInstruction":{"parts":[{"text":"Be brief."}]},"generationConfig":{"maxOutputTokens":64}}',
       'translated request, byte-exact');
    is($reqs->[2]{body}, '{"content":{"parts":[{"text":"hello"}]}}', 'embedContent request');
    is($reqs->[3]{body},
       '{"requests":[{"model":"models/text-embedding-004","content":{"parts":[{"text":"a"}]}},{"model":"models/text-embedding-004","content":{"parts":[{"text":"b"}]}}]}',
       'batchEmbedContents request');
    # 11 * 0.3 + 10 * 2.5 = 3.3 + 25 = 28.3 -> 28 micro-USD
    is(log_count(usage_line('gem/gemini-2.5-flash', 11, 10, 28)), 2, 'chat and stream accounted with thinking tokens');
};

subtest 'anthropic client -> openai, gemini and anthropic providers' => sub {
    $mock->reset;
    my $s = run_steps(
        { name => 'oai',     client => 'anthropic', op => 'messages',        model => 'gpt-4o-mini' },
        { name => 'oai_s',   client => 'anthropic', op => 'messages_stream', model => 'gpt-4o-mini' },
        { name => 'gem',     client => 'anthropic', op => 'messages',        model => 'gemini-2.5-flash' },
        { name => 'gem_s',   client => 'anthropic', op => 'messages_stream', model => 'gemini-2.5-flash' },
        { name => 'native',  client => 'anthropic', op => 'messages',        model => 'sonnet' },
        { name => 'native_s',client => 'anthropic', op => 'messages_stream', model => 'claude-sonnet-4-5' },
    );
    for my $n (qw(oai oai_s gem gem_s native native_s)) {
        my $m = $s->{$n} || {};
        ok($m->{ok}, "$n ok") or diag(Gw::json_encode($m));
        is_deeply($m->{content}, [{ type => 'text', text => 'Hello world' }], "$n: content");
        is($m->{stop_reason}, 'end_turn', "$n: stop_reason");
    }
    is($s->{oai}{model}, 'gpt-4o-mini', 'translated answer reports the caller model');
    like($s->{oai}{id} // '', qr/^msg_/, 'message id');
    is_deeply([@{ $s->{oai}{usage} || {} }{qw(input_tokens output_tokens)}], [11, 7], 'openai usage as Anthropic usage');
    is_deeply([@{ $s->{oai_s}{usage} || {} }{qw(input_tokens output_tokens)}], [11, 7], 'stream usage');
    is_deeply([@{ $s->{gem}{usage} || {} }{qw(input_tokens output_tokens)}], [11, 10], 'gemini usage (thinking included)');
    is($s->{native}{id}, 'msg_mock5', 'native: the provider answer as it is');
    is($s->{native}{model}, 'claude-sonnet-4-5', 'native: the provider model');
    is_deeply($s->{oai_s}{event_types},
              [qw(message_start content_block_start content_block_delta content_block_delta content_block_stop
                  message_delta message_stop)], 'translated stream: Anthropic event sequence');

    my $reqs = $mock->requests;
    is_deeply([map { "$_->{method} $_->{path}" } @$reqs],
              ['POST /v1/chat/completions', 'POST /v1/chat/completions',
               'POST /v1beta/models/gemini-2.5-flash:generateContent',
               'POST /v1beta/models/gemini-2.5-flash:streamGenerateContent',
               'POST /v1/messages', 'POST /v1/messages'], 'provider paths');
    is($reqs->[0]{headers}{authorization}, "Bearer $PKEY{oai}", 'openai key');
    ok(!exists $reqs->[0]{headers}{'x-api-key'}, 'the caller x-api-key is stripped');
    is($reqs->[0]{body},
       '{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}],"max_tokens":64}',
       'Anthropic request as OpenAI request, byte-exact');
    is($reqs->[1]{json}{stream_options}{include_usage}, JSON::PP::true(), 'include_usage forced upstream');
    is($reqs->[4]{headers}{'x-api-key'}, $PKEY{claude}, 'native: the provider key replaces the caller key');
    is($reqs->[4]{headers}{'anthropic-version'}, '2023-06-01', 'native: one anthropic-version');
    is($reqs->[4]{json}{model}, 'claude-sonnet-4-5', 'native: alias rewritten');
    is(log_count(usage_line('oai/gpt-4o-mini', 11, 7, 6)), 2, 'openai-served messages accounted');
    is(log_count(usage_line('claude/claude-sonnet-4-5', 11, 7, 138)), 5, 'native messages accounted (3 before + 2)');
};

subtest 'tool call round trips' => sub {
    $mock->reset;
    $mock->script(
        { match => { path => '/v1/messages' }, json => {
            id => 'msg_t1', type => 'message', role => 'assistant', model => 'claude-sonnet-4-5',
            content => [{ type => 'text', text => 'Let me check.' },
                        { type => 'tool_use', id => 'toolu_01A', name => 'get_weather', input => { city => 'Paris' } }],
            stop_reason => 'tool_use', stop_sequence => undef,
            usage => { input_tokens => 20, output_tokens => 9, cache_read_input_tokens => 5,
                       cache_creation_input_tokens => 2 } } },
        { match => { path => '/v1/messages' }, sse => [
            { event => 'message_start', data => { type => 'message_start', message => {
                id => 'msg_t2', type => 'message', role => 'assistant', model => 'claude-sonnet-4-5', content => [],
                stop_reason => undef, stop_sequence => undef, usage => { input_tokens => 20, output_tokens => 1 } } } },
            { event => 'content_block_start', data => { type => 'content_block_start', index => 0,
                content_block => { type => 'tool_use', id => 'toolu_02B', name => 'get_weather', input => {} } } },
            { event => 'content_block_delta', data => { type => 'content_block_delta', index => 0,
                delta => { type => 'input_json_delta', partial_json => '{"city":' } } },
            { event => 'content_block_delta', data => { type => 'content_block_delta', index => 0,
                delta => { type => 'input_json_delta', partial_json => '"Paris"}' } } },
            { event => 'content_block_stop', data => { type => 'content_block_stop', index => 0 } },
            { event => 'message_delta', data => { type => 'message_delta',
                delta => { stop_reason => 'tool_use', stop_sequence => undef }, usage => { output_tokens => 9 } } },
            { event => 'message_stop', data => { type => 'message_stop' } } ] },
        { match => { path => '/v1/chat/completions' }, json => {
            id => 'chatcmpl-t3', object => 'chat.completion', created => 1, model => 'gpt-4o-mini',
            choices => [{ index => 0, finish_reason => 'tool_calls', message => { role => 'assistant', content => undef,
                tool_calls => [{ id => 'call_9Z', type => 'function',
                                 function => { name => 'get_weather', arguments => '{"city":"Paris"}' } }] } }],
            usage => { prompt_tokens => 30, completion_tokens => 12, total_tokens => 42 } } },
        { match => { path => '/v1beta/models/gemini-2.5-flash:generateContent' }, json => {
            candidates => [{ index => 0, finishReason => 'STOP', content => { role => 'model', parts => [
                { functionCall => { name => 'get_weather', args => { city => 'Paris' } } }] } }],
            usageMetadata => { promptTokenCount => 25, candidatesTokenCount => 6, totalTokenCount => 31 },
            responseId => 'r4' } },
    );
    my $s = run_steps(
        { name => 'o2a',        client => 'openai',    op => 'tools',       model => 'claude-sonnet-4-5' },
        { name => 'o2a_stream', client => 'openai',    op => 'stream',      model => 'claude-sonnet-4-5' },
        { name => 'o2a_result', client => 'openai',    op => 'tool_result', model => 'claude-sonnet-4-5', call_id => 'toolu_01A' },
        { name => 'a2o',        client => 'anthropic', op => 'tools',       model => 'gpt-4o-mini' },
        { name => 'a2o_result', client => 'anthropic', op => 'tool_result', model => 'gpt-4o-mini', call_id => 'call_9Z' },
        { name => 'a2g',        client => 'anthropic', op => 'tools',       model => 'gemini-2.5-flash' },
        { name => 'a2g_result', client => 'anthropic', op => 'tool_result', model => 'gemini-2.5-flash', call_id => 'call_0' },
    );
    my $o = $s->{o2a} || {};
    ok($o->{ok}, 'openai -> anthropic tool call ok') or diag(Gw::json_encode($o));
    is($o->{finish_reason}, 'tool_calls', 'tool_use -> tool_calls');
    is($o->{content}, 'Let me check.', 'text beside the tool call');
    is_deeply($o->{tool_calls}, [{ id => 'toolu_01A', type => 'function',
                                   function => { name => 'get_weather', arguments => '{"city":"Paris"}' } }], 'tool call');
    is_deeply([@{ $o->{usage} || {} }{qw(prompt_tokens completion_tokens)}], [27, 9], 'cache tokens count as prompt tokens');
    is($o->{usage}{prompt_tokens_details}{cached_tokens}, 5, 'cache reads reported as cached_tokens');

    my $os = $s->{o2a_stream} || {};
    ok($os->{ok}, 'streamed tool call ok') or diag(Gw::json_encode($os));
    is($os->{finish_reason}, 'tool_calls', 'stream finish');
    is_deeply($os->{tool_calls}, [{ id => 'toolu_02B', name => 'get_weather', arguments => '{"city":"Paris"}' }],
              'arguments assembled from the deltas');
    ok(($s->{o2a_result} || {})->{ok}, 'second turn ok') or diag(Gw::json_encode($s->{o2a_result}));

    my $a = $s->{a2o} || {};
    ok($a->{ok}, 'anthropic -> openai tool call ok') or diag(Gw::json_encode($a));
    is($a->{stop_reason}, 'tool_use', 'tool_calls -> tool_use');
    is_deeply($a->{content}, [{ type => 'tool_use', id => 'call_9Z', name => 'get_weather', input => { city => 'Paris' } }],
              'tool_use block');
    ok(($s->{a2o_result} || {})->{ok}, 'second turn ok') or diag(Gw::json_encode($s->{a2o_result}));

    my $g = $s->{a2g} || {};
    ok($g->{ok}, 'anthropic -> gemini tool call ok') or diag(Gw::json_encode($g));
    is($g->{stop_reason}, 'tool_use', 'STOP with a function call -> tool_use');
    is_deeply($g->{content}, [{ type => 'tool_use', id => 'call_0', name => 'get_weather', input => { city => 'Paris' } }],
              'tool_use block');
    ok(($s->{a2g_result} || {})->{ok}, 'second turn ok') or diag(Gw::json_encode($s->{a2g_result}));

    my $reqs = $mock->requests;
    is(scalar @$reqs, 7, 'seven provider calls');
    is_deeply($reqs->[2]{json}{messages}, [
        { role => 'user', content => 'Weather in Paris?' },
        { role => 'assistant', content => [{ type => 'tool_use', id => 'toolu_01A', name => 'get_weather', input => { city => 'Paris' } }] },
        { role => 'user', content => [{ type => 'tool_result', tool_use_id => 'toolu_01A', content => 'Sunny, 21C' }] },
    ], 'openai tool result as Anthropic tool_result');
    is_deeply($reqs->[4]{json}{messages}, [
        { role => 'system', content => 'Be brief.' },
        { role => 'user', content => 'Weather in Paris?' },
        { role => 'assistant', content => undef, tool_calls => [{ id => 'call_9Z', type => 'function',
            function => { name => 'get_weather', arguments => '{"city":"Paris"}' } }] },
        { role => 'tool', tool_call_id => 'call_9Z', content => 'Sunny, 21C' },
    ], 'Anthropic tool_result as OpenAI tool message');
    is_deeply($reqs->[6]{json}{contents}, [
        { role => 'user', parts => [{ text => 'Weather in Paris?' }] },
        { role => 'model', parts => [{ functionCall => { name => 'get_weather', args => { city => 'Paris' } },
                                      thoughtSignature => 'skip_thought_signature_validator' }] },
        { role => 'user', parts => [{ functionResponse => { name => 'get_weather', response => { content => 'Sunny, 21C' } } }] },
    ], 'Anthropic tool_result as Gemini functionResponse');
};

subtest 'refusals: 400 for what the target cannot express, 501 for what it cannot serve' => sub {
    $mock->reset;
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => { Authorization => "Bearer $KEY" },
                     body => { model => 'claude-sonnet-4-5', n => 2, messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 400, 'n > 1 to an Anthropic provider: 400');
    like($r->{json}{error}{message} // '', qr/\bn\b/, 'the message names n');
    $r = Gw::http(POST => $ng->url('/v1/embeddings'), headers => { Authorization => "Bearer $KEY" },
                  body => { model => 'claude/claude-sonnet-4-5', input => 'hi' });
    GwConf::is_envelope($r, 501, 'invalid_request_error', 'unsupported_endpoint', 'embeddings to an Anthropic provider: 501');
    $r = Gw::http(POST => $ng->url('/v1/messages'), headers => { 'x-api-key' => $KEY },
                  body => { model => 'gpt-4o-mini', messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 400, '/v1/messages without max_tokens: 400');
    is($r->{json}{type}, 'error', 'in the Anthropic envelope');
    is($r->{json}{error}{type}, 'invalid_request_error', 'Anthropic error type');
    $r = Gw::http(POST => $ng->url('/v1/messages'), headers => { 'x-api-key' => 'sk-wrong' },
                  body => { model => 'gpt-4o-mini', max_tokens => 5, messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 401, 'a wrong key on /v1/messages: 401');
    is($r->{json}{error}{type}, 'authentication_error', 'in the Anthropic envelope');
    $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => { Authorization => "Bearer $KEY" },
                  body => { model => 'gem/../../v1/files', messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 400, 'a model id that would change the Gemini path: 400');
    is(scalar @{ $mock->requests }, 0, 'no provider was called');
};

subtest 'upstream errors in the caller envelope' => sub {
    $mock->reset;
    $mock->script(
        { match => { path => '/v1/messages' }, status => 429,
          json => { type => 'error', error => { type => 'rate_limit_error', message => 'slow down, key sk-ant-api03-SECRETSECRET' } } },
        { match => { path => '/v1/chat/completions' }, status => 500,
          json => { error => { message => 'boom', type => 'server_error', code => undef } } },
    );
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => { Authorization => "Bearer $KEY" },
                     body => { model => 'claude-sonnet-4-5', messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 429, 'the provider status');
    is($r->{json}{error}{type}, 'rate_limit_error', 'OpenAI envelope type');
    like($r->{json}{error}{message}, qr/slow down/, 'the provider message');
    unlike($r->{body}, qr/SECRETSECRET/, 'scrubbed');
    $r = Gw::http(POST => $ng->url('/v1/messages'), headers => { 'x-api-key' => $KEY },
                  body => { model => 'gpt-4o-mini', max_tokens => 5, messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 500, 'the provider status');
    is($r->{json}{type}, 'error', 'Anthropic envelope');
    is($r->{json}{error}{type}, 'api_error', 'api_error');
    like($r->{json}{error}{message}, qr/boom/, 'the provider message');
};

done_testing();
