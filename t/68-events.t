#!/usr/bin/perl
# The failure feed: each hook of the spec's table with its kind, status,
# route and message; no event on success, on an upstream 4xx other than 429,
# on a translation error or on a client cancel; the ring wrapping at 200
# across two workers; GET /admin/api/events (gate, headers, limit); the
# mirror to a real redis-server (one pipeline, capped list, no TTL, throttled,
# skipped while latched, source and degraded switching, bad elements skipped).

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

my $KEY = 'sk-ev-alice-0a1b';
my $LIM = 'sk-ev-lim-2c3d';
my $BUD = 'sk-ev-bud-4e5f';
my $ADMIN = 'sk-ev-root-6a7b';
my $closed_port = Gw::closed_port();

sub gateway_conf {
    my (%o) = @_;
    return GwConf::gateway(
        providers => [
            { name => 'oai', type => 'openai', key => 'sk-prov', models => 'gpt-4o-mini,gpt-4o,local-x',
              loc_extra => 'proxy_read_timeout 1s;' },
            { name => 'gem', type => 'gemini', key => 'AIzaX', models => 'gemini-2.5-flash' },
            { name => 'down', type => 'openai', key => 'sk-down', models => 'down-1', server => "127.0.0.1:$closed_port" },
        ],
        http => ($o{store} // '')
              . "llm_gateway_user root key=$ADMIN admin;\n"
              . "llm_gateway_user alice key=$KEY group=eng;\n"
              . "llm_gateway_user lim key=$LIM requests_per_minute=1;\n"
              . "llm_gateway_user bud key=$BUD group=eng cost_per_day=0.000001;\n"
              . "llm_gateway_price oai/gpt-4o-mini input=0.15 output=0.6;\n"
              . "llm_gateway_price oai/gpt-4o input=2.5 output=10;\n",
        server => "location /admin { llm_gateway_admin; }\n"
                . "    location /passthrough/ { llm_gateway_passthrough; }",
    );
}

my $mock = Gw::Mock->start();
my $ng = Gw::Nginx->start(conf => gateway_conf(), workers => 2, vars => { MOCK => $mock->port });

sub events {
    my (%o) = @_;
    my $q = defined $o{limit} ? "?limit=$o{limit}" : '';
    my $r = Gw::http(GET => ($o{ng} // $ng)->url("/admin/api/events$q"), headers => GwConf::bearer($o{key} // $ADMIN));
    return $r if $o{raw};
    return $r->{json};
}

sub newest { my $e = events(limit => 200); return $e->{events}[0] }
sub count { return scalar @{ events(limit => 200)->{events} } }

sub chat {
    my ($model, %o) = @_;
    return Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($o{key} // $KEY),
                    body => GwConf::chat_body($model, %{ $o{extra} || {} }), timeout => 10);
}

sub strip { my ($e) = @_; my %c = %$e; delete @c{qw(time replica)}; return \%c }

subtest 'the events route: gate, headers, an empty feed' => sub {
    my $r = events(raw => 1);
    is($r->{status}, 200, 'admin: 200');
    is($r->{headers}{'x-content-type-options'}, 'nosniff', 'nosniff');
    is($r->{headers}{'cache-control'}, 'no-store', 'no-store');
    like($r->{headers}{'content-security-policy'}, qr/default-src 'none'/, 'CSP');
    is_deeply($r->{json}, { source => 'replica', replica => $r->{json}{replica}, events => [], capacity => 200 },
              'empty ring, source replica, no degraded field');
    ok(length $r->{json}{replica}, 'replica id');
    is(events(raw => 1, key => $KEY)->{status}, 403, 'non-admin: 403');
    is(Gw::http(GET => $ng->url('/admin/api/events'))->{status}, 401, 'no key: 401');
    for my $bad (qw(0 -1 abc 1.5)) {
        my $b = events(raw => 1, limit => $bad);
        GwConf::is_envelope($b, 400, 'invalid_request_error', 'invalid_limit', "limit=$bad: 400");
    }
};

subtest 'no event on success, on an upstream 400/404, on a translation refusal' => sub {
    $mock->reset;
    is(chat('gpt-4o-mini')->{status}, 200, 'success');
    $mock->script({ match => { model => 'gpt-4o' }, status => 400, json => { error => { message => 'bad', type => 'invalid_request_error' } } });
    is(chat('gpt-4o')->{status}, 400, 'upstream 400 relayed');
    is(Gw::http(GET => $ng->url('/passthrough/oai/nothing-here'), headers => GwConf::bearer($KEY))->{status}, 404,
       'passthrough 404 relayed');
    my $r = Gw::http(POST => $ng->url('/v1/messages'), headers => GwConf::bearer($KEY),
                     body => { model => 'gemini-2.5-flash', max_tokens => 10, top_k => 5,
                               messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 400, 'translation refusal (top_k to Gemini)');
    is(count(), 0, 'no event');
};

subtest 'no event on a client cancel' => sub {
    $mock->reset;
    $mock->script({ match => { model => 'gpt-4o' }, sse => [map { { data => { choices => [{ index => 0, delta => { content => "x$_" } }] } } } 1 .. 20], delay_ms => 100 });
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                               body => GwConf::chat_body('gpt-4o', stream => JSON::PP::true), abort_after_events => 1, timeout => 5);
    ok($r->{aborted}, 'client went away after the first event');
    sleep 1;
    is(count(), 0, 'no event');
};

subtest 'upstream hooks: 503, 429, timeout, refused, invalid answer' => sub {
    $mock->reset;
    $mock->script({ match => { model => 'gpt-4o' }, status => 503, json => { error => { message => 'overloaded, key sk-abcdef1234567890abcdef', type => 'server_error' } } });
    is(chat('gpt-4o')->{status}, 503, '503 relayed');
    is_deeply(strip(newest()), { user => 'alice', group => 'eng', model => 'oai/gpt-4o', provider => 'oai',
                                 route => 'chat/completions', kind => 'upstream', status => 503,
                                 message => 'overloaded, key [redacted]' }, '503: the scrubbed provider text');
    $mock->script({ match => { model => 'gpt-4o' }, status => 429, json => { error => { message => 'slow down', type => 'rate_limit_error' } } });
    chat('gpt-4o');
    is_deeply([@{ strip(newest()) }{qw(kind status message)}], ['upstream', 429, 'slow down'], '429');
    $mock->script({ match => { model => 'gpt-4o' }, hang => JSON::PP::true });
    is(chat('gpt-4o')->{status}, 504, 'timeout: 504');
    is_deeply([@{ strip(newest()) }{qw(kind status message)}], ['timeout', 504, 'the upstream provider timed out'], 'timeout');
    is(chat('down-1')->{status}, 502, 'refused: 502');
    is_deeply([@{ strip(newest()) }{qw(kind status message provider model)}],
              ['upstream', 502, 'the upstream provider could not be reached', 'down', 'down/down-1'], 'refused');
    $mock->script({ match => { model => 'gpt-4o' }, status => 200, body => 'not json', headers => { 'content-type' => 'application/json' } });
    is(chat('gpt-4o')->{status}, 502, 'invalid answer: 502');
    is_deeply([@{ strip(newest()) }{qw(kind status message)}], ['upstream', 502, 'the response body is not valid JSON'], 'invalid');
    my $e = events(limit => 2);
    is(scalar @{ $e->{events} }, 2, 'limit=2: two events');
    is($e->{events}[0]{kind}, 'upstream', 'newest first');
    is($e->{events}[1]{kind}, 'upstream', 'then the one before (refused)');
    is($e->{events}[1]{status}, 502, '...');
    is(count(), 5, 'five events in all');
};

subtest 'proxied requests: 5xx and no response, fixed texts' => sub {
    $mock->reset;
    $mock->script({ match => { path => '/v1/files' }, status => 502, body => 'bad gateway <html>' });
    is(Gw::http(GET => $ng->url('/passthrough/oai/files'), headers => GwConf::bearer($KEY))->{status}, 502, 'relayed');
    # A relayed answer reaches the caller as it streams; its event is
    # written when the call ends, a moment later, maybe on the other worker.
    Gw::wait_until(sub { (newest() // {})->{route} }, timeout => 5);
    is_deeply([@{ strip(newest()) }{qw(route kind status message provider)}],
              ['passthrough', 'upstream', 502, 'passthrough upstream returned status 502', 'oai'], 'fixed text, never the body');
    is(Gw::http(GET => $ng->url('/passthrough/down/models'), headers => GwConf::bearer($KEY))->{status}, 502, 'no response');
    is_deeply([@{ strip(newest()) }{qw(route kind status message)}],
              ['passthrough', 'upstream', 502, 'upstream connection error'], 'no response: fixed text');
};

subtest 'limit rejections and the unpriced refusal' => sub {
    GwMeter::wait_second_below(50);
    chat('gpt-4o-mini', key => $LIM);
    my $r = chat('gpt-4o-mini', key => $LIM);
    is($r->{status}, 429, 'rate limit');
    is_deeply(strip(newest()), { user => 'lim', group => 'default', model => 'oai/gpt-4o-mini', provider => 'oai',
                                 route => 'chat/completions', kind => 'rate_limit', status => 429,
                                 message => 'rate limit exceeded: user "lim" requestsPerMinute 1' }, 'rate_limit event');
    chat('gpt-4o-mini', key => $BUD);    # spends the tiny budget
    $r = chat('gpt-4o-mini', key => $BUD);
    is($r->{status}, 429, 'budget');
    is_deeply([@{ strip(newest()) }{qw(kind status user)}], ['budget', 429, 'bud'], 'budget event');
    like(newest()->{message}, qr/^budget exceeded: user "bud" costPerDayUSD/, 'the violation message');
    $r = chat('local-x', key => $BUD);
    is($r->{status}, 402, 'unpriced under a cost budget: 402');
    is_deeply(strip(newest()), { user => 'bud', group => 'eng', model => 'oai/local-x', provider => 'oai', route => 'pricing',
                                 kind => 'unpriced', status => 402,
                                 message => 'model oai/local-x has no configured price and a cost budget applies to this key' },
              'unpriced event, route pricing');
};

subtest 'the ring holds 200 across both workers, oldest overwritten' => sub {
    GwMeter::wait_second_below(40);
    for my $i (1 .. 215) {
        chat('gpt-4o-mini', key => $LIM);
    }
    my $e = events(limit => 500);
    is(scalar @{ $e->{events} }, 200, 'limit over 200 is 200; the ring holds 200');
    is($e->{capacity}, 200, 'capacity');
    my @t = map { $_->{time} } @{ $e->{events} };
    is_deeply(\@t, [sort { $b cmp $a } @t], 'newest first');
    my @lines = GwMeter::log_lines($ng, qr/rejected user="lim"/);
    cmp_ok(scalar(GwMeter::log_pids(@lines)), '>=', 2, 'both workers rejected some');
    is(scalar(grep { $_->{kind} eq 'rate_limit' } @{ $e->{events} }), 200, 'all 200 are the newest rejections');
    is(scalar @{ events()->{events} }, 50, 'default limit 50');
};

subtest 'a reload keeps the ring (the zone is reused)' => sub {
    my $before = events(limit => 200)->{events};
    ok($ng->reload, 'reload');
    is_deeply(events(limit => 200)->{events}, $before, 'the same 200 events after the reload');
};

$ng->stop;

subtest 'unpriced billed as zero (llm_gateway_allow_unpriced on): a warning event' => sub {
    my $ngw = Gw::Nginx->start(conf => gateway_conf(store => "llm_gateway_allow_unpriced on;\n"), workers => 1,
                               vars => { MOCK => $mock->port });
    my $r = Gw::http(POST => $ngw->url('/v1/chat/completions'), headers => GwConf::bearer($BUD),
                     body => GwConf::chat_body('local-x'));
    is($r->{status}, 200, 'served, billed as zero');
    my $e = events(ng => $ngw)->{events}[0];
    is_deeply(strip($e), { user => 'bud', group => 'eng', model => 'oai/local-x', provider => 'oai', route => 'pricing',
                           kind => 'unpriced',
                           message => 'model oai/local-x has no configured price; billed as zero under a cost budget' },
              'kind unpriced, route pricing, no status');
    $ngw->stop;
};

# ------------------------------------------------------------ Redis mirror

{
    my $rd = GwRedis->start();
    my $ng2 = Gw::Nginx->start(conf => gateway_conf(store => "llm_gateway_store redis://127.0.0.1:" . $rd->port . "/0;\n"),
                               workers => 2, vars => { MOCK => $mock->port });
    $ng2->allow_log(qr/limit store|event mirror failed|store/);
    my $ev = sub { my (%o) = @_; return events(ng => $ng2, %o) };
    my $chat2 = sub {
        my ($model, $key) = @_;
        return Gw::http(POST => $ng2->url('/v1/chat/completions'), headers => GwConf::bearer($key // $KEY),
                        body => GwConf::chat_body($model));
    };

    subtest 'mirrored to llmgw:events: one pipeline, capped, no TTL' => sub {
        $mock->reset;
        my $before = $rd->commandstats;
        $mock->script({ match => { model => 'gpt-4o' }, status => 500, json => { error => { message => 'boom' } }, times => 3 });
        $chat2->('gpt-4o') for 1 .. 3;
        Gw::wait_until(sub { $rd->cli('LLEN', 'llmgw:events') == 3 }, timeout => 5);
        is($rd->cli('LLEN', 'llmgw:events'), 3, 'three events in the list');
        is($rd->cli('TTL', 'llmgw:events'), -1, 'no expiry');
        my $after = $rd->commandstats;
        is($rd->calls('lpush', $after) - $rd->calls('lpush', $before), 3, 'one LPUSH per event');
        is($rd->calls('ltrim', $after) - $rd->calls('ltrim', $before), 3, 'one LTRIM per event');
        my $e = $ev->();
        is($e->{source}, 'redis', 'source redis');
        ok(!exists $e->{degraded}, 'not degraded');
        is(scalar @{ $e->{events} }, 3, 'three events');
        is($e->{events}[0]{message}, 'boom', 'the provider text');
    };

    subtest 'bad list elements are skipped' => sub {
        $rd->cli('LPUSH', 'llmgw:events', 'not json');
        $rd->cli('LPUSH', 'llmgw:events', '[1,2]');
        $rd->cli('LPUSH', 'llmgw:events', '{"kind":"upstream","message":"hand-made"');
        my $e = $ev->(limit => 10);
        is($e->{source}, 'redis', 'read from the list');
        is(scalar @{ $e->{events} }, 3, 'only the three events; the 3 bad elements skipped');
    };

    subtest 'throttled at 50 per second per replica; the list capped at 200' => sub {
        $rd->cli('DEL', 'llmgw:events');
        GwMeter::wait_second_below(30);
        # A fresh second: the events of the subtests before may have used
        # part of this second's 50 pushes.
        my $s0 = time;
        Gw::wait_until(sub { time != $s0 }, timeout => 2, interval => 0.05);
        my $t0 = time;
        my $r = Gw::parallel(4, sub {
            for (1 .. 70) { $chat2->('gpt-4o-mini', $LIM) }
            return 1;
        }, timeout => 60);
        my $t1 = time;
        my $seconds = $t1 - $t0 + 1;
        # The last mirror pushes land: wait until the length holds still.
        my $last = -1;
        Gw::wait_until(sub { my $l = $rd->cli('LLEN', 'llmgw:events'); my $same = $l == $last; $last = $l; $same },
                       timeout => 5, interval => 0.3);
        my $n = $rd->cli('LLEN', 'llmgw:events');
        my $rejected = () = GwMeter::log_lines($ng2, qr/rejected user="lim"/);
        diag("mirror: $n of $rejected rejections over $seconds s; lines: " . $rd->cli('LRANGE', 'llmgw:events', '0', '0'));
        cmp_ok($n, '<=', 50 * $seconds, "at most 50 per second mirrored ($n over $seconds s)");
        cmp_ok($n, '<=', 200, 'the list never exceeds 200');
        cmp_ok($n, '>=', 50, 'at least the first second\'s 50');
        my $ring = scalar @{ Gw::json_decode(Gw::http(GET => $ng2->url('/admin/api/events?limit=200'),
                                                       headers => GwConf::bearer($ADMIN))->{body})->{events} };
        is($ring, $n > 200 ? 200 : $n, 'the read shows the list');
    };

    subtest 'store down: the ring, degraded; mirror skipped while latched' => sub {
        $rd->kill9;
        $mock->script({ match => { model => 'gpt-4o' }, status => 503, json => { error => { message => 'while down' } } });
        $chat2->('gpt-4o');
        my $e = $ev->();
        is($e->{source}, 'replica', 'source replica');
        is($e->{degraded}, JSON::PP::true, 'degraded');
        ok(scalar(grep { ($_->{message} // '') eq 'while down' } @{ $e->{events} }), 'the ring has the event');
        $rd->restart;
        # Each of the two workers has its own connection and latch: wait
        # until six reads in a row (both workers, almost surely) use the list.
        my $back = Gw::wait_until(sub { !grep { ($ev->()->{source} // '') ne 'redis' } 1 .. 6 }, timeout => 20, interval => 0.5);
        ok($back, 'back to redis after the latch closes, on every worker');
    };

    $ng2->stop;
}

done_testing();
