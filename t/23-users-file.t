# llm_gateway_users_file: file users authenticate (literal, env:,
# keySha256), a file admin reads the usage; edits are picked up by both
# workers (added, removed, changed key and limit); a broken file keeps the
# last good users and is reported once per change (per worker); the rej
# counters of removed users are pruned; nginx -t rejects a broken file.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use Test::More;
use Digest::SHA ();
use File::Temp ();

Gw::need_module();

my $dir = File::Temp::tempdir('llmgw-users-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $dir;
my $path = "$dir/users.json";
my $seq = 0;

sub write_users {
    my ($data) = @_;
    my $text = ref $data ? Gw::json_encode($data) : $data;
    my $tmp = "$path.tmp" . ++$seq;
    open my $fh, '>:raw', $tmp or die "$tmp: $!";
    print {$fh} $text;
    close $fh or die "$tmp: $!";
    chmod 0644, $tmp;
    rename $tmp, $path or die "rename $tmp: $!";
}

my %U = (
    flit   => { name => 'flit', key => 'sk-file-literal', group => 'fg' },
    fenv   => { name => 'fenv', key => 'env:FILE_USER_KEY', group => 'fg' },
    fsha   => { name => 'fsha', keySha256 => Digest::SHA::sha256_hex('sk-file-sha') },
    fadmin => { name => 'fadmin', key => 'sk-file-admin', admin => JSON::PP::true },
    fgone  => { name => 'fgone', key => 'sk-file-gone', limits => { requestsPerDay => 1 } },
    flim   => { name => 'flim', key => 'sk-file-lim', limits => { requestsPerDay => 1 } },
    fkey   => { name => 'fkey', key => 'sk-file-key-old' },
    fnew   => { name => 'fnew', key => 'sk-file-new', group => 'fg' },
);
my @GROUPS = ({ name => 'fg', limits => { requestsPerMinute => 1000 } });
sub users_doc { return { groups => \@GROUPS, users => [@_] } }

write_users(users_doc(@U{qw(flit fenv fsha fadmin fgone flim fkey)}));

my $mock = Gw::Mock->start();
my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port, USERS => $path },
                          env => { FILE_USER_KEY => 'sk-file-env' },
                          conf => GwMeter::conf(http => 'llm_gateway_users_file %%USERS%% interval=1s;'));

sub st { GwMeter::chat($ng, $_[0])->{status} }

# Several requests on fresh connections (so both workers are likely hit);
# the list of statuses.
sub statuses { my ($key, $n) = @_; return [map { st($key) } 1 .. ($n // 4)] }

# Waits until both workers logged "reloaded" after byte offset $off.
sub wait_reloaded {
    my ($off) = @_;
    my @lines;
    Gw::wait_until(sub {
        @lines = GwMeter::log_lines($ng, qr/llm_gateway: users file "\Q$path\E" reloaded/, $off);
        GwMeter::log_pids(@lines) >= 2;
    }, timeout => 6, interval => 0.1);
    return @lines;
}

subtest 'file users authenticate' => sub {
    is(st('sk-file-literal'), 200, 'key literal');
    is(st('sk-file-env'), 200, 'key env:FILE_USER_KEY');
    is(st('sk-file-sha'), 200, 'keySha256');
    is(st('sk-file-admin'), 200, 'file admin on the gateway');
    is(st('env:FILE_USER_KEY'), 401, 'the env reference itself is not a key');
    is(st($GwMeter::ADMIN_KEY), 200, 'inline root still works');
    is(st('sk-nobody'), 401, 'unknown key 401');
};

subtest 'a file user with "admin": true reads the usage' => sub {
    my $u = GwMeter::usage($ng, key => 'sk-file-admin');
    is($GwMeter::LAST->{status}, 200, 'fadmin: 200');
    is_deeply([sort map { $_->{name} } @{ $u->{users} || [] }],
              [sort qw(root flit fenv fsha fadmin fgone flim fkey)], 'inline and file users listed');
    is((GwMeter::row($u, user => 'flit') || {})->{group}, 'fg', 'flit in group fg');
    is_deeply((GwMeter::row($u, group => 'fg') || {})->{limits}, { requestsPerMinute => 1000 }, 'file group limits');
    is_deeply((GwMeter::row($u, user => 'flim') || {})->{limits}, { requestsPerDay => 1 }, 'file user limits');
    is(GwMeter::usage($ng, key => 'sk-file-literal') ? 200 : $GwMeter::LAST->{status}, 403, 'non-admin file user: 403');
};

subtest 'limits from the file apply' => sub {
    is_deeply([st('sk-file-gone'), st('sk-file-gone')], [200, 429], 'fgone: requestsPerDay 1');
    is_deeply([st('sk-file-lim'), st('sk-file-lim')], [200, 429], 'flim: requestsPerDay 1');
    my $u = GwMeter::usage($ng);
    is((GwMeter::row($u, user => 'fgone') || {})->{rejectionsPerDay}, 1, 'fgone: 1 rejection');
};

subtest 'edit: add, remove, change key and limit' => sub {
    my $off = length $ng->error_log;
    my %flim = (%{ $U{flim} }, limits => { requestsPerDay => 5 });
    my %fkey = (%{ $U{fkey} }, key => 'sk-file-key-new');
    write_users(users_doc(@U{qw(flit fenv fsha fadmin)}, \%flim, \%fkey, $U{fnew}));
    my @lines = wait_reloaded($off);
    is(scalar(GwMeter::log_pids(@lines)), 2, 'both workers logged "reloaded"');
    is(scalar @lines, 2, 'once each');
    like($lines[0] // '', qr/\[notice\] .*llm_gateway: users file "\Q$path\E" reloaded: 8 users/,
         'notice: reloaded: 8 users (root + 7 from the file)');
    is_deeply(statuses('sk-file-new'), [(200) x 4], 'the new user: 200');
    is_deeply(statuses('sk-file-gone'), [(401) x 4], 'the removed user: 401');
    is_deeply(statuses('sk-file-key-old'), [(401) x 4], 'the old key of fkey: 401');
    is_deeply(statuses('sk-file-key-new'), [(200) x 4], 'the new key of fkey: 200');
    is_deeply(statuses('sk-file-lim', 5), [200, 200, 200, 200, 429], 'flim: the new requestsPerDay 5 applies');
    is_deeply(statuses('sk-file-literal', 2), [200, 200], 'unchanged users still 200');
    my $u = GwMeter::usage($ng);
    ok(!GwMeter::row($u, user => 'fgone'), 'fgone no longer listed');
    is_deeply((GwMeter::row($u, user => 'flim') || {})->{limits}, { requestsPerDay => 5 }, 'flim limit shown as 5');
};

subtest 'a broken file keeps the last good users, reported once per change' => sub {
    my $off = length $ng->error_log;
    write_users('{"users": [ {"name": "broken"');
    my $re = qr/\[error\] .*llm_gateway: users file "\Q$path\E" not valid JSON.*; keeping the previous users/;
    Gw::wait_until(sub { GwMeter::log_pids(GwMeter::log_lines($ng, $re, $off)) >= 2 }, timeout => 6, interval => 0.1);
    select(undef, undef, undef, 3.5);    # a few more intervals
    my @lines = GwMeter::log_lines($ng, qr/llm_gateway: users file "\Q$path\E"/, $off);
    is(scalar(grep { $_ =~ $re } @lines), 2, 'the error is logged once per worker') or diag(join "\n", @lines);
    is(scalar(GwMeter::log_pids(grep { $_ =~ $re } @lines)), 2, 'by both workers');
    is(scalar(grep { /reloaded/ } @lines), 0, 'no reload');
    is_deeply(statuses('sk-file-new'), [(200) x 4], 'users of the last good file: 200');
    is_deeply(statuses('sk-file-key-new'), [(200) x 4], 'changed key still valid');
    is(st('sk-file-gone'), 401, 'removed user still 401');

    # Another broken version: a new change, reported again (once per worker).
    my $off2 = length $ng->error_log;
    write_users('{"users": "not an array"}');
    my $re2 = qr/\[error\] .*llm_gateway: users file "\Q$path\E" "users" must be an array; keeping the previous users/;
    Gw::wait_until(sub { GwMeter::log_pids(GwMeter::log_lines($ng, $re2, $off2)) >= 2 }, timeout => 6, interval => 0.1);
    select(undef, undef, undef, 2.5);
    my @l2 = GwMeter::log_lines($ng, qr/llm_gateway: users file "\Q$path\E"/, $off2);
    is(scalar(grep { $_ =~ $re2 } @l2), 2, 'another broken change: logged once per worker again') or diag(join "\n", @l2);
    is(scalar @l2, 2, 'nothing else logged about the file');
    is_deeply(statuses('sk-file-new', 2), [200, 200], 'still the last good users');
};

subtest 'fixing the file reloads; a re-added user starts with 0 rejections' => sub {
    my $off = length $ng->error_log;
    write_users(users_doc(@U{qw(flit fenv fsha fadmin fgone fnew)}));
    my @lines = wait_reloaded($off);
    is(scalar(GwMeter::log_pids(@lines)), 2, 'both workers reloaded');
    like($lines[0] // '', qr/reloaded: 7 users/, 'reloaded: 7 users');
    is_deeply(statuses('sk-file-key-new', 2), [401, 401], 'fkey gone');
    my $u = GwMeter::usage($ng);
    my $row = GwMeter::row($u, user => 'fgone');
    ok($row, 'fgone listed again');
    is(($row || {})->{rejectionsPerDay}, 0, 'fgone: rejectionsPerDay 0 (pruned while it was removed)');
    is(GwMeter::row($u, total => 'all')->{rejectionsPerDay}, 3, 'the total keeps its rejections (fgone 1, flim 2)');
};

subtest 'a file deleted after a good load: last good users kept, reported once per worker' => sub {
    my $off = length $ng->error_log;
    unlink $path or die "unlink $path: $!";
    my $re = qr/\[error\] .*llm_gateway: users file "\Q$path\E" cannot be (?:read|opened); keeping the previous users/;
    Gw::wait_until(sub { GwMeter::log_pids(GwMeter::log_lines($ng, $re, $off)) >= 2 }, timeout => 4, interval => 0.1);
    select(undef, undef, undef, 2.5);
    my @lines = GwMeter::log_lines($ng, qr/llm_gateway: users file "\Q$path\E"/, $off);
    is(scalar(grep { $_ =~ $re } @lines), 2, 'the missing file is reported once per worker')
        or diag('lines about the file: ' . join("\n", @lines));
    is(scalar(grep { /reloaded/ } @lines), 0, 'no reload');
    is_deeply(statuses('sk-file-new', 2), [200, 200], 'still the last good users');

    my $off2 = length $ng->error_log;
    write_users(users_doc(@U{qw(flit fnew)}));
    my @rl = wait_reloaded($off2);
    is(scalar(GwMeter::log_pids(@rl)), 2, 'the file is back: both workers reloaded');
    is(st('sk-file-sha'), 401, 'and use it');
};

subtest 'nginx -t fails on a broken users file' => sub {
    my $bad = "$dir/bad.json";
    open my $fh, '>', $bad or die $!;
    print {$fh} "{ not json";
    close $fh;
    chmod 0644, $bad;
    my $conf = GwMeter::conf(http => "llm_gateway_users_file $bad interval=1s;");
    my ($exit, $out, $file, $first) = Gw::nginx_t($conf, vars => { MOCK => $mock->port });
    isnt($exit, 0, 'nginx -t fails');
    like($out, qr/\[emerg\] .*llm_gateway_users_file "\Q$bad\E" not valid JSON/, 'message names the directive and the file');
    my @cl = split /\n/, $conf;
    my ($k) = grep { $cl[$_] =~ /llm_gateway_users_file/ } 0 .. $#cl;
    my $line = $first + $k;
    like($out, qr/\Q$file\E:$line\b/, "points at the directive, $file:$line");

    my ($exit2, $out2) = Gw::nginx_t(GwMeter::conf(http => "llm_gateway_users_file $dir/missing.json;"),
                                     vars => { MOCK => $mock->port });
    isnt($exit2, 0, 'a missing file fails too');
    like($out2, qr/llm_gateway_users_file "\Q$dir\E\/missing\.json"/, 'and names it');
};

$ng->stop;
$mock->stop;
done_testing;
