#!/usr/bin/perl
# The build is incremental: with nothing changed, make has nothing to do; a
# changed core file rebuilds its own object only, and a changed header the
# objects that include it (docs/testing.md). Checked in the build folder of
# the module under test, with make -q and make -n: nothing is rebuilt, and
# the touched file's time is put back.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use File::Basename qw(dirname);
use Test::More;

my $module = Gw::need_module();
my $build = dirname($module);
my $root = dirname(dirname(__FILE__));
$root = '.' if $root eq '';

# make as a user runs it, outside the suite's own make (its jobserver).
sub make_run {
    my (@args) = @_;
    local $ENV{MAKEFLAGS} = '';
    local $ENV{MFLAGS} = '';
    local $ENV{MAKELEVEL} = '';
    my $out = qx{cd '$root' && make --no-print-directory BUILD='$build' @args 2>&1};
    return ($? >> 8, $out);
}

# What make would compile of the module's sources.
sub compiled {
    my ($out) = @_;
    return scalar(() = $out =~ m{-o objs/addon/\S+\.o\b}g);
}

my ($rc, $out) = make_run('-q', 'module');
is($rc, 0, 'make -q module: the module is up to date') or diag($out);

# One file's time moved forward for the length of a dry run, then put back.
sub with_touched {
    my ($file, $code) = @_;
    my $path = "$root/$file";
    my @st = stat($path) or die "$path: $!";
    my $t = time + 5;
    utime($t, $t, $path) or die "utime $path: $!";
    my @r = eval { $code->() };
    my $err = $@;
    utime($st[8], $st[9], $path);
    die $err if $err;
    return @r;
}

subtest 'a changed core file rebuilds one object' => sub {
    my ($rc1, $out1) = with_touched('src/core/metering/windows.cpp', sub { make_run('-n', 'module') });
    is($rc1, 0, 'make -n succeeds') or diag($out1);
    is(compiled($out1), 1, 'one object compiled') or diag($out1);
    like($out1, qr{-o objs/addon/metering/windows\.o}, 'the changed file\'s own object');
};

subtest 'a changed header rebuilds only the objects that include it' => sub {
    my ($rc1, $out1) = with_touched('src/core/log/log_escape.h', sub { make_run('-n', 'module') });
    is($rc1, 0, 'make -n succeeds') or diag($out1);
    my $n = compiled($out1);
    my $all = () = glob("$root/src/core/*/*.cpp $root/src/ngx/*.cpp $root/src/ngx/*/*.cpp");
    ok($n >= 1 && $n < $all, "some objects ($n of $all)") or diag($out1);
    like($out1, qr{-o objs/addon/log/log_escape\.o}, 'its own source\'s object among them');
    unlike($out1, qr{-o objs/addon/metering/windows\.o}, 'not a file that does not include it');
};

($rc, $out) = make_run('-q', 'module');
is($rc, 0, 'make -q module afterwards: still up to date') or diag($out);

done_testing();
