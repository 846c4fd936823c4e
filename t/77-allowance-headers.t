# Remaining-allowance headers (llm_gateway_ratelimit_headers on): every
# metered answer, whole or streamed, and every 429 says what the caller may
# still send under its tightest request, token and cost limits, in OpenAI's
# x-ratelimit-* names and in the IETF RateLimit/RateLimit-Policy fields, both
# saying the same; from the admission's own sums, on shared memory and on
# Redis. Off (the default): none. A provider's own rate-limit headers never
# reach the caller either way (docs/metering.md#remaining-allowance-headers).
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
my $FIVE = 'sk-five-per-minute';
my @USERS = ("llm_gateway_user five key=$FIVE requests_per_minute=5 tokens_per_day=1000 cost_per_day=0.01;",
             'llm_gateway_user free key=sk-free-no-limits;');

sub gateway {
    my (%o) = @_;
    my $http = ($o{on} ? "llm_gateway_ratelimit_headers on;\n" : '') . ($o{store} ? "llm_gateway_store $o{store};\n" : '');
    return Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port },
                            conf => GwMeter::conf(users => \@USERS, http => $http));
}

my @OURS = qw(x-ratelimit-limit-requests x-ratelimit-remaining-requests x-ratelimit-reset-requests
              x-ratelimit-limit-tokens x-ratelimit-remaining-tokens x-ratelimit-reset-tokens
              x-ratelimit-limit-cost-usd x-ratelimit-remaining-cost-usd ratelimit ratelimit-policy);

# The OpenAI form and the IETF form of one answer, compared.
sub both_forms_agree {
    my ($h, $name) = @_;
    my ($rr, $rt, $tr, $tt) = ($h->{ratelimit} // '') =~ /^"requests";r=(\d+);t=(\d+), "tokens";r=(\d+);t=(\d+)$/;
    ok(defined $tt, "$name: RateLimit has a requests and a tokens item") or diag($h->{ratelimit});
    is($rr, $h->{'x-ratelimit-remaining-requests'}, "$name: remaining requests agree");
    is($tr, $h->{'x-ratelimit-remaining-tokens'}, "$name: remaining tokens agree");
    is(secs($h->{'x-ratelimit-reset-requests'}), $rt, "$name: request resets agree");
    is(secs($h->{'x-ratelimit-reset-tokens'}), $tt, "$name: token resets agree");
    is($h->{'ratelimit-policy'}, '"requests";q=5;w=60, "tokens";q=1000;w=86400', "$name: RateLimit-Policy");
}

# "1h2m3s" -> 3723
sub secs {
    my ($t) = @_;
    return undef unless defined $t && $t =~ /^(?:(\d+)h)?(?:(\d+)m)?(\d+)s$/;
    return ($1 // 0) * 3600 + ($2 // 0) * 60 + $3;
}

for my $store ('shm', 'redis') {
    subtest "on, $store" => sub {
        my $rd = $store eq 'redis' ? GwRedis->start() : undef;
        my $ng = gateway(on => 1, store => $rd ? 'redis://127.0.0.1:' . $rd->port : undef);
        GwMeter::wait_second_below(45);
        # The provider's own say: never passed on.
        $mock->script({ times => 1, headers => { 'x-ratelimit-remaining-requests' => '9999', 'RateLimit' => '"x";r=1;t=1' },
                        json => { id => 'c', object => 'chat.completion', created => 1, model => 'gpt-4o-mini',
                                  choices => [{ index => 0, message => { role => 'assistant', content => 'hi' }, finish_reason => 'stop' }],
                                  usage => { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18 } } });
        my @r;
        for my $i (1 .. 5) {
            if ($i == 3) {   # one of them streamed
                push @r, Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => GwMeter::auth($FIVE),
                                            body => { model => 'gpt-4o-mini', stream => \1, stream_options => { include_usage => \1 },
                                                      messages => [{ role => 'user', content => 'hi' }] }, timeout => 10);
            } else {
                push @r, GwMeter::chat($ng, $FIVE);
            }
        }
        is_deeply([map { $_->{status} } @r], [200, 200, 200, 200, 200], 'five requests: 200');
        is_deeply([map { $_->{headers}{'x-ratelimit-limit-requests'} } @r], [(5) x 5], 'limit: 5 on each');
        is_deeply([map { $_->{headers}{'x-ratelimit-remaining-requests'} } @r], [4, 3, 2, 1, 0],
                  'remaining requests: one fewer per request, 0 on the fifth');
        is_deeply([map { $_->{headers}{'x-ratelimit-remaining-tokens'} } @r], [1000, 982, 964, 946, 928],
                  'remaining tokens: what the earlier answers used (18 each)');
        is_deeply([map { $_->{headers}{'x-ratelimit-limit-tokens'} } @r], [(1000) x 5], 'token limit');
        ok(!ref $r[0]{headers}{'x-ratelimit-remaining-requests'}, "one value: the provider's 9999 is gone");
        is($r[0]{headers}{ratelimit} =~ /"x"/ ? 1 : 0, 0, "the provider's RateLimit is gone");
        both_forms_agree($r[$_ - 1]{headers}, "request $_") for 1, 3, 5;
        my $rpm_reset = secs($r[4]{headers}{'x-ratelimit-reset-requests'});
        ok($rpm_reset >= 1 && $rpm_reset <= 60, "request reset within the minute ($rpm_reset s)");
        my $tok_reset = secs($r[4]{headers}{'x-ratelimit-reset-tokens'});
        ok($tok_reset >= 1 && $tok_reset <= 86400, "token reset within the day ($tok_reset s)");

        my $u = GwMeter::usage($ng);
        my $cost5 = GwMeter::row($u, user => 'five')->{costPerDayMicroUsd};
        my $per = $cost5 / 5;
        is_deeply([map { $_->{headers}{'x-ratelimit-limit-cost-usd'} } @r], [('0.010000') x 5], 'cost limit in USD, six decimals');
        is_deeply([map { $_->{headers}{'x-ratelimit-remaining-cost-usd'} } @r],
                  [map { sprintf('0.%06d', 10000 - $per * $_) } 0 .. 4], 'remaining cost: what the earlier answers cost');

        my $no = GwMeter::chat($ng, $FIVE);
        is($no->{status}, 429, 'the sixth: 429');
        ok($no->{headers}{'retry-after'}, '429: Retry-After');
        is($no->{headers}{'x-ratelimit-remaining-requests'}, '0', '429: remaining requests 0');
        is($no->{headers}{'x-ratelimit-limit-requests'}, '5', '429: the limit');
        both_forms_agree($no->{headers}, '429');

        my $free = GwMeter::chat($ng, 'sk-free-no-limits');
        is($free->{status}, 200, 'a user without limits: 200');
        is_deeply([grep { exists $free->{headers}{$_} } @OURS], [], 'no limit, no allowance header');
        my $adm = Gw::http(GET => $ng->url('/admin/api/usage'), headers => GwMeter::auth($GwMeter::ADMIN_KEY));
        is_deeply([grep { exists $adm->{headers}{$_} } @OURS], [], 'admin API answers: none');
        $ng->stop;
        $rd->stop if $rd;
    };
}

subtest 'off (the default): none' => sub {
    my $ng = gateway(on => 0);
    my $r = GwMeter::chat($ng, $FIVE);
    is($r->{status}, 200, 'a request: 200');
    is_deeply([grep { exists $r->{headers}{$_} } @OURS], [], 'no allowance header');
    $ng->stop;
};

done_testing();
