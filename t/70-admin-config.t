#!/usr/bin/perl
# The admin documents read from the configuration (catalog, consumers, config)
# and every admin JSON route's gate and headers; no configured secret (provider
# keys given literally, by env: and by file:, user keys, the store password)
# appears in any admin response or in error.log.

use strict;
use warnings;
use lib 't/lib';
use File::Temp qw(tempdir);
use Gw;
use GwConf;
use GwRedis;
use Test::More;

Gw::need_module();
GwRedis::need_redis();

my $ADMIN = 'sk-adm-root-secret-5a5a';
my $KEY = 'sk-adm-alice-secret-6b6b';
my %SECRET = (lit => 'sk-prov-literal-secret-1111', env => 'sk-prov-env-secret-2222', file => 'sk-prov-file-secret-3333',
              pw => 'redis-pass-secret-4444');
my $dir = tempdir(CLEANUP => 1);
open my $fh, '>', "$dir/key" or die;
print $fh "$SECRET{file}\n";
close $fh;

my $rd = GwRedis->start(password => $SECRET{pw});
my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [
        { name => 'lit', type => 'openai', key => $SECRET{lit}, models => 'gpt-4o-mini,local-x', default => 1 },
        { name => 'fromenv', type => 'anthropic', key => 'env:LLMGW_T70_KEY', models => 'claude-sonnet-4-5' },
        { name => 'fromfile', type => 'gemini', key => "file:$dir/key", models => 'gemini-2.5-flash', groups => 'vip' },
    ],
    http => "llm_gateway_store redis://:$SECRET{pw}\@127.0.0.1:" . $rd->port . "/0;\n"
          . "llm_gateway_user root key=$ADMIN admin;\n"
          . "llm_gateway_user alice key=$KEY group=eng requests_per_minute=30;\n"
          . "llm_gateway_group eng cost_per_day=5;\n"
          . "llm_gateway_price lit/local-x input=1 output=2;\n"
          . "llm_gateway_alias fast lit/gpt-4o-mini fromenv/claude-sonnet-4-5;\n",
    server => "location /admin { llm_gateway_admin; }",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 1, vars => { MOCK => $mock->port },
                          env => { LLMGW_T70_KEY => $SECRET{env} });

sub get { my ($path, $key) = @_; return Gw::http(GET => $ng->url($path), headers => defined $key ? GwConf::bearer($key) : {}) }

subtest 'catalog' => sub {
    my $r = get('/admin/api/catalog', $ADMIN);
    is($r->{status}, 200, 'status 200');
    my %by = map { $_->{id} => $_ } @{ $r->{json}{models} };
    is($by{'lit/gpt-4o-mini'}{source}, 'builtin', 'builtin price');
    is($by{'lit/gpt-4o-mini'}{inputUsdPerMTok}, 0.15, 'its input price');
    is($by{'lit/local-x'}{source}, 'override', 'llm_gateway_price');
    is($by{'lit/local-x'}{outputUsdPerMTok}, 2, 'its output price');
    is($by{'fromenv/claude-sonnet-4-5'}{source}, 'builtin', 'anthropic builtin');
    is(scalar keys %by, 4, 'every configured model');
};

subtest 'consumers' => sub {
    my $r = get('/admin/api/consumers', $ADMIN);
    is($r->{status}, 200, 'status 200');
    my ($a) = grep { $_->{user} eq 'alice' } @{ $r->{json}{consumers} };
    is($a->{keySource}, 'literal', 'key source, not the key');
    is_deeply($a->{limits}, { requestsPerMinute => 30 }, 'its limits');
    is_deeply($a->{groupLimits}, { costPerDayMicroUsd => 5000000 }, 'its group\'s limits');
    is_deeply($a->{providers}, ['lit', 'fromenv'], 'the providers its group may use (fromfile is vip only)');
    my ($root) = grep { $_->{user} eq 'root' } @{ $r->{json}{consumers} };
    ok($root->{admin}, 'root is admin');
};

subtest 'config' => sub {
    my $r = get('/admin/api/config', $ADMIN);
    is($r->{status}, 200, 'status 200');
    my %p = map { $_->{name} => $_ } @{ $r->{json}{providers} };
    is($p{lit}{key}, 'literal', 'a literal key: only that it is literal');
    is($p{fromenv}{key}, 'env:LLMGW_T70_KEY', 'env: reference');
    like($p{fromfile}{key}, qr{^file:/}, 'file: reference');
    is_deeply($p{fromfile}{groups}, ['vip'], 'access list');
    ok(exists $p{lit}{groups} && !defined $p{lit}{groups}, 'open provider: groups null');
    is_deeply($r->{json}{aliases}, [{ name => 'fast', targets => ['lit/gpt-4o-mini', 'fromenv/claude-sonnet-4-5'] }], 'aliases');
    is($r->{json}{settings}{store}{type}, 'redis', 'store');
    unlike($r->{json}{settings}{store}{url}, qr/\Q$SECRET{pw}\E/, 'store URL redacted');
};

subtest 'overview: features, cache, warnings' => sub {
    my $o = get('/admin/api/overview', $ADMIN)->{json};
    is_deeply($o->{features}, { usersFile => JSON::PP::false, sharedStore => JSON::PP::true, passthrough => JSON::PP::false,
                                metrics => JSON::PP::false, breaker => JSON::PP::false, retries => 0,
                                discovery => JSON::PP::false }, 'features');
    is_deeply($o->{cache}, { discoveredModels => [] }, 'no discovered lists');
    is_deeply($o->{warnings}, [], 'no warning: every model priced, every provider keyed');
};

subtest 'every admin JSON route: gate and headers; no secret anywhere' => sub {
    Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY), body => GwConf::chat_body('fast'));
    my @routes = qw(/admin/api/usage /admin/api/overview /admin/api/events /admin/api/usage/history?scope=total&metric=req
                    /admin/api/targets /admin/api/catalog /admin/api/consumers /admin/api/config);
    my $all = '';
    for my $p (@routes) {
        my $r = get($p, $ADMIN);
        is($r->{status}, 200, "$p: 200");
        is($r->{headers}{'x-content-type-options'}, 'nosniff', "$p: nosniff");
        is($r->{headers}{'cache-control'}, 'no-store', "$p: no-store");
        like($r->{headers}{'content-security-policy'} // '', qr/default-src 'none'/, "$p: CSP");
        is(get($p)->{status}, 401, "$p: no key 401");
        is(get($p, $KEY)->{status}, 403, "$p: non-admin 403");
        $all .= $r->{body};
    }
    my $log = $ng->error_log;
    for my $name (sort keys %SECRET) {
        ok(index($all, $SECRET{$name}) < 0, "secret $name absent from every admin response");
        ok(index($log, $SECRET{$name}) < 0, "secret $name absent from error.log");
    }
    for my $k ($ADMIN, $KEY) {
        ok(index($all, $k) < 0, 'no user key in any admin response');
        ok(index($log, $k) < 0, 'no user key in error.log');
    }
};

$ng->stop;
done_testing();
