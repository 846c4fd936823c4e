# Store outages and the store-down latch: Redis killed (SIGKILL) mid-run and
# restarted on the same port. Fail-open keeps serving from shared memory
# (limits still enforced there), the admin usage answers 503 while the
# store is down, the error is logged once per 30 s per worker, and after the
# restart the first operation past the 5 s latch probes the store and
# counting resumes in Redis. Fail-closed answers 503 limit_store_unavailable
# without Retry-After while down and 200 after recovery. A store that
# accepts but never answers costs a request at most the call time-out.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Test::More;
use Time::HiRes ();

Gw::need_module();
GwRedis::need_redis();

my $mock = Gw::Mock->start();

my @USERS = ('llm_gateway_user alice key=sk-alice-42 group=eng;',
             'llm_gateway_user lim key=sk-lim-42 group=glim requests_per_minute=3;');

sub gateway {
    my ($store, %o) = @_;
    return Gw::Nginx->start(workers => $o{workers} // 1, vars => { MOCK => $mock->port },
                            conf => GwMeter::conf(users => \@USERS, http => "llm_gateway_store $store;\n"));
}

sub latch_re {
    my ($url, $open) = @_;
    my $mode = $open ? 'counting in shared memory' : 'refusing admission';
    return qr/\[error\] \d+#\d+: llm_gateway: limit store \Q$url\E failed: (.+); not contacting it for 5 s \(\Q$mode\E meanwhile\)$/;
}

sub timed_chat {
    my ($ng, $key) = @_;
    my $t0 = Time::HiRes::time();
    my $r = GwMeter::chat($ng, $key);
    $r->{elapsed} = Time::HiRes::time() - $t0;
    return $r;
}

sub is_503 {
    my ($r, $name) = @_;
    GwConf::is_envelope($r, 503, 'server_error', 'limit_store_unavailable', "$name: 503 limit_store_unavailable");
    is($r->{json}{error}{message}, 'the limit store is unavailable', "$name: message");
    ok(!exists $r->{headers}{'retry-after'}, "$name: no Retry-After");
}

# ============================================================ fail-open

subtest 'fail-open: kill -9, serve from shared memory, log once, recover' => sub {
    my $rd = GwRedis->start();
    my $P = $rd->port;
    my $url = "redis://127.0.0.1:$P/0";
    my $ng = gateway("redis://127.0.0.1:$P", workers => 1);
    my $day = sub { $rd->get_num(GwRedis::key('user', 'alice', 'req', 'day', time)) };

    is(GwMeter::chat($ng, 'sk-alice-42')->{status}, 200, "request $_ with the store up: 200") for 1 .. 2;
    ok(Gw::wait_until(sub { $day->() == 2 }, timeout => 5), 'counted in Redis: req:day 2');
    my $u = GwMeter::usage($ng);
    is(GwMeter::row($u, user => 'alice')->{requestsPerDay}, 2, 'usage (store up): alice requestsPerDay 2');

    GwMeter::wait_second_below(40);
    my $log_from = length $ng->error_log;
    $rd->kill9;
    ok(!$rd->ping, 'Redis is down');
    my $t_kill = Time::HiRes::time();

    # The shared-memory fallback enforces limits too.
    my @lim = map { GwMeter::chat($ng, 'sk-lim-42')->{status} } 1 .. 4;
    is_deeply(\@lim, [200, 200, 200, 429], 'while down: requests_per_minute=3 enforced in shared memory');

    my $usage_down = Gw::http(GET => $ng->url('/admin/api/usage'), headers => GwMeter::auth($GwMeter::ADMIN_KEY));
    GwConf::is_envelope($usage_down, 503, 'server_error', 'limit_store_unavailable',
                        'usage while down: 503 (an outage, never zeros)');

    # ~8 s of traffic: every request served; the latch probes after 5 s and
    # fails again, silently.
    my (@st, $max);
    $max = 0;
    my $usage_probe;
    while (Time::HiRes::time() - $t_kill < 8) {
        my $r = timed_chat($ng, 'sk-alice-42');
        push @st, $r->{status};
        $max = $r->{elapsed} if $r->{elapsed} > $max;
        $usage_probe //= Gw::http(GET => $ng->url('/admin/api/usage'), headers => GwMeter::auth($GwMeter::ADMIN_KEY))
            if Time::HiRes::time() - $t_kill > 5.5;
        Time::HiRes::sleep(0.2);
    }
    cmp_ok(scalar @st, '>=', 20, scalar(@st) . ' requests over 8 s of outage');
    is(scalar(grep { $_ != 200 } @st), 0, 'all served (200) while the store is down');
    cmp_ok($max, '<', 1, sprintf('none waited on the dead store (slowest %.3fs)', $max));
    is($usage_probe && $usage_probe->{status}, 503, 'usage after 5 s down (probe fails): 503');

    my $new = substr($ng->error_log, $log_from);
    my @latch = grep { /limit store/ } split /\n/, $new;
    is(scalar @latch, 1, 'the store error is logged exactly once (one worker, 8 s < 30 s)') or diag(join "\n", @latch);
    my ($why) = ($latch[0] // '') =~ latch_re($url, 1);
    like($why // '', qr/^(?:cannot connect to the store at 127\.0\.0\.1:$P|the store closed the connection|read from the store failed)$/,
         'the reason says the store cannot be reached (' . ($why // 'no match') . ')') or diag($latch[0]);
    my @errors = grep { /\[(?:error|crit|alert|emerg)\]/ } split /\n/, $new;
    is(scalar @errors, 1, 'no other error lines (nginx connect() failures are not logged per attempt)')
        or diag(join "\n", @errors);

    # Restart on the same port; the next probe (<= 5 s after the last
    # failure) closes the latch and counting resumes in Redis.
    $rd->restart;
    my $t_up = Time::HiRes::time();
    my @after;
    my $back = Gw::wait_until(sub {
        push @after, GwMeter::chat($ng, 'sk-alice-42')->{status};
        $day->() >= 1;
    }, timeout => 12, interval => 0.3);
    ok($back, sprintf('counts land in Redis again %.1fs after the restart', Time::HiRes::time() - $t_up));
    is(scalar(grep { $_ != 200 } @after), 0, 'every request around the recovery: 200');
    is(GwMeter::chat($ng, 'sk-alice-42')->{status}, 200, 'one more request: 200');
    my $n_day;
    ok(Gw::wait_until(sub { $n_day = $day->(); $n_day >= 2 }, timeout => 5), "Redis counts again (req:day $n_day)");
    my $u2 = GwMeter::usage($ng);
    ok($u2, 'usage after recovery: 200') or diag($GwMeter::LAST->{status} . ' ' . $GwMeter::LAST->{body});
    is(GwMeter::row($u2, user => 'alice')->{requestsPerDay}, $day->(), 'usage after recovery equals Redis');
    my @latch_all = GwMeter::log_lines($ng, qr/limit store/);
    is(scalar @latch_all, 1, 'still exactly one latch line (recovery is silent, < 30 s)') or diag(join "\n", @latch_all);
    $ng->stop;
    $rd->stop;
};

# ========================================================== fail-closed

subtest 'fail-closed: 503 without Retry-After while down, 200 after recovery' => sub {
    my $rd = GwRedis->start();
    my $P = $rd->port;
    my $ng = gateway("redis://127.0.0.1:$P fail_open=off", workers => 2);
    is(GwMeter::chat($ng, 'sk-alice-42')->{status}, 200, 'store up: 200');
    $rd->kill9;
    $mock->clear;
    my @down = map { timed_chat($ng, 'sk-alice-42') } 1 .. 6;
    is_503($down[0], 'first request after the kill');
    is_503($down[-1], 'sixth request');
    is(scalar(grep { $_->{status} == 503 } @down), 6, 'all 6 requests while down: 503');
    cmp_ok((sort { $b <=> $a } map { $_->{elapsed} } @down)[0], '<', 1, 'answered at once');
    is(scalar @{ $mock->requests }, 0, 'no provider call while the store is down');
    my @latch = GwMeter::log_lines($ng, latch_re("redis://127.0.0.1:$P/0", 0));
    ok(@latch >= 1 && @latch <= 2, scalar(@latch) . ' latch line(s): at most one per worker') or diag(join "\n", @latch);
    is(GwMeter::log_pids(@latch), scalar @latch, 'one per worker');
    my @refused = GwMeter::log_lines($ng, qr/llm_gateway: admission refused: the limit store is unavailable/);
    is(scalar @refused, 6, 'each refusal logged as "admission refused"');

    $rd->restart;
    my $t_up = Time::HiRes::time();
    my $ok200 = 0;
    my $back = Gw::wait_until(sub {
        my $r = GwMeter::chat($ng, 'sk-alice-42');
        $ok200++ if $r->{status} == 200;
        $r->{status} == 200;
    }, timeout => 12, interval => 0.3);
    ok($back, sprintf('200 again %.1fs after the restart', Time::HiRes::time() - $t_up));
    Time::HiRes::sleep(5.5);    # every worker's latch has had its probe window
    my @st = map { GwMeter::chat($ng, 'sk-alice-42')->{status} } 1 .. 4;
    is_deeply(\@st, [200, 200, 200, 200], 'after recovery: 4 x 200');
    $ok200 += 4;
    ok(Gw::wait_until(sub { $rd->get_num(GwRedis::key('user', 'alice', 'tokout', 'day', time)) == 7 * $ok200 },
                      timeout => 5), "the $ok200 admitted requests are counted in the restarted Redis")
        or diag('req:day=' . $rd->get_num(GwRedis::key('user', 'alice', 'req', 'day', time)));
    is($rd->get_num(GwRedis::key('user', 'alice', 'req', 'day', time)), $ok200, "req:day = $ok200");
    $ng->stop;
    $rd->stop;
};

# ================================================= a store that never answers

subtest 'a store that accepts and never answers: fail-open 200 within the 2 s time-out' => sub {
    my $fk = GwRedis::Fake->start(reply => undef);
    my $P = $fk->port;
    # lim has a request limit: its admission asks the store (a user without
    # one is admitted without a store call, docs/store.md#accounting-batches)
    my $ng = gateway("redis://127.0.0.1:$P", workers => 1);
    my $r = timed_chat($ng, 'sk-lim-42');
    is($r->{status}, 200, 'fail-open 200');
    cmp_ok($r->{elapsed}, '<', 3, sprintf('answered in %.2fs (< 3 s)', $r->{elapsed}));
    cmp_ok($r->{elapsed}, '>=', 1.5, 'after waiting for the store (2 s time-out)');
    my $cmds = scalar @{ $fk->stats->{commands} || [] };
    cmp_ok($cmds, '>=', 1, "the silent store received the admission ($cmds command(s))");
    my $r2 = timed_chat($ng, 'sk-lim-42');
    is($r2->{status}, 200, 'next request (latch open): 200');
    cmp_ok($r2->{elapsed}, '<', 1, sprintf('at once (%.2fs): the store is not contacted', $r2->{elapsed}));
    is(scalar @{ $fk->stats->{commands} || [] }, $cmds, 'no command reached the store while the latch is open');
    my @latch = GwMeter::log_lines($ng, qr/limit store/);
    is(scalar @latch, 1, 'one latch line') or diag(join "\n", @latch);
    my ($why) = ($latch[0] // '') =~ latch_re("redis://127.0.0.1:$P/0", 1);
    is($why, 'the store did not answer within the time-out', 'reason: did not answer within the time-out');
    $ng->stop;
    $fk->stop;
};

subtest 'a store that never answers, fail_open=off timeout=500ms: 503 within the time-out' => sub {
    my $fk = GwRedis::Fake->start(reply => undef);
    my $P = $fk->port;
    my $ng = gateway("redis://127.0.0.1:$P fail_open=off timeout=500ms", workers => 1);
    my $r = timed_chat($ng, 'sk-alice-42');
    is_503($r, 'silent store, fail-closed');
    cmp_ok($r->{elapsed}, '<', 1.5, sprintf('answered in %.2fs (timeout=500ms)', $r->{elapsed}));
    my @latch = GwMeter::log_lines($ng, latch_re("redis://127.0.0.1:$P/0", 0));
    is(scalar @latch, 1, 'one latch line (refusing admission meanwhile)');
    $ng->stop;
    $fk->stop;
};

$mock->stop;
done_testing;
