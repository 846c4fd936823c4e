#!/usr/bin/perl
# The optional statistics (llm_gateway_stats): usage per user and model, read
# through /admin/api/usage/models?user=; latency histograms per provider and
# model, read through /admin/api/performance; both refused when off.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();

my $ADMIN = 'sk-stat-root-1f1f';
my %KEY = (alice => 'sk-stat-alice-2e2e', bob => 'sk-stat-bob-3d3d');

sub conf {
    my ($stats) = @_;
    return GwConf::gateway(
        providers => [{ name => 'oai', type => 'openai', key => 'sk-prov', models => 'gpt-4o-mini,gpt-4o', default => 1 }],
        http => ($stats ? "llm_gateway_stats $stats;\n" : '')
              . "llm_gateway_user root key=$ADMIN admin;\n"
              . "llm_gateway_user alice key=$KEY{alice};\n"
              . "llm_gateway_user bob key=$KEY{bob};\n"
              . "llm_gateway_price oai/gpt-4o-mini input=0.15 output=0.6;\n",
        server => "location /admin { llm_gateway_admin; }",
    );
}

my $mock = Gw::Mock->start();

sub chat {
    my ($ng, $who, $model) = @_;
    return Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY{$who}),
                    body => GwConf::chat_body($model))->{status};
}
sub admin_get { my ($ng, $p) = @_; return Gw::http(GET => $ng->url("/admin/api/$p"), headers => GwConf::bearer($ADMIN)) }

subtest 'on: per user and model, latency percentiles' => sub {
    my $ng = Gw::Nginx->start(conf => conf('user_model=on latency=on'), workers => 2, vars => { MOCK => $mock->port });
    $mock->reset;
    $mock->script({ match => { model => 'gpt-4o' }, delay_ms => 300,
                    json => { id => 'x', object => 'chat.completion', model => 'gpt-4o', choices => [],
                              usage => { prompt_tokens => 2, completion_tokens => 3 } } });
    is(chat($ng, alice => 'gpt-4o-mini'), 200, 'alice: mini') for 1 .. 2;
    is(chat($ng, alice => 'gpt-4o'), 200, 'alice: a slow gpt-4o');
    is(chat($ng, bob => 'gpt-4o-mini'), 200, 'bob: mini');
    my $r = admin_get($ng, 'usage/models?user=alice&metric=req&detail=1');
    is($r->{status}, 200, 'usage per user and model: 200');
    is_deeply([map { [$_->{model}, $_->{requests}, $_->{tokensIn}] } @{ $r->{json}{models} }],
              [['oai/gpt-4o-mini', 2, 22], ['oai/gpt-4o', 1, 2]], 'alice\'s models only (bob\'s request not in them)');
    $r = admin_get($ng, 'usage/models?metric=req');
    is_deeply([map { [$_->{model}, $_->{value}] } @{ $r->{json}{models} }], [['oai/gpt-4o-mini', 3], ['oai/gpt-4o', 1]],
              'without user: every caller');
    GwConf::is_envelope(admin_get($ng, 'usage/models?user=nobody'), 404, 'invalid_request_error', 'unknown_scope',
                        'unknown user: 404');
    $r = admin_get($ng, 'performance');
    is($r->{status}, 200, 'performance: 200');
    my %m = map { $_->{model} => $_ } @{ $r->{json}{models} };
    is($m{'oai/gpt-4o-mini'}{calls}, 3, 'three calls to mini');
    is($m{'oai/gpt-4o-mini'}{p50Ms}, 100, 'mini: fast (p50 <= 100 ms)');
    is($m{'oai/gpt-4o'}{calls}, 1, 'one call to gpt-4o');
    is($m{'oai/gpt-4o'}{p50Ms}, 500, 'gpt-4o: 300 ms falls in the 500 ms bucket');
    is_deeply($r->{json}{bucketsMs}, [100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000], 'bucket bounds');
    $ng->stop;
};

subtest 'off (the default): both refused' => sub {
    my $ng = Gw::Nginx->start(conf => conf(undef), workers => 1, vars => { MOCK => $mock->port });
    GwConf::is_envelope(admin_get($ng, 'performance'), 400, 'invalid_request_error', 'statistic_off', 'performance: 400');
    GwConf::is_envelope(admin_get($ng, 'usage/models?user=alice'), 400, 'invalid_request_error', 'statistic_off',
                        'per user: 400');
    $ng->stop;
};

subtest 'nginx -t refuses a bad parameter' => sub {
    my ($exit, $out) = Gw::nginx_t(conf('latency=yes'), vars => { MOCK => 1 });
    isnt($exit, 0, 'fails');
    like($out, qr/invalid parameter "latency=yes" of llm_gateway_stats: use user_model=on\|off and latency=on\|off in \S+:\d+/,
         'file, line and the rule');
};

done_testing();
