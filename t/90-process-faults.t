#!/usr/bin/perl
# The process-level events every nginx operator lives with, under a bounded
# load of mixed requests (chat, streams, translated streams, rejections),
# with the counts checked against what the clients saw (issue 30's fault
# matrix, first part; docs/testing.md#faults-under-load):
#   - kill -9 of one worker (shared memory): the master respawns it, the zone
#     stays usable, counts are exact but for the requests that worker had in
#     flight (admitted and counted as requests, their tokens not: at most one
#     per client connection open at the time);
#   - ten `nginx -s reload`s (Redis store, leases and write-behind on), with
#     the users file, limits and providers changed between them: no request
#     fails, counts exact, the worker count, Redis connections and the
#     master's shared mappings are as before;
#   - a graceful quit (`nginx -s quit`) during open streams (Redis): every
#     stream finishes, and every one is counted in Redis;
#   - Redis hung (SIGSTOP) for 2 s, a client leaving while its admission
#     waits on it, then Redis killed and restarted, under load with
#     fail_open=on: every request answered; past the latch, counting in
#     Redis resumes exactly.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwLoad;
use GwRedis;
use POSIX ();
use Test::More;

Gw::need_module();
GwRedis::need_redis();

my $KEY = 'sk-pf-alice-90ab';
my $CAPPED = 'sk-pf-capped-90cd';
my $WAITER = 'sk-pf-waiter-90ef';   # a limit under 256: each admission asks the store
my $mock = Gw::Mock->start();

# Not across a UTC midnight: the day counters are read.
Gw::wait_until(sub { GwMeter::secs_to_midnight() > 180 }, timeout => 200, interval => 1);

sub conf {
    my (%o) = @_;
    my $claude = "llm_gateway_provider claude type=anthropic location=/_llm/claude/ key=sk-ant-pf models=claude-sonnet-4-5;\n";
    my $extra = $o{extra_provider}
        ? "llm_gateway_provider extra type=openai location=/_llm/mock/ models=gpt-extra-$o{extra_provider};\n" : '';
    return GwMeter::conf(
        users => $o{users} // ["llm_gateway_user alice key=$KEY;",
                               "llm_gateway_user capped key=$CAPPED requests_per_day=1;",
                               "llm_gateway_user waiter key=$WAITER requests_per_minute=100;"],
        http => $claude . $extra . ($o{http} // ''),
        server => "    location /_llm/claude/ {\n        internal;\n        proxy_pass http://mock_up/;\n"
                . "        proxy_http_version 1.1;\n        proxy_set_header Connection \"\";\n"
                . "        proxy_buffering off;\n    }\n");
}

# One request of a kind; returns 'ok', the status, or 'error: ...'.
sub one {
    my ($ng, $kind) = @_;
    if ($kind eq 'chat' || $kind eq 'reject') {
        my $r = GwMeter::chat($ng, $kind eq 'chat' ? $KEY : $CAPPED, timeout => 10);
        return 'error: ' . ($r->{error} // 'none') unless $r->{status};
        return $r->{status} == 200 && ($r->{json} || {})->{usage} ? 'ok' : $r->{status};
    }
    my $model = $kind eq 'xstream' ? 'claude-sonnet-4-5' : 'gpt-4o-mini';
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => GwMeter::auth($KEY),
        body => { model => $model, stream => JSON::PP::true(), messages => [{ role => 'user', content => 'hi' }] },
        timeout => 10);
    return 'error: ' . ($r->{error} // 'none') unless $r->{status};
    return $r->{status} unless $r->{status} == 200;
    my @ev = @{ $r->{events} || [] };
    return @ev && ($ev[-1]{data} // '') eq '[DONE]' && $r->{complete} ? 'ok' : 'error: stream incomplete';
}

my @SERVED = qw(chat stream xstream);
sub start_load { my ($ng, $conc, $secs, @kinds) = @_; return GwLoad::start($conc, $secs, sub { one($ng, $_[0]) }, @kinds) }
sub finish_load { GwLoad::finish(@_) }
sub total { GwLoad::total(@_) }
sub count_of { GwLoad::count(@_) }
sub ok_total { GwLoad::ok_of($_[0], @SERVED) }
sub failed_total { GwLoad::failed_of($_[0], @SERVED) }

subtest 'kill -9 of a worker under load (shared memory)' => sub {
    my $ng = Gw::Nginx->start(conf => conf(), workers => 2, vars => { MOCK => $mock->port });
    $ng->allow_log(qr/worker process \d+ exited on signal 9/);
    is(one($ng, 'reject'), 'ok', 'capped: its one request of the day');
    my $conc = 8;
    my $load = start_load($ng, $conc, 6, qw(chat stream xstream reject));
    select(undef, undef, undef, 2.5);
    my @w = $ng->worker_pids;
    is(scalar @w, 2, 'two workers under load');
    kill 'KILL', $w[0];
    ok(Gw::wait_until(sub { my @n = $ng->worker_pids; @n == 2 && !grep { $_ == $w[0] } @n }, timeout => 5),
       'the master respawned the worker');
    my $sum = finish_load($load);
    diag('outcomes: ' . Gw::json_encode($sum));
    my ($ok, $failed) = (ok_total($sum), failed_total($sum));
    ok($ok > 50, "requests answered under load ($ok)");
    ok($failed <= $conc, "failed requests ($failed) at most the connections open at the kill ($conc)");
    is(total($sum->{client}), 0, 'every client process finished');
    is(one($ng, 'chat'), 'ok', 'a request after the kill is served');
    $ok += 1;
    my $row;
    Gw::wait_until(sub {
        $row = GwMeter::row(GwMeter::usage($ng), user => 'alice');
        $row && $row->{tokensInPerDay} >= 11 * $ok;
    }, timeout => 5, interval => 0.1);
    $row //= {};
    ok($row->{requestsPerDay} >= $ok && $row->{requestsPerDay} <= $ok + $failed,
       "alice's requests ($row->{requestsPerDay}) = answered ($ok) + at most the failed ($failed)");
    ok($row->{tokensInPerDay} >= 11 * $ok && $row->{tokensInPerDay} <= 11 * ($ok + $failed),
       "tokens in ($row->{tokensInPerDay}) = 11 per answered request, plus at most the in-flight ones");
    is($row->{tokensOutPerDay} * 11, $row->{tokensInPerDay} * 7, 'tokens out in the same proportion (7 per 11)');
    my $cap = GwMeter::row(GwMeter::usage($ng), user => 'capped') || {};
    my $rejected = count_of($sum, 'reject', 429);
    ok($cap->{rejectionsPerDay} >= $rejected && $cap->{rejectionsPerDay} <= $rejected + total($sum->{reject}) - $rejected,
       "capped's rejections ($cap->{rejectionsPerDay}) = the 429s clients saw ($rejected), but for in-flight ones");
    is($cap->{requestsPerDay}, 1, 'capped: still one admitted request');
    is_deeply([$ng->log_problems], [], 'no [alert], [crit] or [emerg] but the worker\'s death');
    $ng->stop;
};

subtest 'ten reloads under load with users, limits and providers changed (Redis)' => sub {
    my $rd = GwRedis->start();
    my $dir = File::Temp::tempdir('llmgw-pf-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $users_file = "$dir/users.json";
    my $write_users = sub {
        my ($n) = @_;
        Gw::_spew($users_file, Gw::json_encode({ users => [
            { name => 'alice', key => $KEY },
            { name => 'capped', key => $CAPPED, limits => { requestsPerDay => 1 } },
            { name => "extra$n", key => "sk-pf-extra-$n", limits => { requestsPerMinute => 10 + $n } } ] }));
    };
    $write_users->(0);
    my $http = "llm_gateway_users_file $users_file interval=1s;\n"
             . "llm_gateway_store redis://127.0.0.1:%%RPORT%% flush=50ms;\n";
    my $vars = { MOCK => $mock->port, RPORT => $rd->port };
    my $ng = Gw::Nginx->start(conf => conf(users => [], http => $http), workers => 2, vars => $vars);
    is(one($ng, 'reject'), 'ok', 'capped: its one request of the day');
    Gw::wait_until(sub { $rd->get_num(GwRedis::key('user', 'capped', 'req', 'day', time)) == 1 }, timeout => 5);
    my $clients = sub { my $info = $rd->cli('INFO', 'clients'); $info =~ /connected_clients:(\d+)/ ? $1 - 1 : -1 };
    my $shm = sub { scalar grep { m{/dev/zero|SYSV} } split /\n/, Gw::_slurp("/proc/" . $ng->master_pid . "/maps") };
    my ($clients0, $shm0) = ($clients->(), $shm->());


    my $load = start_load($ng, 6, 14, qw(chat stream xstream reject));
    my $reloads = 0;
    for my $i (1 .. 10) {
        select(undef, undef, undef, 1);
        $write_users->($i);
        $reloads += $ng->reload(conf => conf(users => [], extra_provider => $i,
                                            http => $http . "llm_gateway_group g$i requests_per_minute=" . (100 + $i) . ";\n"),
                               vars => $vars) ? 1 : 0;
    }
    is($reloads, 10, 'ten reloads, each with new workers');
    my $sum = finish_load($load);
    diag('outcomes: ' . Gw::json_encode($sum));
    my $ok = ok_total($sum);
    ok($ok > 50, "requests answered under load ($ok)");
    is(failed_total($sum), 0, 'no request failed');
    is(total($sum->{client}), 0, 'every client process finished');
    is(count_of($sum, 'reject', 429), total($sum->{reject}), 'every capped request refused 429');
    my $key = sub { GwRedis::key('user', $_[0], $_[1], 'day', time) };
    ok(Gw::wait_until(sub { $rd->get_num($key->('alice', 'tokin')) >= 11 * $ok }, timeout => 10),
       'the accounting reached Redis');
    sleep 1;
    is($rd->get_num($key->('alice', 'req')), $ok, "alice's requests in Redis = answered ($ok)");
    is($rd->get_num($key->('alice', 'tokin')), 11 * $ok, 'tokens in exact');
    is($rd->get_num($key->('alice', 'tokout')), 7 * $ok, 'tokens out exact');
    is($rd->get_num($key->('capped', 'rej')), total($sum->{reject}), "capped's rejections exact");
    is($rd->get_num($key->('capped', 'req')), 1, 'capped: one admitted request');
    Gw::wait_until(sub { $ng->worker_pids == 2 && !grep { /shutting down/ } map { $_->[1] } Gw::_children($ng->master_pid) },
                   timeout => 10);
    is(scalar $ng->worker_pids, 2, 'two workers, the old ones gone');
    # A worker opens its one store connection when it first needs it: before
    # the reloads one or two were open; after ten reloads (twenty workers
    # gone) still at most one per worker.
    ok($clients0 >= 1 && $clients0 <= 2, "Redis connections before the reloads: $clients0");
    ok(Gw::wait_until(sub { $clients->() <= 2 }, timeout => 10),
       'Redis connections after them: at most one per worker, none left by the old workers')
        or diag('now: ' . $clients->());
    is($shm->(), $shm0, "the master's shared mappings as before ($shm0)");
    is_deeply([$ng->log_problems], [], 'no [alert], [crit] or [emerg]');
    $ng->stop;
    $rd->stop;
};

subtest 'graceful quit during open streams (Redis): every stream finishes and is counted' => sub {
    my $rd = GwRedis->start();
    my $ng = Gw::Nginx->start(conf => conf(http => "llm_gateway_store redis://127.0.0.1:%%RPORT%%;\n"),
                              workers => 2, vars => { MOCK => $mock->port, RPORT => $rd->port });
    $mock->reset;
    my $K = 6;
    my @chunk = map { "data: " . Gw::json_encode({ id => 'c1', object => 'chat.completion.chunk', created => 1,
        model => 'gpt-4o-mini', choices => [{ index => 0, delta => { content => "w$_ " }, finish_reason => undef }] }) } 1 .. 4;
    $mock->script({ match => { path => '/v1/chat/completions' }, times => $K, delay_ms => 400, sse => [
        @chunk,
        'data: ' . Gw::json_encode({ id => 'c1', object => 'chat.completion.chunk', created => 1, model => 'gpt-4o-mini',
            choices => [], usage => { prompt_tokens => 13, completion_tokens => 5, total_tokens => 18 } }),
        'data: [DONE]' ] });
    my $load_file = File::Temp->new(TMPDIR => 1, UNLINK => 1);
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my @r = Gw::parallel($K, sub { one($ng, 'stream') }, timeout => 30);
        open my $fh, '>', "$load_file" or POSIX::_exit(1);
        print {$fh} Gw::json_encode(\@r);
        close $fh;
        POSIX::_exit(0);
    }
    ok(Gw::wait_until(sub { @{ $mock->requests } >= $K }, timeout => 10), "$K streams open");
    my $master = $ng->master_pid;
    kill 'QUIT', $master;
    waitpid($pid, 0);
    my $r = Gw::json_decode(Gw::_slurp("$load_file")) || [];
    is_deeply($r, [('ok') x $K], 'every stream finished with [DONE]');
    ok(Gw::wait_until(sub { !Gw::_alive($master) }, timeout => 10), 'nginx exited');
    my $key = sub { GwRedis::key('user', 'alice', $_[0], 'day', time) };
    is($rd->get_num($key->('req')), $K, "$K requests in Redis");
    is($rd->get_num($key->('tokin')), 13 * $K, 'their input tokens, flushed before the workers exited');
    is($rd->get_num($key->('tokout')), 5 * $K, 'their output tokens');
    is_deeply([Gw::log_problems_in_text($ng->error_log)], [], 'no [alert], [crit] or [emerg]');
    $ng->stop;
    $rd->stop;
};

subtest 'Redis hung (SIGSTOP), then killed, under load (fail_open=on): every request answered, counting resumes' => sub {
    my $rd = GwRedis->start();
    my $ng = Gw::Nginx->start(conf => conf(http => "llm_gateway_store redis://127.0.0.1:%%RPORT%% timeout=500ms fail_open=on;\n"),
                              workers => 2, vars => { MOCK => $mock->port, RPORT => $rd->port });
    $ng->allow_log(qr/llm_gateway: .*store/i);
    my $load = start_load($ng, 6, 12, qw(chat stream xstream));
    select(undef, undef, undef, 1.5);
    kill 'STOP', $rd->pid;
    select(undef, undef, undef, 0.05);   # admissions now wait on the hung store (up to its 500 ms)
    my $gone = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => GwMeter::auth($WAITER),
        body => { model => 'gpt-4o-mini', messages => [{ role => 'user', content => 'hi' }] }, timeout => 0.15);
    ok(!$gone->{status}, 'a client left while its admission waited on the hung store');
    select(undef, undef, undef, 2);
    kill 'CONT', $rd->pid;
    select(undef, undef, undef, 5.5);    # past the latch (5 s)
    $rd->kill9;
    select(undef, undef, undef, 2);
    $rd->restart;
    my $sum = finish_load($load);
    diag('outcomes: ' . Gw::json_encode($sum));
    ok(ok_total($sum) > 30, 'requests answered under load (' . ok_total($sum) . ')');
    is(failed_total($sum), 0, 'no request failed while the store was down or hung');
    is(total($sum->{client}), 0, 'every client process finished');
    # Past the latch (5 s), the next requests count in Redis again, exactly.
    sleep 6;
    my $key = sub { GwRedis::key('user', 'alice', $_[0], 'day', time) };
    my ($req0, $tok0) = ($rd->get_num($key->('req')), $rd->get_num($key->('tokin')));
    Gw::wait_until(sub { my ($a, $b) = ($rd->get_num($key->('req')), $rd->get_num($key->('tokin')));
                         my $same = $a == $req0 && $b == $tok0; ($req0, $tok0) = ($a, $b); $same }, timeout => 5, interval => 0.5);
    my $n = 0;
    for (1 .. 10) { $n++ if one($ng, 'chat') eq 'ok' }
    is($n, 10, 'ten requests after recovery answered');
    ok(Gw::wait_until(sub { $rd->get_num($key->('tokin')) == $tok0 + 110 }, timeout => 10),
       'and counted in Redis exactly (11 tokens in each)') or diag('tokin ' . $rd->get_num($key->('tokin')) . " from $tok0");
    is($rd->get_num($key->('req')), $req0 + 10, 'ten requests more in Redis');
    is_deeply([$ng->log_problems], [], 'no [alert], [crit] or [emerg]');
    $ng->stop;
    $rd->stop;
};

done_testing();
