# Two gateway replicas (two nginx instances, different llm_gateway_replica
# ids, two workers each) sharing one Redis: a daily request limit holds
# across both (the fourth request is refused whichever replica it hits, with
# Retry-After = seconds to UTC midnight), a per-minute limit holds exactly
# under parallel load spread over both, and both usage endpoints show the
# same shared numbers.
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

sub replica {
    my ($id) = @_;
    return Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port, RPORT => $rd->port },
        conf => GwMeter::conf(
            users => ['llm_gateway_user carol key=sk-carol-43 group=gc requests_per_day=3;',
                      'llm_gateway_user dave key=sk-dave-43 group=gd requests_per_minute=10;'],
            http => "llm_gateway_store redis://127.0.0.1:%%RPORT%%;\nllm_gateway_replica $id;\n"
                  . "llm_gateway_instance gw-$id;\n"));
}

my $A = replica('a');
my $B = replica('b');

subtest 'requests_per_day=3 holds across both replicas' => sub {
    # Not across a UTC midnight.
    Gw::wait_until(sub { GwMeter::secs_to_midnight() > 60 }, timeout => 70, interval => 1);
    my @seq = ([$A, 'a'], [$B, 'b'], [$A, 'a']);
    for my $i (0 .. $#seq) {
        my $r = GwMeter::chat($seq[$i][0], 'sk-carol-43');
        is($r->{status}, 200, 'request ' . ($i + 1) . " on replica $seq[$i][1]: 200") or diag($r->{body});
    }
    is($rd->get_num(GwRedis::key('user', 'carol', 'req', 'day', time)), 3, 'Redis: carol req:day = 3');
    for my $c ([$B, 'b'], [$A, 'a']) {
        my $r = GwMeter::chat($c->[0], 'sk-carol-43');
        my $want = GwMeter::secs_to_midnight();
        GwConf::is_envelope($r, 429, 'rate_limit_error', 'rate_limit_exceeded', "replica $c->[1]: 429 rate_limit_exceeded");
        is($r->{json}{error}{message}, 'rate limit exceeded: user "carol" requestsPerDay 3', 'message');
        my $ra = $r->{headers}{'retry-after'} // '';
        ok($ra =~ /^\d+$/ && abs($ra - $want) <= 2, "Retry-After $ra = seconds to UTC midnight ($want)");
    }
    is($rd->get_num(GwRedis::key('user', 'carol', 'req', 'day', time)), 3, 'Redis: still req:day = 3');
    is($rd->get_num(GwRedis::key('user', 'carol', 'rej', 'day', time)), 2, 'Redis: carol rej:day = 2');
    is(scalar(GwMeter::log_lines($A, qr/llm_gateway: rejected user="carol"/))
       + scalar(GwMeter::log_lines($B, qr/llm_gateway: rejected user="carol"/)), 2, 'one rejection log line each');

    my $key = GwRedis::key('user', 'carol', 'tokout', 'day', time);
    ok(Gw::wait_until(sub { $rd->get_num($key) == 21 }, timeout => 5), 'Redis: carol tokout:day = 21');
    for my $c ([$A, 'a'], [$B, 'b']) {
        my $u = GwMeter::usage($c->[0]);
        ok($u, "usage on replica $c->[1]: 200") or next;
        is($u->{replica}, $c->[1], "replica id $c->[1] in the answer");
        my $row = GwMeter::row($u, user => 'carol');
        is_deeply(GwMeter::fields($row, qw(requestsPerDay rejectionsPerDay tokensInPerDay tokensOutPerDay costPerDayMicroUsd)),
                  { requestsPerDay => 3, rejectionsPerDay => 2, tokensInPerDay => 33, tokensOutPerDay => 21,
                    costPerDayMicroUsd => 18 }, "replica $c->[1]: carol's shared numbers");
        is(GwMeter::row($u, group => 'gc')->{requestsPerDay}, 3, "replica $c->[1]: group gc requestsPerDay 3");
    }
};

subtest 'requests_per_minute=10 holds exactly under 30 parallel requests over both replicas' => sub {
    GwMeter::wait_second_below(40);
    $mock->clear;
    my $t = time;
    my @res = Gw::parallel(30, sub {
        my ($i) = @_;
        my $ng = $i % 2 ? $B : $A;
        my $r = GwMeter::chat($ng, 'sk-dave-43');
        return { status => $r->{status}, code => ($r->{json} && $r->{json}{error} ? $r->{json}{error}{code} : undef) };
    }, timeout => 60);
    is(scalar(grep { $_->{status} == 200 } @res), 10, 'exactly 10 x 200');
    is(scalar(grep { $_->{status} == 429 && ($_->{code} // '') eq 'rate_limit_exceeded' } @res), 20,
       'exactly 20 x 429 rate_limit_exceeded');
    is(scalar @{ $mock->wait_requests(10) }, 10, 'the mock saw 10 requests');
    is($rd->get_num(GwRedis::key('user', 'dave', 'req', 'min', $t)), 10, 'Redis: dave req:min = 10');
    is($rd->get_num(GwRedis::key('group', 'gd', 'rej', 'day', $t)), 20, 'Redis: group gd rej:day = 20');
    my @ua = (GwMeter::usage($A), GwMeter::usage($B));
    is_deeply([map { GwMeter::row($_, user => 'dave')->{requestsPerMinute} } @ua], [10, 10],
              'both usage endpoints: dave requestsPerMinute 10');
};

is(scalar(GwMeter::log_lines($A, qr/limit store/)) + scalar(GwMeter::log_lines($B, qr/limit store/)), 0,
   'no store failure on either replica');
$A->stop;
$B->stop;
$rd->stop;
$mock->stop;
done_testing;
