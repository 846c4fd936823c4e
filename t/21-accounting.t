# Accounting after the response: token and cost counters equal the
# provider's usage (non-stream, stream with forced include_usage,
# embeddings), built-in and overridden prices, free models, estimated usage
# when the upstream sends none; user, group and total rows move together;
# lastSeen.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use Test::More;
use Time::Local ();

Gw::need_module();

my @USERS = qw(plain stream inc emb over free est sest uerr seen);
my $mock = Gw::Mock->start();
my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwMeter::conf(
    users => [map { "llm_gateway_user $_ key=sk-$_ group=g$_;" } @USERS],
    http => <<'HTTP',
llm_gateway_provider mock2 type=openai location=/_llm/mock/;
llm_gateway_price mock2/gpt-4o-mini input=1000 output=2000;
llm_gateway_price mock/x free;
HTTP
));

my @F = qw(requestsPerDay tokensInPerDay tokensOutPerDay tokensInPerMonth tokensOutPerMonth
           costPerDayMicroUsd costPerMonthMicroUsd rejectionsPerDay);

sub expect_row {
    my (%o) = @_;
    my ($req, $in, $out, $cost) = @{ $o{want} };
    return { requestsPerDay => $req, tokensInPerDay => $in, tokensOutPerDay => $out, tokensInPerMonth => $in,
             tokensOutPerMonth => $out, costPerDayMicroUsd => $cost, costPerMonthMicroUsd => $cost,
             rejectionsPerDay => 0 };
}

# Waits until the user's row shows $in input tokens (accounting done), then
# checks that the user, its group and the total (as a delta from $before)
# show exactly [requests, tokens in, tokens out, cost micro-USD].
sub check_scopes {
    my ($user, $before, $want, $name) = @_;
    subtest $name => sub {
        my $u;
        Gw::wait_until(sub {
            $u = GwMeter::usage($ng);
            my $row = GwMeter::row($u, user => $user);
            $row && $row->{tokensInPerDay} >= $want->[1] && $row->{requestsPerDay} >= $want->[0];
        }, timeout => 5, interval => 0.05);
        $u = GwMeter::usage($ng);    # once more: nothing further moves
        my $exp = expect_row(want => $want);
        is_deeply(GwMeter::fields(GwMeter::row($u, user => $user), @F), $exp, "user $user");
        is_deeply(GwMeter::fields(GwMeter::row($u, group => "g$user"), @F), $exp, "group g$user");
        my ($tb, $ta) = (GwMeter::row($before, total => 'all'), GwMeter::row($u, total => 'all'));
        is_deeply({ map { $_ => $ta->{$_} - $tb->{$_} } @F }, $exp, 'total moved by the same amounts');
    };
}

sub usage_logs {
    my ($user) = @_;
    return [map { /(llm_gateway: usage .*?)(?: while|, client)/ ? $1 : $_ }
            GwMeter::log_lines($ng, qr/llm_gateway: usage user="$user"/)];
}

subtest 'nothing counted yet; lastSeen null' => sub {
    my $u = GwMeter::usage($ng);
    ok($u, 'usage answered 200');
    my $row = GwMeter::row($u, user => 'plain');
    is_deeply(GwMeter::fields($row, @F), expect_row(want => [0, 0, 0, 0]), 'plain: all zero');
    ok(exists $row->{lastSeen} && !defined $row->{lastSeen}, 'plain: lastSeen null');
    is_deeply(GwMeter::fields(GwMeter::row($u, total => 'all'), @F), expect_row(want => [0, 0, 0, 0]), 'total: all zero');
};

subtest 'non-stream chat: 11 in, 7 out, built-in price 6 micro-USD' => sub {
    my $before = GwMeter::usage($ng);
    for my $i (1, 2) {
        my $r = GwMeter::chat($ng, 'sk-plain');
        is($r->{status}, 200, "request $i: 200");
        is_deeply($r->{json}{usage}, { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18 },
                  "request $i: usage relayed");
    }
    check_scopes('plain', $before, [2, 22, 14, 12], 'two requests: 22 in, 14 out, 12 micro-USD');
    is_deeply(usage_logs('plain'),
              [('llm_gateway: usage user="plain" model="mock/gpt-4o-mini" prompt_tokens=11 completion_tokens=7 cost_micro_usd=6') x 2],
              'two usage log lines');
};

subtest 'stream without include_usage: the forced usage is counted' => sub {
    my $before = GwMeter::usage($ng);
    $mock->clear;
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => GwMeter::auth('sk-stream'),
                               body => { model => 'gpt-4o-mini', messages => [{ role => 'user', content => 'hi' }],
                                         stream => JSON::PP::true });
    is($r->{status}, 200, 'status 200');
    ok($r->{complete}, 'stream complete');
    my @ev = @{ $r->{events} };
    is($ev[-1]{data} // '', '[DONE]', '[DONE] last');
    is(scalar(grep { $_->{json} && defined $_->{json}{usage} } @ev), 0, 'the client received no usage (it did not ask)');
    is(scalar(grep { $_->{json} && ref $_->{json}{choices} eq 'ARRAY' && !@{ $_->{json}{choices} } } @ev), 0,
       'no usage-only chunk relayed');
    is(scalar @ev, 4, '3 content chunks + [DONE]');
    is(join('', map { $_->{json}{choices}[0]{delta}{content} // '' } grep { $_->{json} } @ev), 'Hello world', 'content');
    my $up = $mock->requests->[0]{json} || {};
    is($up->{stream_options}{include_usage}, JSON::PP::true, 'the provider was asked for usage');
    check_scopes('stream', $before, [1, 11, 7, 6], 'stream: 11 in, 7 out, 6 micro-USD');
    is_deeply(usage_logs('stream'),
              ['llm_gateway: usage user="stream" model="mock/gpt-4o-mini" prompt_tokens=11 completion_tokens=7 cost_micro_usd=6'],
              'usage log line');
};

subtest 'stream with include_usage from the client: relayed and counted once' => sub {
    my $before = GwMeter::usage($ng);
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => GwMeter::auth('sk-inc'),
                               body => { model => 'gpt-4o-mini', messages => [{ role => 'user', content => 'hi' }],
                                         stream => JSON::PP::true, stream_options => { include_usage => JSON::PP::true } });
    is($r->{status}, 200, 'status 200');
    my @usage = grep { $_->{json} && defined $_->{json}{usage} } @{ $r->{events} };
    is(scalar @usage, 1, 'the client got the usage chunk');
    is_deeply($usage[0] && $usage[0]{json}{usage}, { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18 },
              'usage chunk content');
    check_scopes('inc', $before, [1, 11, 7, 6], 'counted once: 11 in, 7 out, 6 micro-USD');
};

subtest 'upstream error: the request is counted, no tokens' => sub {
    my $before = GwMeter::usage($ng);
    $mock->script({ status => 500, json => { error => { message => 'boom', type => 'server_error' } } });
    my $r = GwMeter::chat($ng, 'sk-uerr');
    is($r->{status}, 500, 'upstream 500 relayed');
    my $u;
    Gw::wait_until(sub { $u = GwMeter::usage($ng); (GwMeter::row($u, user => 'uerr') || {})->{requestsPerDay} }, timeout => 5);
    select(undef, undef, undef, 0.3);
    $u = GwMeter::usage($ng);
    my $exp = expect_row(want => [1, 0, 0, 0]);
    is_deeply(GwMeter::fields(GwMeter::row($u, user => 'uerr'), @F), $exp, 'user: 1 request, no tokens, no cost');
    is_deeply(GwMeter::fields(GwMeter::row($u, group => 'guerr'), @F), $exp, 'group: the same');
    is_deeply(usage_logs('uerr'), [], 'no usage log line');
};

subtest 'embeddings: 5 in, 0 out' => sub {
    my $before = GwMeter::usage($ng);
    my $r = GwMeter::embed($ng, 'sk-emb', input => 'hello');
    is($r->{status}, 200, 'status 200');
    # text-embedding-3-small: 5 * 0.02 USD/Mtok = 0.1 micro-USD -> 0
    check_scopes('emb', $before, [1, 5, 0, 0], 'embeddings: 5 in, 0 out, cost 0');
    is_deeply(usage_logs('emb'),
              ['llm_gateway: usage user="emb" model="mock/text-embedding-3-small" prompt_tokens=5 completion_tokens=0 cost_micro_usd=0'],
              'usage log line');
};

subtest 'price override: input=1000 output=2000 -> 25000 micro-USD' => sub {
    my $before = GwMeter::usage($ng);
    $mock->clear;
    my $r = GwMeter::chat($ng, 'sk-over', model => 'mock2/gpt-4o-mini');
    is($r->{status}, 200, 'status 200');
    is($mock->requests->[0]{json}{model}, 'gpt-4o-mini', 'upstream model id');
    check_scopes('over', $before, [1, 11, 7, 25000], 'override: 11*1000 + 7*2000 = 25000 micro-USD');
    is_deeply(usage_logs('over'),
              ['llm_gateway: usage user="over" model="mock2/gpt-4o-mini" prompt_tokens=11 completion_tokens=7 cost_micro_usd=25000'],
              'usage log line');
};

subtest 'free model: cost 0, tokens counted' => sub {
    my $before = GwMeter::usage($ng);
    my $r = GwMeter::chat($ng, 'sk-free', model => 'mock/x');
    is($r->{status}, 200, 'status 200');
    check_scopes('free', $before, [1, 11, 7, 0], 'free: 11 in, 7 out, cost 0');
};

subtest 'no usage from the upstream: estimated as body bytes / 4' => sub {
    my $before = GwMeter::usage($ng);
    $mock->script({ json => { id => 'chatcmpl-nousage', object => 'chat.completion', created => 1,
                              model => 'gpt-4o-mini',
                              choices => [{ index => 0, message => { role => 'assistant', content => 'no usage here' },
                                            finish_reason => 'stop' }] } });
    my $body = Gw::json_encode({ model => 'gpt-4o-mini',
                                 messages => [{ role => 'user', content => 'x' x 400 }] });
    my $est = int(length($body) / 4);
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'),
                     headers => { %{ GwMeter::auth('sk-est') }, 'Content-Type' => 'application/json' }, body => $body);
    is($r->{status}, 200, 'status 200');
    is($r->{json}{choices}[0]{message}{content}, 'no usage here', 'scripted answer relayed');
    is_deeply($mock->pending_script, [], 'the script entry was used');
    check_scopes('est', $before, [1, $est, 0, 0 + sprintf('%.0f', $est * 0.15)],
                 "estimated: $est tokens in (" . length($body) . ' bytes / 4), 0 out');
    is_deeply(usage_logs('est'),
              [sprintf('llm_gateway: usage user="est" model="mock/gpt-4o-mini" prompt_tokens=%d completion_tokens=0 cost_micro_usd=%d (estimated)',
                       $est, sprintf('%.0f', $est * 0.15))],
              'usage log line says (estimated)');
};

subtest 'stream without any usage from the upstream: estimated' => sub {
    my $before = GwMeter::usage($ng);
    $mock->script({ sse => ['data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}',
                            'data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
                            'data: [DONE]'] });
    my $body = Gw::json_encode({ model => 'gpt-4o-mini', stream => JSON::PP::true,
                                 messages => [{ role => 'user', content => 'y' x 200 }] });
    my $est = int(length($body) / 4);
    my $cost = 0 + sprintf('%.0f', $est * 0.15);
    my $r = Gw::stream_request(POST => $ng->url('/v1/chat/completions'),
                               headers => { %{ GwMeter::auth('sk-sest') }, 'Content-Type' => 'application/json' },
                               body => $body);
    is($r->{status}, 200, 'status 200');
    is(($r->{events}[-1] || {})->{data}, '[DONE]', 'stream relayed to [DONE]');
    check_scopes('sest', $before, [1, $est, 0, $cost], "estimated: $est tokens in, 0 out");
    is_deeply(usage_logs('sest'),
              [sprintf('llm_gateway: usage user="sest" model="mock/gpt-4o-mini" prompt_tokens=%d completion_tokens=0 cost_micro_usd=%d (estimated)',
                       $est, $cost)], 'usage log line says (estimated)');
};

subtest 'lastSeen becomes a timestamp near now' => sub {
    my $row = GwMeter::row(GwMeter::usage($ng), user => 'seen');
    ok($row && exists $row->{lastSeen} && !defined $row->{lastSeen}, 'null before any request');
    my $t0 = time;
    is(GwMeter::chat($ng, 'sk-seen')->{status}, 200, 'one request');
    my $u;
    Gw::wait_until(sub { $u = GwMeter::usage($ng); defined((GwMeter::row($u, user => 'seen') || {})->{lastSeen}) },
                   timeout => 5, interval => 0.05);
    my $ls = (GwMeter::row($u, user => 'seen') || {})->{lastSeen};
    like($ls // '', qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, "user lastSeen '" . ($ls // 'null') . "' is a UTC timestamp");
    my $secs = ($ls // '') =~ /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z$/
        ? Time::Local::timegm($6, $5, $4, $3, $2 - 1, $1) : 0;
    ok($secs >= $t0 - 1 && $secs <= time + 1, 'user lastSeen is now (+-1 s)');
    my $gls = (GwMeter::row($u, group => 'gseen') || {})->{lastSeen};
    like($gls // '', qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'group lastSeen is a timestamp');
    like($u->{time} // '', qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'usage time is a UTC timestamp');
};

$ng->stop;
$mock->stop;
done_testing;
