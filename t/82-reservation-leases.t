#!/usr/bin/perl
# Reservation leases on Redis (docs/metering.md#leases-redis): eight clients
# sending eight requests each against a large token and cost budget: all are
# admitted, the store writes far fewer reserved counters than one per
# request and measure each way, and once all have settled spent is their
# real usage exactly and nothing stays reserved. A worker that stops gives
# its idle lease back before it exits; one killed while it holds a lease
# leaves it to lapse with its slot.
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
use JSON::PP ();

Gw::need_module();
GwRedis::need_redis();

my $MAXT = 96;
my $BODY = '{"model":"gpt-4o-mini","max_tokens":' . $MAXT . ',"messages":[{"role":"user","content":"lease me"}]}';
my $W = int((length($BODY) + 3) / 4) + $MAXT;   # tokens, and micro-USD at 1 USD per million
my ($IN, $OUT) = (7, 5);                        # what the provider bills
my ($CLIENTS, $EACH) = (8, 8);

my $mock = Gw::Mock->start();
my $rd = GwRedis->start();

sub conf {
    my (%o) = @_;
    return GwMeter::conf(
        users => ['llm_gateway_user lee key=sk-lease-lee group=gl tokens_per_day=100000000 cost_per_day=100;'],
        http => 'llm_gateway_budget_mode reserve' . ($o{ttl} ? " ttl=$o{ttl}" : '') . ";\n"
              . "llm_gateway_price mock/gpt-4o-mini input=1 output=1;\n"
              . "llm_gateway_store redis://127.0.0.1:%%RPORT%%;\n");
}

sub answer { return GwMeter::chat_answer($IN, $OUT) }

sub chat {
    my ($ng, %o) = @_;
    return Gw::http(POST => $ng->url('/v1/chat/completions'), body => $BODY, timeout => $o{timeout} // 20,
                    headers => { Authorization => 'Bearer sk-lease-lee', 'Content-Type' => 'application/json' });
}

sub lee { GwMeter::row(GwMeter::usage($_[0]), user => 'lee') }

subtest 'requests served from a lease' => sub {
    my $ng = Gw::Nginx->start(workers => 1, conf => conf(), vars => { MOCK => $mock->port, RPORT => $rd->port });
    Gw::wait_until(sub { GwMeter::secs_to_midnight() > 60 }, timeout => 70, interval => 1);
    $mock->reset;
    $mock->script({ %{ answer() }, delay_ms => 150, times => $CLIENTS * $EACH });
    $rd->cli('CONFIG', 'RESETSTAT');
    # Eight clients, each sending its requests one after another, started
    # 19 ms apart: the worker has some in flight all along.
    my @res = Gw::parallel($CLIENTS + 1, sub {
        my ($i) = @_;
        if ($i == $CLIENTS) {
            Time::HiRes::sleep(0.8);
            return lee($ng);
        }
        Time::HiRes::sleep(0.019 * $i);
        my $ok = 0;
        for (1 .. $EACH) { $ok++ if chat($ng)->{status} == 200 }
        return $ok;
    }, timeout => 60);
    my $mid = pop @res;
    my $n = $CLIENTS * $EACH;
    is(List::Util::sum(@res), $n, 'all admitted');
    cmp_ok($mid->{reservedTokens}, '>', 0, "meanwhile the usage API shows tokens reserved ($mid->{reservedTokens})");
    my $hincrby = $rd->calls('hincrby');
    # Without leases: one HINCRBY per request and measure at admission and
    # one at settle (4 per request).
    cmp_ok($hincrby, '<', $n, "the reserved counters were written $hincrby times for $n requests");
    cmp_ok($hincrby, '>', 0, 'and written at all');
    diag("HINCRBY calls for $n requests with leases: $hincrby (without: " . 4 * $n . ')');
    my $u = Gw::wait_until(sub { my $r = lee($ng); $r->{reservedTokens} == 0 && $r->{reservedCostMicroUsd} == 0 ? $r : undef },
                           timeout => 5);
    ok($u, 'settled: nothing reserved (the lease went back once the worker was idle)');
    $u ||= lee($ng);
    is($u->{tokensInPerDay} + $u->{tokensOutPerDay}, $n * ($IN + $OUT), 'spent tokens = the real usage, exactly');
    is($u->{costPerDayMicroUsd}, $n * ($IN + $OUT), 'spent cost = the real usage, exactly');
    my %h = @{ [ split /\n/, $rd->cli('HGETALL', 'llmgw:user:lee:rsv') ] };
    is(scalar(grep { $_ != 0 } values %h), 0, 'every reserved field in Redis is at 0');
    is(scalar(@{ $mock->requests }), $n, 'every request reached the provider');
    $ng->stop;
};

subtest 'a worker that stops gives its lease back before it exits' => sub {
    $rd->cli('FLUSHALL');
    my $ng = Gw::Nginx->start(workers => 1, conf => conf(), vars => { MOCK => $mock->port, RPORT => $rd->port });
    $mock->reset;
    $mock->script({ %{ answer() }, delay_ms => 100, times => $CLIENTS * 2 });
    Gw::parallel($CLIENTS, sub {
        Time::HiRes::sleep(0.019 * $_[0]);
        chat($ng) for 1 .. 2;
        return 1;
    }, timeout => 60);
    $ng->stop;   # at once: the lease is idle, not yet given back
    my %h = @{ [ split /\n/, $rd->cli('HGETALL', 'llmgw:user:lee:rsv') ] };
    ok(scalar(keys %h) > 0, 'the scope\'s reserved fields exist');
    is(scalar(grep { $_ != 0 } values %h), 0, 'every reserved field is at 0 once the worker has exited');
};

subtest 'a worker killed while it holds a lease: the lease lapses' => sub {
    $rd->cli('FLUSHALL');
    my $A = Gw::Nginx->start(workers => 1, conf => conf(ttl => '4s'), vars => { MOCK => $mock->port, RPORT => $rd->port });
    my $B = Gw::Nginx->start(workers => 1, conf => conf(ttl => '4s'), vars => { MOCK => $mock->port, RPORT => $rd->port });
    $mock->reset;
    $mock->script(map { { hang => JSON::PP::true } } 1 .. 10);
    my @kids;
    for (1 .. 10) {
        my $pid = fork // die "fork: $!";
        if (!$pid) { chat($A, timeout => 30); POSIX::_exit(0) }
        push @kids, $pid;
        Time::HiRes::sleep(0.05);
    }
    ok(scalar(@{ $mock->wait_requests(10, timeout => 10) }) >= 10, 'ten requests held by the provider');
    my $held = lee($B)->{reservedTokens};
    cmp_ok($held, '>', 10 * $W, "the killed worker's lease holds more than its requests' worst cases ($held)");
    my $t0 = Time::HiRes::time();
    $A->_kill_all;
    waitpid($_, 0) for @kids;
    my $gone = Gw::wait_until(sub { lee($B)->{reservedTokens} == 0 }, timeout => 15, interval => 0.25);
    my $after = Time::HiRes::time() - $t0;
    ok($gone, sprintf 'the lease lapsed %.1f s after the kill (ttl 4 s, at most 5 s)', $after);
    cmp_ok($after, '<=', 6.5, 'within the reservation TTL and one slot');
    $A->stop;
    $B->stop;
};

done_testing();
