# The Redis counter store, plain (no password, no TLS): counters land in
# the selected database under the exact keys with their TTLs, limits hold
# exactly under concurrency, the admin usage endpoint reads Redis, the
# admission script survives SCRIPT FLUSH (NOSCRIPT -> EVAL), and a metered
# request costs at most two round trips (EVALSHA, then one pipelined
# INCRBY/EXPIRE batch), measured with a counting proxy and INFO commandstats.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use GwRedis;
use Test::More;
use List::Util ();
use POSIX ();

Gw::need_module();
GwRedis::need_redis();

my @SCOPES = (['user', 'alice'], ['group', 'eng'], ['total', 'all']);
my @WINDOWS = qw(min hour day month);

# Per successful gpt-4o-mini request of the mock: 11 prompt, 7 completion
# tokens, 6 micro-USD.
my %PER = (req => 1, tokin => 11, tokout => 7, cost => 6);

my $mock = Gw::Mock->start();
my $rd = GwRedis->start();

my $conf = GwMeter::conf(
    groups => ['llm_gateway_group grpm;'],
    users  => [
        'llm_gateway_user alice key=sk-alice-40 group=eng;',
        'llm_gateway_user bob key=sk-bob-40 group=eng;',
        'llm_gateway_user rpm key=sk-rpm-40 group=grpm requests_per_minute=5;',
        'llm_gateway_user ns key=sk-ns-40 group=gns requests_per_day=1000;',   # a limit: its admission runs the script
    ],
    http => "llm_gateway_store redis://127.0.0.1:%%RPORT%%/3;\nllm_gateway_replica r40;\n",
);
my $ng = Gw::Nginx->start(workers => 2, conf => $conf, vars => { MOCK => $mock->port, RPORT => $rd->port });

sub db3 { $rd->get_num($_[0], 3) }

sub no_latch_lines {
    my ($name) = @_;
    my @l = GwMeter::log_lines($ng, qr/llm_gateway: limit store .* failed/);
    is_deeply(\@l, [], $name);
}

# ------------------------------------------------------------ counting

GwMeter::wait_second_below(40);
my $t_req = time;
subtest 'three requests are counted in Redis db 3 under the exact keys' => sub {
    for my $i (1 .. 3) {
        my $r = GwMeter::chat($ng, 'sk-alice-40');
        is($r->{status}, 200, "request $i: 200") or diag($r->{body});
        is_deeply($r->{json}{usage}, { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18 },
                  "request $i: mock usage 11/7");
    }
    # Accounting is written after the response: wait for the last batch.
    my $k_last = GwRedis::key('model', 'mock/gpt-4o-mini', 'cost', 'month', $t_req);
    ok(Gw::wait_until(sub { db3($k_last) == 18 }, timeout => 5, interval => 0.05),
       "accounting reached Redis ($k_last = 18)") or diag('got ' . db3($k_last));

    my (%want, %got);
    for my $s (@SCOPES) {
        for my $m (qw(req tokin tokout cost)) {
            for my $w (@WINDOWS) {
                my $k = GwRedis::key(@$s, $m, $w, $t_req);
                $want{$k} = 3 * $PER{$m};
                $got{$k} = db3($k);
            }
        }
    }
    for my $m (qw(req tokin tokout cost)) {
        for my $w (@WINDOWS) {
            my $k = GwRedis::key('model', 'mock/gpt-4o-mini', $m, $w, $t_req);
            $want{$k} = 3 * $PER{$m};
            $got{$k} = db3($k);
        }
    }
    for my $p (['prov', 'mock'], ['provmodel', 'mock/gpt-4o-mini']) {
        for my $w (@WINDOWS) {
            my $k = GwRedis::key(@$p, 'att', $w, $t_req);
            $want{$k} = 3;
            $got{$k} = db3($k);
        }
    }
    is_deeply(\%got, \%want, 'every counter (user, group, total, model, provider) equals 3 requests x 1 / 11 / 7 / 6');
    is(db3(GwRedis::key('user', 'alice', 'rej', 'day', $t_req)), 0, 'no rejection counted');
};

subtest 'TTLs are set on the Redis keys' => sub {
    for my $w (@WINDOWS) {
        my $k = GwRedis::key('user', 'alice', 'req', $w, $t_req);
        my $ttl = $rd->cli_db(3, 'TTL', $k);
        my $max = $GwRedis::TTL{$w};
        my $min = $w eq 'min' ? 1 : $max - 60;
        ok($ttl =~ /^\d+$/ && $ttl >= $min && $ttl <= $max, "TTL of the $w key in [$min, $max]")
            or diag("TTL $k = $ttl");
        my $k2 = GwRedis::key('user', 'alice', 'tokin', $w, $t_req);
        my $ttl2 = $rd->cli_db(3, 'TTL', $k2);
        ok($ttl2 =~ /^\d+$/ && $ttl2 >= $min && $ttl2 <= $max, "TTL of the $w tokin key in [$min, $max]")
            or diag("TTL $k2 = $ttl2");
    }
    my $seen = $rd->cli_db(3, 'GET', 'llmgw:user:alice:seen');
    # (stamped when the requests came: after $t_req, before now)
    ok($seen =~ /^\d+$/ && $seen >= $t_req && $seen <= time, 'last-seen of alice is the time of her requests (epoch seconds)')
        or diag("seen=$seen t_req=$t_req now=" . time);
    my $ttl = $rd->cli_db(3, 'TTL', 'llmgw:user:alice:seen');
    ok($ttl > 399 * 86400 && $ttl <= 400 * 86400, 'last-seen TTL 400 d') or diag("ttl=$ttl");
};

subtest 'keys land in db 3 and not in db 0' => sub {
    my $k = GwRedis::key('user', 'alice', 'req', 'day', $t_req);
    is($rd->cli_db(0, 'EXISTS', $k), 0, "$k absent from db 0");
    is($rd->cli_db(0, 'DBSIZE'), 0, 'db 0 is empty');
    my @keys3 = split /\n/, $rd->cli_db(3, 'KEYS', 'llmgw:*');
    ok(@keys3 > 50, scalar(@keys3) . ' llmgw keys in db 3');
    is_deeply([grep { !/^llmgw:/ } split /\n/, $rd->cli_db(3, 'KEYS', '*')], [], 'only llmgw: keys in db 3');
};

# ------------------------------------------------- exact limit in Redis

subtest 'requests_per_minute=5 holds exactly under 40 parallel requests' => sub {
    GwMeter::wait_second_below(40);
    $mock->clear;
    my $t = time;
    my @res = Gw::parallel(40, sub {
        my $r = GwMeter::chat($ng, 'sk-rpm-40');
        return { status => $r->{status}, code => ($r->{json} && $r->{json}{error} ? $r->{json}{error}{code} : undef),
                 retry => $r->{headers}{'retry-after'} };
    }, timeout => 60);
    my $ok = grep { $_->{status} == 200 } @res;
    my @rej = grep { $_->{status} == 429 } @res;
    is($ok, 5, 'exactly 5 x 200');
    is(scalar @rej, 35, 'exactly 35 x 429');
    is(scalar(grep { ($_->{code} // '') eq 'rate_limit_exceeded' } @rej), 35, 'all 429 are rate_limit_exceeded');
    is(scalar(grep { defined $_->{retry} && $_->{retry} =~ /^\d+$/ && $_->{retry} >= 1 && $_->{retry} <= 60 } @rej),
       35, 'all 429 carry Retry-After 1..60');
    is(scalar @{ $mock->wait_requests(5) }, 5, 'the mock saw exactly 5 requests');
    is(db3(GwRedis::key('user', 'rpm', 'req', 'min', $t)), 5, 'Redis: rpm req:min = 5');
    is(db3(GwRedis::key('user', 'rpm', 'rej', 'day', $t)), 35, 'Redis: rpm rej:day = 35');
    is(db3(GwRedis::key('group', 'grpm', 'req', 'min', $t)), 5, 'Redis: group grpm req:min = 5');
    is(db3(GwRedis::key('group', 'grpm', 'rej', 'day', $t)), 35, 'Redis: group grpm rej:day = 35');
    is(db3(GwRedis::key('total', 'all', 'rej', 'day', $t)), 35, 'Redis: total rej:day = 35');
    ok(Gw::wait_until(sub { db3(GwRedis::key('user', 'rpm', 'tokin', 'day', $t)) == 55 }, timeout => 5),
       'Redis: rpm tokin:day = 55 (5 x 11)');
};

# --------------------------------------------- usage endpoint from Redis

my %FIELD = (
    requestsPerMinute   => ['req', 'min'],
    requestsPerDay      => ['req', 'day'],
    tokensInPerDay      => ['tokin', 'day'],
    tokensOutPerDay     => ['tokout', 'day'],
    tokensInPerMonth    => ['tokin', 'month'],
    tokensOutPerMonth   => ['tokout', 'month'],
    costPerDayMicroUsd  => ['cost', 'day'],
    costPerMonthMicroUsd => ['cost', 'month'],
    rejectionsPerDay    => ['rej', 'day'],
);

subtest 'the usage endpoint reads its numbers from Redis' => sub {
    GwMeter::wait_second_below(50);
    my $t = time;
    my $u = GwMeter::usage($ng);
    ok($u, 'usage 200') or return diag($GwMeter::LAST->{status} . ' ' . $GwMeter::LAST->{body});
    is($u->{replica}, 'r40', 'replica r40');
    for my $s (['user', 'alice'], ['user', 'rpm'], ['group', 'eng'], ['group', 'grpm'], ['total', 'all']) {
        my $row = GwMeter::row($u, @$s);
        ok($row, "row $s->[0] $s->[1]") or next;
        my (%got, %want);
        for my $f (sort keys %FIELD) {
            $got{$f} = $row->{$f};
            $want{$f} = db3(GwRedis::key(@$s, @{ $FIELD{$f} }, $t)) + 0;
        }
        is_deeply(\%got, \%want, "$s->[0] $s->[1]: every field equals redis-cli GET");
    }
    is(GwMeter::row($u, user => 'alice')->{requestsPerDay}, 3, 'alice requestsPerDay 3');
    is(GwMeter::row($u, user => 'rpm')->{rejectionsPerDay}, 35, 'rpm rejectionsPerDay 35');
    is(GwMeter::row($u, total => 'all')->{requestsPerDay}, 8, 'total requestsPerDay 8 (admin traffic not in total)');

    # A value written into Redis by someone else (another replica) shows up.
    my $kb = GwRedis::key('user', 'bob', 'req', 'day', $t);
    is($rd->cli_db(3, 'INCRBY', $kb, 42), 42, 'INCRBY bob req:day 42 in Redis');
    my $kt = GwRedis::key('user', 'bob', 'tokout', 'month', $t);
    $rd->cli_db(3, 'INCRBY', $kt, 1234567);
    my $u2 = GwMeter::usage($ng);
    is(GwMeter::row($u2, user => 'bob')->{requestsPerDay}, 42, 'bob requestsPerDay 42, from Redis');
    is(GwMeter::row($u2, user => 'bob')->{tokensOutPerMonth}, 1234567, 'bob tokensOutPerMonth 1234567, from Redis');
    my $seen = GwMeter::row($u2, user => 'alice')->{lastSeen};
    like($seen // '', qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'alice lastSeen from the Redis stamp');
};

# --------------------------------------------------------------- NOSCRIPT

subtest 'SCRIPT FLUSH: the next admission falls back to EVAL and counts' => sub {
    my $before = $rd->commandstats;
    is($rd->cli('SCRIPT', 'FLUSH'), 'OK', 'SCRIPT FLUSH');
    my $t = time;
    my $r = GwMeter::chat($ng, 'sk-ns-40');
    is($r->{status}, 200, 'request after the flush: 200') or diag($r->{body});
    my $mid = $rd->commandstats;
    # The admission and the accounting script were both flushed: each is sent
    # whole once, after its NOSCRIPT reply.
    is($rd->calls('eval', $mid) - $rd->calls('eval', $before), 2,
       'exactly two EVALs (admission and accounting, after their NOSCRIPT replies)');
    my $r2 = GwMeter::chat($ng, 'sk-ns-40');
    is($r2->{status}, 200, 'second request: 200');
    my $after = $rd->commandstats;
    is($rd->calls('eval', $after) - $rd->calls('eval', $mid), 0, 'the second one needs no EVAL (script cached again)');
    ok($rd->calls('evalsha', $after) - $rd->calls('evalsha', $mid) >= 1, 'the second one used EVALSHA');
    is(db3(GwRedis::key('user', 'ns', 'req', 'day', $t)), 2, 'Redis: ns req:day = 2');
    is(db3(GwRedis::key('group', 'gns', 'req', 'day', $t)), 2, 'Redis: gns req:day = 2');
    no_latch_lines('NOSCRIPT is not a store failure: no latch line');
};

no_latch_lines('no store failure logged in the whole run');
$ng->stop;

# ---------------------------------------------- round trips per request

subtest 'round trips per metered request (counting proxy + commandstats)' => sub {
    my $rd2 = GwRedis->start();
    my $px = GwRedis::Proxy->start(target => $rd2->port);
    my $ng2 = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port, PX => $px->port },
        conf => GwMeter::conf(users => ['llm_gateway_user carl key=sk-carl-40 group=eng;'],
                              http => "llm_gateway_store redis://127.0.0.1:%%PX%%;\n"));
    # Warm-up: a worker's new connection loads both scripts (SCRIPT LOAD,
    # pipelined after the handshake), so even the first admission and the
    # first accounting on a fresh server are one EVALSHA each, never a
    # NOSCRIPT round trip after the client has its answer.
    my $t0 = time;
    is(GwMeter::chat($ng2, 'sk-carl-40')->{status}, 200, 'warm-up request 200');
    ok(Gw::wait_until(sub { $rd2->get_num(GwRedis::key('user', 'carl', 'tokout', 'day', $t0)) == 7 }, timeout => 5),
       'warm-up accounted');
    Time::HiRes::sleep(0.3);
    my $s0 = $px->stats;
    my $c0 = $rd2->commandstats;
    is($rd2->calls('eval', $c0), 0, 'warm-up: no EVAL (the scripts were loaded as the connection opened)');
    # carl has no request limit: his admission needs no store call (its
    # request counts go with the accounting), docs/store.md#accounting-batches
    is($rd2->calls('evalsha', $c0), 1, 'warm-up: one EVALSHA (the accounting; the admission had nothing to check)');
    is($rd2->calls('script|load', $c0), 2 * $s0->{connections}, 'two SCRIPT LOADs per connection opened');
    is($s0->{bursts}[0][0], 'SCRIPT', "the connection's first command is SCRIPT LOAD")
        or diag(explain($s0->{bursts}[0]));
    my $n = 20;
    my $t_start = time;
    for my $i (1 .. $n) {
        my $r = GwMeter::chat($ng2, 'sk-carl-40');
        is($r->{status}, 200, "request $i 200") or diag($r->{body});
    }
    ok(Gw::wait_until(sub { $rd2->get_num(GwRedis::key('user', 'carl', 'tokout', 'day', $t0)) == 7 * ($n + 1) },
                      timeout => 5), 'all accounted in Redis');
    Time::HiRes::sleep(0.3);
    my $t_end = time;
    my $s1 = $px->stats;
    my $c1 = $rd2->commandstats;
    my @bursts = @{ $s1->{bursts} }[scalar @{ $s0->{bursts} } .. $#{ $s1->{bursts} }];

    # (The counting proxy slows the replies down: a request that settles
    # while the one before is still in flight joins its batch.)
    my $calls = $rd2->calls('evalsha', $c1) - $rd2->calls('evalsha', $c0);
    cmp_ok($calls, '<=', $n, "commandstats: $calls EVALSHA for $n requests, at most one per request");
    cmp_ok($calls, '>=', $n / 2, 'most requests alone in their batch (sequential requests)');
    is($rd2->calls('eval', $c1) - $rd2->calls('eval', $c0), 0, 'commandstats: no EVAL');
    my @non_set = grep { grep { $_ ne 'SET' } @$_ } @bursts;
    my @sets = map { grep { $_ eq 'SET' } @$_ } @bursts;
    diag(sprintf '%d requests: %d round trips (%d without last-seen-only ones), %d SET', $n, scalar @bursts,
         scalar @non_set, scalar @sets);
    cmp_ok(scalar @non_set, '<=', $n, 'at most 1 round trip per metered request without a request limit (last-seen SETs aside)');
    # Each accounting is one EVALSHA of the accounting script carrying its 72
    # counters (req/tokin/tokout/cost x 4 windows x user, group, total = 48,
    # the request counts included since no limit reads them; the same for
    # the model = 16; provider and provider-model attempts x 4 windows = 8).
    # (Consecutive operations may share a round trip when the server has not
    # answered yet; never the other way round.)
    my $K = 72;
    my @evalsha = map { grep { $_ eq 'EVALSHA' } @$_ } @bursts;
    is(scalar @evalsha, $calls, "$calls EVALSHA sent (the accounting)");
    is(scalar(grep { my $b = $_; (grep { $_ eq 'EVALSHA' } @$b) > 1 } @bursts), 0,
       'never more than one request\'s script in one round trip (sequential requests)');
    is(scalar(map { grep { $_ eq 'INCRBY' || $_ eq 'EXPIRE' } @$_ } @bursts), 0,
       'no per-counter commands on the wire: the counters travel inside the script call');
    # commandstats counts the script's own INCRBYs: the 72 counters of each
    # accounting.
    # (A batch whose requests span two minutes writes some counters of both.
    # A batch still in flight when the next request is admitted takes that
    # request's 12 request counts along, which its own call then lacks: 60.)
    my $incrby = $rd2->calls('incrby', $c1) - $rd2->calls('incrby', $c0);
    cmp_ok($incrby, '>=', ($K - 12) * $calls, "commandstats INCRBY: $K (or 60) per accounting call, all inside the script");
    cmp_ok($incrby, '<=', $K * $n, "and at most $K per request ($incrby)");
    my @other = grep { !/^(?:EVALSHA|INCRBY|EXPIRE|SET|SCRIPT)$/ } map { @$_ } @bursts;
    is_deeply(\@other, [], 'no other commands');
    is(scalar(map { grep { $_ eq 'SCRIPT' } @$_ } @bursts), 2 * ($s1->{connections} - $s0->{connections}),
       'SCRIPT LOAD only where a connection opened (the other worker\'s), two each');
    # Last-seen: one SET per scope (user, group) per minute per worker.
    my $minutes = int($t_end / 60) - int($t_start / 60) + 1;
    cmp_ok(scalar @sets, '<=', 2 * 2 * $minutes, "SETs <= 2 scopes x 2 workers x $minutes minute(s)");
    is(GwMeter::log_lines($ng2, qr/limit store .* failed/), 0, 'no store failure');
    $ng2->stop;
    $px->stop;
    $rd2->stop;
};

# A reload or quit lets workers finish their requests: the accounting of a
# request in flight then still reaches Redis (the worker's open connection
# takes it while it shuts down), with no store failure logged.
subtest 'a request in flight when its worker shuts down gracefully is counted in Redis' => sub {
    my $ng3 = Gw::Nginx->start(workers => 1, conf => $conf, vars => { MOCK => $mock->port, RPORT => $rd->port });
    GwMeter::wait_second_below(50);
    my $t = time;
    my $before = db3(GwRedis::key('user', 'bob', 'tokin', 'day', $t));
    $mock->reset;
    $mock->script({ delay_ms => 1500,
                    json => { id => 'chatcmpl-q', object => 'chat.completion', created => 1, model => 'gpt-4o-mini',
                              choices => [{ index => 0, message => { role => 'assistant', content => 'ok' },
                                            finish_reason => 'stop' }],
                              usage => { prompt_tokens => $PER{tokin}, completion_tokens => $PER{tokout},
                                         total_tokens => $PER{tokin} + $PER{tokout} } } });
    my $pid = fork // die "fork: $!";
    if (!$pid) { my $r = GwMeter::chat($ng3, 'sk-bob-40'); POSIX::_exit($r->{status} == 200 ? 0 : 1) }
    ok(scalar(@{ $mock->wait_requests(1, timeout => 10) }) >= 1, 'the request reached the provider');
    kill 'QUIT', $ng3->master_pid;
    waitpid($pid, 0);
    is($? >> 8, 0, 'it was answered 200 while the worker shut down');
    my $after = Gw::wait_until(sub { my $v = db3(GwRedis::key('user', 'bob', 'tokin', 'day', $t)); $v > $before ? $v : undef },
                               timeout => 5);
    is(($after // $before) - $before, $PER{tokin}, 'its input tokens were counted in Redis');
    is(GwMeter::log_lines($ng3, qr/limit store .* failed/), 0, 'no store failure logged');
    $ng3->stop;
};

$rd->stop;
$mock->stop;
done_testing;
