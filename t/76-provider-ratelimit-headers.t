# A provider's own rate-limit headers describe the operator's account with
# it, not the caller's allowance: they never reach the caller, whatever the
# route (chat, streamed or not, translated or not; messages; embeddings; the
# passthrough; a provider's 429), while the rest of the provider's headers
# still do. A tool server's answer is relayed as it is (docs/errors.md).
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();

my $KEY = 'sk-rl-alice-0001';
my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [
        { name => 'oai',    type => 'openai',    key => 'sk-prov-rl-oai', models => 'gpt-4o-mini,text-embedding-3-small' },
        { name => 'claude', type => 'anthropic', key => 'sk-ant-prov-rl', models => 'claude-sonnet-4-5' },
    ],
    http => "llm_gateway_user alice key=$KEY;\n"
          . "llm_gateway_mcp_server tools location=/_mcp/tools;\n",
    server => "location /passthrough/ { llm_gateway_passthrough; }\n"
            . "    location /mcp/ { llm_gateway_target_proxy mcp; }\n"
            . "    location /_mcp/tools { internal; proxy_pass http://127.0.0.1:%%MOCK%%/mcp; }",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 1, vars => { MOCK => $mock->port });

# What providers send: OpenAI's, Anthropic's and the IETF fields, in mixed case.
my %LIMITS = (
    'x-ratelimit-limit-requests'     => '10000',
    'X-RateLimit-Remaining-Tokens'   => '149984',
    'x-ratelimit-reset-requests'     => '6ms',
    'anthropic-ratelimit-requests-remaining' => '49',
    'Anthropic-RateLimit-Tokens-Reset' => '2026-11-25T12:00:00Z',
    'RateLimit'                      => '"default";r=50;t=30',
    'RateLimit-Policy'               => '"default";q=100;w=60',
);
my %KEEP = ('x-request-id' => 'req-abc-123', 'openai-processing-ms' => '42');
my @RL = map { lc } keys %LIMITS;

my $CHAT = { id => 'c1', object => 'chat.completion', created => 1, model => 'gpt-4o-mini',
             choices => [{ index => 0, message => { role => 'assistant', content => 'hi' }, finish_reason => 'stop' }],
             usage => { prompt_tokens => 3, completion_tokens => 1, total_tokens => 4 } };
my $MSG = { id => 'msg_1', type => 'message', role => 'assistant', model => 'claude-sonnet-4-5',
            content => [{ type => 'text', text => 'hi' }], stop_reason => 'end_turn', stop_sequence => undef,
            usage => { input_tokens => 3, output_tokens => 1 } };
my $EMB = { object => 'list', model => 'text-embedding-3-small',
            data => [{ object => 'embedding', index => 0, embedding => [0.1, 0.2] }],
            usage => { prompt_tokens => 2, total_tokens => 2 } };
my @CHAT_SSE = ('data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}',
                'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}',
                'data: [DONE]');

sub none_of_them {
    my ($r, $name) = @_;
    my @seen = grep { exists $r->{headers}{$_} } @RL;
    is_deeply(\@seen, [], "$name: no provider rate-limit header");
}

sub kept {
    my ($r, $name) = @_;
    is($r->{headers}{'x-request-id'}, 'req-abc-123', "$name: the provider's other headers still pass");
}

my $auth = { Authorization => "Bearer $KEY" };
my $chat = { model => 'oai/gpt-4o-mini', messages => [{ role => 'user', content => 'hi' }] };

subtest 'chat completions, whole and streamed' => sub {
    $mock->script({ headers => { %LIMITS, %KEEP }, json => $CHAT });
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => $auth, body => $chat);
    is($r->{status}, 200, 'whole: 200');
    none_of_them($r, 'whole');
    kept($r, 'whole');

    $mock->script({ headers => { %LIMITS, %KEEP }, sse => \@CHAT_SSE });
    my $s = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => $auth,
                               body => { %$chat, stream => \1 }, timeout => 10);
    is($s->{status}, 200, 'streamed: 200');
    none_of_them($s, 'streamed');
    kept($s, 'streamed');
};

subtest 'messages, native and translated; embeddings' => sub {
    $mock->script({ headers => { %LIMITS, %KEEP }, json => $MSG });
    my $r = Gw::http(POST => $ng->url('/v1/messages'), headers => { %$auth, 'anthropic-version' => '2023-06-01' },
                     body => { model => 'claude/claude-sonnet-4-5', max_tokens => 10, messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 200, 'messages: 200');
    none_of_them($r, 'messages');
    kept($r, 'messages');

    $mock->script({ headers => { %LIMITS, %KEEP }, json => $MSG });
    my $t = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => $auth,
                     body => { model => 'claude/claude-sonnet-4-5', messages => [{ role => 'user', content => 'hi' }] });
    is($t->{status}, 200, 'chat translated to Anthropic: 200');
    none_of_them($t, 'translated');

    $mock->script({ headers => { %LIMITS, %KEEP }, json => $EMB });
    my $e = Gw::http(POST => $ng->url('/v1/embeddings'), headers => $auth,
                     body => { model => 'oai/text-embedding-3-small', input => 'hi' });
    is($e->{status}, 200, 'embeddings: 200');
    none_of_them($e, 'embeddings');
};

subtest "the passthrough, and a provider's 429" => sub {
    $mock->script({ headers => { %LIMITS, %KEEP }, json => { object => 'list', data => [] } });
    my $p = Gw::http(GET => $ng->url('/passthrough/oai/models'), headers => $auth);
    is($p->{status}, 200, 'passthrough: 200');
    none_of_them($p, 'passthrough');
    kept($p, 'passthrough');

    $mock->script({ status => 429, headers => { %LIMITS, 'Retry-After' => '7' },
                    json => { error => { message => 'slow down', type => 'rate_limit_error' } } });
    my $q = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => $auth, body => $chat);
    is($q->{status}, 429, "the provider's 429 is relayed");
    none_of_them($q, '429');
};

subtest "a tool server's answer is its own" => sub {
    $mock->script({ headers => { 'x-ratelimit-remaining-requests' => '5' }, json => { jsonrpc => '2.0', id => 1, result => {} } });
    my $r = Gw::http(POST => $ng->url('/mcp/tools'), headers => { %$auth, Accept => 'application/json, text/event-stream' },
                     body => { jsonrpc => '2.0', id => 1, method => 'ping' });
    is($r->{status}, 200, 'tool server: 200');
    is($r->{headers}{'x-ratelimit-remaining-requests'}, '5', 'its headers, rate limits included, pass');
};

$ng->stop;
done_testing();
