# The Redis store with a password and over TLS: the password in the URL,
# through password=file: and as user:password; a wrong or missing password
# is a store error (the latch line says why, fail-open serves, fail-closed
# answers 503) and the password never shows in error.log nor in responses.
# TLS with certificates generated at test time: the right CA counts, a
# wrong CA or host name is refused (fail_open=off: 503), verification is on
# by default (no tls_ca: the system CA certificates, which do not vouch for
# the test's CA, so the server is refused), tls_verify=off
# accepts, and a server that requires client certificates works with
# tls_cert/tls_key and refuses a client without them.
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

my $PW = 'pw-41-Sekr3t-zq';
my $WRONG = 'wrong-41-Pass-xk';

my $mock = Gw::Mock->start();
my $tmp = File::Temp::tempdir('llmgw41-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LLMGW_KEEP});
Gw::_spew("$tmp/pw", "$PW\n");
Gw::_spew("$tmp/wrong", "$WRONG\n");

my @USERS = map { "llm_gateway_user $_ key=sk-$_-41 group=g41;" } qw(p1 p2 p3 p4 p5 p6 t1 t2 t3 t4 t5 t6 t7 m1 m2);

# An nginx whose store is $store (the rest of the llm_gateway_store line).
sub gateway {
    my ($store, %o) = @_;
    my $ng = eval {
        Gw::Nginx->start(workers => $o{workers} // 2, vars => { MOCK => $mock->port },
                         conf => GwMeter::conf(users => \@USERS, http => "llm_gateway_store $store;\n"));
    };
    fail("nginx starts with llm_gateway_store $store") or diag($@) unless $ng;
    return $ng;
}

sub latch_lines {
    my ($ng) = @_;
    return GwMeter::log_lines($ng, qr/llm_gateway: limit store /);
}

# The exact latch line format, with the reason captured.
sub latch_re {
    my ($url, $open) = @_;
    my $mode = $open ? 'counting in shared memory' : 'refusing admission';
    return qr/\[error\] \d+#\d+: llm_gateway: limit store \Q$url\E failed: (.+); not contacting it for 5 s \(\Q$mode\E meanwhile\)$/;
}

# Sends $n chats as $user; all must answer $status.
sub chats {
    my ($ng, $user, $n, $status, $name) = @_;
    my @r = map { GwMeter::chat($ng, "sk-$user-41") } 1 .. $n;
    my @st = map { $_->{status} } @r;
    is_deeply(\@st, [($status) x $n], "$name: $n x $status") or diag($r[0]{body});
    return @r;
}

sub counted {
    my ($rd, $user, $n, $name) = @_;
    my $t = time;
    my $k = GwRedis::key('user', $user, 'tokout', 'day', $t);
    my $ok = Gw::wait_until(sub { $rd->get_num($k) == 7 * $n }, timeout => 5, interval => 0.05);
    ok($ok, "$name: counted in Redis ($k = " . 7 * $n . ')') or diag('got ' . $rd->get_num($k));
    is($rd->get_num(GwRedis::key('user', $user, 'req', 'day', $t)), $n, "$name: req:day = $n in Redis");
}

sub not_counted {
    my ($rd, $user, $name) = @_;
    is($rd->cli('KEYS', "llmgw:user:$user:*"), '', "$name: nothing of $user in Redis");
}

sub secret_free {
    my ($ng, @r) = @_;
    my $text = $ng->error_log . Gw::_slurp($ng->prefix . '/logs/startup.log') . join('', map { $_->{body} } @r);
    unlike($text, qr/\Q$PW\E|\Q$WRONG\E/, 'no password in error.log, startup.log or the responses');
}

sub is_503 {
    my ($r, $name) = @_;
    GwConf::is_envelope($r, 503, 'server_error', 'limit_store_unavailable', "$name: 503 limit_store_unavailable");
    is($r->{json}{error}{message}, 'the limit store is unavailable', "$name: message");
    ok(!exists $r->{headers}{'retry-after'}, "$name: no Retry-After");
}

# ================================================================ password

my $rd = GwRedis->start(password => $PW);
my $P = $rd->port;

subtest 'password in the URL' => sub {
    my $ng = gateway("redis://:$PW\@127.0.0.1:$P") or return;
    my @r = chats($ng, 'p1', 3, 200, 'redis://:PASS@');
    counted($rd, 'p1', 3, 'URL password');
    is_deeply([latch_lines($ng)], [], 'no store failure');
    secret_free($ng, @r);
    $ng->stop;
};

subtest 'password=file:' => sub {
    my $ng = gateway("redis://127.0.0.1:$P password=file:$tmp/pw") or return;
    my @r = chats($ng, 'p2', 2, 200, 'password=file:');
    counted($rd, 'p2', 2, 'password=file:');
    is_deeply([latch_lines($ng)], [], 'no store failure');
    secret_free($ng, @r);
    $ng->stop;
};

subtest 'user:password (AUTH default PASS)' => sub {
    my $ng = gateway("redis://default:$PW\@127.0.0.1:$P/2") or return;
    my @r = chats($ng, 'p3', 2, 200, 'redis://default:PASS@ .../2');
    my $t = time;
    ok(Gw::wait_until(sub { $rd->get_num(GwRedis::key('user', 'p3', 'req', 'day', $t), 2) == 2 }, timeout => 5),
       'counted in db 2');
    is_deeply([latch_lines($ng)], [], 'no store failure');
    secret_free($ng, @r);
    $ng->stop;
};

subtest 'wrong password in the URL: store error, fail-open serves' => sub {
    my $ng = gateway("redis://:$WRONG\@127.0.0.1:$P", workers => 1) or return;
    my @r = chats($ng, 'p4', 3, 200, 'wrong password, fail-open');
    my $re = latch_re("redis://:[redacted]\@127.0.0.1:$P/0", 1);
    ok($ng->wait_log($re), 'latch line logged');
    my @l = latch_lines($ng);
    is(scalar @l, 1, 'exactly one latch line (one worker, < 30 s)') or diag(join "\n", @l);
    my ($why) = ($l[0] // '') =~ $re;
    is($why, 'the store refused the credentials', 'reason: the store refused the credentials');
    not_counted($rd, 'p4', 'wrong password');
    secret_free($ng, @r);
    $ng->stop;
};

subtest 'wrong password=file:, fail_open=off: 503 without Retry-After' => sub {
    my $ng = gateway("redis://127.0.0.1:$P password=file:$tmp/wrong fail_open=off", workers => 1) or return;
    $mock->clear;
    my $r = GwMeter::chat($ng, 'sk-p5-41');
    is_503($r, 'wrong password, fail-closed');
    my $r2 = GwMeter::chat($ng, 'sk-p5-41');
    is_503($r2, 'while the latch is open');
    # password= is in effect: the URL carries the marker (docs/store.md)
    my $re = latch_re("redis://:[redacted]\@127.0.0.1:$P/0", 0);
    my @l = latch_lines($ng);
    is(scalar @l, 1, 'exactly one latch line') or diag(join "\n", @l);
    my ($why) = ($l[0] // '') =~ $re;
    is($why, 'the store refused the credentials', 'reason: the store refused the credentials');
    is(scalar @{ $mock->requests }, 0, 'no provider call was made');
    not_counted($rd, 'p5', 'fail-closed');
    secret_free($ng, $r, $r2);
    $ng->stop;
};

subtest 'no password against requirepass: store error, fail-open serves' => sub {
    my $ng = gateway("redis://127.0.0.1:$P", workers => 1) or return;
    my @r = chats($ng, 'p6', 2, 200, 'no password, fail-open');
    my $re = latch_re("redis://127.0.0.1:$P/0", 1);
    ok($ng->wait_log($re), 'latch line logged');
    my @l = latch_lines($ng);
    is(scalar @l, 1, 'exactly one latch line') or diag(join "\n", @l);
    my ($why) = ($l[0] // '') =~ $re;
    like($why // '', qr/NOAUTH|credentials|[Aa]uthentication|unauthenticated/, "reason names the missing authentication ($why)");
    not_counted($rd, 'p6', 'no password');
    secret_free($ng, @r);
    $ng->stop;
};

$rd->stop;

# ===================================================================== TLS

my $pki = GwRedis::make_pki($tmp);
my %tls = (cert => $pki->{server_cert}, key => $pki->{server_key}, ca => $pki->{ca},
           client_cert => $pki->{client_cert}, client_key => $pki->{client_key});
my $rt = GwRedis->start(tls => { %tls, auth_clients => 'no' });
my $T = $rt->port;

subtest 'rediss:// with tls_ca counts in Redis' => sub {
    my $ng = gateway("rediss://127.0.0.1:$T?tls_ca=$pki->{ca}") or return;
    chats($ng, 't1', 3, 200, 'TLS');
    counted($rt, 't1', 3, 'TLS');
    is_deeply([latch_lines($ng)], [], 'no store failure');
    $ng->stop;
};

subtest 'rediss:// with tls_sni=localhost (DNS name in the certificate)' => sub {
    my $ng = gateway("rediss://127.0.0.1:$T?tls_ca=$pki->{ca}&tls_sni=localhost") or return;
    chats($ng, 't2', 2, 200, 'TLS, SNI localhost');
    counted($rt, 't2', 2, 'TLS, SNI localhost');
    is_deeply([latch_lines($ng)], [], 'no store failure');
    $ng->stop;
};

subtest 'a wrong CA is refused; fail_open=off answers 503' => sub {
    my $ng = gateway("rediss://127.0.0.1:$T?tls_ca=$pki->{ca2} fail_open=off", workers => 1) or return;
    my $r = GwMeter::chat($ng, 'sk-t3-41');
    is_503($r, 'wrong CA');
    my $re_any = qr/llm_gateway: limit store \S+ failed: (.+); not contacting it for 5 s \(refusing admission meanwhile\)$/;
    my @l = latch_lines($ng);
    is(scalar @l, 1, 'exactly one latch line') or diag(join "\n", @l);
    my ($why) = ($l[0] // '') =~ $re_any;
    like($why // '', qr/certificate/, "the reason mentions the certificate (" . ($why // 'none') . ')');
    like($l[0] // '', qr/limit store rediss:\/\/127\.0\.0\.1:$T\/0\?tls_ca=\Q$pki->{ca2}\E failed/, 'the line names the store');
    not_counted($rt, 't3', 'wrong CA');
    $ng->stop;
};

subtest 'a host name not in the certificate is refused (fail-open serves)' => sub {
    my $ng = gateway("rediss://127.0.0.1:$T?tls_ca=$pki->{ca}&tls_sni=wrong.example", workers => 1) or return;
    chats($ng, 't4', 2, 200, 'wrong name, fail-open');
    ok($ng->wait_log(qr/limit store .* failed: .*(?:certificate|host name)/), 'latch line logged');
    my @l = latch_lines($ng);
    is(scalar @l, 1, 'exactly one latch line') or diag(join "\n", @l);
    like($l[0] // '', qr/failed: store certificate does not match the host name; .*\(counting in shared memory meanwhile\)$/,
         'reason: the certificate does not match the host name');
    not_counted($rt, 't4', 'wrong name');
    $ng->stop;
};

subtest 'verification is on by default: without tls_ca the system CAs refuse the test CA\'s server' => sub {
    my $ng = gateway("rediss://127.0.0.1:$T fail_open=off", workers => 1) or return;
    my $r = GwMeter::chat($ng, 'sk-t7-41');
    is_503($r, 'no tls_ca, no tls_verify');
    my @l = latch_lines($ng);
    is(scalar @l, 1, 'exactly one latch line') or diag(join "\n", @l);
    like($l[0] // '', qr/limit store rediss:\/\/127\.0\.0\.1:$T\/0 failed: store certificate verify failed: .+; not contacting it for 5 s \(refusing admission meanwhile\)$/,
         'the reason: the certificate was not verified');
    not_counted($rt, 't7', 'default verification');
    $ng->stop;
};

subtest 'tls_verify=off accepts a server the CA does not vouch for' => sub {
    my $ng = gateway("rediss://127.0.0.1:$T?tls_ca=$pki->{ca2}&tls_verify=off") or return;
    chats($ng, 't5', 2, 200, 'tls_verify=off');
    counted($rt, 't5', 2, 'tls_verify=off');
    is_deeply([latch_lines($ng)], [], 'no store failure');
    $ng->stop;
};

subtest 'plain redis:// to a TLS port is a store error (fail-open serves)' => sub {
    my $ng = gateway("redis://127.0.0.1:$T", workers => 1) or return;
    my $t0 = Time::HiRes::time();
    chats($ng, 't6', 1, 200, 'plain to TLS');
    cmp_ok(Time::HiRes::time() - $t0, '<', 3, 'answered within the 2 s store time-out (+1 s)');
    ok($ng->wait_log(latch_re("redis://127.0.0.1:$T/0", 1)), 'latch line logged');
    not_counted($rt, 't6', 'plain to TLS');
    $ng->stop;
};

$rt->stop;

# ------------------------------------------------ client certificates

my $rm = GwRedis->start(tls => { %tls, auth_clients => 'yes' });
my $M = $rm->port;

subtest 'client certificate required: tls_cert/tls_key work' => sub {
    my $ng = gateway("rediss://127.0.0.1:$M?tls_ca=$pki->{ca}&tls_cert=$pki->{client_cert}&tls_key=$pki->{client_key}")
        or return;
    chats($ng, 'm1', 2, 200, 'mTLS');
    counted($rm, 'm1', 2, 'mTLS');
    is_deeply([latch_lines($ng)], [], 'no store failure');
    $ng->stop;
};

subtest 'client certificate required: without one the store fails' => sub {
    my $ng = gateway("rediss://127.0.0.1:$M?tls_ca=$pki->{ca} fail_open=off", workers => 1) or return;
    my $t0 = Time::HiRes::time();
    my $r = GwMeter::chat($ng, 'sk-m2-41');
    is_503($r, 'no client certificate');
    cmp_ok(Time::HiRes::time() - $t0, '<', 3, 'answered within the 2 s store time-out (+1 s)');
    my @l = latch_lines($ng);
    is(scalar @l, 1, 'exactly one latch line') or diag(join "\n", @l);
    like($l[0] // '', qr/limit store rediss:\/\/127\.0\.0\.1:$M\/0\?tls_ca=\S+ failed: .+; not contacting it for 5 s \(refusing admission meanwhile\)$/,
         'latch line with a reason');
    not_counted($rm, 'm2', 'no client certificate');
    $ng->stop;
};

$rm->stop;
$mock->stop;
done_testing;
