#!/usr/bin/perl
# A users file that holds keys (given literally or as literal:) and that its
# group or other users may read (mode bit 040 or 004) is warned about when it
# is loaded: by nginx -t, at start and on every reload (the master, once), by
# each worker that re-reads the changed file, and in the admin overview's
# warnings. The line names the file and its mode, never a key. A file of
# mode 0600, or one whose keys are all keySha256, env: or file:, is not
# warned about. (docs/directives.md#llm_gateway_users_file)

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use Digest::SHA ();
use File::Temp ();
use Test::More;

Gw::need_module();

my $dir = File::Temp::tempdir('llmgw-27-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $dir;
my $path = "$dir/users.json";
my $seq = 0;

# When the tests run as root the workers run as nobody: the file is theirs,
# so that they can re-read it at any mode.
my ($wuid, $wgid) = $> == 0 ? (getpwnam('nobody'))[2, 3] : ($>, $));

my $KEYS = [{ name => 'lit', key => 'sk-27-literal-key-0a1b2c3d' },
            { name => 'lit2', key => 'literal:sk-27-literal-prefixed-4e5f' },
            { name => 'env', key => 'env:LLMGW27_KEY' }];
my $NO_KEYS = [{ name => 'env', key => 'env:LLMGW27_KEY' },
               { name => 'file', key => "file:$dir/secret" },
               { name => 'sha', keySha256 => Digest::SHA::sha256_hex('sk-27-sha') }];
my @SECRETS = ('sk-27-literal-key-0a1b2c3d', 'sk-27-literal-prefixed-4e5f', 'sk-27-env-value-6a7b8c', 'sk-27-file-value-9d0e');

open my $sf, '>', "$dir/secret" or die $!;
print {$sf} "$SECRETS[3]\n";
close $sf;
chmod 0644, "$dir/secret";

sub write_users {
    my ($users, $mode) = @_;
    my $tmp = "$path.tmp" . ++$seq;
    open my $fh, '>:raw', $tmp or die "$tmp: $!";
    print {$fh} Gw::json_encode({ users => $users });
    close $fh or die "$tmp: $!";
    chown $wuid, $wgid, $tmp;
    chmod $mode, $tmp;
    rename $tmp, $path or die "rename $tmp: $!";
}

my %ENV27 = (LLMGW27_KEY => $SECRETS[2]);
my $mock = Gw::Mock->start();
my $conf = GwMeter::conf(http => "llm_gateway_users_file $path interval=1s;");

sub warning_re {
    my ($n, $who, $mode) = @_;
    return qr/\[warn\] (?:\d+#\d+: )?llm_gateway: users file "\Q$path\E" holds $n keys? and can be read by \Q$who\E \(mode $mode\): make it readable by the user nginx's workers run as only \(chmod 600, owned by that user\), or give the keys as keySha256, env: or file:/;
}
sub no_secret_in {
    my ($text, $what) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    ok(!(grep { index($text, $_) >= 0 } @SECRETS), "no key in $what");
}

# ------------------------------------------------------------ nginx -t

my @rows = (
    [0644, $KEYS,    2, 'its group and every other user'],
    [0640, $KEYS,    2, 'its group'],
    [0604, $KEYS,    2, 'every other user'],
    [0600, $KEYS,    undef],
    [0400, $KEYS,    undef],
    [0644, $NO_KEYS, undef],
    [0666, [$KEYS->[0]], 1, 'its group and every other user'],
);
for my $row (@rows) {
    my ($mode, $users, $n, $who) = @$row;
    my $oct = sprintf '%04o', $mode;
    my $name = sprintf 'nginx -t, mode %s, %s', $oct,
        $users == $NO_KEYS ? 'no key in the file (env:, file:, keySha256)' : scalar(@$users) . ' users';
    subtest $name => sub {
        write_users($users, $mode);
        my ($exit, $out) = Gw::nginx_t($conf, vars => { MOCK => $mock->port }, env => \%ENV27);
        is($exit, 0, 'nginx -t passes');
        my @lines = grep { /users file/ } split /\n/, $out;
        if (defined $n) {
            is(scalar @lines, 1, 'one warning about the file') or diag($out);
            like($lines[0] // '', warning_re($n, $who, $oct), "it names the file, $n key(s), who may read it and mode $oct");
        } else {
            is_deeply(\@lines, [], 'no warning about the file') or diag($out);
        }
        no_secret_in($out, 'the output');
    };
}

# ------------------------------------------------------------ a running nginx

write_users($KEYS, 0600);
my $ng = Gw::Nginx->start(workers => 2, conf => $conf, vars => { MOCK => $mock->port }, env => \%ENV27);
sub overview_warnings {
    my $o = Gw::http(GET => $ng->url('/admin/api/overview'), headers => { 'x-api-key' => $GwMeter::ADMIN_KEY });
    return [grep { /users file/ } @{ ($o->{json} // {})->{warnings} // [] }];
}

subtest 'start with mode 0600: no warning' => sub {
    is(GwMeter::chat($ng, $KEYS->[0]{key})->{status}, 200, 'a file user is served');
    is(scalar(() = $ng->error_log =~ /holds \d+ keys?/g), 0, 'no warning in error.log');
    is_deeply(overview_warnings(), [], 'none in the overview');
};

# Waits until both workers re-read the file after byte $from; their lines.
sub wait_reloaded {
    my ($from) = @_;
    my @l;
    Gw::wait_until(sub {
        @l = GwMeter::log_lines($ng, qr/llm_gateway: users file "\Q$path\E" reloaded/, $from);
        GwMeter::log_pids(@l) >= 2;
    }, timeout => 8, interval => 0.1);
    return @l;
}

subtest 'the file rewritten with mode 0644: each worker warns once as it re-reads it' => sub {
    my $from = length $ng->error_log;
    write_users([@$KEYS, { name => 'new', key => 'sk-27-literal-new-5566' }], 0644);
    push @SECRETS, 'sk-27-literal-new-5566';
    my @re = wait_reloaded($from);
    is(GwMeter::log_pids(@re), 2, 'both workers re-read the file');
    my @warn = GwMeter::log_lines($ng, qr/holds \d+ keys?/, $from);
    is(scalar @warn, 2, 'two warnings, one per worker') or diag(join "\n", @warn);
    like($_, warning_re(3, 'its group and every other user', '0644'), 'names the file, 3 keys and mode 0644') for @warn;
    is(GwMeter::log_pids(@warn), 2, 'from both workers');
    my @ov = map { @{ overview_warnings() } } 1 .. 4;
    ok(@ov >= 4, 'the overview lists it (every worker that answered)') or diag(explain \@ov);
    like($ov[0] // '', qr/^users file "\Q$path\E" holds 3 keys .*\(mode 0644\)/, 'the overview\'s sentence');
    is(GwMeter::chat($ng, 'sk-27-literal-new-5566')->{status}, 200, 'and the new user is served all the same');
};

subtest 'a reload: the master warns once' => sub {
    my $from = length $ng->error_log;
    ok($ng->reload, 'reloaded');
    my @warn = GwMeter::log_lines($ng, qr/holds \d+ keys?/, $from);
    is(scalar @warn, 1, 'one warning, from the master re-reading the configuration') or diag(join "\n", @warn);
    like($warn[0] // '', warning_re(3, 'its group and every other user', '0644'), 'the same sentence');
};

subtest 'the file rewritten with mode 0600: no warning, the overview clear' => sub {
    my $from = length $ng->error_log;
    write_users($KEYS, 0600);
    wait_reloaded($from);
    is(scalar(GwMeter::log_lines($ng, qr/holds \d+ keys?/, $from)), 0, 'no new warning');
    my @ov = map { @{ overview_warnings() } } 1 .. 4;
    is_deeply(\@ov, [], 'the overview no longer lists it');
};

no_secret_in($ng->error_log, 'error.log');
$ng->stop;
done_testing();
