#!/usr/bin/perl
# A Redis Cluster as the shared store (docs/store.md#redis-cluster): six real
# redis-server processes (three masters, three replicas) made with
# `redis-cli --cluster create`, two gateway replicas of two workers each,
# the mock provider as ground truth:
#   - the hash-tagged layout: every counter of a scope in its own slot;
#   - limits shared and exact: a burst of 200 at a limit of 50 admits 50,
#     counted exactly in the user's, group's and total's slots;
#   - a refusal in one slot rolls the other slots' parts back (a group limit
#     refuses: the user's slot keeps no request count of it);
#   - leases and write-behind: 300 requests at a large limit, exact counts;
#   - MOVED followed after the user's slot is resharded to another master;
#   - a master killed: its replica is promoted and the gateway recovers by
#     itself (fail-open meanwhile);
#   - TLS and a password on every node.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use GwRedis;
use GwRedisCluster;
use Test::More;
use File::Temp ();
use POSIX ();
use Time::HiRes ();

Gw::need_module();
GwRedis::need_redis();

my ($IN, $OUT) = (7, 5);   # what the provider bills per request
my $mock = Gw::Mock->start();
my $KEY = 'sk-cluster-86';
my $GKEY = 'sk-cluster-86-g';

sub prime { my (%o) = @_; $mock->reset; $mock->script(GwMeter::chat_answer($IN, $OUT, times => 2000, %o)); }

# A gateway on the cluster $cl: the URL names one master, seeds= the others.
sub gateway {
    my ($cl, %o) = @_;
    my @ports = $cl->seed_ports;
    my $scheme = $o{tls} ? 'rediss' : 'redis';
    my $auth = defined $o{password} ? ":$o{password}@" : '';
    my $query = $o{tls} ? "?tls_ca=$o{tls}{ca}" : '';
    my $seeds = join ',', map { "127.0.0.1:$_" } @ports[1 .. $#ports];
    my $conf = GwMeter::conf(
        groups => ['llm_gateway_group gcl requests_per_day=' . ($o{group_limit} // 1000000) . ';'],
        users => ["llm_gateway_user lee key=$KEY group=gcl $o{limits};",
                  "llm_gateway_user gus key=$GKEY group=gcl;"],
        http => "llm_gateway_price mock/gpt-4o-mini input=1 output=1;\n"
              . "llm_gateway_ratelimit_headers on;\n"
              . "llm_gateway_store $scheme://$auth" . "127.0.0.1:$ports[0]$query cluster=on seeds=$seeds"
              . ($o{store} ? " $o{store}" : '') . ";\n");
    return Gw::Nginx->start(workers => $o{workers} // 2, conf => $conf, error_log_level => $o{log} // 'info',
                            vars => { MOCK => $mock->port });
}

sub ckey { my ($kind, $id, $metric, $win) = @_; my $b = GwRedis::buckets(time)->{$win // 'day'};
           return "llmgw:{$kind:$id}:$metric:" . ($win // 'day') . ":$b" }
sub skey { my ($kind, $id, $metric) = @_; return "llmgw:{stats}:$kind:$id:$metric:day:" . GwRedis::buckets(time)->{day} }

sub chat {
    my ($ng, $key) = @_;
    return Gw::http(POST => $ng->url('/v1/chat/completions'), body => GwConf::chat_body('gpt-4o-mini'), timeout => 30,
                    headers => { Authorization => 'Bearer ' . ($key // $KEY), 'Content-Type' => 'application/json' });
}

subtest 'cluster=on and seeds= are checked by nginx -t' => sub {
    my $base = sub {
        GwMeter::conf(users => ["llm_gateway_user lee key=$KEY;"], http => "llm_gateway_store $_[0];\n");
    };
    for my $case (['redis://127.0.0.1:7000 seeds=127.0.0.1:7001', qr/llm_gateway_store: seeds= needs cluster=on/],
                  ['redis://127.0.0.1:7000/2 cluster=on', qr/a Redis Cluster has only database 0, not 2/],
                  ['redis://127.0.0.1:7000 cluster=on seeds=127.0.0.1:7001,nohost:', qr/invalid seed "nohost:" \(want host:port\)/],
                  ['redis://127.0.0.1:7000 cluster=on seeds=a:1@b:2', qr/invalid seed "a:1\@b:2"/],
                  ['redis://127.0.0.1:7000 cluster=maybe', qr/invalid parameter "cluster" of llm_gateway_store/]) {
        my ($rc, $out, $file) = Gw::nginx_t($base->($case->[0]), vars => { MOCK => 1 });
        isnt($rc, 0, "$case->[0]: nginx -t fails");
        like($out, $case->[1], "$case->[0]: the sentence says why");
        like($out, qr/ in \Q$file\E:\d+/, "$case->[0]: file and line");
    }
    my ($rc, $out) = Gw::nginx_t($base->('redis://127.0.0.1:7000 cluster=on seeds=127.0.0.1:7001,[::1]:7002'),
                                 vars => { MOCK => 1 });
    is($rc, 0, 'a cluster with two seeds: accepted') or diag($out);
};

my $cl = GwRedisCluster->start();

subtest 'limits shared and exact across two replicas; the hash-tagged layout' => sub {
    $cl->flushall;
    my @ngs = map { gateway($cl, limits => 'requests_per_day=50') } 1 .. 2;
    GwMeter::wait_second_below(45);
    prime(delay_ms => 300);
    my @st = Gw::parallel(200, sub { chat($ngs[$_[0] % 2])->{status} }, timeout => 120);
    my $ok = grep { $_ == 200 } @st;
    my $no = grep { $_ == 429 } @st;
    is($ok, 50, 'a burst of 200 at a limit of 50: 50 admitted');
    is($no, 150, 'and 150 refused with 429')
        or diag join "\n", map { GwMeter::log_lines($_, qr/store|cluster/) } @ngs;
    is(scalar @{ $mock->requests }, 50, 'the provider saw 50');
    ok(Gw::wait_until(sub { $cl->get_num(ckey('user', 'lee', 'req')) == 50 }, timeout => 5),
       'llmgw:{user:lee}:req:day: 50');
    ok(Gw::wait_until(sub { $cl->get_num(skey('total', 'all', 'req')) == 50 }, timeout => 5),
       'llmgw:{stats}:total:all:req:day: 50');
    ok(Gw::wait_until(sub { $cl->get_num(ckey('group', 'gcl', 'tokout')) == 50 * $OUT }, timeout => 5),
       'group output tokens: 50 x 5');
    ok(Gw::wait_until(sub { $cl->get_num(skey('model', 'mock/gpt-4o-mini', 'req')) == 50 }, timeout => 5),
       'llmgw:{stats}:model:mock/gpt-4o-mini:req:day: 50');
    for my $s (['user', 'lee'], ['group', 'gcl'], ['total', 'all']) {
        my $k = $s->[0] eq 'total' ? skey(@$s, 'rej') : ckey(@$s, 'rej');
        ok(Gw::wait_until(sub { $cl->get_num($k) == 150 }, timeout => 5), "$s->[0] rejections: 150 (each in its own slot)")
            or diag "$k: " . $cl->get_num($k);
    }
    my @plain = grep { !/^llmgw:\{/ && $_ ne 'llmgw:events' } $cl->keys('llmgw:*');
    is_deeply(\@plain, [], 'every key but the events list is hash-tagged');
    isnt($cl->slot_of(ckey('user', 'lee', 'req')), $cl->slot_of(ckey('group', 'gcl', 'req')),
         'the user and the group are in different slots');
    is_deeply(GwMeter::fields(GwMeter::row(GwMeter::usage($ngs[1]), user => 'lee'),
                              qw(requestsPerDay rejectionsPerDay tokensInPerDay)),
              { requestsPerDay => 50, rejectionsPerDay => 150, tokensInPerDay => 50 * $IN },
              'the admin usage view reads every slot of the cluster');
    my $r = chat($ngs[0]);
    is($r->{status}, 429, 'the next request: 429');
    is($r->{headers}{'x-ratelimit-remaining-requests'}, '0', 'remaining 0');
    for my $ng (@ngs) {
        my @bad = GwMeter::log_lines($ng, qr/\[(alert|crit|emerg)\]|limit store .* failed/);
        is_deeply(\@bad, [], 'no store failure logged');
        $ng->stop;
    }
};

subtest 'a refusal in one slot rolls back the parts admitted in others' => sub {
    $cl->flushall;
    my $ng = gateway($cl, limits => 'requests_per_day=100', group_limit => 3);
    GwMeter::wait_second_below(50);
    prime();
    my @st = map { chat($ng)->{status} } 1 .. 5;
    is_deeply(\@st, [200, 200, 200, 429, 429], 'the group limit of 3 refuses the 4th and 5th');
    ok(Gw::wait_until(sub { $cl->get_num(ckey('user', 'lee', 'req')) == 3 }, timeout => 5),
       'the user\'s slot counts the 3 admitted only (the refused ones rolled back)');
    ok(Gw::wait_until(sub { $cl->get_num(ckey('user', 'lee', 'req', 'min')) == 3 }, timeout => 5),
       'in the minute window too');
    is($cl->get_num(ckey('group', 'gcl', 'req')), 3, 'group requests: 3');
    is($cl->get_num(ckey('user', 'lee', 'rej')), 2, 'user rejections: 2');
    is($cl->get_num(ckey('group', 'gcl', 'rej')), 2, 'group rejections: 2');
    $ng->stop;
};

subtest 'leases and write-behind: 300 requests at a large limit, exact' => sub {
    $cl->flushall;
    my @ngs = map { gateway($cl, limits => 'requests_per_day=100000', log => 'debug') } 1 .. 2;
    GwMeter::wait_second_below(40);
    prime();
    my @st = Gw::parallel(300, sub { chat($ngs[$_[0] % 2])->{status} }, timeout => 120);
    is(scalar(grep { $_ == 200 } @st), 300, '300 admitted');
    ok(Gw::wait_until(sub { $cl->get_num(ckey('user', 'lee', 'req')) == 300 }, timeout => 5), 'user requests: 300');
    ok(Gw::wait_until(sub { $cl->get_num(ckey('user', 'lee', 'tokin')) == 300 * $IN }, timeout => 5),
       'user input tokens exact');
    ok(Gw::wait_until(sub { $cl->get_num(skey('total', 'all', 'req')) == 300 }, timeout => 5), 'total: 300');
    $_->stop for @ngs;
    # One client after another: admitted from the worker's lease.
    my $ng = gateway($cl, limits => 'requests_per_day=100000', log => 'debug', workers => 1);
    my $from = length $ng->error_log;
    is(chat($ng)->{status}, 200, 'sequential request') for 1 .. 100;
    my $local = () = substr($ng->error_log, $from) =~ /admitted from the worker's leases without a store call/g;
    cmp_ok($local, '>=', 90, "then 100 one after another: $local admitted from the lease without a store call");
    ok(Gw::wait_until(sub { $cl->get_num(ckey('user', 'lee', 'req')) == 400 }, timeout => 5), 'user requests: 400');
    $ng->stop;
};

subtest 'MOVED followed after the user\'s slot is resharded' => sub {
    $cl->flushall;
    my $ng = gateway($cl, limits => 'requests_per_day=50', log => 'debug', workers => 1);
    GwMeter::wait_second_below(45);
    prime();
    is(chat($ng)->{status}, 200, 'a request') for 1 .. 3;
    ok(Gw::wait_until(sub { $cl->get_num(ckey('user', 'lee', 'req')) == 3 }, timeout => 5), 'counted: 3');
    my $from = $cl->node_for_key(ckey('user', 'lee', 'req'));
    my $to = $cl->move_slot_of(ckey('user', 'lee', 'req'));
    isnt($to->port, $from->port, 'the slot moved to another master');
    is(chat($ng)->{status}, 200, 'a request') for 1 .. 3;
    ok(Gw::wait_until(sub { $cl->get_num(ckey('user', 'lee', 'req')) == 6 }, timeout => 5), 'counted on the new master: 6');
    my @bad = GwMeter::log_lines($ng, qr/limit store .* failed/);
    is_deeply(\@bad, [], 'no store failure: the redirect was followed');
    my $slot = $cl->slot_of(ckey('user', 'lee', 'req'));
    my $port = $to->port;
    cmp_ok(scalar(GwMeter::log_lines($ng, qr/store: MOVED $slot: to 127\.0\.0\.1:$port/)), '>=', 1,
           "the debug log shows MOVED $slot to the new master");
    $ng->stop;
};

subtest 'ASK followed while the user\'s slot is being migrated' => sub {
    $cl->flushall;
    my $ng = gateway($cl, limits => 'requests_per_day=50', log => 'debug', workers => 1);
    GwMeter::wait_second_below(45);
    prime();
    is(chat($ng)->{status}, 200, 'a request') for 1 .. 2;
    my $k = ckey('user', 'lee', 'req');
    ok(Gw::wait_until(sub { $cl->get_num($k) == 2 }, timeout => 5), 'counted: 2');
    my ($slot, $src, $dst) = $cl->migrate_keys_of($k);
    # The slot's keys are on the target, the slot still the source's: the
    # source answers ASK, the target (importing) TRYAGAIN to a script that
    # creates keys, until the move ends, which a child does 0.5 s later;
    # the requests wait for it (the call's time-out is 2 s).
    my $child = fork // die "fork: $!";
    if (!$child) {
        Time::HiRes::sleep(0.5);
        eval { $cl->finish_move($slot, $src, $dst) };
        POSIX::_exit($@ ? 1 : 0);
    }
    is(chat($ng)->{status}, 200, 'a request during the migration') for 1 .. 2;
    waitpid($child, 0);
    is($?, 0, 'the move ended');
    my $port = $dst->port;
    cmp_ok(scalar(GwMeter::log_lines($ng, qr/store: ASK $slot: to 127\.0\.0\.1:$port/)), '>=', 1,
           "the debug log shows ASK $slot to the importing master");
    cmp_ok(scalar(GwMeter::log_lines($ng, qr/store: TRYAGAIN on slot $slot: again in 50 ms/)), '>=', 1,
           'and TRYAGAIN, sent again');
    ok(Gw::wait_until(sub { $cl->get_num($k) == 4 }, timeout => 5), 'all 4 counted on the new master');
    is(chat($ng)->{status}, 200, 'and a request after the move');
    is_deeply([GwMeter::log_lines($ng, qr/limit store .* failed/)], [], 'no store failure');
    $ng->stop;
};

subtest 'a master killed: the replica is promoted and the gateway recovers by itself' => sub {
    $cl->flushall;
    my $ng = gateway($cl, limits => 'requests_per_day=1000', log => 'debug', workers => 1);
    GwMeter::wait_second_below(30);
    prime();
    is(chat($ng)->{status}, 200, 'a request before');
    ok($cl->wait_replicated, 'replicated');
    $cl->kill_master_of(ckey('user', 'lee', 'req'));
    my $t0 = time;
    my ($n, $all200) = (0, 1);
    # Fail-open meanwhile: every request is answered; within the latch's 5 s
    # and the failover, counts reach the promoted replica again.
    my $back = Gw::wait_until(sub {
        my $s = chat($ng)->{status};
        $all200 = 0 if $s != 200;
        $n++;
        my $before = $cl->get_num(ckey('user', 'lee', 'req'));
        my $s2 = chat($ng)->{status};
        $n++;
        $all200 = 0 if $s2 != 200;
        return Gw::wait_until(sub { $cl->get_num(ckey('user', 'lee', 'req')) > $before }, timeout => 1);
    }, timeout => 30, interval => 0.5);
    ok($back, sprintf('counted in the cluster again after %d s', time - $t0));
    ok($all200, "all $n requests meanwhile answered 200 (fail_open=on)");
    $ng->stop;
};

$cl->stop;

subtest 'TLS and a password on every node' => sub {
    my $dir = File::Temp::tempdir('llmgw-pki-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $pki = GwRedis::make_pki($dir);
    my $tcl = GwRedisCluster->start(password => 'cl-secret-86',
        tls => { cert => $pki->{server_cert}, key => $pki->{server_key}, ca => $pki->{ca},
                 client_cert => $pki->{client_cert}, client_key => $pki->{client_key} });
    my $ng = gateway($tcl, limits => 'requests_per_day=5', tls => $pki, password => 'cl-secret-86');
    GwMeter::wait_second_below(50);
    prime();
    my @st = map { chat($ng)->{status} } 1 .. 6;
    is_deeply(\@st, [200, 200, 200, 200, 200, 429], 'a limit of 5 over TLS: the 6th refused');
    ok(Gw::wait_until(sub { $tcl->get_num(ckey('user', 'lee', 'req')) == 5 }, timeout => 5), 'counted: 5');
    unlike($ng->error_log, qr/cl-secret-86/, 'the password is never logged');
    $ng->stop;
    $tcl->stop;
};

done_testing();
