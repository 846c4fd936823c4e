#!/usr/bin/perl
# POST /v1/responses (OpenAI's Responses API) through the official `openai`
# client (t/js/responses.mjs): native to an OpenAI-type provider (the body
# relayed with the model rewritten, the typed events relayed as they come),
# translated to Anthropic- and Gemini-type providers (stream and not, a tool
# call round trip), what each provider received byte for byte, what was
# accounted, the 400s for what needs OpenAI's server-side state, failover
# across an alias's targets of different types, and GET / DELETE / cancel of
# a stored response through the passthrough.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();
Gw::need_js_deps();

my $KEY = 'sk-rs-alice-7a8b9c0d';
my %PKEY = (oai => 'sk-prov-oai-444', claude => 'sk-ant-prov-555', gem => 'AIzaProvGem666');

my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [
        { name => 'oai',    type => 'openai',    key => $PKEY{oai},    models => 'gpt-4o-mini' },
        { name => 'claude', type => 'anthropic', key => $PKEY{claude}, models => 'claude-sonnet-4-5' },
        { name => 'gem',    type => 'gemini',    key => $PKEY{gem},    models => 'gemini-2.5-flash' },
    ],
    http => "llm_gateway_user alice key=$KEY;\n"
          . "llm_gateway_alias sonnet claude/claude-sonnet-4-5;\n"
          . "llm_gateway_alias any oai/gpt-4o-mini claude/claude-sonnet-4-5;\n"
          . "llm_gateway_price claude/claude-sonnet-4-5 input=3 output=15;\n"
          . "llm_gateway_price gem/gemini-2.5-flash input=0.3 output=2.5;\n"
          . "llm_gateway_price oai/gpt-4o-mini input=0.15 output=0.6;\n",
    server => "location /passthrough/ { llm_gateway_passthrough; }",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, vars => { MOCK => $mock->port });

sub run_steps {
    my (@steps) = @_;
    my $r = Gw::run_node('responses.mjs', timeout => 60,
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

# The typed events a Responses stream of one message carries.
my @MESSAGE_EVENTS = qw(response.created response.in_progress response.output_item.added
    response.content_part.added response.output_text.delta response.output_text.delta response.output_text.done
    response.content_part.done response.output_item.done response.completed);

subtest 'openai-type provider: native, the body relayed with only the model rewritten' => sub {
    $mock->reset;
    my $s = run_steps(
        { name => 'create', op => 'create', model => 'gpt-4o-mini' },
        { name => 'stream', op => 'stream', model => 'oai/gpt-4o-mini' },
        { name => 'state',  op => 'create', model => 'gpt-4o-mini',
          extra => { previous_response_id => 'resp_prev1', store => JSON::PP::true(),
                     tools => [{ type => 'web_search' }] } },
    );
    my $c = $s->{create} || {};
    ok($c->{ok}, 'create ok') or diag(Gw::json_encode($c));
    is($c->{object}, 'response', 'a response object');
    like($c->{id}, qr/^resp_mock\d+$/, 'the provider\'s own id (it stored the response)');
    is($c->{output_text}, 'Hello world', 'output_text');
    is_deeply($c->{usage}, { input_tokens => 11, input_tokens_details => { cached_tokens => 2 }, output_tokens => 7,
                             output_tokens_details => { reasoning_tokens => 0 }, total_tokens => 18 }, 'usage as sent');
    my $st = $s->{stream} || {};
    ok($st->{ok}, 'stream ok (the SDK\'s stream helper built the response)') or diag(Gw::json_encode($st));
    is_deeply($st->{events}, \@MESSAGE_EVENTS, 'the typed events, relayed');
    is($st->{streamed_text}, 'Hello world', 'deltas');
    is($st->{output_text}, 'Hello world', 'final response');
    ok(($s->{state} || {})->{ok}, 'previous_response_id, store and built-in tools pass to OpenAI-type providers')
        or diag(Gw::json_encode($s->{state}));

    my $reqs = $mock->requests;
    is_deeply([map { "$_->{method} $_->{path}" } @$reqs], [('POST /v1/responses') x 3], 'the Responses path');
    is_deeply([map { $_->{headers}{authorization} } @$reqs], [("Bearer $PKEY{oai}") x 3], 'the provider key');
    is($reqs->[0]{body}, '{"model":"gpt-4o-mini","instructions":"Be brief.","input":"Say hello","max_output_tokens":64}',
       'byte for byte what the SDK sent');
    is($reqs->[1]{body},
       '{"model":"gpt-4o-mini","instructions":"Be brief.","input":"Say hello","max_output_tokens":64,"stream":true}',
       'stream: the model rewritten, nothing added');
    is($reqs->[2]{body},
       '{"model":"gpt-4o-mini","instructions":"Be brief.","input":"Say hello","max_output_tokens":64,'
       . '"previous_response_id":"resp_prev1","store":true,"tools":[{"type":"web_search"}]}', 'state parameters relayed');
    # 11 * 0.15 + 7 * 0.6 = 1.65 + 4.2 = 5.85 -> 5 or 6 micro-USD: the count is what matters here
    ok($ng->wait_log(usage_line('oai/gpt-4o-mini', 11, 7, '\d+')), 'usage accounted');
    is(log_count(usage_line('oai/gpt-4o-mini', 11, 7, '\d+')), 3, 'each request accounted once (stream included)');
};

subtest 'anthropic-type provider: translated both ways' => sub {
    $mock->reset;
    my $s = run_steps(
        { name => 'create', op => 'create', model => 'sonnet' },
        { name => 'stream', op => 'stream', model => 'claude-sonnet-4-5' },
    );
    my $c = $s->{create} || {};
    ok($c->{ok}, 'create ok') or diag(Gw::json_encode($c));
    is($c->{object}, 'response', 'object');
    like($c->{id}, qr/^resp_[0-9A-Za-z]{24}$/, 'the gateway\'s own response id');
    is($c->{model}, 'sonnet', 'the model the caller named');
    is($c->{status}, 'completed', 'status');
    is($c->{output_text}, 'Hello world', 'output_text');
    is_deeply($c->{usage}, { input_tokens => 11, input_tokens_details => { cached_tokens => 0 }, output_tokens => 7,
                             output_tokens_details => { reasoning_tokens => 0 }, total_tokens => 18 }, 'usage');
    my $st = $s->{stream} || {};
    ok($st->{ok}, 'stream ok (the SDK\'s helper accepted the event sequence)') or diag(Gw::json_encode($st));
    is_deeply($st->{events}, \@MESSAGE_EVENTS, 'the typed events a Responses client expects');
    is($st->{output_text}, 'Hello world', 'final response from response.completed');
    is($st->{usage}{output_tokens}, 7, 'usage in response.completed');

    my $reqs = $mock->requests;
    is_deeply([map { "$_->{method} $_->{path}" } @$reqs], [('POST /v1/messages') x 2], 'Messages API');
    is_deeply([map { $_->{headers}{'x-api-key'} } @$reqs], [($PKEY{claude}) x 2], 'provider key as x-api-key');
    is($reqs->[0]{body},
       '{"model":"claude-sonnet-4-5","system":"Be brief.","messages":[{"role":"user","content":"Say hello"}],"max_tokens":64}',
       'translated request, byte-exact (instructions -> system, max_output_tokens -> max_tokens)');
    is($reqs->[1]{body},
       '{"model":"claude-sonnet-4-5","system":"Be brief.","messages":[{"role":"user","content":"Say hello"}],"max_tokens":64,"stream":true}',
       'stream request');
    ok($ng->wait_log(usage_line('claude/claude-sonnet-4-5', 11, 7, 138)), 'usage and cost accounted (11*3 + 7*15)');
    is(log_count(usage_line('claude/claude-sonnet-4-5', 11, 7, 138)), 2, 'each accounted once');
};

subtest 'gemini-type provider: translated both ways, text.format as a JSON schema' => sub {
    $mock->reset;
    my $schema = { type => 'object', properties => { greeting => { type => 'string' } }, required => ['greeting'],
                   additionalProperties => JSON::PP::false() };
    my $s = run_steps(
        { name => 'create', op => 'create', model => 'gemini-2.5-flash',
          extra => { text => { format => { type => 'json_schema', name => 'greeting', schema => $schema, strict => JSON::PP::true() } },
                     reasoning => { effort => 'low' }, temperature => 0.2 } },
        { name => 'stream', op => 'stream', model => 'gem/gemini-2.5-flash' },
    );
    my $c = $s->{create} || {};
    ok($c->{ok}, 'create ok') or diag(Gw::json_encode($c));
    is($c->{output_text}, 'Hello world', 'output_text');
    is_deeply([@{ $c->{usage} || {} }{qw(input_tokens output_tokens total_tokens)}], [11, 10, 21],
              'thinking tokens count as output tokens');
    is($c->{usage}{output_tokens_details}{reasoning_tokens}, 3, 'reasoning tokens reported');
    my $st = $s->{stream} || {};
    ok($st->{ok}, 'stream ok') or diag(Gw::json_encode($st));
    is_deeply($st->{events}, \@MESSAGE_EVENTS, 'typed events');
    is($st->{output_text}, 'Hello world', 'final text');

    my $reqs = $mock->requests;
    is_deeply([map { "$_->{path}?$_->{query}" } @$reqs],
              ['/v1beta/models/gemini-2.5-flash:generateContent?',
               '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse'], 'Gemini paths');
    is($reqs->[0]{body},
       '{"contents":[{"role":"user","parts":[{"text":"Say hello"}]}],"systemInstruction":{"parts":[{"text":"Be brief."}]},'
       . '"generationConfig":{"temperature":0.2,"maxOutputTokens":64,"responseMimeType":"application/json",'
       . '"responseJsonSchema":{"additionalProperties":false,"properties":{"greeting":{"type":"string"}},"required":["greeting"],"type":"object"},'
       . '"thinkingConfig":{"thinkingBudget":1024}}}',
       'translated request, byte-exact (text.format -> responseJsonSchema, reasoning.effort -> thinkingBudget)');
    is(log_count(usage_line('gem/gemini-2.5-flash', 11, 10, 28)), 2, 'accounted with thinking tokens');
};

subtest 'tool call round trips, stream and not' => sub {
    $mock->reset;
    $mock->script(
        { match => { path => '/v1/messages' }, json => {
            id => 'msg_t1', type => 'message', role => 'assistant', model => 'claude-sonnet-4-5',
            content => [{ type => 'text', text => 'Let me check.' },
                        { type => 'tool_use', id => 'toolu_01A', name => 'get_weather', input => { city => 'Oslo' } }],
            stop_reason => 'tool_use', stop_sequence => undef,
            usage => { input_tokens => 20, output_tokens => 9 } } },
        { match => { path => '/v1/messages' }, sse => [
            { event => 'message_start', data => { type => 'message_start', message => {
                id => 'msg_t2', type => 'message', role => 'assistant', model => 'claude-sonnet-4-5', content => [],
                stop_reason => undef, stop_sequence => undef, usage => { input_tokens => 20, output_tokens => 1 } } } },
            { event => 'content_block_start', data => { type => 'content_block_start', index => 0,
                content_block => { type => 'tool_use', id => 'toolu_02B', name => 'get_weather', input => {} } } },
            { event => 'content_block_delta', data => { type => 'content_block_delta', index => 0,
                delta => { type => 'input_json_delta', partial_json => '{"city":' } } },
            { event => 'content_block_delta', data => { type => 'content_block_delta', index => 0,
                delta => { type => 'input_json_delta', partial_json => '"Oslo"}' } } },
            { event => 'content_block_stop', data => { type => 'content_block_stop', index => 0 } },
            { event => 'message_delta', data => { type => 'message_delta',
                delta => { stop_reason => 'tool_use', stop_sequence => undef }, usage => { output_tokens => 9 } } },
            { event => 'message_stop', data => { type => 'message_stop' } } ] },
        { match => { path => '/v1beta/models/gemini-2.5-flash:generateContent' }, json => {
            candidates => [{ index => 0, finishReason => 'STOP', content => { role => 'model', parts => [
                { functionCall => { name => 'get_weather', args => { city => 'Oslo' } } }] } }],
            usageMetadata => { promptTokenCount => 25, candidatesTokenCount => 6, totalTokenCount => 31 } } },
    );
    my $s = run_steps(
        { name => 'a',        op => 'tools',       model => 'claude-sonnet-4-5' },
        { name => 'a_stream', op => 'tools',       model => 'claude-sonnet-4-5', stream => 1 },
        { name => 'a_result', op => 'tool_result', model => 'claude-sonnet-4-5', call_id => 'toolu_01A' },
        { name => 'g',        op => 'tools',       model => 'gemini-2.5-flash' },
        { name => 'g_result', op => 'tool_result', model => 'gemini-2.5-flash', call_id => 'call_0' },
    );
    my $a = $s->{a} || {};
    ok($a->{ok}, 'anthropic tool call ok') or diag(Gw::json_encode($a));
    is_deeply($a->{output}, [
        { type => 'message', role => 'assistant', status => 'completed', content => ['Let me check.'] },
        { type => 'function_call', call_id => 'toolu_01A', name => 'get_weather', arguments => '{"city":"Oslo"}',
          status => 'completed' },
    ], 'a message item and a function_call item');
    my $as = $s->{a_stream} || {};
    ok($as->{ok}, 'streamed tool call ok') or diag(Gw::json_encode($as));
    is_deeply($as->{events}, [qw(response.created response.in_progress response.output_item.added
        response.function_call_arguments.delta response.function_call_arguments.delta
        response.function_call_arguments.done response.output_item.done response.completed)], 'function call events');
    is($as->{streamed_arguments}, '{"city":"Oslo"}', 'argument deltas');
    is_deeply($as->{output}, [{ type => 'function_call', call_id => 'toolu_02B', name => 'get_weather',
                                arguments => '{"city":"Oslo"}', status => 'completed' }], 'final output');
    ok(($s->{a_result} || {})->{ok}, 'second turn ok') or diag(Gw::json_encode($s->{a_result}));
    my $g = $s->{g} || {};
    ok($g->{ok}, 'gemini tool call ok') or diag(Gw::json_encode($g));
    is($g->{output}[0]{type}, 'function_call', 'function_call item');
    is($g->{output}[0]{call_id}, 'call_0', 'Gemini calls get the gateway\'s ids by position');
    is($g->{output}[0]{arguments}, '{"city":"Oslo"}', 'arguments');
    ok(($s->{g_result} || {})->{ok}, 'second turn ok') or diag(Gw::json_encode($s->{g_result}));

    my $reqs = $mock->requests;
    is(scalar @$reqs, 5, 'five provider calls');
    is_deeply($reqs->[0]{json}{tools}, [{ name => 'get_weather', description => 'Weather in a city',
        input_schema => { type => 'object', properties => { city => { type => 'string' } }, required => ['city'],
                          additionalProperties => JSON::PP::false() } }], 'function tool as an Anthropic tool');
    is_deeply($reqs->[0]{json}{tool_choice}, { type => 'auto' }, 'tool_choice');
    is($reqs->[2]{body},
       '{"model":"claude-sonnet-4-5","system":"Be brief.","messages":[{"role":"user","content":"What is the weather in Oslo?"},'
       . '{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Oslo"}}]},'
       . '{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":"Sunny, 21C"}]}],"max_tokens":64,'
       . '"tools":[{"name":"get_weather","description":"Weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}]}',
       'function_call and function_call_output items as tool_use and tool_result, byte-exact');
    is_deeply($reqs->[4]{json}{contents}, [
        { role => 'user', parts => [{ text => 'What is the weather in Oslo?' }] },
        { role => 'model', parts => [{ functionCall => { name => 'get_weather', args => { city => 'Oslo' } },
                                      thoughtSignature => 'skip_thought_signature_validator' }] },
        { role => 'user', parts => [{ functionResponse => { name => 'get_weather', response => { content => 'Sunny, 21C' } } }] },
    ], 'as Gemini functionCall and functionResponse');
};

subtest 'what needs OpenAI\'s server-side state is refused on translated targets' => sub {
    $mock->reset;
    my $s = run_steps(
        { name => 'prev',  op => 'create', model => 'sonnet', extra => { previous_response_id => 'resp_1' } },
        { name => 'store', op => 'create', model => 'gemini-2.5-flash', extra => { store => JSON::PP::true() } },
        { name => 'web',   op => 'create', model => 'sonnet', extra => { tools => [{ type => 'web_search' }] } },
        { name => 'bg',    op => 'create', model => 'gemini-2.5-flash', extra => { background => JSON::PP::true() } },
        { name => 'fmt',   op => 'create', model => 'sonnet',
          extra => { text => { format => { type => 'json_schema', name => 'x', schema => { type => 'object' } } } } },
        { name => 'nostore', op => 'create', model => 'sonnet', extra => { store => JSON::PP::false() } },
    );
    my %want = (
        prev  => 'previous_response_id is not supported for anthropic providers (it needs the provider\'s stored responses: use an OpenAI-type provider)',
        store => 'store: true is not supported for gemini providers (it needs the provider\'s stored responses: use an OpenAI-type provider)',
        web   => 'tools[0]: the built-in tool "web_search" is not supported for anthropic providers (function tools only; built-in tools need an OpenAI-type provider)',
        bg    => 'background: true is not supported for gemini providers (it needs the provider\'s stored responses: use an OpenAI-type provider)',
        fmt   => 'text.format "json_schema" is not supported for anthropic providers',
    );
    for my $n (sort keys %want) {
        my $r = $s->{$n} || {};
        is($r->{status}, 400, "$n: 400");
        is($r->{name}, 'BadRequestError', "$n: the SDK's BadRequestError");
        is(($r->{error} || {})->{message}, $want{$n}, "$n: the message names the parameter");
        is(($r->{error} || {})->{type}, 'invalid_request_error', "$n: type");
    }
    ok(($s->{nostore} || {})->{ok}, 'store: false is what a translated target does anyway: accepted')
        or diag(Gw::json_encode($s->{nostore}));
    is(scalar @{ $mock->requests }, 1, 'no provider call for a refused request');
};

subtest 'failover across an alias\'s targets of different types, before the first byte' => sub {
    $mock->reset;
    $mock->script({ match => { path => '/v1/responses' }, status => 503,
                    json => { error => { message => 'overloaded', type => 'server_error' } } },
                  { match => { path => '/v1/responses' }, status => 503,
                    json => { error => { message => 'overloaded', type => 'server_error' } } });
    my $s = run_steps({ name => 'create', op => 'create', model => 'any' },
                      { name => 'stream', op => 'stream', model => 'any' });
    for my $n (qw(create stream)) {
        my $c = $s->{$n} || {};
        ok($c->{ok}, "$n ok after failover") or diag(Gw::json_encode($c));
        is($c->{output_text}, 'Hello world', "$n answered by the second target, translated");
        is($c->{model}, 'any', "$n: the alias named");
    }
    is_deeply([map { $_->{path} } @{ $mock->requests }],
              ['/v1/responses', '/v1/messages', '/v1/responses', '/v1/messages'], 'OpenAI native first, then Anthropic');
};

subtest 'GET, DELETE and cancel of a stored response reach OpenAI-type providers through the passthrough' => sub {
    $mock->reset;
    my $s = run_steps({ name => 'create', op => 'create', model => 'gpt-4o-mini', extra => { store => JSON::PP::true() } });
    my $id = ($s->{create} || {})->{id} // 'none';
    like($id, qr/^resp_mock/, 'created');
    $s = run_steps(
        { name => 'get',    op => 'retrieve', base => '/passthrough/oai', id => $id },
        { name => 'cancel', op => 'cancel',   base => '/passthrough/oai', id => $id },
        { name => 'delete', op => 'delete',   base => '/passthrough/oai', id => $id },
        { name => 'gone',   op => 'retrieve', base => '/passthrough/oai', id => $id },
    );
    is(($s->{get} || {})->{output_text}, 'Hello world', 'retrieved') or diag(Gw::json_encode($s->{get}));
    is(($s->{cancel} || {})->{status}, 'cancelled', 'cancelled') or diag(Gw::json_encode($s->{cancel}));
    ok(($s->{delete} || {})->{ok}, 'deleted') or diag(Gw::json_encode($s->{delete}));
    is(($s->{gone} || {})->{status}, 404, 'then 404, relayed');
    is_deeply([map { "$_->{method} $_->{path}" } @{ $mock->requests }],
              ['POST /v1/responses', "GET /v1/responses/$id", "POST /v1/responses/$id/cancel",
               "DELETE /v1/responses/$id", "GET /v1/responses/$id"], 'the provider\'s paths');
    is_deeply([map { $_->{headers}{authorization} } @{ $mock->requests }], [("Bearer $PKEY{oai}") x 5],
              'with the provider\'s key');
};

subtest 'an OpenAI Agents SDK agent runs a turn with a tool through the gateway' => sub {
    for my $case (['claude-sonnet-4-5', '/v1/messages', 0], ['gpt-4o-mini', '/v1/responses', 0],
                  ['claude-sonnet-4-5', '/v1/messages', 1]) {
        my ($model, $path, $stream) = @$case;
        $mock->reset;
        if ($path eq '/v1/messages') {
            $mock->script(
                { match => { path => $path }, json => {
                    id => 'msg_a1', type => 'message', role => 'assistant', model => $model,
                    content => [{ type => 'tool_use', id => 'toolu_A1', name => 'get_weather', input => { city => 'Oslo' } }],
                    stop_reason => 'tool_use', stop_sequence => undef, usage => { input_tokens => 30, output_tokens => 10 } } },
                { match => { path => $path }, json => {
                    id => 'msg_a2', type => 'message', role => 'assistant', model => $model,
                    content => [{ type => 'text', text => 'It is sunny in Oslo.' }],
                    stop_reason => 'end_turn', stop_sequence => undef, usage => { input_tokens => 50, output_tokens => 8 } } });
        } else {
            $mock->script(
                { match => { path => $path }, json => {
                    id => 'resp_a1', object => 'response', created_at => 1, status => 'completed', model => $model,
                    output => [{ type => 'function_call', id => 'fc_1', call_id => 'call_A1', name => 'get_weather',
                                 arguments => '{"city":"Oslo"}', status => 'completed' }],
                    usage => { input_tokens => 30, output_tokens => 10, total_tokens => 40 } } },
                { match => { path => $path }, json => {
                    id => 'resp_a2', object => 'response', created_at => 1, status => 'completed', model => $model,
                    output => [{ type => 'message', id => 'msg_2', role => 'assistant', status => 'completed',
                                 content => [{ type => 'output_text', text => 'It is sunny in Oslo.', annotations => [] }] }],
                    usage => { input_tokens => 50, output_tokens => 8, total_tokens => 58 } } });
        }
        my $r = Gw::run_node('agents.mjs', timeout => 60,
                             env => { GW_URL => $ng->url(''), GW_KEY => $KEY, MODEL => $model, STREAM => $stream });
        $model .= ' (streamed)' if $stream;
        is($r->{exit}, 0, "$model: agent script exits 0") or diag("stdout: $r->{stdout}\nstderr: $r->{stderr}");
        my $j = $r->{json} || {};
        ok($j->{ok}, "$model: the agent's run completed") or diag(Gw::json_encode($j));
        is($j->{final_output}, 'It is sunny in Oslo.', "$model: final output");
        is_deeply($j->{tool_calls}, ['Oslo'], "$model: the tool ran once with the model's arguments");
        is_deeply([@{ $j->{usage} || {} }{qw(requests input_tokens output_tokens)}], [2, 80, 18], "$model: usage the SDK summed");
        my $reqs = $mock->requests;
        is_deeply([map { $_->{path} } @$reqs], [$path, $path], "$model: two provider calls");
        my $second = $reqs->[1]{body} // '';
        like($second, qr/Sunny, 21C in Oslo/, "$model: the tool's output went back to the model");
        ok($ng->wait_log(usage_line(($path eq '/v1/messages' ? 'claude/' : 'oai/') . ($model =~ s/ .*//r), 50, 8, '\d+')),
           "$model: the second turn accounted");
    }
};

is_deeply([Gw::log_problems_in_text($ng->error_log)], [], 'no [alert], [crit] or [emerg] in error.log');
$ng->stop;
done_testing();
