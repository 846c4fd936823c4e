#!/usr/bin/perl
# The Prometheus endpoint: the admin key or an allowed address; the families
# with TYPE and HELP, no duplicate series, counters ending in _total;
# promtool check metrics on real scrapes with the store up, down and in
# fail-open; store-backed series omitted (never zeros) while the store is
# down; the response cache's families per scope and per model, read from
# Redis counters (and the admin usage view's cache object from the same); label escaping with quotes, backslashes, newlines and invalid UTF-8 in
# user and group names (from a users file); the in-process rejection counter.

use strict;
use warnings;
use lib 't/lib';
use File::Temp qw(tempdir);
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Test::More;

Gw::need_module();
GwRedis::need_redis();

my $ADMIN = 'sk-met-root-1a1a';
my $KEY = 'sk-met-alice-2b2b';
my $ODD = 'sk-met-odd-3c3c';
my $promtool = `command -v promtool 2>/dev/null`;
chomp $promtool;

my $dir = tempdir(CLEANUP => 1);
# A user and a group whose names need escaping: a quote, a backslash, a
# newline and an invalid UTF-8 byte (the users file is JSON: \u escapes for
# the first three; the invalid byte is written raw).
open my $fh, '>:raw', "$dir/users.json" or die;
print $fh qq({"groups":[{"name":"g\\"q\\\\b\\nn\xff","limits":{"requestsPerMinute":1}}],)
        . qq("users":[{"name":"o\\"d\\\\d\\ny\xfe","key":"$ODD","group":"g\\"q\\\\b\\nn\xff","limits":{"requestsPerMinute":1}}]});
close $fh;

sub conf {
    my ($store, $metrics) = @_;
    return GwConf::gateway(
        providers => [{ name => 'oai', type => 'openai', key => 'sk-prov', models => 'gpt-4o-mini', default => 1 }],
        http => ($store // '')
              . "llm_gateway_user root key=$ADMIN admin;\n"
              . "llm_gateway_user alice key=$KEY group=eng requests_per_day=100 tokens_per_day=1000;\n"
              . "llm_gateway_users_file $dir/users.json;\n"
              . "llm_gateway_price oai/gpt-4o-mini input=0.15 output=0.6;\n"
              # The response cache on: its families and the usage view's cache object.
              . "proxy_cache_path %%TMP%%/cache keys_zone=llm:1m;\nllm_gateway_cache zone=llm;\n",
        server => "location = /metrics { llm_gateway_metrics $metrics; }\n"
                . "    location = /open-metrics { llm_gateway_metrics allow=127.0.0.0/8; }\n"
                . "    location /admin { llm_gateway_admin; }",
    );
}

sub scrape {
    my ($ng, %o) = @_;
    my $path = $o{path} // '/metrics';
    return Gw::http(GET => $ng->url($path), headers => exists $o{key} ? ($o{key} ? GwConf::bearer($o{key}) : {}) : GwConf::bearer($ADMIN));
}

# The families (name => type) and series of a scrape; fails on a series twice.
sub parse {
    my ($text) = @_;
    my (%type, %help, @series, %seen, @dup);
    for my $l (split /\n/, $text) {
        if ($l =~ /^# TYPE (\S+) (\S+)$/) { $type{$1} = $2; next }
        if ($l =~ /^# HELP (\S+) /) { $help{$1} = 1; next }
        next unless length $l;
        my ($s) = $l =~ /^(.*) \S+$/;
        push @dup, $s if $seen{$s}++;
        push @series, $l;
    }
    return (\%type, \%help, \@series, \@dup);
}

sub promtool_ok {
    my ($text, $name) = @_;
    SKIP: {
        Gw::skip('promtool is not installed (Debian package prometheus)', 1) unless $promtool;
        my $f = "$dir/scrape.txt";
        open my $o, '>:raw', $f or die;
        print $o $text;
        close $o;
        my $out = `$promtool check metrics < $f 2>&1`;
        is($?, 0, "promtool check metrics: $name") or diag($out);
    }
}

my $mock = Gw::Mock->start();

subtest 'shared memory: families, escaping, rejections, access' => sub {
    my $ng = Gw::Nginx->start(conf => conf(undef, 'model_label=on'), workers => 2, vars => { MOCK => $mock->port });
    GwMeter::wait_second_below(50);
    is(Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                body => GwConf::chat_body('gpt-4o-mini'))->{status}, 200, 'a chat');
    for (1 .. 3) {
        Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($ODD), body => GwConf::chat_body('gpt-4o-mini'));
    }
    my $r = scrape($ng);
    is($r->{status}, 200, 'admin key: 200');
    like($r->{headers}{'content-type'}, qr{^text/plain; version=0\.0\.4}, 'text exposition');
    my ($type, $help, $series, $dup) = parse($r->{body});
    is_deeply($dup, [], 'no series twice');
    for my $f (sort keys %$type) {
        ok($help->{$f}, "$f has HELP");
        like($f, qr/_total$/, "$f: a counter ends in _total") if $type->{$f} eq 'counter';
    }
    for my $f (qw(llmgateway_requests_total llmgateway_tokens_total llmgateway_cost_micro_usd_total
                  llmgateway_provider_attempts_total llmgateway_provider_failures_total llmgateway_provider_health
                  llmgateway_budget_consumed_ratio llmgateway_rate_limit_rejections_total llmgateway_limit_store_up
                  llmgateway_model_requests_total llmgateway_cache_requests_total llmgateway_cache_tokens_total
                  llmgateway_model_cache_requests_total llmgateway_model_cache_tokens_total)) {
        ok($type->{$f}, "family $f");
    }
    my $body = $r->{body};
    like($body, qr/^llmgateway_requests_total\{scope_kind="user",scope="alice"\} 1$/m, 'alice: one request today');
    like($body, qr/^llmgateway_tokens_total\{scope_kind="user",scope="alice",direction="in"\} 11$/m, 'alice: tokens in');
    like($body, qr/^llmgateway_cost_micro_usd_total\{scope_kind="total",scope="all"\} 12$/m, 'total cost (two requests)');
    like($body, qr/^llmgateway_budget_consumed_ratio\{scope_kind="user",scope="alice",limit="tokensPerDay"\} 0\.018$/m,
         'alice: 18 of 1000 tokens today');
    like($body, qr/^llmgateway_provider_attempts_total\{provider="oai"\} 2$/m, 'provider attempts');
    like($body, qr/^llmgateway_model_requests_total\{provider="oai",model="gpt-4o-mini"\} 2$/m, 'model label breakdown');
    # The response cache's counters: no lookup yet, so zeros (as every scope counter).
    like($body, qr/^llmgateway_cache_requests_total\{scope_kind="user",scope="alice",result="hit"\} 0$/m, 'alice: no cache hit');
    like($body, qr/^llmgateway_cache_requests_total\{scope_kind="total",scope="all",result="miss"\} 0$/m, 'total: no cache miss');
    like($body, qr/^llmgateway_cache_tokens_total\{scope_kind="group",scope="eng",direction="out"\} 0$/m, 'eng: no token from the cache');
    like($body, qr/^llmgateway_model_cache_requests_total\{provider="oai",model="gpt-4o-mini",result="hit"\} 0$/m,
         'per model (model_label)');
    like($body, qr/^llmgateway_provider_health\{provider="oai"\} 1$/m, 'breaker closed: 1');
    like($body, qr/^llmgateway_limit_store_up\{replica="[^"]+"\} 1$/m, 'store up');
    # The odd names: quote, backslash (doubled in the value), newline, invalid bytes as \xHH markers.
    like($body, qr/^llmgateway_rate_limit_rejections_total\{scope_kind="user",scope="o\\"d\\\\\\\\d\\ny\\\\xFE"\} 2$/m,
         'escaped user name; two rejections (1 request a minute)');
    like($body, qr/^llmgateway_rate_limit_rejections_total\{scope_kind="group",scope="g\\"q\\\\\\\\b\\nn\\\\xFF"\} 2$/m,
         'escaped group name');
    ok(utf8::decode(my $copy = $body), 'the whole scrape is valid UTF-8');
    promtool_ok($body, 'shared memory');

    is(scrape($ng, key => undef)->{status}, 401, 'no key: 401');
    is(scrape($ng, key => $KEY)->{status}, 403, 'non-admin key: 403');
    my $open = scrape($ng, path => '/open-metrics', key => undef);
    is($open->{status}, 200, 'an allowed address scrapes without a key');
    like($open->{body}, qr/^llmgateway_requests_total\{scope_kind="user",scope="alice"\} 1$/m, 'the same series');
    unlike($open->{body}, qr/llmgateway_model_requests_total\{/, 'model_label off there');
    unlike($open->{body}, qr/llmgateway_model_cache_/, 'no per-model cache family there');
    $ng->stop;
};

subtest 'redis: up, fail-open while down (store series omitted), back' => sub {
    my $rd = GwRedis->start();
    my $ng = Gw::Nginx->start(conf => conf("llm_gateway_store redis://127.0.0.1:" . $rd->port . "/0 fail_open=on;\n",
                                           'model_label=on'),
                              workers => 1, vars => { MOCK => $mock->port });
    Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY), body => GwConf::chat_body('gpt-4o-mini'));
    # The response cache's counters as accounting writes them (docs/cache.md):
    # alice this month 3 hits and 1 miss, 40 and 12 tokens served from the
    # cache, 2 of the hits and the miss today; the model's; the total's.
    sleep 1 while GwMeter::secs_to_midnight() < 10;   # one UTC day (and month) for the writes and the reads
    my $now = time;
    my %cache = (chit => 3, cmiss => 1, chitin => 40, chitout => 12);
    $rd->cli('SET', GwRedis::key(user => 'alice', $_, 'month', $now), $cache{$_}) for sort keys %cache;
    $rd->cli('SET', GwRedis::key(user => 'alice', chit => 'day', $now), 2);
    $rd->cli('SET', GwRedis::key(user => 'alice', cmiss => 'day', $now), 1);
    $rd->cli('SET', GwRedis::key(model => 'oai/gpt-4o-mini', chit => 'month', $now), 5);
    $rd->cli('SET', GwRedis::key(model => 'oai/gpt-4o-mini', chitout => 'month', $now), 30);
    $rd->cli('SET', GwRedis::key(total => 'all', cmiss => 'month', $now), 7);
    my $up = scrape($ng)->{body};
    like($up, qr/^llmgateway_requests_total\{scope_kind="user",scope="alice"\} 1$/m, 'store up: series from Redis');
    like($up, qr/^llmgateway_cache_requests_total\{scope_kind="user",scope="alice",result="hit"\} 3$/m, 'alice: 3 cache hits');
    like($up, qr/^llmgateway_cache_requests_total\{scope_kind="user",scope="alice",result="miss"\} 1$/m, 'alice: 1 miss');
    like($up, qr/^llmgateway_cache_tokens_total\{scope_kind="user",scope="alice",direction="in"\} 40$/m, 'alice: 40 prompt tokens');
    like($up, qr/^llmgateway_cache_tokens_total\{scope_kind="user",scope="alice",direction="out"\} 12$/m,
         'alice: 12 completion tokens');
    like($up, qr/^llmgateway_cache_requests_total\{scope_kind="total",scope="all",result="miss"\} 7$/m, 'total: 7 misses');
    like($up, qr/^llmgateway_cache_requests_total\{scope_kind="group",scope="eng",result="hit"\} 0$/m, 'eng: none');
    like($up, qr/^llmgateway_model_cache_requests_total\{provider="oai",model="gpt-4o-mini",result="hit"\} 5$/m,
         'the model: 5 hits');
    like($up, qr/^llmgateway_model_cache_tokens_total\{provider="oai",model="gpt-4o-mini",direction="out"\} 30$/m,
         'the model: 30 completion tokens');
    like($up, qr/^llmgateway_tokens_total\{scope_kind="user",scope="alice",direction="in"\} 11$/m,
         'the provider\'s tokens apart');
    promtool_ok($up, 'redis up, with cache counters');
    # The same counters in the admin usage view, per window.
    my $u = GwMeter::usage($ng, key => $ADMIN);
    is_deeply((GwMeter::row($u, user => 'alice') || {})->{cache},
              { day => { hits => 2, misses => 1, hitTokensIn => 0, hitTokensOut => 0, hitRate => 2 / 3 },
                month => { hits => 3, misses => 1, hitTokensIn => 40, hitTokensOut => 12, hitRate => 0.75 } },
              'usage: alice\'s cache object');
    is_deeply((GwMeter::row($u, group => 'eng') || {})->{cache}{day},
              { hits => 0, misses => 0, hitTokensIn => 0, hitTokensOut => 0, hitRate => undef }, 'usage: eng, no lookup: hitRate null');
    is((GwMeter::row($u, total => 'all') || {})->{cache}{month}{hitRate}, 0, 'usage: the total, misses only: hitRate 0');
    is((GwMeter::row($u, user => 'alice') || {})->{requestsPerDay}, 1, 'usage: the other fields as before');
    $rd->kill9;
    # A request counted fail-open in shared memory; the scrape must not show it as the store's.
    is(Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                body => GwConf::chat_body('gpt-4o-mini'))->{status}, 200, 'fail-open request served');
    my $down = scrape($ng)->{body};
    unlike($down, qr/^llmgateway_requests_total\{/m, 'store down: request counters omitted, not zero');
    unlike($down, qr/^llmgateway_tokens_total\{/m, 'tokens omitted');
    unlike($down, qr/^llmgateway_budget_consumed_ratio\{/m, 'budget ratios omitted');
    like($down, qr/^# TYPE llmgateway_requests_total counter$/m, 'the family is still declared');
    like($down, qr/^llmgateway_limit_store_up\{replica="[^"]+"\} 0$/m, 'store_up 0');
    promtool_ok($down, 'redis down, fail-open');
    $rd->restart;
    Gw::wait_until(sub { scrape($ng)->{body} =~ /^llmgateway_limit_store_up\{[^}]*\} 1$/m }, timeout => 15, interval => 0.5);
    # The restarted redis-server kept nothing (no persistence): the series are back, read from it.
    like(scrape($ng)->{body}, qr/^llmgateway_requests_total\{scope_kind="user",scope="alice"\} 0$/m,
         'back: the series return, read from Redis again');
    $ng->stop;
    $rd->stop;
};

done_testing();
