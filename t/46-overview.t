#!/usr/bin/perl
# GET /admin/api/overview: configuration and health of the replica, never a
# secret. With a shared store it reports whether the store is up, the last
# store error and its time, and keeps them after recovery.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use GwRedis;
use Test::More;

Gw::need_module();

my $mock = Gw::Mock->start();
my $PASS = 'redis-pass-46-5f4dcc3b5aa765d6';

sub overview {
    my ($ng) = @_;
    my $r = Gw::http(GET => $ng->url('/admin/api/overview'), headers => { 'x-api-key' => $GwMeter::ADMIN_KEY });
    is($r->{status}, 200, 'overview answers 200') or diag($r->{body});
    return $r;
}

subtest 'shared memory only' => sub {
    my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port }, conf => GwMeter::conf(
        users => ['llm_gateway_user alice key=sk-alice-46 group=eng;'],
        http => "llm_gateway_replica r46;\nllm_gateway_instance blue;\n"));
    my $r = overview($ng);
    my $j = $r->{json};
    is($j->{replica}, 'r46', 'replica id');
    is($j->{instance}, 'blue', 'instance name');
    is_deeply($j->{store}, { type => 'shm', up => JSON::PP::true() }, 'store: shared memory, up');
    is($j->{providers}[0]{name}, 'mock', 'provider listed');
    is($j->{providers}[0]{key}, 'none', 'provider without key= shows none');
    ok(scalar(grep { $_ eq 'eng' } @{ $j->{groups} }), 'groups listed');
    is($r->{headers}{'x-content-type-options'}, 'nosniff', 'nosniff');
    is($r->{headers}{'cache-control'}, 'no-store', 'no-store');
    my $anon = Gw::http(GET => $ng->url('/admin/api/overview'));
    is($anon->{status}, 401, 'no key: 401');
    my $user = Gw::http(GET => $ng->url('/admin/api/overview'), headers => { 'x-api-key' => 'sk-alice-46' });
    is($user->{status}, 403, 'not an admin: 403');
    $ng->stop;
};

subtest 'a shared store: up, down with its last error, up again with the error kept' => sub {
    GwRedis::need_redis();
    my $rd = GwRedis->start(password => $PASS);
    my $ng = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port }, conf => GwMeter::conf(
        users => ['llm_gateway_user alice key=sk-alice-46;'],
        http => 'llm_gateway_store redis://:' . $PASS . '@127.0.0.1:' . $rd->port . "/2;\n"));
    is(GwMeter::chat($ng, 'sk-alice-46')->{status}, 200, 'a request through the store');
    my $j = overview($ng)->{json};
    is($j->{store}{type}, 'redis', 'store type');
    is($j->{store}{url}, 'redis://:[redacted]@127.0.0.1:' . $rd->port . '/2', 'URL redacted');
    ok($j->{store}{up}, 'store up');
    is($j->{store}{lastError}, undef, 'no error yet');

    $rd->kill9;
    is(GwMeter::chat($ng, 'sk-alice-46')->{status}, 200, 'fail-open while the store is down');
    my $down = overview($ng);
    $j = $down->{json};
    ok(!$j->{store}{up}, 'store reported down');
    like($j->{store}{lastError} // '', qr/cannot connect to the store|closed the connection|read from the store failed/,
         'last error recorded');
    like($j->{store}{lastErrorTime} // '', qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'with its time');
    my $err = $j->{store}{lastError};
    ok(index($down->{body}, $PASS) < 0, 'the password is not in the overview');

    $rd->restart;
    my $up;
    Gw::wait_until(sub {
        GwMeter::chat($ng, 'sk-alice-46');
        $up = Gw::http(GET => $ng->url('/admin/api/overview'), headers => { 'x-api-key' => $GwMeter::ADMIN_KEY })->{json};
        $up && $up->{store}{up};
    }, timeout => 12, interval => 0.5);
    ok($up && $up->{store}{up}, 'store up again after the probe');
    is($up && $up->{store}{lastError}, $err, 'the last error is kept after recovery');
    ok(index($ng->error_log, $PASS) < 0, 'the password is not in error.log');
    $ng->stop;
    $rd->stop;
};

$mock->stop;
done_testing;
