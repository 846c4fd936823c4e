# The admin gate: no admin location -> 404; no key 401, non-admin 403,
# admin 200 with the security headers; the HTML shell needs no key; admin
# traffic counts only against the admin's own user scope.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use Test::More;

Gw::need_module();

my $mock = Gw::Mock->start();

sub envelope_ok {
    my ($r, $status, $type, $code, $name) = @_;
    subtest $name => sub {
        is($r->{status}, $status, "status $status");
        like($r->{headers}{'content-type'} // '', qr{^application/json}, 'content-type application/json');
        is($r->{json}{error}{type}, $type, "type $type");
        is($r->{json}{error}{code}, $code, "code $code");
        ok(length($r->{json}{error}{message} // ''), 'a message');
        ok(exists $r->{json}{error}{param} && !defined $r->{json}{error}{param}, 'param null');
        unlike($r->{body}, qr/\Q$GwMeter::ADMIN_KEY\E|sk-user-plain/, 'no key echoed');
    };
}

{
    my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port },
                              conf => GwMeter::conf(admin_location => 0,
                                                    users => ['llm_gateway_user plain key=sk-user-plain;']));
    subtest 'no llm_gateway_admin location' => sub {
        my $r = Gw::http(GET => $ng->url('/admin/api/usage'), headers => GwMeter::auth($GwMeter::ADMIN_KEY));
        is($r->{status}, 404, '/admin/api/usage -> 404');
        is(Gw::http(GET => $ng->url('/admin'))->{status}, 404, '/admin -> 404');
        my $g = Gw::http(GET => $ng->url('/v1/admin/api/usage'), headers => GwMeter::auth($GwMeter::ADMIN_KEY));
        is($g->{status}, 404, 'not served by the llm_gateway location either');
        ok(!($g->{json} && exists $g->{json}{users}), 'no usage document');
    };
    $ng->stop;
}

my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwMeter::conf(
    users => [
        'llm_gateway_user plain key=sk-user-plain;',
        'llm_gateway_user limadmin key=sk-lim-admin group=admins admin requests_per_minute=2;',
    ],
));
my $url = $ng->url('/admin/api/usage');

subtest 'no credentials' => sub {
    envelope_ok(Gw::http(GET => $url), 401, 'invalid_request_error', 'missing_api_key', 'no key -> 401');
    envelope_ok(Gw::http(GET => $url, headers => GwMeter::auth('sk-wrong')), 401, 'invalid_request_error',
                'invalid_api_key', 'unknown key -> 401');
};

subtest 'a non-admin key' => sub {
    my $r = Gw::http(GET => $url, headers => GwMeter::auth('sk-user-plain'));
    envelope_ok($r, 403, 'permission_error', 'admin_required', 'non-admin -> 403 admin_required');
    ok(!exists $r->{json}{users}, 'no usage document');
};

subtest 'the admin key' => sub {
    for my $h ([Bearer => GwMeter::auth($GwMeter::ADMIN_KEY)], ['x-api-key' => { 'x-api-key' => $GwMeter::ADMIN_KEY }]) {
        my $r = Gw::http(GET => $url, headers => $h->[1]);
        is($r->{status}, 200, "$h->[0]: 200");
        like($r->{headers}{'content-type'} // '', qr{^application/json}, "$h->[0]: JSON");
        is($r->{headers}{'x-content-type-options'}, 'nosniff', "$h->[0]: X-Content-Type-Options: nosniff");
        is($r->{headers}{'cache-control'}, 'no-store', "$h->[0]: Cache-Control: no-store");
        ok(length($r->{headers}{'content-security-policy'} // ''), "$h->[0]: Content-Security-Policy present");
        like($r->{headers}{'content-security-policy'} // '', qr/default-src 'none'/, "$h->[0]: CSP default-src 'none'");
        ok(ref $r->{json}{users} eq 'ARRAY' && ref $r->{json}{groups} eq 'ARRAY' && ref $r->{json}{total} eq 'HASH',
           "$h->[0]: users, groups, total");
        is_deeply([sort map { $_->{name} } @{ $r->{json}{users} || [] }], [qw(limadmin plain root)], "$h->[0]: all users");
        is($r->{json}{total}{kind}, 'total', "$h->[0]: total kind");
        is($r->{json}{total}{name}, 'all', "$h->[0]: total name all");
        unlike($r->{body}, qr/sk-root-admin|sk-user-plain|sk-lim-admin/, "$h->[0]: no key in the document");
    }
};

subtest 'the HTML shell needs no key' => sub {
    my $r = Gw::http(GET => $ng->url('/admin'));
    is($r->{status}, 200, 'GET /admin -> 200');
    like($r->{headers}{'content-type'} // '', qr{^text/html}, 'text/html');
    like($r->{body}, qr/<html/i, 'an HTML document');
};

subtest 'admin traffic counts only against the admin user' => sub {
    GwMeter::wait_second_below(50);
    is(GwMeter::chat($ng, 'sk-user-plain')->{status}, 200, 'one LLM request by plain');
    my @u = map { GwMeter::usage($ng) } 1 .. 4;
    is(scalar(grep { defined } @u), 4, 'four usage reads');
    my @root = map { (GwMeter::row($_, user => 'root') || {})->{requestsPerMinute} } @u;
    is_deeply([map { $root[$_] - $root[0] } 0 .. 3], [0, 1, 2, 3], 'root requestsPerMinute +1 per admin call');
    is_deeply([map { $_->{total}{requestsPerMinute} } @u], [1, 1, 1, 1], 'total requestsPerMinute: only the LLM request');
    is_deeply([map { $_->{total}{requestsPerDay} } @u], [1, 1, 1, 1], 'total requestsPerDay: only the LLM request');
    is_deeply([map { (GwMeter::row($_, group => 'default') || {})->{requestsPerMinute} } @u], [1, 1, 1, 1],
              'root\'s group "default": only plain\'s LLM request');
    is_deeply(GwMeter::fields(GwMeter::row($u[-1], user => 'root'), qw(tokensInPerDay tokensOutPerDay costPerDayMicroUsd)),
              { tokensInPerDay => 0, tokensOutPerDay => 0, costPerDayMicroUsd => 0 }, 'root: no tokens or cost');
    ok(!exists $u[-1]{total}{cache} && !exists((GwMeter::row($u[-1], user => 'root') || {})->{cache}),
       'no llm_gateway_cache: no cache object (its counters are not read)');
};

subtest "an admin's own limit applies to admin calls" => sub {
    GwMeter::wait_second_below(55);
    my @st = map { Gw::http(GET => $url, headers => GwMeter::auth('sk-lim-admin')) } 1 .. 3;
    is_deeply([map { $_->{status} } @st], [200, 200, 429], 'requests_per_minute=2: the third call is 429');
    is($st[2]{json}{error}{message}, 'rate limit exceeded: user "limadmin" requestsPerMinute 2', 'user message');
    my $u = GwMeter::usage($ng);
    is((GwMeter::row($u, group => 'admins') || {})->{requestsPerMinute}, 0, 'its group is not counted');
    is($u->{total}{rejectionsPerDay}, 0, 'the total has no rejection from admin traffic');
};

$ng->stop;
$mock->stop;
done_testing;
