#!/usr/bin/perl
# GET /admin/api/usage/history on the shared-memory store and on Redis:
# every point with its bucket, oldest first; the 400s, the 404s, and a 503
# (never a zero-filled series) when the store cannot be read. And the
# targets view's counters (a tool server's proxied request counted in each
# store), and its 503 when the store cannot be read.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwRedis;
use Test::More;

Gw::need_module();
GwRedis::need_redis();

my $KEY = 'sk-hist-alice-9f8e';
my $ADMIN = 'sk-hist-root-7d6c';

sub conf {
    my ($store) = @_;
    return GwConf::gateway(
        providers => [{ name => 'oai', type => 'openai', key => 'sk-prov', models => 'gpt-4o-mini,free-m,idle-m', default => 1 },
                      { name => 'many', type => 'openai', key => 'sk-many', models => join(',', map { "m$_" } 1 .. 460) }],
        http => ($store // '') . "llm_gateway_mcp_server tools location=/_t/tools groups=;\n"
              # A tool server reached through the provider's own location (the mock answers any path).
              . "llm_gateway_mcp_server relay location=/_llm/oai;\n"
              . "llm_gateway_user root key=$ADMIN admin;\n"
              . "llm_gateway_user alice key=$KEY group=eng;\n"
              . "llm_gateway_price oai/gpt-4o-mini input=0.15 output=0.6;\n"
              . "llm_gateway_price oai/free-m free;\n",
        server => "location /admin { llm_gateway_admin; }\n    location /mcp/ { llm_gateway_target_proxy mcp; }",
    );
}

sub history {
    my ($ng, $q, %o) = @_;
    return Gw::http(GET => $ng->url("/admin/api/usage/history?$q"), headers => GwConf::bearer($o{key} // $ADMIN));
}

sub day_back {
    my ($n) = @_;
    my @g = gmtime(time - 86400 * $n);
    return sprintf '%04d%02d%02d', $g[5] + 1900, $g[4] + 1, $g[3];
}

# On Redis a request's counts reach the store with its worker's batch, just
# after its answer; a read served by the other worker may come first. Waits
# (bounded) until the total scope's requests today reach $n.
sub settled {
    my ($rd, $n) = @_;
    return 1 unless $rd;
    return ok(Gw::wait_until(sub { $rd->get_num(GwRedis::key('total', 'all', 'req', 'day', time)) == $n }, timeout => 5),
              "the $n requests' counts are in Redis");
}

my $mock = Gw::Mock->start();

for my $store_kind (qw(shm redis)) {
    my $rd = $store_kind eq 'redis' ? GwRedis->start() : undef;
    my $ng = Gw::Nginx->start(conf => conf($rd ? "llm_gateway_store redis://127.0.0.1:" . $rd->port . "/0;\n" : undef),
                              workers => 2, vars => { MOCK => $mock->port });

    subtest "$store_kind: series oldest first, one point per bucket" => sub {
        for (1 .. 3) {
            is(Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                        body => GwConf::chat_body('gpt-4o-mini'))->{status}, 200, 'chat');
        }
        settled($rd, 3);
        my $r = history($ng, 'scope=user:alice&metric=req&window=day&span=3');
        is($r->{status}, 200, 'status 200');
        is($r->{headers}{'cache-control'}, 'no-store', 'no-store');
        is($r->{headers}{'x-content-type-options'}, 'nosniff', 'nosniff');
        is_deeply($r->{json}, { scope => 'user:alice', metric => 'req', window => 'day', span => 3,
                                points => [{ bucket => day_back(2), value => 0 }, { bucket => day_back(1), value => 0 },
                                           { bucket => day_back(0), value => 3 }] }, 'the series');
        $r = history($ng, 'scope=model:oai%2Fgpt-4o-mini&metric=tokin&window=hour');
        is(scalar @{ $r->{json}{points} }, 48, 'hour: 48 points by default');
        is($r->{json}{points}[-1]{value}, 33, 'the model\'s prompt tokens this hour');
        like($r->{json}{points}[0]{bucket}, qr/^\d{10}$/, 'hour buckets YYYYMMDDHH');
        $r = history($ng, 'scope=total&metric=cost&window=month&span=13');
        is(scalar @{ $r->{json}{points} }, 13, 'month: 13 points');
        is($r->{json}{points}[-1]{value}, 18, 'total cost this month (3 x 6 micro-USD)');
        is($r->{json}{points}[-1]{bucket}, substr(day_back(0), 0, 6), 'month bucket YYYYMM');
        $r = history($ng, 'scope=group:eng&metric=tokout');
        is(scalar @{ $r->{json}{points} }, 30, 'day: 30 points by default');
        is($r->{json}{points}[-1]{value}, 21, 'group output tokens today');
    };

    subtest "$store_kind: models ranked over the catalog" => sub {
        is(Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                    body => GwConf::chat_body('oai/free-m'))->{status}, 200, 'a request to the free model');
        settled($rd, 4);
        my $get = sub { Gw::http(GET => $ng->url("/admin/api/usage/models?$_[0]"), headers => GwConf::bearer($ADMIN)) };
        my $r = $get->('metric=req');
        is($r->{status}, 200, 'status 200');
        is($r->{headers}{'cache-control'}, 'no-store', 'no-store');
        is_deeply($r->{json}, { metric => 'req', window => 'day', span => 1, total => 2,
                                models => [{ model => 'oai/gpt-4o-mini', value => 3 }, { model => 'oai/free-m', value => 1 }] },
                  'ranked by requests today; idle models not listed');
        $r = $get->('metric=cost&window=month');
        is_deeply($r->{json}{models}, [{ model => 'oai/gpt-4o-mini', value => 18 }], 'by cost: the free model has none');
        $r = $get->('metric=cost&window=month&detail=1');
        is_deeply($r->{json}{models},
                  [{ model => 'oai/gpt-4o-mini', value => 18, requests => 3, tokensIn => 33, tokensOut => 21, costMicroUsd => 18,
                     free => JSON::PP::false },
                   { model => 'oai/free-m', value => 0, requests => 1, tokensIn => 11, tokensOut => 7, costMicroUsd => 0,
                     free => JSON::PP::true }], 'detail: the free model with traffic listed at value 0');
        $r = $get->('metric=req&limit=1&offset=1');
        is_deeply($r->{json}{models}, [{ model => 'oai/free-m', value => 1 }], 'limit and offset');
        $r = $get->('metric=req&prefix=oai%2Fgpt');
        is_deeply([map { $_->{model} } @{ $r->{json}{models} }], ['oai/gpt-4o-mini'], 'prefix filters the ids');
        $r = $get->('metric=req&window=day&span=35&detail=1');
        GwConf::is_envelope($r, 400, 'invalid_request_error', 'read_too_large', 'over 64,000 keys: 400, not truncated');
        like($r->{json}{error}{message}, qr/would read 64\d{3} keys/, 'says how many');
        GwConf::is_envelope($get->('metric=rej'), 400, 'invalid_request_error', 'invalid_ranking_query', 'bad metric: 400');
        is($get->('metric=req&span=16&detail=0')->{status}, 200, '463 models x 16 buckets: one read under the cap');
    };

    subtest "$store_kind: 400, 404 and the gate" => sub {
        for my $q ('metric=req', 'scope=team:x&metric=req', 'scope=user:alice&metric=rej', 'scope=user:alice&metric=req&window=min',
                   'scope=user:alice&metric=req&window=day&span=36', 'scope=user:alice&metric=req&window=month&span=14',
                   'scope=user:alice&metric=req&window=hour&span=49', 'scope=user:alice&metric=req&span=0',
                   'scope=user:alice&metric=req&span=abc') {
            GwConf::is_envelope(history($ng, $q), 400, 'invalid_request_error', 'invalid_history_query', "400: $q");
        }
        GwConf::is_envelope(history($ng, 'scope=user:nobody&metric=req'), 404, 'invalid_request_error', 'unknown_scope',
                            'unknown user: 404');
        GwConf::is_envelope(history($ng, 'scope=group:nope&metric=req'), 404, 'invalid_request_error', 'unknown_scope',
                            'unknown group: 404');
        is(history($ng, 'scope=total&metric=req', key => $KEY)->{status}, 403, 'non-admin: 403');
        is(Gw::http(GET => $ng->url('/admin/api/usage/history?scope=total&metric=req'))->{status}, 401, 'no key: 401');
        my $t = Gw::http(GET => $ng->url('/admin/api/targets'), headers => GwConf::bearer($ADMIN));
        is($t->{status}, 200, 'targets: 200');
        my ($tools) = grep { $_->{name} eq 'tools' } @{ $t->{json}{targets} // [] };
        is_deeply($tools, { kind => 'mcp', name => 'tools', url => '/_t/tools', location => '/_t/tools',
                            federated => JSON::PP::true, access => [],
                            requests => { min => 0, hour => 0, day => 0, month => 0 } },
                  'targets: the tool server, no request yet');
    };

    subtest "$store_kind: a tool server's requests counted in this store" => sub {
        is(Gw::http(GET => $ng->url('/mcp/relay/models'), headers => GwConf::bearer($KEY))->{status}, 200,
           'a proxied request');
        ok(Gw::wait_until(sub { $rd->get_num(GwRedis::key('mcp', 'relay', 'req', 'day', time)) == 1 }, timeout => 5),
           'its count is in Redis') if $rd;
        my $t = Gw::http(GET => $ng->url('/admin/api/targets'), headers => GwConf::bearer($ADMIN));
        my ($relay) = grep { $_->{name} eq 'relay' } @{ $t->{json}{targets} // [] };
        is_deeply($relay->{requests}, { min => 1, hour => 1, day => 1, month => 1 }, 'the targets view counts it');
        if ($rd) {
            is($rd->get_num(GwRedis::key('mcp', 'relay', 'req', 'day', time)), 1, 'in Redis: llmgw:mcp:relay:req:day:<bucket>');
        }
    };

    subtest "$store_kind: series and totals" => sub {
        my $get = sub { Gw::http(GET => $ng->url("/admin/api/usage/$_[0]"), headers => GwConf::bearer($ADMIN)) };
        my $r = $get->('series?scope=user:alice&window=day&span=2');
        is($r->{status}, 200, 'series: 200');
        is_deeply($r->{json}, { scope => 'user:alice', window => 'day', span => 2,
                                points => [{ bucket => day_back(1), requests => 0, tokensIn => 0, tokensOut => 0, costMicroUsd => 0 },
                                           { bucket => day_back(0), requests => 4, tokensIn => 44, tokensOut => 28,
                                             costMicroUsd => 18 }] }, 'the four metrics per bucket (the free model costs 0)');
        $r = $get->('totals?window=month');
        is_deeply($r->{json}, { scope => 'total', window => 'month', span => 1, requests => 4, tokensIn => 44, tokensOut => 28,
                                costMicroUsd => 18 }, 'totals of the total scope this month');
        GwConf::is_envelope($get->('totals?window=min'), 400, 'invalid_request_error', 'invalid_history_query', 'bad window: 400');
        GwConf::is_envelope($get->('series?scope=user:ghost'), 404, 'invalid_request_error', 'unknown_scope', 'unknown user: 404');
    };

    if ($rd) {
        subtest 'redis down: 503, never a zero-filled series' => sub {
            $rd->kill9;
            my $r = history($ng, 'scope=user:alice&metric=req&window=day&span=3');
            GwConf::is_envelope($r, 503, 'server_error', 'limit_store_unavailable', 'store read failed: 503');
            $r = Gw::http(GET => $ng->url('/admin/api/usage/models?metric=req'), headers => GwConf::bearer($ADMIN));
            GwConf::is_envelope($r, 503, 'server_error', 'limit_store_unavailable', 'ranking: 503, never an empty ranking');
            $r = Gw::http(GET => $ng->url('/admin/api/usage/totals'), headers => GwConf::bearer($ADMIN));
            GwConf::is_envelope($r, 503, 'server_error', 'limit_store_unavailable', 'totals: 503, never zeros');
            $r = Gw::http(GET => $ng->url('/admin/api/targets'), headers => GwConf::bearer($ADMIN));
            GwConf::is_envelope($r, 503, 'server_error', 'limit_store_unavailable', 'targets: 503, never zeros');
            $rd->restart;
        };
    }
    $ng->stop;
    $rd->stop if $rd;
}

done_testing();
