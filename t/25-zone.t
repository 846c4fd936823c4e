# The counters' shared memory zone: it survives nginx -s reload; a zone that
# is too small answers 503 limit_store_unavailable and logs "is full", and
# nginx keeps running.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use Test::More;

Gw::need_module();

my $mock = Gw::Mock->start();

sub settled_row {
    my ($ng, $user, $req) = @_;
    my $row;
    Gw::wait_until(sub {
        $row = GwMeter::row(GwMeter::usage($ng), user => $user);
        $row && $row->{requestsPerDay} >= $req && $row->{tokensInPerDay} >= 11 * $req;
    }, timeout => 5, interval => 0.05);
    return GwMeter::row(GwMeter::usage($ng), user => $user);
}

my @F = qw(requestsPerDay tokensInPerDay tokensOutPerDay costPerDayMicroUsd rejectionsPerDay);
sub want { my ($n, $rej) = @_; return { requestsPerDay => $n, tokensInPerDay => 11 * $n, tokensOutPerDay => 7 * $n,
                                         costPerDayMicroUsd => 6 * $n, rejectionsPerDay => $rej // 0 } }

subtest 'counters survive nginx -s reload' => sub {
    my %c = (users => ['llm_gateway_user rl key=sk-rl group=grl requests_per_day=100;',
                       'llm_gateway_user cap key=sk-cap group=grl requests_per_day=1;'],
             http => 'llm_gateway_zone meter:1m;');
    my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwMeter::conf(%c));
    is_deeply([map { GwMeter::chat($ng, 'sk-rl')->{status} } 1 .. 3], [200, 200, 200], 'three requests');
    is_deeply([map { GwMeter::chat($ng, 'sk-cap')->{status} } 1 .. 2], [200, 429], 'cap: one admitted, one rejected');
    is_deeply(GwMeter::fields(settled_row($ng, 'rl', 3), @F), want(3), 'before the reload: 3 requests');

    my @old = $ng->worker_pids;
    ok($ng->reload, 'reload');
    my @new = $ng->worker_pids;
    ok(!(grep { my $o = $_; grep { $_ == $o } @new } @old), 'new workers');
    my $u = GwMeter::usage($ng);
    is_deeply(GwMeter::fields(GwMeter::row($u, user => 'rl'), @F), want(3), 'after the reload: still 3');
    is_deeply(GwMeter::fields(GwMeter::row($u, group => 'grl'), @F), want(4, 1), 'group: 4 requests, 1 rejection');
    is(GwMeter::chat($ng, 'sk-cap')->{status}, 429, 'cap: its day limit is still exhausted');
    is(GwMeter::chat($ng, 'sk-rl')->{status}, 200, 'a 4th request');
    is_deeply(GwMeter::fields(settled_row($ng, 'rl', 4), @F), want(4), 'it counts 4');

    ok($ng->reload(conf => GwMeter::conf(%c, users => [@{ $c{users} }, 'llm_gateway_user added key=sk-added;'])),
       'reload with a changed configuration (one more user)');
    $u = GwMeter::usage($ng);
    is_deeply(GwMeter::fields(GwMeter::row($u, user => 'rl'), @F), want(4), 'still 4');
    is((GwMeter::row($u, user => 'cap') || {})->{rejectionsPerDay}, 2, 'cap: 2 rejections kept');
    is(GwMeter::chat($ng, 'sk-added')->{status}, 200, 'the added user works');
    $ng->stop;
};

subtest 'a tiny zone fills up: 503 limit_store_unavailable, no crash' => sub {
    my $n = 200;
    my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwMeter::conf(
        users => [map { "llm_gateway_user z$_ key=sk-z$_;" } 1 .. $n],
        http => 'llm_gateway_zone small:32k;'));
    my @workers = sort $ng->worker_pids;
    GwMeter::wait_second_below(45);
    ok(GwMeter::usage($ng), 'usage read before filling (the admin\'s counters exist)');
    my ($first503, $r, %seen);
    for my $i (1 .. $n) {
        $r = GwMeter::chat($ng, "sk-z$i");
        $seen{ $r->{status} }++;
        if ($r->{status} == 503) { $first503 = $i; last }
    }
    ok($first503, 'a 503 came' . ($first503 ? " at user $first503" : '') . ' (statuses: '
        . join(', ', map { "$_ x $seen{$_}" } sort keys %seen) . ')');
    is_deeply([sort grep { $_ != 200 && $_ != 503 } keys %seen], [], 'only 200 before it');
    is($r->{status}, 503, 'status 503');
    like($r->{headers}{'content-type'} // '', qr{^application/json}, 'JSON');
    is($r->{json}{error}{code}, 'limit_store_unavailable', 'code limit_store_unavailable');
    like($r->{json}{error}{message} // '', qr/limit store/i, 'message: the limit store is unavailable');
    ok(!exists $r->{headers}{'retry-after'}, 'no Retry-After');
    ok($ng->wait_log(qr/llm_gateway: zone "small" is full/), 'error.log: zone "small" is full');

    my $u = GwMeter::usage($ng);
    ok($u, 'the admin can still read the usage') or diag("status $GwMeter::LAST->{status}: $GwMeter::LAST->{body}");
    if ($u && $first503) {
        is_deeply(GwMeter::fields(GwMeter::row($u, user => "z$first503"), qw(requestsPerMinute requestsPerDay)),
                  { requestsPerMinute => 0, requestsPerDay => 0 }, "the refused user z$first503 has no request counted");
        is($u->{total}{requestsPerDay}, $seen{200}, 'the total counts only the admitted requests');
    }

    # nginx keeps running and answering.
    for my $i (1 .. 10) { GwMeter::chat($ng, 'sk-z' . ($n - $i + 1)) }
    is(Gw::http(GET => $ng->url('/admin'))->{status}, 200, 'the admin shell still answers');
    is(Gw::http(GET => $ng->url('/v1/models'), headers => GwMeter::auth('sk-z1'))->{status}, 200, '/v1/models still answers');
    is_deeply([sort $ng->worker_pids], \@workers, 'the same workers (none crashed)');
    my @bad = $ng->log_problems;
    is_deeply(\@bad, [], 'no [alert]/[crit]/[emerg] in the logs');
    $ng->stop;
};

$mock->stop;
done_testing;
