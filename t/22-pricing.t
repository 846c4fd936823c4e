# The 402 rule: a model without a price cannot be billed against a cost
# budget (the user's or its group's), unless llm_gateway_allow_unpriced on.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use Test::More;

Gw::need_module();

my $UNPRICED = 'mock/unpriced-model-x';
my %conf = (
    groups => ['llm_gateway_group gbudget cost_per_month=5;'],
    users  => [
        'llm_gateway_user capped key=sk-capped group=gplain cost_per_day=1;',
        'llm_gateway_user member key=sk-member group=gbudget;',
        'llm_gateway_user nobudget key=sk-nobudget group=gplain requests_per_minute=100 tokens_per_day=100000;',
    ],
);
my $mock = Gw::Mock->start();

sub unpriced_402 {
    my ($ng, $key, $user) = @_;
    subtest "$user: unpriced model -> 402" => sub {
        $mock->clear;
        my $r = GwMeter::chat($ng, $key, model => $UNPRICED);
        is($r->{status}, 402, 'status 402');
        like($r->{headers}{'content-type'} // '', qr{^application/json}, 'JSON');
        is($r->{json}{error}{type}, 'invalid_request_error', 'type invalid_request_error');
        is($r->{json}{error}{code}, 'model_unpriced', 'code model_unpriced');
        like($r->{json}{error}{message} // '', qr/\Q$UNPRICED\E/, 'message names the model');
        ok(exists $r->{json}{error}{param} && !defined $r->{json}{error}{param}, 'param null');
        ok(!exists $r->{headers}{'retry-after'}, 'no Retry-After');
        is(scalar @{ $mock->requests }, 0, 'no upstream call');
        ok($ng->wait_log(qr/\[warn\] .*llm_gateway: model "\Q$UNPRICED\E" has no price and a cost budget applies to user "$user"/),
           'warn log names model and user');
    };
}

{
    my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwMeter::conf(%conf));

    unpriced_402($ng, 'sk-capped', 'capped');
    unpriced_402($ng, 'sk-member', 'member');

    subtest 'a priced model is fine for the same users' => sub {
        is(GwMeter::chat($ng, 'sk-capped')->{status}, 200, 'capped: gpt-4o-mini 200');
        is(GwMeter::chat($ng, 'sk-member')->{status}, 200, 'member: gpt-4o-mini 200');
    };

    subtest 'a user without any cost budget may use the unpriced model' => sub {
        $mock->clear;
        my $r = GwMeter::chat($ng, 'sk-nobudget', model => $UNPRICED);
        is($r->{status}, 200, 'status 200');
        is($mock->requests->[0]{json}{model}, 'unpriced-model-x', 'the provider got its own model id');
        my $row;
        Gw::wait_until(sub { $row = GwMeter::row(GwMeter::usage($ng), user => 'nobudget'); $row && $row->{tokensInPerDay} },
                       timeout => 5);
        is_deeply(GwMeter::fields($row, qw(requestsPerDay tokensInPerDay tokensOutPerDay costPerDayMicroUsd)),
                  { requestsPerDay => 1, tokensInPerDay => 11, tokensOutPerDay => 7, costPerDayMicroUsd => 0 },
                  'counted, cost 0');
        is(scalar(GwMeter::log_lines($ng, qr/billed as zero/)), 0, 'no "billed as zero" warning without a budget');
    };
    $ng->stop;
}

{
    my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port },
                              conf => GwMeter::conf(%conf, http => 'llm_gateway_allow_unpriced on;'));
    for my $c (['capped', 'sk-capped', 'gplain'], ['member', 'sk-member', 'gbudget']) {
        my ($user, $key, $group) = @$c;
        subtest "allow_unpriced on: $user gets 200, billed as zero" => sub {
            $mock->clear;
            my $r = GwMeter::chat($ng, $key, model => $UNPRICED);
            is($r->{status}, 200, 'status 200');
            is(scalar @{ $mock->requests }, 1, 'one upstream call');
            ok($ng->wait_log(qr/\[warn\] .*llm_gateway: model "\Q$UNPRICED\E" has no price; billed as zero for user "$user"/),
               'warn log "billed as zero"');
            my $row;
            Gw::wait_until(sub { $row = GwMeter::row(GwMeter::usage($ng), user => $user); $row && $row->{tokensInPerDay} },
                           timeout => 5);
            is_deeply(GwMeter::fields($row, qw(requestsPerDay tokensInPerDay tokensOutPerDay costPerDayMicroUsd costPerMonthMicroUsd)),
                      { requestsPerDay => 1, tokensInPerDay => 11, tokensOutPerDay => 7, costPerDayMicroUsd => 0,
                        costPerMonthMicroUsd => 0 }, 'tokens counted, cost 0');
        };
    }
    $ng->stop;
}

$mock->stop;
done_testing;
