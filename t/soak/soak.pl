#!/usr/bin/perl
# make soak [SOAK_SECONDS=600]: the gateway, built with AddressSanitizer and
# UndefinedBehaviorSanitizer, under mixed traffic for SOAK_SECONDS while the
# store and nginx itself go through what operators see: every minute Redis
# is SIGKILLed and restarted, hung (SIGSTOP) for 2 s, and nginx reloaded;
# clients cancel streams mid-way. Traffic: chat, streams, streams
# translated to Anthropic- and Gemini-type providers, /v1/responses
# translated, /v1/messages, rejections, cancels (6 clients).
#
# Passes when: no sanitizer report and no [alert], [crit] or [emerg] in
# error.log; no request failed but the cancelled ones (fail_open=on: the
# store's outages cost no request); the workers' memory flat after warm-up
# (sampled every 10 s: the highest sample of the last third of the run is at
# most 15% + 8 MiB above the highest of the second third). The samples and
# the outcome counts are printed; docs/testing.md#soak records a run.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Gw;
use GwConf;
use GwMeter;
use GwLoad;
use GwRedis;
use Test::More;

Gw::need_module();
GwRedis::need_redis();

my $SECONDS = $ENV{SOAK_SECONDS} // 600;
Gw::watchdog($SECONDS + 240);   # the harness's default bound is 300 s
my $SAMPLE = 10;
my $KEY = 'sk-soak-user-0001';
my $CAPPED = 'sk-soak-capped-0002';

my $mock = Gw::Mock->start();
my $rd = GwRedis->start();
my $http = "llm_gateway_store redis://127.0.0.1:%%RPORT%% timeout=500ms fail_open=on flush=50ms;\n"
         . "llm_gateway_provider claude type=anthropic location=/_llm/claude/ key=sk-ant-soak models=claude-sonnet-4-5;\n"
         . "llm_gateway_provider gem type=gemini location=/_llm/gem/ key=AIzaSoak models=gemini-2.5-flash;\n";
my $loc = sub {
    my ($name, $base) = @_;
    return "    location /_llm/$name/ {\n        internal;\n        proxy_pass http://mock_up$base;\n"
         . "        proxy_http_version 1.1;\n        proxy_set_header Connection \"\";\n        proxy_buffering off;\n    }\n";
};
my $conf = GwMeter::conf(users => ["llm_gateway_user alice key=$KEY;", "llm_gateway_user capped key=$CAPPED requests_per_day=1;"],
                         http => $http, server => $loc->('claude', '/') . $loc->('gem', '/'));
my $vars = { MOCK => $mock->port, RPORT => $rd->port };
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, vars => $vars);
$ng->allow_log(qr/llm_gateway: .*store/i);

my $auth = GwMeter::auth($KEY);
my %BODY = (
    stream  => ['/v1/chat/completions', { model => 'gpt-4o-mini', stream => JSON::PP::true(), messages => [{ role => 'user', content => 'hi' }] }],
    xstream => ['/v1/chat/completions', { model => 'claude-sonnet-4-5', stream => JSON::PP::true(), messages => [{ role => 'user', content => 'hi' }] }],
    gstream => ['/v1/chat/completions', { model => 'gemini-2.5-flash', stream => JSON::PP::true(), messages => [{ role => 'user', content => 'hi' }] }],
    rstream => ['/v1/responses', { model => 'claude-sonnet-4-5', stream => JSON::PP::true(), input => 'hi' }],
    messages => ['/v1/messages', { model => 'gemini-2.5-flash', max_tokens => 32, messages => [{ role => 'user', content => 'hi' }] }],
    cancel  => ['/v1/chat/completions', { model => 'claude-sonnet-4-5', stream => JSON::PP::true(), messages => [{ role => 'user', content => 'hi' }] }],
);

sub one {
    my ($kind) = @_;
    if ($kind eq 'chat' || $kind eq 'reject') {
        my $r = GwMeter::chat($ng, $kind eq 'chat' ? $KEY : $CAPPED, timeout => 10);
        return $r->{status} ? ($r->{status} == 200 ? 'ok' : $r->{status}) : 'error';
    }
    my ($path, $body) = @{ $BODY{$kind} };
    if ($kind eq 'messages') {
        my $r = Gw::http(POST => $ng->url($path), headers => $auth, body => $body, timeout => 10);
        return $r->{status} ? ($r->{status} == 200 ? 'ok' : $r->{status}) : 'error';
    }
    my $r = Gw::stream_request(POST => $ng->url($path), headers => $auth, body => $body, timeout => 10,
                               ($kind eq 'cancel' ? (abort_after_events => 2) : ()));
    return 'cancelled' if $kind eq 'cancel' && $r->{aborted};
    return 'error' unless $r->{status};
    return $r->{status} unless $r->{status} == 200;
    return $r->{complete} && @{ $r->{events} || [] } ? 'ok' : 'incomplete';
}

# The load: 6 clients for the whole run.
my $load = GwLoad::start(6, $SECONDS, \&one, qw(chat stream xstream gstream rstream messages reject cancel));

sub rss_kb {
    my $kb = 0;
    for my $pid ($ng->worker_pids) {
        my $s = Gw::_slurp("/proc/$pid/status") // '';
        $kb += $1 if $s =~ /^VmRSS:\s+(\d+)/m;
    }
    return $kb;
}

my $t0 = time;
my (@samples, %faults);
my $next_sample = $t0 + $SAMPLE;
while (time - $t0 < $SECONDS) {
    my $t = time - $t0;
    my $phase = $t % 60;
    if ($phase == 20 && !$faults{"kill$t"}++) {
        $rd->kill9; select(undef, undef, undef, 3); $rd->restart; $faults{redis_kill}++;
    } elsif ($phase == 35 && !$faults{"stop$t"}++) {
        kill 'STOP', $rd->pid; select(undef, undef, undef, 2); kill 'CONT', $rd->pid; $faults{redis_stop}++;
    } elsif ($phase == 50 && !$faults{"reload$t"}++) {
        $faults{reload}++ if $ng->reload;
    }
    if (time >= $next_sample) {
        push @samples, [time - $t0, rss_kb()];
        $next_sample += $SAMPLE;
    }
    select(undef, undef, undef, 0.2);
}
my $sum = GwLoad::finish($load);
diag("faults: " . Gw::json_encode({ map { $_ => $faults{$_} } grep { !/\d/ } keys %faults }));
diag("outcomes: " . Gw::json_encode($sum));
diag("worker RSS (KiB, both workers) every ${SAMPLE}s: " . join(' ', map { "$_->[0]s=$_->[1]" } @samples));

my ($okn, $bad) = (0, 0);
for my $k (keys %$sum) {
    next if $k eq 'client';
    for my $o (keys %{ $sum->{$k} }) {
        my $n = $sum->{$k}{$o};
        if ($o eq 'ok' || ($k eq 'reject' && $o eq '429') || ($k eq 'cancel' && $o eq 'cancelled')) { $okn += $n }
        else { $bad += $n; diag("failed: $k -> $o x$n") }
    }
}
ok($okn > $SECONDS, "requests answered: $okn");
is($bad, 0, 'no request failed but the cancelled ones');
is(scalar keys %{ $sum->{client} || {} }, 0, 'every client finished');
ok(($faults{redis_kill} // 0) >= 1 && ($faults{reload} // 0) >= 1, 'the store was killed and nginx reloaded at least once');
my $n = @samples;
if ($n >= 6) {
    my @mid = @samples[int($n / 3) .. int(2 * $n / 3) - 1];
    my @last = @samples[int(2 * $n / 3) .. $n - 1];
    my ($mmax) = sort { $b <=> $a } map { $_->[1] } @mid;
    my ($lmax) = sort { $b <=> $a } map { $_->[1] } @last;
    ok($lmax <= $mmax * 1.15 + 8192, "memory flat after warm-up: last third max $lmax KiB, second third max $mmax KiB");
} else {
    fail("too few memory samples ($n): run at least 60 s");
}
is_deeply([$ng->log_problems], [], 'no sanitizer report, no [alert], [crit] or [emerg]');
$ng->stop;
done_testing();
