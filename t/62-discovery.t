#!/usr/bin/perl
# Model discovery for GET /v1/models: each provider type's pagination as the
# mock saw it (cursor, credential header, never the caller's key), the merged
# list with owner-prefixed ids, the shared cache and its interval, a failing
# refresh that keeps the last good list, a looping cursor, and chat requests
# that never trigger discovery.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();

my $KEY = 'sk-disc-alice-4d3c';
my $mock = Gw::Mock->start();
my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port },
    conf => GwConf::gateway(
        providers => [
            { name => 'oai', type => 'openai',    key => 'sk-oai-disc', models => 'gpt-4o-mini', default => 1,
              discover => '10s' },
            { name => 'ant', type => 'anthropic', key => 'sk-ant-disc', discover => '10s' },
            { name => 'gem', type => 'gemini',    key => 'AIza-gem-disc', discover => '10s' },
        ],
        http => "llm_gateway_user alice key=$KEY;\n"));

sub models {
    my $r = Gw::http(GET => $ng->url('/v1/models'), headers => { Authorization => "Bearer $KEY" }, timeout => 15);
    is($r->{status}, 200, '/v1/models: 200') or diag($r->{body});
    return [map { "$_->{id}|$_->{owned_by}" } @{ ($r->{json} || {})->{data} || [] }];
}

sub list_requests { return [grep { $_->{method} eq 'GET' } @{ $mock->requests }] }

sub script_pages {
    $mock->script(
        { match => { path => '/v1/models', query => '' }, json => {
            object => 'list', has_more => JSON::PP::true(), last_id => 'gpt-b',
            data => [{ id => 'gpt-a', object => 'model' }, { id => 'gpt-b', object => 'model' }] } },
        { match => { path => '/v1/models', query => 'after=gpt-b' }, json => {
            object => 'list', has_more => JSON::PP::false(),
            data => [{ id => 'meta-llama/Llama-3.1-8B', object => 'model' }, { id => 'gpt-4o-mini' }] } },
        { match => { path => '/v1/models', query => 'limit=1000' }, json => {
            data => [{ id => 'claude-x', type => 'model' }], has_more => JSON::PP::true(),
            first_id => 'claude-x', last_id => 'claude-x' } },
        { match => { path => '/v1/models', query => 'limit=1000&after_id=claude-x' }, json => {
            data => [{ id => 'claude-y', type => 'model' }], has_more => JSON::PP::false(), last_id => 'claude-y' } },
        { match => { path => '/v1beta/models', query => 'pageSize=1000' }, json => {
            models => [{ name => 'models/gemini-a' }], nextPageToken => 'tok/1+=' } },
        { match => { path => '/v1beta/models', query => 'pageSize=1000&pageToken=tok%2F1%2B%3D' }, json => {
            models => [{ name => 'models/gemini-b' }, { name => "models/bad\nid" }] } },
    );
}

my @WANT = ('oai/gpt-4o-mini|oai', 'oai/gpt-a|oai', 'oai/gpt-b|oai', 'meta-llama/Llama-3.1-8B|meta-llama',
            'ant/claude-x|ant', 'ant/claude-y|ant', 'gem/gemini-a|gem', 'gem/gemini-b|gem');

subtest 'pagination of each type, merged' => sub {
    $mock->reset;
    script_pages();
    is_deeply(models(), \@WANT, 'configured, then discovered; owner-prefixed ids as they are; no duplicate');
    my $q = list_requests();
    my %by = map { ("$_->{path}?$_->{query}" => $_) } @$q;
    is_deeply([sort keys %by], [sort '/v1/models?', '/v1/models?after=gpt-b', '/v1/models?limit=1000',
                                '/v1/models?limit=1000&after_id=claude-x', '/v1beta/models?pageSize=1000',
                                '/v1beta/models?pageSize=1000&pageToken=tok%2F1%2B%3D'], 'every page, with its cursor');
    is($by{'/v1/models?'}{headers}{authorization}, 'Bearer sk-oai-disc', 'openai: Bearer key');
    is($by{'/v1/models?limit=1000'}{headers}{'x-api-key'}, 'sk-ant-disc', 'anthropic: x-api-key');
    is($by{'/v1/models?limit=1000'}{headers}{'anthropic-version'}, '2023-06-01', 'anthropic: version');
    is($by{'/v1beta/models?pageSize=1000'}{headers}{'x-goog-api-key'}, 'AIza-gem-disc', 'gemini: x-goog-api-key');
    ok(!(grep { join(' ', values %{ $_->{headers} }) =~ /\Q$KEY\E/ } @$q), 'the caller key never sent');
    ok($ng->wait_log(qr/model discovery of provider "gem": 2 models in 2 pages/), 'logged');
};

subtest 'cached: no upstream call within the interval' => sub {
    $mock->reset;
    is_deeply(models(), \@WANT, 'same list') for 1 .. 3;
    is(scalar @{ list_requests() }, 0, 'no list request');
};

subtest 'chat never triggers discovery' => sub {
    $mock->reset;
    sleep 10;   # the lists are stale now
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => { Authorization => "Bearer $KEY" },
                     body => { model => 'gpt-4o-mini', messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 200, 'chat answered');
    is(scalar @{ list_requests() }, 0, 'no list request');
};

subtest 'a failing refresh keeps the last good list' => sub {
    $mock->reset;
    my $from = length $ng->error_log;
    $mock->script(
        { match => { path => '/v1/models', query => '' }, status => 500, json => { error => { message => 'down, key sk-proj-SECRETSECRETSECRET12' } } },
        { match => { path => '/v1/models', query => 'limit=1000' }, body => 'not json' },
        { match => { path => '/v1beta/models', query => 'pageSize=1000' }, json => {
            models => [{ name => 'models/gemini-c' }], nextPageToken => 'again' } },
        { match => { path => '/v1beta/models', query => 'pageSize=1000&pageToken=again' }, json => {
            models => [{ name => 'models/gemini-d' }], nextPageToken => 'again' } },
    );
    is_deeply(models(), ['oai/gpt-4o-mini|oai', 'oai/gpt-a|oai', 'oai/gpt-b|oai', 'meta-llama/Llama-3.1-8B|meta-llama',
                         'ant/claude-x|ant', 'ant/claude-y|ant', 'gem/gemini-c|gem', 'gem/gemini-d|gem'],
              'openai and anthropic keep their lists; gemini stops at the repeated cursor');
    my $log = substr($ng->error_log, $from);
    like($log, qr/model discovery of provider "oai" failed: the provider answered status 500.*the last good list is kept/,
         'openai failure logged');
    unlike($log, qr/SECRETSECRET/, 'scrubbed');
    like($log, qr/model discovery of provider "ant" failed: the model list is not a JSON object/, 'anthropic failure logged');
    like($log, qr/model discovery of provider "gem" stopped after 2 pages/, 'the loop stopped');
    is(scalar @{ list_requests() }, 4, 'four list requests');
};

done_testing();
