#!/usr/bin/perl
# Reservations (llm_gateway_budget_mode reserve): forty requests at once,
# the provider holding every answer until all are decided, against a cost
# budget (then a token budget) that fits ten worst cases: ten pass, thirty
# get 429 budget_exceeded with Retry-After, spent never exceeds the limit and
# after settlement equals the sum of real usage exactly; the usage API shows
# what is reserved meanwhile. The same with two workers (the access log's
# $pid shows both served the burst) and with two replicas on one
# redis-server. A replica killed mid-request: its reservation expires and
# frees the budget. An upstream error releases its reservation and bills
# nothing. A request outliving its reservation settles exactly. With
# reservations off, the same burst's overshoot is measured and printed.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Test::More;
use Time::HiRes ();
use POSIX ();
use JSON::PP ();

Gw::need_module();
GwRedis::need_redis();

# The request every caller sends: its worst case is its input estimate
# (bytes / 4, rounded up) plus its max_tokens, at 1 USD per million tokens
# both ways (1 micro-USD a token). The mock bills exactly that worst case.
my $MAXT = 96;
my $BODY = '{"model":"gpt-4o-mini","max_tokens":' . $MAXT . ',"messages":[{"role":"user","content":"reserve me"}]}';
my $IN = int((length($BODY) + 3) / 4);
my $W = $IN + $MAXT;                  # tokens, and micro-USD
my $LIMIT = 10 * $W + int($W / 2);    # ten worst cases fit, eleven do not
my $LIMIT_USD = sprintf '%.6f', $LIMIT / 1e6;

sub answer {
    my (%o) = @_;
    return { json => { id => 'chatcmpl-r', object => 'chat.completion', created => 1, model => 'gpt-4o-mini',
                       choices => [{ index => 0, message => { role => 'assistant', content => 'ok' }, finish_reason => 'stop' }],
                       usage => { prompt_tokens => $o{in} // $IN, completion_tokens => $o{out} // $MAXT,
                                  total_tokens => ($o{in} // $IN) + ($o{out} // $MAXT) } },
             %{ $o{extra} || {} } };
}

sub conf {
    my (%o) = @_;
    return GwMeter::conf(
        users => ["llm_gateway_user ann key=sk-rsv-ann group=ga cost_per_day=$LIMIT_USD;",
                  "llm_gateway_user bob key=sk-rsv-bob group=gb tokens_per_day=$LIMIT;",
                  'llm_gateway_user one key=sk-rsv-one group=go cost_per_day=' . sprintf('%.6f', ($W + int($W / 2)) / 1e6) . ';'],
        http => ($o{mode} // 'llm_gateway_budget_mode reserve;') . "\n"
              . "llm_gateway_price mock/gpt-4o-mini input=1 output=1;\n"
              . "log_format burst '\$pid \$status';\n" . ($o{http} // ''),
        server => "    access_log logs/burst.log burst;\n");
}

sub chat {
    my ($ng, $key, %o) = @_;
    return Gw::http(POST => $ng->url('/v1/chat/completions'), body => $BODY, timeout => $o{timeout} // 20,
                    headers => { Authorization => "Bearer $key", 'Content-Type' => 'application/json' });
}

# Forty at once (spread over the replicas given); the forty-first reads the
# usage while the provider holds the answers. Returns the results and that
# usage row.
sub burst {
    my ($key, $name, @ngs) = @_;
    my @res = Gw::parallel(41, sub {
        my ($i) = @_;
        if ($i == 40) {
            Time::HiRes::sleep(1.2);
            return GwMeter::row(GwMeter::usage($ngs[0]), user => $name);
        }
        my $r = chat($ngs[$i % @ngs], $key);
        return { status => $r->{status}, at => Time::HiRes::time(), retry => $r->{headers}{'retry-after'},
                 code => ($r->{json} && ref $r->{json}{error} eq 'HASH') ? $r->{json}{error}{code} : undef };
    }, timeout => 60);
    my $mid = pop @res;
    return (\@res, $mid);
}

sub check_burst {
    my ($res, $mid, $what) = @_;
    my @ok = grep { $_->{status} == 200 } @$res;
    my @no = grep { $_->{status} == 429 } @$res;
    is(scalar @ok, 10, "$what: ten admitted");
    is(scalar @no, 30, "$what: thirty refused");
    is(scalar(grep { ($_->{code} // '') eq 'budget_exceeded' && ($_->{retry} // '') =~ /^\d+$/ } @no), 30,
       "$what: every refusal is budget_exceeded with a Retry-After");
    my ($last_no) = sort { $b <=> $a } map { $_->{at} } @no;
    my ($first_ok) = sort { $a <=> $b } map { $_->{at} } @ok;
    ok(@no && @ok && $last_no < $first_ok, "$what: every refusal came while the provider held the answers");
    return $mid;
}

my $mock = Gw::Mock->start();

subtest 'a cost budget: forty at once, two workers, shared memory' => sub {
    my $ng = Gw::Nginx->start(workers => 2, conf => conf(), vars => { MOCK => $mock->port });
    $mock->reset;
    $mock->script({ %{ answer() }, delay_ms => 2500, times => 40 });
    Gw::wait_until(sub { GwMeter::secs_to_midnight() > 60 }, timeout => 70, interval => 1);
    my ($res, $mid) = burst('sk-rsv-ann', 'ann', $ng);
    check_burst($res, $mid, 'cost');
    is($mid->{reservedCostMicroUsd}, 10 * $W, 'while held: the usage API shows ten worst cases reserved');
    is($mid->{costPerDayMicroUsd}, 0, 'while held: nothing spent yet');
    is($mid->{reservedTokens}, 0, 'no token limit: no tokens reserved');
    my $u = GwMeter::row(GwMeter::usage($ng), user => 'ann');
    is($u->{costPerDayMicroUsd}, 10 * $W, 'settled: spent = the sum of real usage, exactly');
    cmp_ok($u->{costPerDayMicroUsd}, '<=', $LIMIT, 'spent never exceeds the limit');
    is($u->{reservedCostMicroUsd}, 0, 'settled: nothing reserved');
    is(GwMeter::row(GwMeter::usage($ng), group => 'ga')->{reservedCostMicroUsd}, 0, 'the group held nothing (no limit)');
    my @pids = map { (split / /)[0] } grep { / (200|429)$/ } split /\n/, Gw::_slurp($ng->prefix . '/logs/burst.log');
    my %distinct = map { $_ => 1 } @pids;
    cmp_ok(scalar(keys %distinct), '>=', 2, 'the access log\'s $pid: both workers served the burst');
    is(scalar(@{ $mock->requests }), 10, 'only the admitted reached the provider');
    $ng->stop;
};

subtest 'a token budget: the same' => sub {
    my $ng = Gw::Nginx->start(workers => 2, conf => conf(), vars => { MOCK => $mock->port });
    $mock->reset;
    $mock->script({ %{ answer() }, delay_ms => 2500, times => 40 });
    my ($res, $mid) = burst('sk-rsv-bob', 'bob', $ng);
    check_burst($res, $mid, 'tokens');
    is($mid->{reservedTokens}, 10 * $W, 'while held: ten worst cases reserved');
    my $u = GwMeter::row(GwMeter::usage($ng), user => 'bob');
    is($u->{tokensInPerDay} + $u->{tokensOutPerDay}, 10 * $W, 'settled: spent = the sum of real usage, exactly');
    is($u->{reservedTokens}, 0, 'settled: nothing reserved');
    $ng->stop;
};

subtest 'an upstream error releases its reservation and bills nothing' => sub {
    my $ng = Gw::Nginx->start(workers => 1, conf => conf(), vars => { MOCK => $mock->port });
    $mock->reset;
    $mock->script({ status => 500, json => { error => { message => 'boom', type => 'server_error' } } });
    is(chat($ng, 'sk-rsv-one')->{status}, 500, 'the provider failed');
    my $u = GwMeter::row(GwMeter::usage($ng), user => 'one');
    is($u->{reservedCostMicroUsd}, 0, 'released');
    is($u->{costPerDayMicroUsd}, 0, 'nothing billed');
    $mock->script(answer());
    is(chat($ng, 'sk-rsv-one')->{status}, 200, 'the budget that fits one worst case admits the next');
    is(GwMeter::row(GwMeter::usage($ng), user => 'one')->{costPerDayMicroUsd}, $W, 'which is billed');
    $ng->stop;
};

subtest 'a request outliving its reservation settles exactly' => sub {
    my $ng = Gw::Nginx->start(workers => 1, conf => conf(mode => 'llm_gateway_budget_mode reserve ttl=1s;'),
                              vars => { MOCK => $mock->port });
    $mock->reset;
    $mock->script({ %{ answer(in => 7, out => 5) }, delay_ms => 3500 });
    my $r = chat($ng, 'sk-rsv-one');
    is($r->{status}, 200, 'answered after 3.5 s (the reservation lapsed after at most 2 s)');
    my $u = GwMeter::row(GwMeter::usage($ng), user => 'one');
    is($u->{costPerDayMicroUsd}, 12, 'its real usage, exactly');
    is($u->{reservedCostMicroUsd}, 0, 'no reserved counter left, none negative');
    $ng->stop;
};

{
    my $rd = GwRedis->start();
    my $replica = sub {
        my ($id, %o) = @_;
        return Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port, RPORT => $rd->port },
            conf => conf(mode => $o{mode},
                         http => "llm_gateway_store redis://127.0.0.1:%%RPORT%%;\nllm_gateway_replica $id;\n"));
    };

    subtest 'two replicas on one redis-server' => sub {
        my $A = $replica->('a');
        my $B = $replica->('b');
        $mock->reset;
        $mock->script({ %{ answer() }, delay_ms => 2500, times => 40 });
        my ($res, $mid) = burst('sk-rsv-ann', 'ann', $A, $B);
        check_burst($res, $mid, 'two replicas');
        is($mid->{reservedCostMicroUsd}, 10 * $W, 'while held: ten worst cases reserved in Redis');
        my $spent = Gw::wait_until(sub {
            my $c = GwMeter::row(GwMeter::usage($B), user => 'ann')->{costPerDayMicroUsd};
            $c == 10 * $W ? $c : 0;
        }, timeout => 5);
        is($spent, 10 * $W, 'settled: spent = the sum of real usage, exactly');
        is(GwMeter::row(GwMeter::usage($A), user => 'ann')->{reservedCostMicroUsd}, 0, 'nothing reserved');
        $A->stop;
        $B->stop;
    };

    subtest 'a replica killed mid-request: its reservation expires and frees the budget' => sub {
        $rd->cli('FLUSHALL');
        my $mode = 'llm_gateway_budget_mode reserve ttl=4s;';
        my $A = $replica->('a', mode => $mode);
        my $B = $replica->('b', mode => $mode);
        $mock->reset;
        $mock->script({ hang => JSON::PP::true }, answer());
        my $pid = fork // die "fork: $!";
        if (!$pid) { chat($A, 'sk-rsv-one', timeout => 30); POSIX::_exit(0) }
        ok(scalar(@{ $mock->wait_requests(1, timeout => 10) }) >= 1, 'the first request reached the provider (held)');
        my $t0 = Time::HiRes::time();
        $A->_kill_all;
        waitpid($pid, 0);
        my $r = chat($B, 'sk-rsv-one');
        is($r->{status}, 429, 'the dead replica\'s reservation still holds the budget');
        my $ok = Gw::wait_until(sub { chat($B, 'sk-rsv-one')->{status} == 200 }, timeout => 12, interval => 0.5);
        my $took = Time::HiRes::time() - $t0;
        ok($ok, sprintf 'then it expired and the budget admitted the next (%.1f s later; ttl 4 s + a 1 s slot)', $took);
        cmp_ok($took, '<=', 7, 'within the reservation\'s life and one slot');
        $A->stop;
        $B->stop;
    };
}

subtest 'reservations off: the same burst overshoots (measured, not asserted)' => sub {
    my $ng = Gw::Nginx->start(workers => 2, conf => conf(mode => ''), vars => { MOCK => $mock->port });
    $mock->reset;
    $mock->script({ %{ answer() }, delay_ms => 2500, times => 40 });
    my ($res) = burst('sk-rsv-ann', 'ann', $ng);
    my $n = grep { $_->{status} == 200 } @$res;
    my $spent = GwMeter::row(GwMeter::usage($ng), user => 'ann')->{costPerDayMicroUsd};
    diag(sprintf 'reservations off: %d of 40 admitted; spent %d micro-USD against a limit of %d (%.1fx)',
         $n, $spent, $LIMIT, $spent / $LIMIT);
    ok(!exists GwMeter::row(GwMeter::usage($ng), user => 'ann')->{reservedCostMicroUsd}, 'check mode shows no reserved fields');
    $ng->stop;
};

done_testing();
