#!/usr/bin/perl
# Failover across an alias's targets and retries on one target
# (docs/failover.md): which provider got what, when, and what was counted
# (provider attempt and failure counters read from Redis).

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwRedis;
use Test::More;
use Time::HiRes ();

Gw::need_module();
GwRedis::need_redis();

my $KEY = 'sk-fo-alice-1a2b';
my $mock = Gw::Mock->start();
my $rd = GwRedis->start();
my $closed_port = Gw::closed_port();   # nothing listens there: connection refused

my @providers = (
    { name => 'p1',   type => 'openai',    key => 'sk-p1', models => 'gpt-4o-mini' },
    { name => 'p2',   type => 'anthropic', key => 'sk-p2', models => 'claude-sonnet-4-5' },
    { name => 'down', type => 'openai',    key => 'sk-down', server => "127.0.0.1:$closed_port" },
    { name => 'slow', type => 'openai',    key => 'sk-slow', loc_extra => 'proxy_read_timeout 1s;' },
);
my $http = "llm_gateway_user alice key=$KEY;\n"
         . "llm_gateway_store redis://127.0.0.1:%%RPORT%%/5;\n"
         . "llm_gateway_alias chain p1/gpt-4o-mini p2/claude-sonnet-4-5;\n"
         . "llm_gateway_alias downfirst down/m p1/gpt-4o-mini;\n"
         . "llm_gateway_alias slowfirst slow/slow-m p1/gpt-4o-mini;\n"
         . "llm_gateway_alias same p1/gpt-4o-mini p1/gpt-4o;\n";

sub start_gateway {
    my (%o) = @_;
    return Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port, RPORT => $rd->port },
        conf => GwConf::gateway(providers => \@providers, http => $http, %o));
}

sub chat {
    my ($ng, $model, %o) = @_;
    return Gw::http(POST => $ng->url('/v1/chat/completions'), headers => { Authorization => "Bearer $KEY" },
                    body => { model => $model, messages => [{ role => 'user', content => 'hi' }], %{ $o{extra} || {} } },
                    timeout => $o{timeout} // 15);
}

my %seen;   # counter key -> value before the subtest
sub counter { my ($scope, $id, $m) = @_; return $rd->get_num(GwRedis::key($scope, $id, $m, 'month', time), 5) }
sub deltas {
    my (@ids) = @_;
    my %d;
    for my $id (@ids) {
        my ($scope, $name) = split /:/, $id, 2;
        for my $m (qw(att fail)) {
            my $k = "$id:$m";
            $d{$k} = counter($scope, $name, $m) - ($seen{$k} // 0);
        }
    }
    return \%d;
}
sub snapshot {
    for my $id (@_) {
        my ($scope, $name) = split /:/, $id, 2;
        $seen{"$id:$_"} = counter($scope, $name, $_) for qw(att fail);
    }
}
my @PROVS = ('prov:p1', 'prov:p2', 'prov:down', 'prov:slow', 'provmodel:p1/gpt-4o-mini', 'provmodel:p2/claude-sonnet-4-5');

sub paths { return [map { "$_->{method} $_->{path}" } @{ $_[0] }] }

# ------------------------------------------------- failover, no retries
my $ng = start_gateway(retries => 0, breaker => 'off');

for my $case ([429, 'rate_limit_error'], [500, 'server_error'], [503, 'server_error']) {
    my ($status) = @$case;
    subtest "failover on $status" => sub {
        $mock->reset;
        snapshot(@PROVS);
        $mock->script({ match => { path => '/v1/chat/completions' }, status => $status,
                        json => { error => { message => "busy $status", type => 'server_error' } } });
        my $r = chat($ng, 'chain');
        is($r->{status}, 200, 'the caller gets an answer');
        is($r->{json}{choices}[0]{message}{content}, 'Hello world', 'from the next target');
        is($r->{json}{model}, 'chain', 'the model the caller named');
        is_deeply(paths($mock->requests), ['POST /v1/chat/completions', 'POST /v1/messages'], 'p1, then p2');
        ok(Gw::wait_until(sub { deltas('prov:p2')->{'prov:p2:att'} == 1 }, timeout => 5), 'counted');
        is_deeply(deltas(@PROVS), {
            'prov:p1:att' => 1, 'prov:p1:fail' => 1, 'prov:p2:att' => 1, 'prov:p2:fail' => 0,
            'prov:down:att' => 0, 'prov:down:fail' => 0, 'prov:slow:att' => 0, 'prov:slow:fail' => 0,
            'provmodel:p1/gpt-4o-mini:att' => 1, 'provmodel:p1/gpt-4o-mini:fail' => 1,
            'provmodel:p2/claude-sonnet-4-5:att' => 1, 'provmodel:p2/claude-sonnet-4-5:fail' => 0,
        }, 'one failed attempt on p1, one good one on p2');
        ok($ng->wait_log(qr/llm_gateway: usage user="alice" model="p2\/claude-sonnet-4-5" prompt_tokens=11 completion_tokens=7/),
           'tokens counted against the provider and model that answered');
    };
}

subtest 'failover on connection refused' => sub {
    $mock->reset;
    snapshot(@PROVS);
    my $r = chat($ng, 'downfirst');
    is($r->{status}, 200, 'answered by the second target');
    is_deeply(paths($mock->requests), ['POST /v1/chat/completions'], 'p1 called once');
    ok(Gw::wait_until(sub { deltas('prov:down')->{'prov:down:fail'} == 1 }, timeout => 5), 'down: one failure');
    is(deltas('prov:p1')->{'prov:p1:att'}, 1, 'p1: one attempt');
};

subtest 'failover on timeout' => sub {
    $mock->reset;
    snapshot(@PROVS);
    $mock->script({ match => { model => 'slow-m' }, delay_ms => 3000, json => { never => 'used' } });
    my $t0 = Time::HiRes::time();
    my $r = chat($ng, 'slowfirst');
    my $dt = Time::HiRes::time() - $t0;
    is($r->{status}, 200, 'answered by the second target');
    ok($dt >= 0.9 && $dt < 2.8, sprintf('after the 1 s read timeout (%.2fs)', $dt));
    is_deeply([map { $_->{json}{model} } @{ $mock->requests }], ['slow-m', 'gpt-4o-mini'], 'slow, then p1');
    ok(Gw::wait_until(sub { deltas('prov:slow')->{'prov:slow:fail'} == 1 }, timeout => 5), 'slow: one failure');
};

subtest 'no failover after the first streamed byte' => sub {
    $mock->reset;
    $mock->script({ match => { path => '/v1/chat/completions' }, truncate => 1, sse => [
        'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}' ] });
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => { Authorization => "Bearer $KEY" },
        body => { model => 'chain', stream => JSON::PP::true(), messages => [{ role => 'user', content => 'hi' }] },
        timeout => 10);
    is($r->{status}, 200, 'the stream began');
    like($r->{body}, qr/"content":"Hel"/, 'the first chunk reached the client');
    like($r->{body}, qr/event: error\ndata: \{"error":\{"message":"the upstream stream ended before completion"/,
         'the cut stream ends with an error event');
    is_deeply(paths($mock->requests), ['POST /v1/chat/completions'], 'no second call');
};

subtest 'every target fails: the last failure is the answer' => sub {
    $mock->reset;
    $mock->script(
        { match => { path => '/v1/chat/completions' }, status => 500, json => { error => { message => 'p1 broke' } } },
        { match => { path => '/v1/messages' }, status => 529,
          json => { type => 'error', error => { type => 'overloaded_error', message => 'Overloaded' } } },
    );
    my $r = chat($ng, 'chain');
    is($r->{status}, 529, "the last target's status");
    is($r->{json}{error}{message}, 'upstream returned status 529: Overloaded', "the last target's message, in the caller's envelope");
    is(scalar @{ $mock->requests }, 2, 'two calls');
};

subtest 'a 4xx other than 429 is final' => sub {
    $mock->reset;
    $mock->script({ match => { path => '/v1/chat/completions' }, status => 400,
                    json => { error => { message => 'bad request', type => 'invalid_request_error' } } });
    my $r = chat($ng, 'chain');
    is($r->{status}, 400, 'relayed');
    is(scalar @{ $mock->requests }, 1, 'no failover');
};

$ng->stop;

# ---------------------------------------------------------------- retries
$ng = start_gateway(retries => 1, breaker => 'off',
                    http => $http . "llm_gateway_retry_backoff 200ms 400ms;\n");

subtest 'Retry-After is honoured exactly' => sub {
    $mock->reset;
    $mock->script({ match => { path => '/v1/chat/completions' }, status => 429, headers => { 'Retry-After' => '2' },
                    json => { error => { message => 'slow down', type => 'requests' } } });
    my $r = chat($ng, 'p1/gpt-4o-mini');
    is($r->{status}, 200, 'answered by the retry');
    my $q = $mock->requests;
    is(scalar @$q, 2, 'two calls to the same target');
    my $gap = $q->[1]{time} - $q->[0]{time};
    ok($gap >= 2.0 && $gap < 2.6, sprintf('the retry came 2 s later, never earlier (%.3fs)', $gap));
};

subtest 'a Retry-After over 30 s is not waited for' => sub {
    $mock->reset;
    $mock->script({ match => { path => '/v1/chat/completions' }, status => 429, headers => { 'Retry-After' => '60' },
                    json => { error => { message => 'come back later', type => 'requests' } } });
    my $t0 = Time::HiRes::time();
    my $r = chat($ng, 'p1/gpt-4o-mini');
    is($r->{status}, 429, 'the 429 is the answer');
    is($r->{headers}{'retry-after'}, '60', 'with its Retry-After');
    ok(Time::HiRes::time() - $t0 < 1.5, 'at once');
    is(scalar @{ $mock->requests }, 1, 'no retry');

    $mock->reset;
    $mock->script({ match => { path => '/v1/chat/completions' }, status => 503, headers => { 'Retry-After' => '3600' },
                    json => { error => { message => 'maintenance' } } });
    $r = chat($ng, 'chain');
    is($r->{status}, 200, 'with another target: failover at once');
    is_deeply(paths($mock->requests), ['POST /v1/chat/completions', 'POST /v1/messages'], 'p1 once, then p2');
};

subtest 'the backoff stays within its bounds' => sub {
    for my $i (1 .. 3) {
        $mock->reset;
        $mock->script({ match => { path => '/v1/chat/completions' }, status => 500, json => { error => { message => 'x' } } });
        my $r = chat($ng, 'p1/gpt-4o-mini');
        is($r->{status}, 200, "round $i: answered by the retry");
        my $q = $mock->requests;
        my $gap = @$q == 2 ? $q->[1]{time} - $q->[0]{time} : -1;
        ok($gap >= 0.1 && $gap < 0.35, sprintf('round %d: gap %.3fs within [0.1, 0.2] s plus transit', $i, $gap));
    }
};

subtest 'retries on the same target, then the next target' => sub {
    $mock->reset;
    $mock->script({ match => { path => '/v1/chat/completions' }, status => 502, times => 2, json => { error => { message => 'x' } } });
    my $r = chat($ng, 'chain');
    is($r->{status}, 200, 'answered');
    is_deeply(paths($mock->requests), ['POST /v1/chat/completions', 'POST /v1/chat/completions', 'POST /v1/messages'],
              'p1, p1 again, then p2');
};

subtest 'a client gone during a wait ends it' => sub {
    $mock->reset;
    snapshot(@PROVS);
    my $from = length $ng->error_log;
    $mock->script({ match => { path => '/v1/chat/completions' }, status => 429, headers => { 'Retry-After' => '3' },
                    json => { error => { message => 'wait' } } });
    my $r = chat($ng, 'p1/gpt-4o-mini', timeout => 1);
    ok($r->{status} == 599 || $r->{status} == 0, 'the client gave up');
    sleep 4;
    is(scalar @{ $mock->requests }, 1, 'no further attempt');
    ok(Gw::wait_until(sub { grep { /client closed the connection while a retry was waiting/ }
                                 split /\n/, substr($ng->error_log, $from) }, timeout => 5), 'logged');
    is_deeply(deltas('prov:p1'), { 'prov:p1:att' => 1, 'prov:p1:fail' => 1 },
              'the failed attempt counted, nothing for the abandoned one');
    unlike(substr($ng->error_log, $from), qr/llm_gateway: usage user="alice"/, 'no tokens counted');
};

$ng->stop;

# ------------------------------------------- retries and breaker per provider
subtest 'retries, backoff and breaker per provider (llm_gateway_provider)' => sub {
    my @pp = ({ name => 'flaky', type => 'openai', key => 'sk-flaky', models => 'gpt-4o-mini',
                params => 'retries=3 retry_backoff=1ms,5ms breaker=off' },
              { name => 'dear', type => 'openai', key => 'sk-dear', models => 'gpt-4o',
                params => 'retries=0 breaker_failures=2 breaker_open=1h' },
              { name => 'plain', type => 'openai', key => 'sk-plain', models => 'gpt-4o-nano' });
    # The http level: one retry, a 50 ms backoff, a breaker after 5.
    my $g = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port, RPORT => $rd->port },
        conf => GwConf::gateway(providers => \@pp, retries => 1, breaker => 'failures=5 open=30s',
                                http => "llm_gateway_user alice key=$KEY;\nllm_gateway_retry_backoff 50ms 50ms;\n"
                                      . "llm_gateway_user root key=sk-fo-root-9 admin;\n",
                                server => "location /admin { llm_gateway_admin; }"));
    my $fail = sub { $mock->reset; $mock->script({ match => { path => '/v1/chat/completions' }, status => 500, times => 100,
                                                   json => { error => { message => 'x' } } }) };
    $fail->();
    is(chat($g, 'flaky/gpt-4o-mini')->{status}, 500, 'flaky: the failure is the answer');
    is(scalar @{ $mock->requests }, 4, 'flaky: tried 4 times (retries=3), the http level says 2');
    $fail->();
    is(chat($g, 'plain/gpt-4o-nano')->{status}, 500, 'plain: the failure is the answer');
    is(scalar @{ $mock->requests }, 2, 'plain: tried twice (the http level\'s llm_gateway_retries 1)');
    $fail->();
    is(chat($g, 'dear/gpt-4o')->{status}, 500, 'dear: 500') for 1 .. 2;
    is(scalar @{ $mock->requests }, 2, 'dear: one call per request (retries=0)');
    $fail->();
    my $r = chat($g, 'dear/gpt-4o');
    is($r->{status}, 503, 'dear: its breaker opened after its own 2 failures (the http level says 5)');
    is(scalar @{ $mock->requests }, 0, 'dear: skipped, nothing sent');
    $fail->();
    is(chat($g, 'flaky/gpt-4o-mini')->{status}, 500, 'flaky: breaker=off, still called') for 1 .. 2;
    is(scalar @{ $mock->requests }, 8, 'flaky: 4 calls each time');
    my $c = Gw::http(GET => $g->url('/admin/api/config'), headers => { Authorization => 'Bearer sk-fo-root-9' });
    my %byname = map { $_->{name} => $_ } @{ $c->{json}{providers} || [] };
    is_deeply([@{ $byname{flaky} }{qw(retries retryBackoffMs retryBackoffMaxMs breaker)}], [3, 1, 5, undef],
              'config route: flaky\'s effective values');
    is_deeply([@{ $byname{dear} }{qw(retries retryBackoffMs retryBackoffMaxMs)}], [0, 50, 50], 'dear: its retries, the http backoff');
    is_deeply($byname{dear}{breaker}, { failures => 2, openMs => 3600000 }, 'dear: its breaker');
    is_deeply($byname{plain}{breaker}, { failures => 5, openMs => 30000 }, 'plain: the http level\'s breaker');
    my $o = Gw::http(GET => $g->url('/admin/api/overview'), headers => { Authorization => 'Bearer sk-fo-root-9' });
    my ($ov) = grep { $_->{name} eq 'flaky' } @{ $o->{json}{providers} || [] };
    is($ov->{retries}, 3, 'overview: flaky retries 3');
    $g->stop;
    for my $case (['retries=11', qr/retries= of llm_gateway_provider "x" must be a number from 0 to 10/],
                  ['retry_backoff=2s,1s', qr/retry_backoff= of llm_gateway_provider "x" must be two times, base,max/],
                  ['breaker_failures=0', qr/breaker_failures= of llm_gateway_provider "x" must be a number from 1 to 1000/],
                  ['breaker_open=5h', qr/breaker_open= of llm_gateway_provider "x" must be a time from 1s to 1h/],
                  ['breaker=off breaker_open=10s', qr/breaker=off and breaker_open= contradict/]) {
        my ($rc, $out, $file) = Gw::nginx_t(GwConf::gateway(providers => [{ name => 'x', key => 'sk-x', models => 'm',
                                                                             params => $case->[0] }]),
                                            vars => { MOCK => 1 });
        isnt($rc, 0, "$case->[0]: nginx -t fails");
        like($out, $case->[1], "$case->[0]: the sentence says why");
        like($out, qr/ in \Q$file\E:\d+/, "$case->[0]: file and line");
    }
};

done_testing();
