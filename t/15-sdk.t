#!/usr/bin/perl
# The official openai npm client through the gateway (t/js/gateway_openai.mjs):
# chat, chat streams with and without include_usage, embeddings,
# models.list; a wrong key makes the SDK throw AuthenticationError (401).

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();
Gw::need_js_deps();

my $KEY = 'sk-sdk-alice-8f7e6d5c';
my $PKEY = 'sk-sdk-provider-1a2b3c';

my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [ { name => 'mock', key => $PKEY, models => 'gpt-4o-mini,text-embedding-3-small', default => 1 } ],
    http => "llm_gateway_user alice key=$KEY;\nllm_gateway_alias smart mock/gpt-4o-mini;\n",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, vars => { MOCK => $mock->port });

subtest 'SDK with a valid key' => sub {
    $mock->clear;
    my $r = Gw::run_node('gateway_openai.mjs', args => ['all'], timeout => 60,
                         env => { GW_URL => $ng->url(''), GW_KEY => $KEY });
    is($r->{exit}, 0, 'script exits 0') or diag("stdout: $r->{stdout}\nstderr: $r->{stderr}");
    my $s = ($r->{json} || {})->{steps} || {};

    my $c = $s->{chat} || {};
    ok($c->{ok}, 'chat: ok') or diag(Gw::json_encode($c));
    is($c->{object}, 'chat.completion', 'chat: object');
    is($c->{model}, 'gpt-4o-mini', 'chat: model');
    is($c->{content}, 'Hello world', 'chat: content');
    is($c->{finish_reason}, 'stop', 'chat: finish_reason');
    is_deeply($c->{usage}, { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18 }, 'chat: usage');

    my $st = $s->{stream} || {};
    ok($st->{ok}, 'stream (no include_usage): ok') or diag(Gw::json_encode($st));
    is($st->{content}, 'Hello world', 'stream: content assembled');
    is($st->{finish_reason}, 'stop', 'stream: finish_reason');
    is($st->{chunks}, 3, 'stream: three chunks');
    ok(!$st->{usage_seen}, 'stream: no usage chunk for a client that did not ask');
    is($st->{empty_choice_chunks}, 0, 'stream: no chunk without choices');

    my $su = $s->{stream_usage} || {};
    ok($su->{ok}, 'stream (include_usage): ok') or diag(Gw::json_encode($su));
    is($su->{content}, 'Hello world', 'stream_usage: content assembled');
    is($su->{chunks}, 4, 'stream_usage: three chunks and the usage chunk');
    ok($su->{usage_seen}, 'stream_usage: usage chunk seen');
    is_deeply($su->{usage}, { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18 }, 'stream_usage: usage');

    my $e = $s->{embeddings} || {};
    ok($e->{ok}, 'embeddings: ok') or diag(Gw::json_encode($e));
    is($e->{object}, 'list', 'embeddings: object');
    is($e->{count}, 2, 'embeddings: two');
    is($e->{dims}, 8, 'embeddings: 8 dims (base64 decoded by the SDK)');
    is($e->{model}, 'text-embedding-3-small', 'embeddings: model');
    is_deeply($e->{usage}, { prompt_tokens => 5, total_tokens => 5 }, 'embeddings: usage');
    ok(abs(($e->{first}[0] // 99) - 0.841471) < 1e-5, 'embeddings: first value sin(1)');

    my $m = $s->{models} || {};
    ok($m->{ok}, 'models: ok') or diag(Gw::json_encode($m));
    is_deeply($m->{ids}, [qw(mock/gpt-4o-mini mock/text-embedding-3-small smart)], 'models: ids');
    is_deeply($m->{owners}, [qw(mock mock mock)], 'models: owned_by');

    # What the provider saw: four calls (models.list is answered by the gateway).
    my $reqs = $mock->requests;
    is_deeply([map { "$_->{method} $_->{path}" } @$reqs],
              ['POST /v1/chat/completions', 'POST /v1/chat/completions', 'POST /v1/chat/completions',
               'POST /v1/embeddings'], 'upstream calls');
    is_deeply([map { $_->{headers}{authorization} } @$reqs], [("Bearer $PKEY") x 4], 'provider key on each call');
    ok(!(grep { ($_->{json}{stream_options}{include_usage} // 0) != 1 } @$reqs[1, 2]),
       'both streams asked upstream for include_usage');
    is($reqs->[3]{json}{encoding_format}, 'base64', 'the SDK asked for base64 embeddings');
};

subtest 'SDK with the alias as model' => sub {
    $mock->clear;
    my $r = Gw::run_node('gateway_openai.mjs', args => ['all'], timeout => 60,
                         env => { GW_URL => $ng->url(''), GW_KEY => $KEY, GW_MODEL => 'smart' });
    my $s = ($r->{json} || {})->{steps} || {};
    is($s->{chat}{content}, 'Hello world', 'chat via alias');
    is($s->{stream}{content}, 'Hello world', 'stream via alias');
    my @models = map { $_->{json}{model} } grep { $_->{path} eq '/v1/chat/completions' } @{ $mock->requests };
    is_deeply(\@models, [('gpt-4o-mini') x 3], 'upstream got the real model id each time');
};

subtest 'SDK with a wrong key: AuthenticationError' => sub {
    $mock->clear;
    my $r = Gw::run_node('gateway_openai.mjs', args => ['auth'], timeout => 60,
                         env => { GW_URL => $ng->url(''), GW_KEY => 'sk-not-a-gateway-key-00' });
    is($r->{exit}, 0, 'script exits 0') or diag("stdout: $r->{stdout}\nstderr: $r->{stderr}");
    my $s = ($r->{json} || {})->{steps} || {};
    for my $name (qw(chat models)) {
        my $c = $s->{$name} || {};
        ok(!$c->{ok}, "$name: failed");
        is($c->{status}, 401, "$name: status 401");
        ok($c->{is_auth_error}, "$name: instanceof OpenAI.AuthenticationError") or diag(Gw::json_encode($c));
        is($c->{name}, 'AuthenticationError', "$name: class name");
        is($c->{code}, 'invalid_api_key', "$name: err.code");
        is($c->{type}, 'invalid_request_error', "$name: err.type");
        is(($c->{error} || {})->{message}, 'Incorrect API key provided.', "$name: err.error.message");
    }
    is(scalar @{ $mock->requests }, 0, 'no upstream call');
};

$ng->stop;
$mock->stop;
done_testing;
