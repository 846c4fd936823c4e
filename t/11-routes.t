#!/usr/bin/perl
# Routes and model resolution: alias, provider/model, a bare model listed in
# models=, the default provider; what the provider receives (model, headers,
# Content-Length, body); embeddings; GET /v1/models; the gateway's own
# errors (404 model_not_found / unknown_url, 405, 400) and upstream errors
# (relayed JSON errors with Retry-After, non-JSON 500, unreachable 502,
# timeout 504).

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use JSON::PP ();
use Time::HiRes ();
use Test::More;

Gw::need_module();

my $KEY = 'sk-routes-alice-6d2f90';
my %PKEY = (mock => 'sk-prov-mock-a1', other => 'sk-prov-other-b2', slow => 'sk-prov-slow-c3',
            down => 'sk-prov-down-d4');
my $AUTH = GwConf::bearer($KEY);

my $mock = Gw::Mock->start();
my $dead = Gw::closed_port();    # nothing listens there
ok(!Gw::port_open($dead), "port $dead is closed");

# No provider is the default here: an unknown model is a 404.
my $conf = GwConf::gateway(
    providers => [
        { name => 'mock',  key => $PKEY{mock},  models => 'gpt-4o-mini,text-embedding-3-small' },
        { name => 'other', key => $PKEY{other}, models => 'other-model' },
        { name => 'down',  key => $PKEY{down},  models => 'down-model', upstream => 'DEAD' },
        { name => 'nokey', models => 'nokey-model' },
        { name => 'slow',  key => $PKEY{slow},  models => 'slow-model',
          loc_extra => 'proxy_read_timeout 1s; proxy_send_timeout 1s;' },
    ],
    http => "llm_gateway_user alice key=$KEY;\n"
          . "llm_gateway_alias smart mock/gpt-4o;\n"
          . "llm_gateway_alias emb mock/text-embedding-3-small;\n"
          . "llm_gateway_alias elsewhere other/other-model-2;\n",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, vars => { MOCK => $mock->port, DEAD => $dead });

my $chat = sub {
    my ($body, %o) = @_;
    return Gw::http(POST => $ng->url('/v1/chat/completions'),
                    headers => { %$AUTH, %{ $o{headers} || {} } }, body => $body);
};

# The one request the mock recorded since the last clear (undef unless exactly one).
my $only = sub {
    my $reqs = $mock->requests;
    is(scalar @$reqs, 1, 'exactly one upstream request') or return undef;
    return $reqs->[0];
};

subtest 'model via alias' => sub {
    $mock->clear;
    my $r = $chat->(GwConf::chat_body('smart'));
    is($r->{status}, 200, 'status 200');
    is($r->{json}{model}, 'gpt-4o', 'the mock echoed the upstream model');
    my $q = $only->() or return;
    is($q->{path}, '/v1/chat/completions', 'upstream path');
    is($q->{method}, 'POST', 'upstream method');
    is($q->{json}{model}, 'gpt-4o', 'upstream got the provider model id, not the alias');
    unlike($q->{body}, qr/smart/, 'the alias is nowhere in the upstream body');
    is($q->{headers}{authorization}, "Bearer $PKEY{mock}", "provider mock's key");
};

subtest 'model via provider/model' => sub {
    $mock->clear;
    my $r = $chat->(GwConf::chat_body('other/some-model-7'));
    is($r->{status}, 200, 'status 200');
    my $q = $only->() or return;
    is($q->{json}{model}, 'some-model-7', 'upstream model without the provider prefix');
    is($q->{headers}{authorization}, "Bearer $PKEY{other}", "provider other's key");

    $mock->clear;
    $r = $chat->(GwConf::chat_body('elsewhere'));
    is($r->{status}, 200, 'alias to another provider: 200');
    $q = $only->() or return;
    is($q->{json}{model}, 'other-model-2', 'alias target model');
    is($q->{headers}{authorization}, "Bearer $PKEY{other}", "provider other's key");
};

subtest 'model via a bare id listed in models=' => sub {
    $mock->clear;
    my $r = $chat->(GwConf::chat_body('other-model'));
    is($r->{status}, 200, 'status 200');
    my $q = $only->() or return;
    is($q->{json}{model}, 'other-model', 'upstream model');
    is($q->{headers}{authorization}, "Bearer $PKEY{other}", 'routed to the provider listing it');

    $mock->clear;
    $r = $chat->(GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 200, 'gpt-4o-mini: 200');
    $q = $only->() or return;
    is($q->{headers}{authorization}, "Bearer $PKEY{mock}", 'routed to mock');
};

subtest 'what the provider receives' => sub {
    $mock->clear;
    my $body = {
        model => 'smart',
        messages => [{ role => 'system', content => "be terse \x{e9}\x{4e16}" },
                     { role => 'user', content => 'hi "there"' }],
        temperature => 0.25, max_tokens => 17, user => 'end-user-1', n => 1,
        metadata => { a => [1, 2, { b => JSON::PP::false }] }, stop => undef,
    };
    my $r = $chat->($body, headers => {
        'x-api-key' => 'sk-ignored-because-bearer-wins',
        'OpenAI-Organization' => 'org-123', 'OpenAI-Project' => 'proj-456',
        'api-key' => 'azure-style-key', 'x-goog-api-key' => 'goog-key',
        'Proxy-Authorization' => 'Basic eDp5', 'anthropic-api-key' => 'ant-key',
        'X-Trace-Id' => 'trace-42',
    });
    is($r->{status}, 200, 'status 200');
    my $q = $only->() or return;
    my $h = $q->{headers};
    for my $name (qw(x-api-key openai-organization openai-project api-key x-goog-api-key
                     proxy-authorization anthropic-api-key)) {
        ok(!exists $h->{$name}, "no $name header upstream") or diag("$name: $h->{$name}");
    }
    is($h->{authorization}, "Bearer $PKEY{mock}", 'Authorization is the provider key');
    unlike(Gw::json_encode($h), qr/\Q$KEY\E/, "the caller's key is in no upstream header");
    is($h->{'x-trace-id'}, 'trace-42', 'other caller headers are passed');
    like($h->{'content-type'} // '', qr{^application/json}, 'Content-Type application/json');
    my $bytes = $q->{body};
    utf8::encode($bytes);
    is($h->{'content-length'}, length($bytes), 'Content-Length equals the bytes received');
    ok(!exists $h->{'transfer-encoding'}, 'not chunked');
    my %want = (%$body, model => 'gpt-4o');
    is_deeply($q->{json}, \%want, 'body unchanged except the model');
    ok(!exists $q->{json}{stream_options}, 'no stream_options added to a non-stream request');
};

subtest 'a provider without key=: no Authorization upstream at all' => sub {
    $mock->clear;
    my $r = $chat->(GwConf::chat_body('nokey-model'), headers => { 'x-api-key' => 'sk-extra-caller-key' });
    is($r->{status}, 200, 'status 200');
    my $q = $only->() or return;
    ok(!exists $q->{headers}{authorization}, 'no Authorization header')
        or diag("authorization: $q->{headers}{authorization}");
    ok(!exists $q->{headers}{'x-api-key'}, 'no x-api-key header');
    unlike(Gw::json_encode($q->{headers}), qr/\Q$KEY\E|sk-extra-caller-key/, 'no caller key in any header');
};

subtest 'embeddings' => sub {
    $mock->clear;
    my $r = Gw::http(POST => $ng->url('/v1/embeddings'), headers => $AUTH,
                     body => { model => 'emb', input => ['alpha', 'beta'], encoding_format => 'float' });
    is($r->{status}, 200, 'status 200');
    my $q = $only->() or return;
    is($q->{path}, '/v1/embeddings', 'upstream path');
    is($q->{json}{model}, 'text-embedding-3-small', 'upstream model');
    is_deeply($q->{json}{input}, ['alpha', 'beta'], 'input kept');
    is($q->{json}{encoding_format}, 'float', 'encoding_format kept');
    is($q->{headers}{authorization}, "Bearer $PKEY{mock}", 'provider key');
    # The gateway returns exactly what the mock returns for the same request.
    my $direct = Gw::http(POST => $mock->url('/v1/embeddings'),
                          body => { model => 'text-embedding-3-small', input => ['alpha', 'beta'],
                                    encoding_format => 'float' });
    is($r->{body}, $direct->{body}, "the gateway relays the provider's JSON byte for byte");
    is($r->{json}{object}, 'list', 'object list');
    is(scalar @{ $r->{json}{data} || [] }, 2, 'two embeddings');
    is($r->{json}{model}, 'text-embedding-3-small', 'model');
    is_deeply($r->{json}{usage}, { prompt_tokens => 5, total_tokens => 5 }, 'usage');
    like($r->{headers}{'content-type'} // '', qr{^application/json}, 'content-type');
};

subtest 'GET /v1/models' => sub {
    $mock->clear;
    my $r = Gw::http(GET => $ng->url('/v1/models'), headers => $AUTH);
    is($r->{status}, 200, 'status 200');
    like($r->{headers}{'content-type'} // '', qr{^application/json}, 'content-type');
    is($r->{json}{object}, 'list', 'object list');
    my @data = @{ $r->{json}{data} || [] };
    is_deeply([map { $_->{id} } @data],
              [qw(mock/gpt-4o-mini mock/text-embedding-3-small other/other-model down/down-model
                  nokey/nokey-model slow/slow-model smart emb elsewhere)], 'exact id list');
    is_deeply([map { $_->{owned_by} } @data], [qw(mock mock other down nokey slow mock mock other)], 'owned_by');
    ok(!(grep { ($_->{object} // '') ne 'model' } @data), 'object "model" on each');
    ok(!(grep { !defined $_->{created} || $_->{created} ne '0' } @data), 'created 0 on each');
    is(scalar @{ $mock->requests }, 0, 'no upstream call');

    my $h = Gw::http(HEAD => $ng->url('/v1/models'), headers => $AUTH);
    is($h->{status}, 200, 'HEAD /v1/models: 200');
    is($h->{body}, '', 'HEAD: no body');
};

subtest 'unknown model: 404 model_not_found, no upstream call' => sub {
    $mock->clear;
    my $r = $chat->(GwConf::chat_body('no-such-model'));
    GwConf::is_envelope($r, 404, 'invalid_request_error', 'model_not_found');
    is($r->{json}{error}{message}, 'The model `no-such-model` does not exist or you do not have access to it.',
       'message');
    my $p = $chat->(GwConf::chat_body('nope/gpt-4o'));
    GwConf::is_envelope($p, 404, 'invalid_request_error', 'model_not_found', 'unknown provider prefix: 404');
    my $e = Gw::http(POST => $ng->url('/v1/embeddings'), headers => $AUTH,
                     body => { model => 'no-such-embedder', input => 'x' });
    GwConf::is_envelope($e, 404, 'invalid_request_error', 'model_not_found', 'embeddings: 404');
    is(scalar @{ $mock->requests }, 0, 'no upstream call');
};

subtest '405 with Allow' => sub {
    my $r = Gw::http(GET => $ng->url('/v1/chat/completions'), headers => $AUTH);
    GwConf::is_envelope($r, 405, 'invalid_request_error', 'method_not_allowed');
    is($r->{headers}{allow}, 'POST', 'Allow: POST');
    my $n = Gw::http(GET => $ng->url('/v1/chat/completions'));
    is($n->{status}, 405, 'without a key too (method check before auth)');
    my $e = Gw::http(PUT => $ng->url('/v1/embeddings'), headers => $AUTH, body => {});
    GwConf::is_envelope($e, 405, 'invalid_request_error', 'method_not_allowed', 'PUT /v1/embeddings: 405');
    is($e->{headers}{allow}, 'POST', 'Allow: POST');
    my $m = Gw::http(POST => $ng->url('/v1/models'), headers => $AUTH, body => {});
    GwConf::is_envelope($m, 405, 'invalid_request_error', 'method_not_allowed', 'POST /v1/models: 405');
    is($m->{headers}{allow}, 'GET, HEAD', 'Allow: GET, HEAD');
};

subtest '404 unknown_url' => sub {
    my $r = Gw::http(POST => $ng->url('/v1/foo'), headers => $AUTH, body => {});
    GwConf::is_envelope($r, 404, 'invalid_request_error', 'unknown_url');
    my $g = Gw::http(GET => $ng->url('/v1/foo'));
    GwConf::is_envelope($g, 404, 'invalid_request_error', 'unknown_url', 'GET /v1/foo without a key: 404');
};

subtest '400 for bad bodies, no upstream call' => sub {
    $mock->clear;
    my %cases = (
        'not JSON'        => '{"model": "gpt-4o-mini", ',
        'not an object'   => '["gpt-4o-mini"]',
        'no model'        => '{"messages":[{"role":"user","content":"hi"}]}',
        'model not a string' => '{"model":42,"messages":[]}',
        'empty model'     => '{"model":"","messages":[]}',
        'stream not boolean' => '{"model":"gpt-4o-mini","messages":[],"stream":"yes"}',
        'empty body'      => '',
    );
    for my $name (sort keys %cases) {
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'),
                         headers => { %$AUTH, 'Content-Type' => 'application/json' }, body => $cases{$name});
        GwConf::is_envelope($r, 400, 'invalid_request_error', 'invalid_request', "$name: 400 invalid_request");
    }
    my $e = Gw::http(POST => $ng->url('/v1/embeddings'),
                     headers => { %$AUTH, 'Content-Type' => 'application/json' }, body => 'input=x');
    GwConf::is_envelope($e, 400, 'invalid_request_error', 'invalid_request', 'embeddings, not JSON: 400');
    is(scalar @{ $mock->requests }, 0, 'no upstream call');
};

subtest 'the alias never reaches the provider, even with tricky bodies' => sub {
    for my $raw ('{"model":"smart","messages":[],"model":"gpt-4o-mini"}',
                 '{"model":"gpt-4o-mini","messages":[],"model":"smart"}') {
        $mock->clear;
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'),
                         headers => { %$AUTH, 'Content-Type' => 'application/json' }, body => $raw);
        ok($r->{status} == 200 || $r->{status} == 400, "$raw: 200 or 400 (got $r->{status})");
        my @up = map { $_->{body} } @{ $mock->requests };
        ok(!(grep { /smart/ } @up), "$raw: no alias upstream") or diag(join "\n", @up);
        ok(!(grep { my $n = () = /"model"/g; $n != 1 } @up), "$raw: one model member upstream")
            or diag(join "\n", @up);
    }
    # A JSON escape in the model is still the alias.
    $mock->clear;
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'),
                     headers => { %$AUTH, 'Content-Type' => 'application/json' },
                     body => '{"model":"sm\\u0061rt","messages":[]}');
    is($r->{status}, 200, 'escaped alias: 200');
    my $q = $only->() or return;
    is($q->{json}{model}, 'gpt-4o', 'escaped alias resolved');
    unlike($q->{body}, qr/sm\\u0061rt|smart/, 'no alias upstream');
};

subtest 'upstream JSON errors are relayed' => sub {
    $mock->reset;
    my $err400 = { error => { message => "Invalid value for 'temperature'.", type => 'invalid_request_error',
                              param => 'temperature', code => 'invalid_value' } };
    $mock->script({ status => 400, json => $err400 });
    my $r = $chat->(GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 400, 'status 400');
    is_deeply($r->{json}, $err400, 'same JSON body');
    like($r->{headers}{'content-type'} // '', qr{^application/json}, 'content-type');
    is(scalar @{ $mock->requests }, 1, 'one upstream call');

    $mock->reset;
    my $raw429 = '{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","param":null,"code":"rate_limit_exceeded"}}';
    $mock->script({ status => 429, headers => { 'Retry-After' => '7', 'content-type' => 'application/json' },
                    body => $raw429 });
    $r = $chat->(GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 429, 'status 429');
    is($r->{body}, $raw429, 'body relayed unchanged');
    is($r->{headers}{'retry-after'}, '7', 'Retry-After: 7');
    is(scalar @{ $mock->requests }, 1, 'one upstream call (no retry)');
    is_deeply($mock->pending_script, [], 'script consumed');
};

subtest 'upstream non-JSON 500' => sub {
    $mock->reset;
    $mock->script({ status => 500, headers => { 'content-type' => 'text/html' },
                    body => '<html><body>Internal Server Error</body></html>' });
    my $r = $chat->(GwConf::chat_body('gpt-4o-mini'));
    GwConf::is_envelope($r, 500, 'upstream_error', 'upstream_error');
    like($r->{json}{error}{message} // '', qr/^upstream returned status 500: /, 'message');
    is(scalar @{ $mock->requests }, 1, 'one upstream call');
};

subtest 'upstream cuts a non-stream response: 502, never a short 200' => sub {
    $mock->reset;
    $mock->script({ json => { id => 'x', object => 'chat.completion', model => 'gpt-4o-mini',
                              choices => [{ index => 0, message => { role => 'assistant', content => 'A' x 400 },
                                            finish_reason => 'stop' }],
                              usage => { prompt_tokens => 1, completion_tokens => 1, total_tokens => 2 } },
                    truncate => JSON::PP::true });
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => $AUTH,
                               body => GwConf::chat_body('gpt-4o-mini'), timeout => 10);
    ok($r->{complete}, 'a complete response');
    GwConf::is_envelope($r, 502, 'upstream_error', 'bad_gateway');
    is($r->{json}{error}{message}, 'the upstream provider sent an invalid response', 'message');
    ok($ng->wait_log(qr/llm_gateway: provider "mock" sent an invalid response: the response body ended before completion/),
       'warn log: the response body ended before completion');
};

subtest 'upstream down: 502 bad_gateway' => sub {
    my $r = $chat->(GwConf::chat_body('down-model'));
    GwConf::is_envelope($r, 502, 'upstream_error', 'bad_gateway');
    ok($ng->wait_log(qr/llm_gateway: provider "down" gave no response/), 'warn log: gave no response');
    my $e = Gw::http(POST => $ng->url('/v1/embeddings'), headers => $AUTH,
                     body => { model => 'down/emb', input => 'x' });
    GwConf::is_envelope($e, 502, 'upstream_error', 'bad_gateway', 'embeddings: 502 too');
};

subtest 'upstream timeout: 504 upstream_timeout' => sub {
    $mock->reset;
    $mock->script({ match => { model => 'slow-model' }, hang => JSON::PP::true });
    my $t0 = Time::HiRes::time();
    my $r = $chat->(GwConf::chat_body('slow-model'));
    my $dt = Time::HiRes::time() - $t0;
    GwConf::is_envelope($r, 504, 'upstream_error', 'upstream_timeout');
    cmp_ok($dt, '>=', 0.9, sprintf('answered after the 1s read timeout (%.2fs)', $dt));
    cmp_ok($dt, '<', 5, 'and not much later');
    is(scalar @{ $mock->requests }, 1, 'one upstream call');
    ok($ng->wait_log(qr/llm_gateway: provider "slow" timed out/), 'warn log: timed out');
    # The next request to the same provider works.
    my $ok = $chat->(GwConf::chat_body('slow-model'));
    is($ok->{status}, 200, 'slow provider answers again');
};

$ng->stop;

# A second gateway: two providers, "dflt" marked default.
subtest 'model via the default provider' => sub {
    my $conf2 = GwConf::gateway(
        providers => [
            { name => 'first', key => 'sk-prov-first', models => 'first-model' },
            { name => 'dflt',  key => 'sk-prov-dflt',  models => 'listed-model', default => 1 },
        ],
        http => "llm_gateway_user alice key=$KEY;\n",
    );
    my $ng2 = Gw::Nginx->start(conf => $conf2, workers => 2, vars => { MOCK => $mock->port });
    $mock->reset;
    my $r = Gw::http(POST => $ng2->url('/v1/chat/completions'), headers => $AUTH,
                     body => GwConf::chat_body('unlisted-model-9'));
    is($r->{status}, 200, 'status 200');
    my $q = $only->() or return;
    is($q->{json}{model}, 'unlisted-model-9', 'upstream model as requested');
    is($q->{headers}{authorization}, 'Bearer sk-prov-dflt', "the default provider's key");

    $mock->clear;
    $r = Gw::http(POST => $ng2->url('/v1/chat/completions'), headers => $AUTH,
                  body => GwConf::chat_body('first-model'));
    is($r->{status}, 200, 'listed model of the non-default provider: 200');
    $q = $only->() or return;
    is($q->{headers}{authorization}, 'Bearer sk-prov-first', 'routed by models=, not to the default');

    $mock->clear;
    $r = Gw::http(POST => $ng2->url('/v1/chat/completions'), headers => $AUTH,
                  body => GwConf::chat_body('nope/x'));
    is($r->{status}, 200, 'unknown provider prefix goes to the default');
    $q = $only->() or return;
    is($q->{json}{model}, 'nope/x', 'the whole id is the upstream model');
    is($q->{headers}{authorization}, 'Bearer sk-prov-dflt', 'default provider');
    $ng2->stop;
};

$mock->stop;
done_testing;
