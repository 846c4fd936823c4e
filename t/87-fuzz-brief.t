#!/usr/bin/perl
# Every libFuzzer target of make fuzz builds and runs briefly: make fuzz
# FUZZ_SECONDS=5 (docs/testing.md#fuzzing), in the build folder of the module
# under test (build/ without one). Fails when a target does not build or its
# run finds anything (a crash, a sanitizer report, a broken invariant: the
# crash input is left in <build>/fuzz/crash-<target>-*). Without clang the
# file is skipped, except under CI, where that is a failure. It does not need
# the module. About a minute of runs on 2 cores, plus the first build of the
# core's instrumented objects (about 1.5 minutes on 2 idle cores).

use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use Test::More;
use Time::HiRes qw(time);

my $root = abs_path(dirname(__FILE__) . '/..');
my $build = $ENV{LLMGW_MODULE} ? dirname($ENV{LLMGW_MODULE}) : "$root/build";
my $seconds = $ENV{LLMGW_FUZZ_SECONDS} || 5;

my $have_clang = system('sh', '-c', 'command -v clang++ >/dev/null 2>&1') == 0;
if (!$have_clang) {
    if ($ENV{CI}) {
        fail('clang++ is installed (CI: the fuzz targets must build; scripts/install-deps installs clang)');
        done_testing();
        exit;
    }
    plan skip_all => 'clang++ is not installed (scripts/install-deps installs it)';
}

# Bounded: a hung target or build fails the file instead of hanging the suite.
local $SIG{ALRM} = sub { BAIL_OUT("make fuzz took longer than 900 s") };
alarm 900;

# make as a user runs it, outside the suite's own make (its jobserver).
sub make_run {
    my (@args) = @_;
    local $ENV{MAKEFLAGS} = '';
    local $ENV{MFLAGS} = '';
    local $ENV{MAKELEVEL} = '';
    my $out = qx{cd '$root' && make --no-print-directory BUILD='$build' @args 2>&1};
    return ($? >> 8, $out);
}

my ($rc, $list) = make_run('fuzz-targets');
is($rc, 0, 'make fuzz-targets') or diag($list);
my @targets = split ' ', $list;
cmp_ok(scalar @targets, '>=', 12, 'the targets: ' . join(' ', @targets));

my $t0 = time;
my ($brc, $bout) = make_run('-j2', 'fuzz-build');
is($brc, 0, 'every target builds') or diag(substr($bout, -4000));
my $built = time - $t0;

$t0 = time;
my ($frc, $fout) = make_run('fuzz', "FUZZ_SECONDS=$seconds");
is($frc, 0, "make fuzz FUZZ_SECONDS=$seconds finds nothing") or diag(substr($fout, -8000));
my $ran = time - $t0;

for my $t (@targets) {
    like($fout, qr/^fuzz_\Q$t\E: \Q$seconds\E s, [1-9]\d* runs, \d+ exec\/s, nothing found$/m,
         "fuzz_$t ran and found nothing");
}
note($fout);
diag(sprintf('fuzz brief: build %.0f s, runs %.0f s (%d targets x %d s)', $built, $ran, scalar @targets, $seconds));
alarm 0;

done_testing();
