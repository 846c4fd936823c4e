#!/usr/bin/perl
# The provider health breaker across the two workers: it opens after the
# configured consecutive failures, skips the provider (503 + Retry-After,
# no call), lets one probe through after the open time, reopens when the
# probe fails and closes when it succeeds; /admin/api/overview shows it.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();

my $KEY = 'sk-br-alice-9c8d';
my $ADMIN = 'sk-br-admin-7e6f';
my $mock = Gw::Mock->start();
my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port },
    conf => GwConf::gateway(
        providers => [ { name => 'flaky', key => 'sk-flaky', models => 'm1', default => 1 },
                       { name => 'spare', key => 'sk-spare', models => 'm2' } ],
        retries => 0, breaker => 'failures=3 open=2s',
        http => "llm_gateway_user alice key=$KEY;\nllm_gateway_user root key=$ADMIN admin;\n"
              . "llm_gateway_alias both flaky/m1 spare/m2;\n",
        server => "location /admin { llm_gateway_admin; }"));

sub chat {
    my ($model) = @_;
    return Gw::http(POST => $ng->url('/v1/chat/completions'),
                    headers => { Authorization => "Bearer $KEY", Connection => 'close' },
                    body => { model => $model, messages => [{ role => 'user', content => 'hi' }] }, timeout => 10);
}

sub health {
    my $r = Gw::http(GET => $ng->url('/admin/api/overview'), headers => { 'x-api-key' => $ADMIN });
    my ($p) = grep { $_->{name} eq 'flaky' } @{ ($r->{json} || {})->{providers} || [] };
    return ($p || {})->{health} || {};
}

sub fail_next { $mock->script({ match => { model => 'm1' }, status => 500, times => $_[0], json => { error => { message => 'down' } } }) }

subtest 'closed: failures are relayed until the threshold' => sub {
    $mock->reset;
    is(health()->{state}, 'closed', 'starts closed');
    fail_next(3);
    for my $i (1 .. 3) {
        my $r = chat('m1');
        is($r->{status}, 500, "failure $i relayed");
    }
    is(scalar @{ $mock->requests }, 3, 'three calls');
    my $h = health();
    is($h->{state}, 'open', 'open after three consecutive failures');
    is($h->{consecutiveFailures}, 3, 'three counted');
    like($h->{retryAt} // '', qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'with the probe time');
};

subtest 'open: skipped by every worker, 503 with Retry-After' => sub {
    $mock->reset;
    my $from = length $ng->error_log;
    for my $i (1 .. 8) {
        my $r = chat('m1');
        GwConf::is_envelope($r, 503, 'server_error', 'provider_unavailable', "request $i: 503");
        my $ra = $r->{headers}{'retry-after'} // '';
        ok($ra =~ /^\d+$/ && $ra >= 1 && $ra <= 2, "request $i: Retry-After $ra within the open time");
    }
    is(scalar @{ $mock->requests }, 0, 'the provider was not called');
    my @skips = grep { /provider "flaky" skipped: its breaker is open/ } split /\n/, substr($ng->error_log, $from);
    is(scalar @skips, 8, 'each request logged the skip');
    my $r = chat('both');
    is($r->{status}, 200, 'an alias with another target fails over without calling it');
    is_deeply([map { $_->{json}{model} } @{ $mock->requests }], ['m2'], 'only the spare was called');
};

subtest 'half-open: one probe; a failed probe reopens' => sub {
    $mock->reset;
    sleep 2;
    fail_next(1);
    my $r = chat('m1');
    is($r->{status}, 500, 'the probe went through and failed');
    is(scalar @{ $mock->requests }, 1, 'one call');
    is(health()->{state}, 'open', 'open again');
    $r = chat('m1');
    is($r->{status}, 503, 'skipped again');
    is(scalar @{ $mock->requests }, 1, 'no call');
};

subtest 'a successful probe closes it' => sub {
    $mock->reset;
    sleep 2;
    my $r = chat('m1');
    is($r->{status}, 200, 'the probe succeeded');
    my $h = health();
    is($h->{state}, 'closed', 'closed');
    is($h->{consecutiveFailures}, 0, 'count reset');
    is($h->{retryAt}, undef, 'no probe time');
    for my $i (1 .. 4) {
        is(chat('m1')->{status}, 200, "request $i after closing: 200");
    }
    is(scalar @{ $mock->requests }, 5, 'all called');
};

subtest 'a reload keeps the zone and starts its breakers closed' => sub {
    $mock->reset;
    fail_next(3);
    chat('m1') for 1 .. 3;
    is(health()->{state}, 'open', 'open before the reload');
    ok($ng->reload, 'reload');
    my $h = health();
    is($h->{state}, 'closed', 'closed after the reload');
    is($h->{consecutiveFailures}, 0, 'count reset');
    $mock->reset;
    is(chat('m1')->{status}, 200, 'the provider is called again');
    is(scalar @{ $mock->requests }, 1, 'one call');
};

done_testing();
