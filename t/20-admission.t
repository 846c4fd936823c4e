# Limit admission across two workers: exact counts under concurrency, the
# 429 envelopes and Retry-After, precedence (user before group; within a
# scope requests before tokens), group limits with rollback, token and cost
# budgets, and unlimited users.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use Test::More;
use Time::Local ();

Gw::need_module();

my $mock = Gw::Mock->start();
my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwMeter::conf(
    groups => [
        'llm_gateway_group gconc;',
        'llm_gateway_group gprec requests_per_day=1;',
        'llm_gateway_group gshared requests_per_minute=3;',
        'llm_gateway_group gmix requests_per_minute=1;',
        'llm_gateway_group gpar requests_per_minute=30;',
    ],
    users => [
        'llm_gateway_user conc key=sk-conc group=gconc requests_per_minute=50;',
        'llm_gateway_user prec key=sk-prec group=gprec requests_per_day=1;',
        'llm_gateway_user order key=sk-order group=gorder requests_per_day=1 tokens_per_day=18;',
        'llm_gateway_user order2 key=sk-order2 group=gorder2 requests_per_minute=1 requests_per_day=1;',
        'llm_gateway_user eve key=sk-eve group=gshared;',
        'llm_gateway_user frank key=sk-frank group=gshared;',
        'llm_gateway_user gina key=sk-gina group=gtok tokens_per_day=18;',
        'llm_gateway_user hank key=sk-hank group=gcost cost_per_day=0.000001;',
        'llm_gateway_user ivan key=sk-ivan group=gfree;',
        'llm_gateway_user zero key=sk-zero group=gfree requests_per_minute=0 requests_per_day=0 tokens_per_day=0;',
        'llm_gateway_user mix key=sk-mix group=gmix tokens_per_day=18;',
        'llm_gateway_user month key=sk-month group=gmonth tokens_per_month=18;',
        'llm_gateway_user pa key=sk-pa group=gpar;',
        'llm_gateway_user pb key=sk-pb group=gpar;',
    ],
));

my @COUNT_FIELDS = qw(requestsPerMinute requestsPerDay rejectionsPerDay);

sub envelope_ok {
    my ($r, $type, $code, $message, $name) = @_;
    subtest $name => sub {
        is($r->{status}, 429, 'status 429');
        like($r->{headers}{'content-type'} // '', qr{^application/json}, 'content-type application/json');
        is($r->{json}{error}{type}, $type, "type $type");
        is($r->{json}{error}{code}, $code, "code $code");
        is($r->{json}{error}{message}, $message, 'message');
        ok(exists $r->{json}{error}{param} && !defined $r->{json}{error}{param}, 'param null');
    };
}

# Waits until the usage of a user shows $n input tokens for the day (the
# accounting of a request is in the store before the next one is sent).
sub wait_tokens {
    my ($user, $n) = @_;
    return Gw::wait_until(sub {
        my $row = GwMeter::row(GwMeter::usage($ng), user => $user);
        $row && $row->{tokensInPerDay} >= $n;
    }, timeout => 5, interval => 0.05);
}

# ---------------------------------------------------------------- exactness
subtest '200 parallel requests against requests_per_minute=50' => sub {
    GwMeter::wait_second_below(45);
    my @res = Gw::parallel(200, sub {
        my $r = GwMeter::chat($ng, 'sk-conc');
        return { status => $r->{status}, retry_after => $r->{headers}{'retry-after'}, date => $r->{headers}{date},
                 json => $r->{json}, t => Time::HiRes::time(), ctype => $r->{headers}{'content-type'} };
    }, timeout => 60);
    # The second the server answered in: its Date header (the clock Retry-After counts from), else
    # the client's clock once the answer came (on a loaded machine a client may read it seconds later).
    my $answer_second = sub {
        my ($res) = @_;
        return $1 + 0 if ($res->{date} // '') =~ /\d\d:\d\d:(\d\d) GMT$/;
        return (gmtime(int $res->{t}))[0];
    };
    my @ok = grep { ($_->{status} // 0) == 200 } @res;
    my @rej = grep { ($_->{status} // 0) == 429 } @res;
    is(scalar @ok, 50, 'exactly 50 answered 200');
    is(scalar @rej, 150, 'exactly 150 answered 429');
    is(scalar(@res) - @ok - @rej, 0, 'no other status')
        or diag(Gw::json_encode([map { $_->{status} // $_->{error} } grep { ($_->{status} // 0) !~ /^(200|429)$/ } @res]));

    my $msg = 'rate limit exceeded: user "conc" requestsPerMinute 50';
    is(scalar(grep { ($_->{json}{error}{message} // '') eq $msg } @rej), 150, "every 429 says '$msg'");
    is(scalar(grep { ($_->{json}{error}{type} // '') eq 'rate_limit_error'
                     && ($_->{json}{error}{code} // '') eq 'rate_limit_exceeded' } @rej), 150,
       'every 429 is rate_limit_error / rate_limit_exceeded');
    my @bad_ra = grep {
        my $sec = $answer_second->($_);
        my $ra = $_->{retry_after};
        my $d = defined $ra && $ra =~ /^\d+$/ ? abs($ra - (60 - $sec)) % 60 : 99;    # 60 and 1 are neighbours
        !(defined $ra && $ra =~ /^\d+$/ && $ra >= 1 && $ra <= 60 && ($d <= 1 || $d == 59));
    } @rej;
    is(scalar @bad_ra, 0, 'every Retry-After is 60 - current second (+-1), within 1..60')
        or diag('bad Retry-After: ' . join(', ', map { ($_->{retry_after} // 'none') . '@' . $answer_second->($_) . ' (client '
                                                     . (gmtime(int $_->{t}))[0] . ')' } @bad_ra[0 .. ($#bad_ra < 4 ? $#bad_ra : 4)]));

    ok(wait_tokens('conc', 50 * 11), 'the accounting of the 50 is done');
    my $u = GwMeter::usage($ng);
    my $want = { requestsPerMinute => 50, requestsPerDay => 50, rejectionsPerDay => 150 };
    is_deeply(GwMeter::fields(GwMeter::row($u, user => 'conc'), @COUNT_FIELDS), $want, 'user conc: 50 requests, 150 rejections');
    is_deeply(GwMeter::fields(GwMeter::row($u, group => 'gconc'), @COUNT_FIELDS), $want, 'group gconc: 50 requests, 150 rejections');
    is_deeply(GwMeter::fields(GwMeter::row($u, total => 'all'), @COUNT_FIELDS), $want, 'total: 50 requests, 150 rejections');
    is(GwMeter::row($u, user => 'conc')->{tokensInPerDay}, 50 * 11, 'user conc: 50 x 11 tokens in');
    is(GwMeter::row($u, user => 'conc')->{tokensOutPerDay}, 50 * 7, 'user conc: 50 x 7 tokens out');
    is_deeply(GwMeter::row($u, user => 'conc')->{limits}, { requestsPerMinute => 50 }, 'limits shown');
    is(scalar @{ $mock->requests }, 50, 'the provider saw exactly 50 calls');

    my @lines = GwMeter::log_lines($ng, qr/\Qllm_gateway: rejected user="conc": $msg\E/);
    is(scalar @lines, 150, '150 rejection log lines');
    like($lines[0] // '', qr/\[warn\]/, 'rejection logged at warn');
    my @pids = GwMeter::log_pids(GwMeter::log_lines($ng, qr/llm_gateway: (?:rejected|usage) user="conc"/));
    is(scalar @pids, 2, 'both workers served the traffic');
    envelope_ok($rej[0] ? { status => 429, headers => { 'content-type' => $rej[0]{ctype} }, json => $rej[0]{json} } : {},
                'rate_limit_error', 'rate_limit_exceeded', $msg, 'one 429 envelope in full');
};

subtest 'group requests_per_minute=30: 100 parallel requests from two users' => sub {
    GwMeter::wait_second_below(45);
    my @res = Gw::parallel(100, sub {
        my ($i) = @_;
        my $r = GwMeter::chat($ng, $i % 2 ? 'sk-pb' : 'sk-pa');
        return { status => $r->{status}, message => $r->{json} && $r->{json}{error} ? $r->{json}{error}{message} : undef };
    }, timeout => 60);
    my %by = (pa => [grep { $_ % 2 == 0 } 0 .. 99], pb => [grep { $_ % 2 } 0 .. 99]);
    my %ok = map { my $u = $_; ($u => scalar(grep { ($res[$_]{status} // 0) == 200 } @{ $by{$u} })) } keys %by;
    my %rej = map { my $u = $_; ($u => scalar(grep { ($res[$_]{status} // 0) == 429 } @{ $by{$u} })) } keys %by;
    is($ok{pa} + $ok{pb}, 30, 'exactly 30 admitted');
    is($rej{pa} + $rej{pb}, 70, 'exactly 70 rejected');
    is(scalar(grep { ($_->{message} // '') eq 'rate limit exceeded: group "gpar" requestsPerMinute 30' } @res), 70,
       'every rejection names the group');
    my $u = GwMeter::usage($ng);
    for my $n (qw(pa pb)) {
        is_deeply(GwMeter::fields(GwMeter::row($u, user => $n), @COUNT_FIELDS),
                  { requestsPerMinute => $ok{$n}, requestsPerDay => $ok{$n}, rejectionsPerDay => $rej{$n} },
                  "user $n: $ok{$n} requests, $rej{$n} rejections (rolled back)");
    }
    is_deeply(GwMeter::fields(GwMeter::row($u, group => 'gpar'), @COUNT_FIELDS),
              { requestsPerMinute => 30, requestsPerDay => 30, rejectionsPerDay => 70 }, 'group gpar: 30 requests, 70 rejections');
};

# --------------------------------------------------------------- precedence
subtest 'user scope wins over group scope' => sub {
    is(GwMeter::chat($ng, 'sk-prec')->{status}, 200, 'first request admitted');
    my $r = GwMeter::chat($ng, 'sk-prec');
    envelope_ok($r, 'rate_limit_error', 'rate_limit_exceeded',
                'rate limit exceeded: user "prec" requestsPerDay 1', 'second: the user\'s violation');
    my $ra = $r->{headers}{'retry-after'} // -1;
    ok(abs($ra - GwMeter::secs_to_midnight()) <= 2, "requestsPerDay: Retry-After $ra = seconds to UTC midnight");
};

subtest 'within a scope: requests before tokens, minute before day' => sub {
    is(GwMeter::chat($ng, 'sk-order')->{status}, 200, 'order: first request admitted (18 tokens)');
    ok(wait_tokens('order', 11), 'order: its tokens are accounted');
    envelope_ok(GwMeter::chat($ng, 'sk-order'), 'rate_limit_error', 'rate_limit_exceeded',
                'rate limit exceeded: user "order" requestsPerDay 1', 'requestsPerDay reported before tokensPerDay');

    GwMeter::wait_second_below(55);
    is(GwMeter::chat($ng, 'sk-order2')->{status}, 200, 'order2: first request admitted');
    envelope_ok(GwMeter::chat($ng, 'sk-order2'), 'rate_limit_error', 'rate_limit_exceeded',
                'rate limit exceeded: user "order2" requestsPerMinute 1', 'requestsPerMinute reported before requestsPerDay');
};

subtest 'user scope first even when its breach is a budget and the group\'s a rate' => sub {
    GwMeter::wait_second_below(55);
    is(GwMeter::chat($ng, 'sk-mix')->{status}, 200, 'first request admitted (18 tokens, group minute now full)');
    ok(wait_tokens('mix', 11), 'its tokens are accounted');
    envelope_ok(GwMeter::chat($ng, 'sk-mix'), 'insufficient_quota', 'budget_exceeded',
                'budget exceeded: user "mix" tokensPerDay 18', 'the user\'s tokensPerDay, not the group\'s requestsPerMinute');
};

# ------------------------------------------------------ group limit, rollback
subtest 'group requests_per_minute=3 shared by two users; rollback' => sub {
    GwMeter::wait_second_below(45);
    my @st = map { GwMeter::chat($ng, $_)->{status} } qw(sk-eve sk-frank sk-eve);
    is_deeply(\@st, [200, 200, 200], 'eve, frank, eve: three admitted');
    my $before = GwMeter::usage($ng);

    my $r = GwMeter::chat($ng, 'sk-frank');
    envelope_ok($r, 'rate_limit_error', 'rate_limit_exceeded',
                'rate limit exceeded: group "gshared" requestsPerMinute 3', 'frank\'s 4th group request: the group message');
    my $ra = $r->{headers}{'retry-after'} // -1;
    ok(abs($ra - GwMeter::secs_to_minute()) <= 1, "Retry-After $ra = seconds to the next minute");
    envelope_ok(GwMeter::chat($ng, 'sk-eve'), 'rate_limit_error', 'rate_limit_exceeded',
                'rate limit exceeded: group "gshared" requestsPerMinute 3', 'eve is rejected too');

    my $after = GwMeter::usage($ng);
    my %want = (
        user_eve   => { requestsPerMinute => 2, requestsPerDay => 2, rejectionsPerDay => 1 },
        user_frank => { requestsPerMinute => 1, requestsPerDay => 1, rejectionsPerDay => 1 },
        group      => { requestsPerMinute => 3, requestsPerDay => 3, rejectionsPerDay => 2 },
    );
    is_deeply(GwMeter::fields(GwMeter::row($after, user => 'eve'), @COUNT_FIELDS), $want{user_eve},
              'eve: requests unchanged by the rejection, 1 rejection');
    is_deeply(GwMeter::fields(GwMeter::row($after, user => 'frank'), @COUNT_FIELDS), $want{user_frank},
              'frank: requests unchanged by the rejection, 1 rejection');
    is_deeply(GwMeter::fields(GwMeter::row($after, group => 'gshared'), @COUNT_FIELDS), $want{group},
              'group: 3 requests, 2 rejections');
    my ($tb, $ta) = (GwMeter::row($before, total => 'all'), GwMeter::row($after, total => 'all'));
    is_deeply({ rpm => $ta->{requestsPerMinute} - $tb->{requestsPerMinute},
                rpd => $ta->{requestsPerDay} - $tb->{requestsPerDay},
                rej => $ta->{rejectionsPerDay} - $tb->{rejectionsPerDay} },
              { rpm => 0, rpd => 0, rej => 2 }, 'total: requests unchanged, rejections +2');
    is(GwMeter::row($after, user => 'frank')->{requestsPerMinute},
       GwMeter::row($before, user => 'frank')->{requestsPerMinute}, 'frank\'s requestsPerMinute as before the rejection');
};

# ------------------------------------------------------------------- budgets
subtest 'tokens_per_day=18: the second request is over budget' => sub {
    is(GwMeter::chat($ng, 'sk-gina')->{status}, 200, 'first request (11 + 7 tokens) admitted');
    ok(wait_tokens('gina', 11), 'tokens accounted');
    my $r = GwMeter::chat($ng, 'sk-gina');
    envelope_ok($r, 'insufficient_quota', 'budget_exceeded', 'budget exceeded: user "gina" tokensPerDay 18',
                'second request: budget envelope');
    my $ra = $r->{headers}{'retry-after'} // -1;
    my $want = GwMeter::secs_to_midnight();
    ok(abs($ra - $want) <= 2, "Retry-After $ra = seconds to UTC midnight ($want +-2)");
    my $row = GwMeter::row(GwMeter::usage($ng), user => 'gina');
    is_deeply(GwMeter::fields($row, qw(requestsPerDay tokensInPerDay tokensOutPerDay rejectionsPerDay)),
              { requestsPerDay => 1, tokensInPerDay => 11, tokensOutPerDay => 7, rejectionsPerDay => 1 }, 'gina usage');
    ok($ng->wait_log(qr/\[warn\] .*llm_gateway: rejected user="gina": budget exceeded: user "gina" tokensPerDay 18/),
       'rejection logged at warn');
};

subtest 'tokens_per_month: Retry-After is the seconds to the next UTC month' => sub {
    is(GwMeter::chat($ng, 'sk-month')->{status}, 200, 'first request admitted');
    ok(wait_tokens('month', 11), 'tokens accounted');
    my $r = GwMeter::chat($ng, 'sk-month');
    envelope_ok($r, 'insufficient_quota', 'budget_exceeded', 'budget exceeded: user "month" tokensPerMonth 18',
                'second request: month budget envelope');
    my @t = gmtime(time);
    my ($y, $m) = ($t[5] + 1900, $t[4] + 1);
    ($y, $m) = $m == 12 ? ($y + 1, 1) : ($y, $m + 1);
    my $want = Time::Local::timegm(0, 0, 0, 1, $m - 1, $y) - time;
    my $ra = $r->{headers}{'retry-after'} // -1;
    ok(abs($ra - $want) <= 2, "Retry-After $ra = seconds to the next month ($want +-2)");
};

subtest 'cost_per_day=0.000001 trips after the first request' => sub {
    is(GwMeter::chat($ng, 'sk-hank')->{status}, 200, 'first request admitted (cost 6 micro-USD)');
    Gw::wait_until(sub { (GwMeter::row(GwMeter::usage($ng), user => 'hank') || {})->{costPerDayMicroUsd} }, timeout => 5);
    my $r = GwMeter::chat($ng, 'sk-hank');
    envelope_ok($r, 'insufficient_quota', 'budget_exceeded', 'budget exceeded: user "hank" costPerDayUSD 0.000001',
                'second request: cost budget envelope');
    my $ra = $r->{headers}{'retry-after'} // -1;
    ok(abs($ra - GwMeter::secs_to_midnight()) <= 2, "Retry-After $ra = seconds to UTC midnight");
    my $row = GwMeter::row(GwMeter::usage($ng), user => 'hank');
    is($row->{costPerDayMicroUsd}, 6, 'hank: cost 6 micro-USD');
    is_deeply($row->{limits}, { costPerDayMicroUsd => 1 }, 'hank: limit shown in micro-USD');
};

# ---------------------------------------------------------------- no limits
subtest 'no limits: never 429, still counted' => sub {
    my @res = Gw::parallel(60, sub { GwMeter::chat($ng, 'sk-ivan')->{status} }, timeout => 60);
    is(scalar(grep { ($_ // 0) == 200 } @res), 60, 'all 60 answered 200');
    my $u = GwMeter::usage($ng);
    is_deeply(GwMeter::fields(GwMeter::row($u, user => 'ivan'), qw(requestsPerDay rejectionsPerDay tokensInPerDay tokensOutPerDay)),
              { requestsPerDay => 60, rejectionsPerDay => 0, tokensInPerDay => 660, tokensOutPerDay => 420 }, 'ivan counted');
    is_deeply(GwMeter::fields(GwMeter::row($u, group => 'gfree'), qw(requestsPerDay rejectionsPerDay)),
              { requestsPerDay => 60, rejectionsPerDay => 0 }, 'group gfree counted');
    is_deeply(GwMeter::row($u, user => 'ivan')->{limits}, {}, 'no limits shown');
    my @z = Gw::parallel(20, sub { GwMeter::chat($ng, 'sk-zero')->{status} }, timeout => 60);
    is(scalar(grep { ($_ // 0) == 200 } @z), 20, 'limits of 0 mean no limit: 20 x 200');
    is((GwMeter::row(GwMeter::usage($ng), user => 'zero') || {})->{requestsPerDay}, 20, 'and counted');
};

$ng->stop;
$mock->stop;
done_testing;
