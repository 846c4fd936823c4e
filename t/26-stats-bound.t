# Bounds that one caller or one provider response cannot get past, in
# shared memory:
#   - the statistics counters (model, provider-model) of made-up model names
#     take at most a quarter of the zone; past it, new model ids count as
#     "<provider>/other", and every other user is still admitted with exact
#     admission counters;
#   - usage above llm_gateway_max_tokens_per_request (default 10,000,000)
#     is implausible: the sample is estimated and a warning logged, as is
#     one whose count is not a count at all (2^64, negative, 1e308).
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use Test::More;

Gw::need_module();

my $mock = Gw::Mock->start();

# ================================================ statistics of made-up models

subtest 'thousands of made-up model names cannot fill the zone' => sub {
    my $n = 2000;
    my $ng = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port }, conf => GwMeter::conf(
        users => ['llm_gateway_user flood key=sk-flood group=gf;', 'llm_gateway_user calm key=sk-calm group=gc;'],
        http => 'llm_gateway_zone tiny:128k;'));
    GwMeter::wait_second_below(20);
    my %st;
    for my $i (1 .. $n) {
        # both spellings: the default provider, and <provider>/<anything>
        my $model = $i % 2 ? sprintf('m1-%05d-%s', $i, 'x' x 20) : sprintf('mock/m2-%05d-%s', $i, 'y' x 20);
        $st{ GwMeter::chat($ng, 'sk-flood', model => $model)->{status} }++;
    }
    is_deeply(\%st, { 200 => $n }, "all $n flood requests served (statistics never refuse admission)");
    is_deeply([map { GwMeter::chat($ng, 'sk-calm')->{status} } 1 .. 3], [200, 200, 200], 'another user: 3 x 200');
    my $u;
    Gw::wait_until(sub {
        $u = GwMeter::usage($ng);
        $u && (GwMeter::row($u, user => 'calm') || {})->{tokensInPerDay} == 33;
    }, timeout => 5);
    my @F = qw(requestsPerDay tokensInPerDay tokensOutPerDay rejectionsPerDay);
    is_deeply(GwMeter::fields(GwMeter::row($u, user => 'calm'), @F),
              { requestsPerDay => 3, tokensInPerDay => 33, tokensOutPerDay => 21, rejectionsPerDay => 0 },
              'calm: exact admission and usage counters');
    is_deeply(GwMeter::fields(GwMeter::row($u, user => 'flood'), @F),
              { requestsPerDay => $n, tokensInPerDay => 11 * $n, tokensOutPerDay => 7 * $n, rejectionsPerDay => 0 },
              'flood: exact admission and usage counters');
    is($u->{total}{requestsPerDay}, $n + 3, 'total: exact');
    my @bound = GwMeter::log_lines($ng, qr/llm_gateway: zone "tiny": the statistics counters use their quarter of the zone; new model ids are counted as "<provider>\/other"$/);
    is(scalar @bound, 1, 'one warning (at most one a minute per worker)');
    is(scalar GwMeter::log_lines($ng, qr/is full/), 0, 'the zone never filled');
    $ng->stop;
};

# ============================================================ implausible usage

# One row per usage the provider reports: what is counted.
my $BODY = Gw::json_encode({ model => 'gpt-4o-mini', messages => [{ role => 'user', content => 'z' x 400 }] });
my $EST = int(length($BODY) / 4);
my @ROWS = (
    # name,                                   usage JSON,                                            tokin,     tokout, estimated
    ['int64 max both ways',                   '{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}', $EST, 0, 1],
    ['int64 max prompt only',                 '{"prompt_tokens":9223372036854775807,"completion_tokens":7}', $EST, 0, 1],
    ['one over the default ceiling',          '{"prompt_tokens":10000001,"completion_tokens":7}',     $EST,      0, 1],
    ['completion over the ceiling',           '{"prompt_tokens":11,"completion_tokens":10000001}',     $EST,      0, 1],
    ['exactly the ceiling',                   '{"prompt_tokens":10000000,"completion_tokens":10000000}', 10000000, 10000000, 0],
    # counts that are not counts: the whole usage is estimated (never a direction counted as 0)
    ['2^64 (invalid)',                        '{"prompt_tokens":18446744073709551616,"completion_tokens":7}', $EST, 0, 1],
    ['negative (invalid)',                    '{"prompt_tokens":-5,"completion_tokens":7}',            $EST,      0, 1],
    ['1e308 (invalid)',                       '{"prompt_tokens":1e308,"completion_tokens":7}',         $EST,      0, 1],
    ['ordinary',                              '{"prompt_tokens":11,"completion_tokens":7}',            11,        7, 0],
);

subtest 'implausible usage is estimated (non-streamed)' => sub {
    my $ng = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port }, conf => GwMeter::conf(
        users => [map { "llm_gateway_user u$_ key=sk-u$_ group=gu;" } 1 .. @ROWS]));
    for my $i (1 .. @ROWS) {
        my ($name, $usage, $tin, $tout, $est) = @{ $ROWS[$i - 1] };
        $mock->script({ headers => { 'content-type' => 'application/json' },
                        body => '{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini",'
                              . '"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],'
                              . qq("usage":$usage}) });
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwMeter::auth("sk-u$i"), body => $BODY);
        is($r->{status}, 200, "$name: 200");
        my $line = $ng->wait_log(qr/llm_gateway: usage user="u$i" /);
        my $cost = int((($tin * 150000) + ($tout * 600000) + 500000) / 1000000);
        is(($line // '') =~ s/^.*?(llm_gateway: usage )/$1/r =~ s/ while sending to client, .*//r,
           qq(llm_gateway: usage user="u$i" model="mock/gpt-4o-mini" prompt_tokens=$tin completion_tokens=$tout cost_micro_usd=$cost)
           . ($est ? ' (estimated)' : ''), "$name: usage line");
        my $row = GwMeter::row(GwMeter::usage($ng), user => "u$i");
        is_deeply(GwMeter::fields($row, qw(tokensInPerDay tokensOutPerDay costPerDayMicroUsd)),
                  { tokensInPerDay => $tin, tokensOutPerDay => $tout, costPerDayMicroUsd => $cost }, "$name: counters");
    }
    my @warn = GwMeter::log_lines($ng, qr/\[warn\].*llm_gateway: implausible usage/);
    is(scalar @warn, 7, 'a warning for each usage over the ceiling or invalid');
    is(scalar(grep { /\(a token count that is not an integer from 0 to 9223372036854775807\); estimating/ } @warn), 3,
       'the invalid ones say so');
    like($warn[0] // '', qr/llm_gateway: implausible usage from the provider for model "mock\/gpt-4o-mini" \(prompt_tokens=9223372036854775807 completion_tokens=9223372036854775807, over llm_gateway_max_tokens_per_request 10000000\); estimating/,
         'the warning names the numbers and the ceiling');
    my $t = GwMeter::usage($ng)->{total};
    cmp_ok($t->{tokensInPerDay}, '<', 100_000_000, 'the total is nowhere near the 64-bit maximum');
    $ng->stop;
};

subtest 'llm_gateway_max_tokens_per_request: a configured ceiling, streamed usage' => sub {
    my $ng = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port }, conf => GwMeter::conf(
        users => ['llm_gateway_user s1 key=sk-s1;', 'llm_gateway_user s2 key=sk-s2;'],
        http => 'llm_gateway_max_tokens_per_request 1000;'));
    my $chunk = sub { my ($p, $c) = @_; return ('data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}',
                                              qq(data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":$p,"completion_tokens":$c}}),
                                              'data: [DONE]') };
    my $sbody = Gw::json_encode({ model => 'gpt-4o-mini', stream => JSON::PP::true,
                                  messages => [{ role => 'user', content => 'z' x 400 }] });
    my $sest = int(length($sbody) / 4);
    for my $row (['s1', 1001, 5, $sest, 0, 1], ['s2', 1000, 5, 1000, 5, 0]) {
        my ($user, $p, $c, $tin, $tout, $est) = @$row;
        $mock->script({ sse => [$chunk->($p, $c)] });
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwMeter::auth("sk-$user"), body => $sbody);
        is($r->{status}, 200, "$user: prompt_tokens=$p: 200");
        my $line = $ng->wait_log(qr/llm_gateway: usage user="$user" /);
        like($line // '', qr/prompt_tokens=$tin completion_tokens=$tout cost_micro_usd=\d+\Q@{[$est ? ' (estimated)' : '']}\E(?: while |$)/,
             "$user: counted $tin/$tout" . ($est ? ' (estimated)' : ''));
    }
    is(scalar GwMeter::log_lines($ng, qr/implausible usage .* over llm_gateway_max_tokens_per_request 1000\)/), 1,
       'one warning, naming the configured ceiling');
    $ng->stop;

    for my $bad (['0', 'value must be equal to or greater than 1'], ['lots', 'invalid number']) {
        my ($exit, $out) = Gw::nginx_t(GwMeter::conf(http => "llm_gateway_max_tokens_per_request $bad->[0];"),
                                       vars => { MOCK => $mock->port });
        isnt($exit, 0, "nginx -t refuses llm_gateway_max_tokens_per_request $bad->[0]");
        like($out, qr/\[emerg\] .*\Q$bad->[1]\E.* in \S+:\d+/, "  with file:line and a sentence");
    }
};

$mock->stop;
done_testing;
