# A store that misbehaves, and inputs that would grow or overflow it, one
# row per case:
#   - replies delayed past the 2 s time-out (fail_open=on): the requests are
#     admitted and counted in shared memory, and the store calls that timed
#     out are cancelled in Redis (their late runs undone), so Redis counts
#     none of them; after recovery every request is counted in Redis;
#   - redis-server stopped (SIGSTOP) and continued (SIGCONT): the same;
#   - a counter near 2^63: the accounting script saturates at the maximum
#     instead of failing (INCRBY refuses to overflow);
#   - thousands of made-up model names: Redis keeps counters for at most
#     1000 statistics ids (model and provider-model), the rest count as
#     "<provider>/other".
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use GwRedis;
use Test::More;
use Time::HiRes ();

Gw::need_module();
GwRedis::need_redis();

my $mock = Gw::Mock->start();
my @USERS = ('llm_gateway_user alice key=sk-alice-53 group=eng;', 'llm_gateway_user bob key=sk-bob-53 group=eng;');

sub gateway {
    my ($port, $extra) = @_;
    return Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port },
                            conf => GwMeter::conf(users => \@USERS,
                                                  http => "llm_gateway_store redis://127.0.0.1:$port $extra;\n"));
}

sub redis_day { my ($rd, $kind, $id, $metric) = @_; return $rd->get_num(GwRedis::key($kind, $id, $metric, 'day', time)) }

# Waits until the worker's latch has closed again: the admin usage read
# answers 200 only from the store.
sub wait_store_back {
    my ($ng) = @_;
    return Gw::wait_until(sub { GwMeter::usage($ng) }, timeout => 15, interval => 0.5);
}

# Sends $n requests of alice, one at a time; the statuses.
sub send_n { my ($ng, $n, $gap) = @_; my @s; for (1 .. $n) { push @s, GwMeter::chat($ng, 'sk-alice-53')->{status}; Time::HiRes::sleep($gap) if $gap } return @s }

my @OUTAGES = (
    {
        name => 'replies delayed 3 s through a proxy',
        outage => sub { my ($rd, $px) = @_; $px->set_delay(3000) },
        recover => sub { my ($rd, $px) = @_; $px->set_delay(0) },
    },
    {
        name => 'redis-server stopped (SIGSTOP) then continued (SIGCONT)',
        outage => sub { my ($rd) = @_; kill 'STOP', $rd->pid },
        recover => sub { my ($rd) = @_; kill 'CONT', $rd->pid },
    },
);

for my $row (@OUTAGES) {
    subtest "fail-open, $row->{name}: counted once, where admitted" => sub {
        my $rd = GwRedis->start();
        my $px = GwRedis::Proxy->start(target => $rd->port);
        my $ng = gateway($px->port, 'fail_open=on');
        # not across a UTC midnight (the day counters)
        Time::HiRes::sleep(86400 - time % 86400 + 1) if time % 86400 > 86400 - 60;
        is_deeply([send_n($ng, 2)], [200, 200], 'store up: 2 x 200');
        ok(Gw::wait_until(sub { redis_day($rd, 'user', 'alice', 'tokout') == 14 }, timeout => 5), 'counted in Redis: 2');

        my $scripts = sub { scalar grep { $_ eq 'EVALSHA' || $_ eq 'EVAL' } map { @$_ } @{ $px->stats->{bursts} } };
        my $before = $scripts->();
        $row->{outage}->($rd, $px);
        my $t0 = Time::HiRes::time();
        my @st;
        push @st, send_n($ng, 1, 0.3) while Time::HiRes::time() - $t0 < 8 && @st < 40;
        is_deeply([grep { $_ != 200 } @st], [], scalar(@st) . ' requests during the outage: all 200 (from shared memory)');
        my $during = $scripts->() - $before;
        cmp_ok($during, '>=', 1, "the store received $during script call(s) during the outage, none answered in time");
        $row->{recover}->($rd, $px);
        Time::HiRes::sleep(3.5);    # the late replies arrive, or the stopped server runs what it had received
        ok(wait_store_back($ng), 'the store is back (admin usage answers)');
        ok(Gw::wait_until(sub { redis_day($rd, 'user', 'alice', 'req') == 2 }, timeout => 10),
           'Redis: the requests of the outage were cancelled there (req:day back to 2)')
            or diag('req:day = ' . redis_day($rd, 'user', 'alice', 'req'));
        is(redis_day($rd, 'user', 'alice', 'tokout'), 14, 'Redis: tokout:day 14 (no accounting of the outage)');

        is_deeply([send_n($ng, 10)], [(200) x 10], 'after recovery: 10 x 200');
        ok(Gw::wait_until(sub { redis_day($rd, 'user', 'alice', 'tokout') == 7 * 12 }, timeout => 5),
           'Redis counts every request after recovery: tokout:day 84')
            or diag('tokout:day = ' . redis_day($rd, 'user', 'alice', 'tokout'));
        is(redis_day($rd, 'user', 'alice', 'req'), 12, 'Redis: req:day 12');
        is(redis_day($rd, 'total', 'all', 'req'), 12, 'Redis: total req:day 12');
        my $u = GwMeter::usage($ng);
        is((GwMeter::row($u, user => 'alice') || {})->{requestsPerDay}, 12, 'admin usage: 12');
        $ng->stop;
        $px->stop;
        $rd->stop;
    };
}

# ============================================================ counters near 2^63

subtest 'a counter near 2^63 saturates in the accounting script' => sub {
    my $rd = GwRedis->start();
    my $ng = gateway($rd->port, '');
    my $key = GwRedis::key('user', 'alice', 'tokout', 'day', time);
    $rd->cli('SET', $key, '9223372036854775805');
    is(GwMeter::chat($ng, 'sk-alice-53')->{status}, 200, 'a request: 200');
    ok(Gw::wait_until(sub { redis_day($rd, 'model', 'mock/gpt-4o-mini', 'req') == 1 }, timeout => 5),
       'the rest of the accounting was written (model req:day 1)');
    is($rd->get_num($key), '9223372036854775807', 'user tokout:day saturated at 2^63-1');
    is(redis_day($rd, 'total', 'all', 'tokout'), 7, 'total tokout:day 7');
    is(scalar GwMeter::log_lines($ng, qr/limit store/), 0, 'no store failure');
    $ng->stop;
    $rd->stop;
};

# ====================================================== made-up model names

subtest 'thousands of made-up model names: Redis keeps at most 1000 statistics ids' => sub {
    my $rd = GwRedis->start();
    my $ng = gateway($rd->port, '');
    my $n = 1100;
    my %st;
    $st{ GwMeter::chat($ng, 'sk-bob-53', model => sprintf('m-%05d', $_))->{status} }++ for 1 .. $n;
    is_deeply(\%st, { 200 => $n }, "$n requests served");
    ok(Gw::wait_until(sub { redis_day($rd, 'user', 'bob', 'tokout') == 7 * $n }, timeout => 10), 'all accounted');
    is($rd->cli('SCARD', 'llmgw:stats:ids'), 1000, 'the id set holds 1000 members (model and provmodel of 500 names)');
    my @model_keys = grep { length } split /\n/, $rd->cli('KEYS', 'llmgw:model:*:req:day:*');
    is(scalar @model_keys, 501, 'model req:day keys: 500 names and mock/other');
    is(redis_day($rd, 'model', 'mock/other', 'req'), $n - 500, 'mock/other counts the other 600');
    is(redis_day($rd, 'provmodel', 'mock/other', 'att'), $n - 500, 'provmodel mock/other: 600 attempts');
    is(redis_day($rd, 'model', 'mock/m-00001', 'req'), 1, 'a known name keeps its own counter');
    is(GwMeter::chat($ng, 'sk-bob-53', model => 'm-00002')->{status}, 200, 'a known name again');
    ok(Gw::wait_until(sub { redis_day($rd, 'model', 'mock/m-00002', 'req') == 2 }, timeout => 5), 'counted as itself');
    my $ttl = $rd->cli('TTL', 'llmgw:stats:ids');
    ok($ttl > 34 * 86400 && $ttl <= 35 * 86400, "the id set expires within 35 days ($ttl s)");
    $ng->stop;
    $rd->stop;
};

$mock->stop;
done_testing;
