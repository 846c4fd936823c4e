#!/usr/bin/perl
# Accounting behind the answer on Redis (docs/store.md#accounting-batches):
# the requests a worker settles while an accounting call is in flight, or
# within flush=, are merged into one script call; the counters equal the
# provider's ground truth after it; a pending batch is written before the
# worker exits (quit, reload); a batch the store does not take is counted
# once in shared memory with fail_open=on and dropped, logged per request,
# with fail_open=off. A user without a request limit is admitted without a
# store call (fail_open=on): its request counts go with the accounting.
# flush= is checked by nginx -t.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Test::More;
use Time::HiRes ();
use List::Util ();
use POSIX ();

Gw::need_module();
GwRedis::need_redis();

my ($IN, $OUT) = (7, 5);   # what the provider bills per request
my $mock = Gw::Mock->start();
my $rd = GwRedis->start();

sub conf {
    my (%o) = @_;
    my $store = "llm_gateway_store redis://127.0.0.1:%%RPORT%%" . ($o{store} ? " $o{store}" : '') . ";\n";
    # bat has a request limit (its admission asks the store and writes its
    # request counts: below 64 requests, too small for a worker's lease,
    # t/85); free has none.
    return GwMeter::conf(users => [$o{user} // 'llm_gateway_user bat key=sk-bat-84 group=gb requests_per_day=60;',
                                   'llm_gateway_user free key=sk-free-84 group=gf;'],
                         http => "llm_gateway_price mock/gpt-4o-mini input=1 output=1;\n" . $store);
}

sub gateway {
    my (%o) = @_;
    return Gw::Nginx->start(workers => $o{workers} // 1, conf => conf(%o),
                            vars => { MOCK => $mock->port, RPORT => $o{rport} // $rd->port });
}

sub answer { my (%o) = @_; return GwMeter::chat_answer($IN, $OUT, %o) }

# Every answer of the mock bills $IN + $OUT from now on.
sub prime { my (%o) = @_; $mock->reset; $mock->script(answer(times => 1000, %o)); }

sub key_of { my ($kind, $id, $metric, $r) = @_; GwRedis::key($kind, $id, $metric, 'day', time) }
sub counted { my ($kind, $id, $metric, $r) = @_; ($r // $rd)->get_num(key_of($kind, $id, $metric)) }

# ------------------------------------------------------------------ merged

subtest 'concurrent requests: accounting merged into few calls, counters exact' => sub {
    $rd->cli('FLUSHALL');
    my $ng = gateway(store => 'flush=300ms');
    GwMeter::wait_second_below(50);
    prime();
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, 'warm-up request 200');
    ok(Gw::wait_until(sub { counted('user', 'bat', 'tokout') == $OUT }, timeout => 3), 'warm-up accounted');
    $rd->cli('CONFIG', 'RESETSTAT');
    my $n = 24;
    prime(delay_ms => 100);
    my @res = Gw::parallel($n, sub { GwMeter::chat($ng, 'sk-bat-84', timeout => 20)->{status} }, timeout => 60);
    is(scalar(grep { $_ == 200 } @res), $n, "all $n answered 200");
    my $ok = Gw::wait_until(sub { counted('user', 'bat', 'tokout') == $OUT * ($n + 1) }, timeout => 3);
    ok($ok, 'within the flush interval every request is counted');
    is(counted('user', 'bat', 'tokin'), $IN * ($n + 1), 'user tokin exact');
    is(counted('group', 'gb', 'tokout'), $OUT * ($n + 1), 'group tokout exact');
    is(counted('total', 'all', 'cost'), ($IN + $OUT) * ($n + 1), 'total cost exact');
    is(counted('model', 'mock/gpt-4o-mini', 'req'), $n + 1, 'model requests exact');
    is(counted('user', 'bat', 'req'), $n + 1, 'user requests exact (counted at admission)');
    my $u = GwMeter::row(GwMeter::usage($ng), user => 'bat');
    is($u->{tokensOutPerDay}, $OUT * ($n + 1), 'the usage API shows them');
    my $calls = $rd->calls('evalsha');
    my $accounting = $calls - $n;   # one admission script call per request
    # (24 answers within 300 ms of the first: a loaded machine may spread
    # them over a few batches, never one per request.)
    cmp_ok($accounting, '<=', 6, "$n requests accounted in $accounting script calls");
    cmp_ok($accounting, '>=', 1, 'and accounted at all');
    # The admissions write bat's req in 4 windows; the accounting, 68
    # counters per call (tokens and cost of bat, and req too of the group
    # and total, which no request limit reads; model; provider attempts).
    my $incrby = $rd->calls('incrby') - 4 * $n;
    cmp_ok($incrby, '<=', 68 * $accounting, "the accounting wrote $incrby counters (not " . 68 * $n . ')');
    diag("$n concurrent requests: $accounting accounting calls, $incrby counter increments");
    is(GwMeter::log_lines($ng, qr/limit store .* failed|accounting dropped/), 0, 'no store failure, nothing dropped');
    $ng->stop;
};

subtest 'default: one request alone is written at once' => sub {
    $rd->cli('FLUSHALL');
    my $ng = gateway();
    GwMeter::wait_second_below(55);
    prime();
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, 'request 200');
    my $t0 = Time::HiRes::time();
    ok(Gw::wait_until(sub { counted('user', 'bat', 'tokout') == $OUT }, timeout => 2, interval => 0.005),
       sprintf 'counted %.0f ms after the answer', 1000 * (Time::HiRes::time() - $t0));
    cmp_ok(Time::HiRes::time() - $t0, '<', 0.5, 'without waiting for a timer');
    $ng->stop;
};

subtest 'flush=1s: written after the interval, not before' => sub {
    $rd->cli('FLUSHALL');
    my $ng = gateway(store => 'flush=1s');
    GwMeter::wait_second_below(55);
    prime();
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, 'request 200');
    my $t0 = Time::HiRes::time();
    is(counted('user', 'bat', 'tokout'), 0, 'not yet written just after the answer');
    is(counted('user', 'bat', 'req'), 1, 'the admission itself is not delayed');
    ok(Gw::wait_until(sub { counted('user', 'bat', 'tokout') == $OUT }, timeout => 3, interval => 0.02),
       'written within the interval');
    my $dt = Time::HiRes::time() - $t0;
    cmp_ok($dt, '>', 0.7, sprintf 'after about one second (%.2f s)', $dt);
    $ng->stop;
};

# ------------------------------------------------- no request limit, no call

subtest 'no request limit: admitted without a store call, counted with the accounting' => sub {
    $rd->cli('FLUSHALL');
    my $ng = gateway();
    GwMeter::wait_second_below(55);
    prime();
    is(GwMeter::chat($ng, 'sk-free-84')->{status}, 200, 'warm-up 200');
    ok(Gw::wait_until(sub { counted('user', 'free', 'req') == 1 }, timeout => 2), 'warm-up counted');
    $rd->cli('CONFIG', 'RESETSTAT');
    my $n = 5;
    is(GwMeter::chat($ng, 'sk-free-84')->{status}, 200, "request $_ 200") for 1 .. $n;
    ok(Gw::wait_until(sub { counted('total', 'all', 'req') == $n + 1 }, timeout => 2, interval => 0.01),
       'total requests exact');
    is(counted('user', 'free', 'req'), $n + 1, 'user requests exact');
    is(counted('group', 'gf', 'req'), $n + 1, 'group requests exact');
    is(counted('user', 'free', 'tokout'), ($n + 1) * $OUT, 'user tokout exact');
    is($rd->calls('evalsha'), $n, "$n script calls for $n requests: the accounting's only");
    my $row = GwMeter::row(GwMeter::usage($ng), user => 'free');
    is($row->{requestsPerDay}, $n + 1, 'the usage API shows them');
    $ng->stop;

    # fail_open=off keeps the admission call: it is what refuses requests
    # while the store is down.
    $rd->cli('FLUSHALL');
    my $closed = gateway(store => 'fail_open=off');
    is(GwMeter::chat($closed, 'sk-free-84')->{status}, 200, 'fail_open=off: warm-up 200');
    ok(Gw::wait_until(sub { counted('user', 'free', 'tokout') == $OUT }, timeout => 2), 'warm-up accounted');
    $rd->cli('CONFIG', 'RESETSTAT');
    is(GwMeter::chat($closed, 'sk-free-84')->{status}, 200, "fail_open=off: request $_ 200") for 1 .. $n;
    ok(Gw::wait_until(sub { counted('user', 'free', 'tokout') == ($n + 1) * $OUT }, timeout => 2), 'accounted');
    is($rd->calls('evalsha'), 2 * $n, "fail_open=off: $n admission and $n accounting calls");
    is(counted('user', 'free', 'req'), $n + 1, 'fail_open=off: user requests exact');
    $closed->stop;
};

# ------------------------------------------- limits hold under batching

# Two replicas of two workers each on one Redis, 200 requests at once:
# requests_per_minute=50 admits exactly 50 (the request counts of a limited
# scope stay in the admission); in reserve mode a token budget of 50 worst
# cases is never overspent; after one flush the counters equal what the
# provider answered.
subtest 'a burst of 200 across two replicas: no limit exceeded, counts exact' => sub {
    my $MAXT = 20;
    my $BODY = '{"model":"gpt-4o-mini","max_tokens":' . $MAXT . ',"messages":[{"role":"user","content":"hi"}]}';
    my $W = int((length($BODY) + 3) / 4) + $MAXT;   # a request's worst case in tokens
    for my $mode ('check', 'reserve') {
        $rd->cli('FLUSHALL');
        my $user = $mode eq 'check'
            ? 'llm_gateway_user bat key=sk-bat-84 group=gb requests_per_minute=50;'
            : 'llm_gateway_user bat key=sk-bat-84 group=gb tokens_per_day=' . (50 * $W) . ';';
        my $conf = GwMeter::conf(users => [$user],
            http => "llm_gateway_price mock/gpt-4o-mini input=1 output=1;\n"
                  . ($mode eq 'reserve' ? "llm_gateway_budget_mode reserve;\n" : '')
                  . "llm_gateway_store redis://127.0.0.1:%%RPORT%%;\n");
        my @ngs = map { Gw::Nginx->start(workers => 2, conf => $conf, vars => { MOCK => $mock->port, RPORT => $rd->port }) }
                  1 .. 2;
        GwMeter::wait_second_below(45);
        # The provider holds every answer 3 s: all 200 are admitted or
        # refused before any settles.
        prime(delay_ms => 3000);
        my @st = Gw::parallel(200, sub {
            my ($i) = @_;
            Gw::http(POST => $ngs[$i % 2]->url('/v1/chat/completions'), body => $BODY, timeout => 30,
                     headers => { Authorization => 'Bearer sk-bat-84', 'Content-Type' => 'application/json' })->{status};
        }, timeout => 90);
        my $ok = scalar grep { $_ == 200 } @st;
        my $no = scalar grep { $_ == 429 } @st;
        is($ok + $no, 200, "$mode: every request answered 200 or 429");
        my $served = scalar @{ $mock->requests };
        is($served, $ok, "$mode: the provider saw exactly the $ok admitted");
        if ($mode eq 'check') {
            is($ok, 50, 'check: requests_per_minute=50 admitted exactly 50 of 200');
        } else {
            cmp_ok($ok, '<=', 50, "reserve: $ok admitted, their worst cases within the budget of 50");
            # Four workers' leases may each hold part of the headroom unused
            # while the burst lasts (docs/metering.md#leases-redis): at most
            # an eighth of it each.
            cmp_ok($ok, '>=', 25, "reserve: and the budget was used ($ok of 50 worst cases)");
            diag("reserve mode: $ok of 200 admitted against a budget of 50 worst cases");
        }
        ok(Gw::wait_until(sub { counted('user', 'bat', 'tokout') == $OUT * $ok }, timeout => 3),
           "$mode: tokens counted exactly after the flush");
        is(counted('user', 'bat', 'req'), $ok, "$mode: user requests exact");
        ok(Gw::wait_until(sub { counted('total', 'all', 'req') == $ok }, timeout => 3),
           "$mode: total requests exact (written with the accounting)");
        is(counted('user', 'bat', 'rej'), $no, "$mode: rejections exact");
        is(counted('model', 'mock/gpt-4o-mini', 'tokin'), $IN * $ok, "$mode: model tokens exact");
        if ($mode eq 'reserve') {
            ok(Gw::wait_until(sub {
                my %h = @{ [ split /\n/, $rd->cli('HGETALL', 'llmgw:user:bat:rsv') ] };
                !grep { $_ != 0 } values %h;
            }, timeout => 5), 'reserve: nothing stays reserved once all have settled');
        }
        $_->stop for @ngs;
    }
};

# ------------------------------------------------------------- worker exit

subtest 'a pending batch is written before the worker exits: quit and reload' => sub {
    $rd->cli('FLUSHALL');
    my $ng = gateway(store => 'flush=1s');
    GwMeter::wait_second_below(50);
    prime();
    # One request, then the check at once: pending while within flush=1s of
    # the request (on a machine so loaded that the check came later, the
    # timer may have written it: then exactly once).
    my $t0 = Time::HiRes::time();
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, 'request 1 200');
    my $seen = counted('user', 'bat', 'tokout');
    my $late = Time::HiRes::time() - $t0 >= 0.9;
    ok($seen == 0 || ($late && $seen == $OUT), sprintf('pending: not yet in Redis (%s, %.2f s after the request)',
                                                     $seen, Time::HiRes::time() - $t0));
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, "request $_ 200") for 2 .. 3;
    my @old = $ng->worker_pids;
    ok($ng->reload, 'reload');
    ok(Gw::wait_until(sub { !grep { Gw::_alive($_) } @old }, timeout => 5), 'the old worker exited');
    is(counted('user', 'bat', 'tokout'), 3 * $OUT, 'its batch was written before it exited');
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, "request $_ on the new worker 200") for 4 .. 5;
    my $master = $ng->master_pid;
    kill 'QUIT', $master;
    ok(Gw::wait_until(sub { !Gw::_alive($master) }, timeout => 5), 'nginx quit');
    is(counted('user', 'bat', 'tokout'), 5 * $OUT, 'the new worker\'s batch was written before it exited');
    is(counted('group', 'gb', 'tokin'), 5 * $IN, 'group tokin exact');
    is(GwMeter::log_lines($ng, qr/limit store .* failed|accounting dropped/), 0, 'no store failure, nothing dropped');
    $ng->stop;
};

# ------------------------------------------------------------ failed flush

subtest 'fail_open=on: a batch the store does not take is counted once in shared memory' => sub {
    my $r2 = GwRedis->start();
    # 20 tokens a day: one request (12) fits, two (24) do not.
    my $ng = gateway(store => 'flush=1s fail_open=on', rport => $r2->port,
                     user => 'llm_gateway_user bat key=sk-bat-84 group=gb tokens_per_day=20;');
    $ng->allow_log(qr/limit store .* failed/);
    GwMeter::wait_second_below(45);
    prime();
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, 'request 1 (admitted by Redis): 200');
    $r2->kill9;
    Time::HiRes::sleep(1.5);   # past the flush interval: the batch was tried
    is(scalar(GwMeter::log_lines($ng, qr/limit store .* failed/)), 1, 'the flush failed: the latch opened');
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, 'request 2 (shared memory: 12 of 20 spent): 200');
    my $r3 = GwMeter::chat($ng, 'sk-bat-84');
    is($r3->{status}, 429, 'request 3: 429, request 1 and 2 were counted in shared memory (24 of 20)');
    is(GwMeter::log_lines($ng, qr/accounting dropped/), 0, 'nothing dropped');
    $ng->stop;
    $r2->stop;
};

# A request admitted in shared memory while the latch was open, settled
# after its 5 s: its accounting joins the batch without taking the latch's
# probe, which the batch's own call takes when it is written. (Taken by the
# settle and then not used, the probe was lost and the latch stayed open
# for 30 s after the store came back.)
subtest 'a settle after the latch\'s 5 s leaves the probe to the batch\'s call' => sub {
    my $r2 = GwRedis->start();
    my $ng = gateway(store => 'flush=1s', rport => $r2->port);
    $ng->allow_log(qr/limit store .* failed/);
    GwMeter::wait_second_below(30);
    $mock->reset;
    $mock->script(answer(times => 1), answer(delay_ms => 6000, times => 1), answer(times => 1000));
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, 'store up: 200');
    $r2->kill9;
    my $t_kill = Time::HiRes::time();
    my $pid = fork // die "fork: $!";
    if (!$pid) { my $r = GwMeter::chat($ng, 'sk-bat-84', timeout => 20); POSIX::_exit($r->{status} == 200 ? 0 : 1) }
    ok(scalar(@{ $mock->wait_requests(2, timeout => 5) }) >= 2, 'a request admitted in shared memory, held 6 s by the provider');
    Time::HiRes::sleep(5.5 - (Time::HiRes::time() - $t_kill));
    $r2->restart;
    waitpid($pid, 0);
    is($? >> 8, 0, 'it was answered 200 after the latch\'s 5 s');
    # Its batch is written after the flush interval (1 s) by a call that takes
    # the probe: wait until that call's counts are in the store (a fixed
    # wait ran out on a loaded machine), then let its reply close the latch.
    ok(Gw::wait_until(sub { $r2->get_num(key_of('user', 'bat', 'tokout')) > 0 }, timeout => 6, interval => 0.05),
       'the held request\'s batch reached the store');
    Time::HiRes::sleep(0.2);
    my $before = $r2->get_num(key_of('user', 'bat', 'req'));
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, 'the next request: 200');
    ok(Gw::wait_until(sub { $r2->get_num(key_of('user', 'bat', 'req')) > $before }, timeout => 3, interval => 0.05),
       'counted in Redis again: the latch closed with the batch\'s probe');
    $ng->stop;
    $r2->stop;
};

subtest 'fail_open=off: a batch the store does not take is dropped, logged per request' => sub {
    my $r2 = GwRedis->start();
    my $ng = gateway(store => 'flush=1s fail_open=off', rport => $r2->port);
    $ng->allow_log(qr/limit store .* failed/, qr/accounting dropped/);
    GwMeter::wait_second_below(50);
    prime();
    is(GwMeter::chat($ng, 'sk-bat-84')->{status}, 200, "request $_: 200") for 1 .. 2;
    $r2->kill9;
    ok(Gw::wait_until(sub { GwMeter::log_lines($ng, qr/accounting dropped/) >= 2 }, timeout => 4, interval => 0.05),
       'the flush failed');
    my @lines = GwMeter::log_lines($ng, qr/accounting dropped/);
    is(scalar @lines, 2, 'one line per request of the batch');
    like($lines[0] // '', qr/\[error\] .*llm_gateway: accounting dropped: the limit store is unavailable; sample dropped/,
         'the line says why');
    $ng->stop;
    $r2->stop;
};

# ------------------------------------------------------------------ config

subtest 'flush= is checked by nginx -t' => sub {
    for my $case (['flush=2s', qr/llm_gateway_store: flush= must be a time from 0 to 1s \(e\.g\. flush=10ms\), not "2s"/],
                  ['flush=soon', qr/flush= must be a time from 0 to 1s \(e\.g\. flush=10ms\), not "soon"/]) {
        my ($rc, $out, $file) = Gw::nginx_t(conf(store => $case->[0]), vars => { MOCK => 1, RPORT => 1 });
        isnt($rc, 0, "$case->[0]: nginx -t fails");
        like($out, $case->[1], "$case->[0]: the sentence says why");
        like($out, qr/ in \Q$file\E:\d+/, "$case->[0]: file and line");
    }
    my ($rc, $out) = Gw::nginx_t(conf(store => 'flush=0 fail_open=on'), vars => { MOCK => 1, RPORT => 1 });
    is($rc, 0, 'flush=0: accepted') or diag($out);
};

$rd->stop;
$mock->stop;
done_testing;
