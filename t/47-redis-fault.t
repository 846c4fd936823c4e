#!/usr/bin/perl
# An exception on the Redis path never ends the worker. With the test-only
# LLMGW_TEST_FAULT=redis-reply-bad-alloc, handling the worker's first store
# reply throws std::bad_alloc: the error is logged, the admission fails
# cleanly (fail-open: served from shared memory; fail-closed: 503), the same
# worker keeps serving, and nothing is logged at alert or worse.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Test::More;

Gw::need_module();
GwRedis::need_redis();

my $mock = Gw::Mock->start();
my $rd = GwRedis->start();
my $P = $rd->port;

# A request limit: the admission asks the store (a user without one is
# admitted without a store call, docs/store.md#accounting-batches).
my @USERS = ('llm_gateway_user alice key=sk-alice-47 group=eng requests_per_day=100000;');
my $FAULT_RE = qr/\[error\] (\d+)#\d+: llm_gateway: handling a store reply failed: std::bad_alloc$/;

sub gateway {
    my ($store) = @_;
    return Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port },
                            env => { LLMGW_TEST_FAULT => 'redis-reply-bad-alloc' },
                            conf => GwMeter::conf(users => \@USERS, http => "llm_gateway_store $store;\n"));
}

sub no_alerts {
    my ($ng, $name) = @_;
    my @bad = GwMeter::log_lines($ng, qr/\[(?:alert|crit|emerg)\]/);
    is_deeply(\@bad, [], $name);
}

subtest 'fail-open: the faulted admission is served from shared memory' => sub {
    my $url = "redis://127.0.0.1:$P/0";
    my $ng = gateway("redis://127.0.0.1:$P");
    like($ng->conf_text, qr/^env LLMGW_TEST_FAULT;$/m, 'the test config passes LLMGW_TEST_FAULT');

    my $r = GwMeter::chat($ng, 'sk-alice-47');
    is($r->{status}, 200, 'first request: 200 despite the fault') or diag($r->{body});
    my @fault = GwMeter::log_lines($ng, $FAULT_RE);
    is(scalar @fault, 1, 'the fault is logged once at error level');
    ok($ng->wait_log(qr/\[error\] \d+#\d+: llm_gateway: limit store \Q$url\E failed: the store reply could not be handled; not contacting it for 5 s \(counting in shared memory meanwhile\)$/),
       'the admission failed cleanly and opened the latch');
    my ($fault_pid) = GwMeter::log_pids(@fault);

    for my $i (2 .. 3) {
        my $r2 = GwMeter::chat($ng, 'sk-alice-47');
        is($r2->{status}, 200, "request $i: 200");
    }
    my @auth = GwMeter::log_lines($ng, qr/llm_gateway: authenticated user="alice"/);
    is(scalar @auth, 3, 'three requests authenticated');
    is_deeply([GwMeter::log_pids(@auth)], [$fault_pid], 'all served by the worker that hit the fault');
    is(scalar(GwMeter::log_lines($ng, $FAULT_RE)), 1, 'the fault fired once only');
    my @exits = GwMeter::log_lines($ng, qr/worker process \d+ exited/);
    is_deeply(\@exits, [], 'no worker exited');
    no_alerts($ng, 'no alert, crit or emerg in error.log');
    $ng->stop;
};

subtest 'fail-closed: the faulted admission is a 503, the worker lives on' => sub {
    my $ng = gateway("redis://127.0.0.1:$P fail_open=off");
    my $r = GwMeter::chat($ng, 'sk-alice-47');
    GwConf::is_envelope($r, 503, 'server_error', 'limit_store_unavailable', 'first request: 503 limit_store_unavailable');
    my @fault = GwMeter::log_lines($ng, $FAULT_RE);
    is(scalar @fault, 1, 'the fault is logged once at error level');
    my ($fault_pid) = GwMeter::log_pids(@fault);

    # The latch keeps the store closed for 5 s; then the same worker counts in Redis again.
    my $ok = Gw::wait_until(sub { GwMeter::chat($ng, 'sk-alice-47')->{status} == 200 }, timeout => 10, interval => 0.5);
    ok($ok, 'the same worker admits again once the latch closes');
    my @auth = GwMeter::log_lines($ng, qr/llm_gateway: authenticated user="alice"/);
    is_deeply([GwMeter::log_pids(@auth)], [$fault_pid], 'every request served by the worker that hit the fault');
    no_alerts($ng, 'no alert, crit or emerg in error.log');
    $ng->stop;
};

done_testing();
