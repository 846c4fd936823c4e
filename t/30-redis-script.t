#!/usr/bin/perl
# The admission Lua script (src/core/store/admit_script.cpp) against a real
# redis-server: starts one on a free 127.0.0.1 port (no persistence), runs
# the unit binary's AdmitScriptRedis* tests with LLMGW_REDIS_PORT set, and
# stops the server. Needs build/unit_tests (make unit) and redis-server.
#
#   LLMGW_UNIT_BIN   unit test binary (default build/unit_tests)
#   REDIS_SERVER     redis-server binary (default: from PATH)

use strict;
use warnings;
use lib 't/lib';
use Gw;
use File::Spec;
use File::Temp ();
use POSIX ();
use Test::More;

my $unit = $ENV{LLMGW_UNIT_BIN} || "$Gw::ROOT/build/unit_tests";
Gw::need(-x $unit, "$unit is missing: run make unit first");

my $redis_bin = $ENV{REDIS_SERVER};
unless ($redis_bin) {
    for my $dir (File::Spec->path, '/usr/bin', '/usr/sbin') {
        my $p = "$dir/redis-server";
        if (-x $p) { $redis_bin = $p; last }
    }
}
Gw::need($redis_bin && -x $redis_bin, 'redis-server not found (apt-get install redis-server)');

my $dir = File::Temp::tempdir('llmgw-redis-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $port = Gw::free_port();
my $redis_pid;

sub stop_redis {
    return unless $redis_pid;
    kill 'TERM', $redis_pid;
    my $gone = Gw::wait_until(sub { waitpid($redis_pid, POSIX::WNOHANG()) == $redis_pid }, timeout => 10);
    unless ($gone) {
        kill 'KILL', $redis_pid;
        waitpid($redis_pid, 0);
    }
    undef $redis_pid;
}

my $owner = $$;
END { stop_redis() if $$ == $owner }

$redis_pid = fork // die "fork: $!";
if (!$redis_pid) {
    open STDIN, '<', '/dev/null';
    open STDOUT, '>', "$dir/redis.log";
    open STDERR, '>&', \*STDOUT;
    exec { $redis_bin } $redis_bin, '--port', $port, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
        '--dir', $dir, '--daemonize', 'no', '--protected-mode', 'yes'
        or POSIX::_exit(127);
}

my $up = Gw::wait_until(sub { Gw::port_open($port) }, timeout => 15, interval => 0.05);
ok($up, "redis-server listens on 127.0.0.1:$port") or do {
    diag(Gw::_slurp("$dir/redis.log") // '');
    done_testing();
    exit;
};

my $r = Gw::run([$unit, '--gtest_filter=AdmitScriptRedis*', '--gtest_color=no'],
                env => { LLMGW_REDIS_PORT => $port }, timeout => 180);
ok(!$r->{timed_out}, 'unit tests finished in time');
is($r->{exit}, 0, 'AdmitScriptRedis* tests pass') or diag($r->{stdout} . $r->{stderr});
my ($passed) = $r->{stdout} =~ /\[  PASSED  \] (\d+) tests?\./;
cmp_ok($passed // 0, '>=', 12, 'every AdmitScriptRedis test ran');
unlike($r->{stdout}, qr/\[  SKIPPED \]/, 'none skipped');

stop_redis();
ok(!Gw::port_open($port), 'redis-server stopped');

done_testing();
