package Gw;

# Integration-test harness for the LLM gateway nginx module.
#
#   use lib 't/lib'; use Gw;
#   my $mock = Gw::Mock->start();
#   my $ng   = Gw::Nginx->start(conf => $http_block, workers => 2,
#                               vars => { MOCK => $mock->port });
#   my $r    = Gw::http(POST => $ng->url('/v1/chat/completions'), body => {...});
#
# Everything talks to 127.0.0.1 only, on ports the kernel hands out. Every
# wait is bounded. nginx instances and mocks are stopped (and nginx's logs
# checked for [alert]/[crit]/[emerg] and sanitizer reports) when they go out
# of scope or when the test script ends. See docs/testing.md.
#
# Environment:
#   NGINX_BIN           nginx binary (default /usr/sbin/nginx)
#   LLMGW_MODULE        absolute path of ngx_http_llm_gateway_module.so
#   NODE_BIN            node binary (default: node from PATH)
#   LLMGW_KEEP=1        keep nginx prefixes (temp dirs) after the test
#   LLMGW_TEST_TIMEOUT  watchdog for a whole test script, seconds (default 300)
#   LLMGW_ARTIFACTS     keep what the gateways said (logs, responses, nginx -t
#                       output) and the configured secrets under this folder,
#                       for t/99-no-secret-anywhere.t (t/lib/GwArtifacts.pm)

use strict;
use warnings;

use Cwd ();
use File::Basename ();
use File::Spec;
use File::Temp ();
use HTTP::Tiny;
use IO::Select;
use IO::Socket::INET;
use JSON::PP ();
use POSIX ();
use Scalar::Util ();
use Test::More ();
use Time::HiRes ();
use GwArtifacts ();

our $VERSION = '0.1';

# Repository root: t/lib/Gw.pm -> ../..
our $ROOT = Cwd::abs_path(File::Spec->catdir(File::Basename::dirname(__FILE__), '..', '..'));
our $MOCK_SCRIPT = "$ROOT/t/mock/provider.mjs";
our $JS_DIR      = "$ROOT/t/js";

# Lines in nginx logs that fail a test.
our $LOG_PROBLEM_RE = qr/\[(?:alert|crit|emerg)\]|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:/;

# Sanitizer settings that must reach nginx's workers when they are set.
our @SANITIZER_ENV = qw(ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS);

my $JSON = JSON::PP->new->utf8->canonical->allow_nonref->allow_blessed->convert_blessed;

my $OWNER_PID = $$;     # the test script; forked helpers never clean up
my %LIVE;               # refaddr -> weak ref to live Gw::Nginx / Gw::Mock

my $artifacts_ready;
sub import {
    GwArtifacts::init() unless $artifacts_ready++;
    # A whole test script is bounded in time, and INT/TERM still run the
    # END cleanup below.
    watchdog($ENV{LLMGW_TEST_TIMEOUT} // 300) unless $SIG{ALRM};
    for my $sig (qw(INT TERM)) {
        $SIG{$sig} = sub { Test::More::diag("Gw: caught SIG$sig, cleaning up"); exit 130 }
            unless $SIG{$sig};
    }
}

# ------------------------------------------------------------------ basics

sub nginx_bin   { $ENV{NGINX_BIN} || '/usr/sbin/nginx' }
sub module_path { $ENV{LLMGW_MODULE} || undef }
sub node_bin    { $ENV{NODE_BIN} || 'node' }

# A worker's memory growth allowed on top of a test's own bound, in kB:
# under make test-asan, AddressSanitizer's quarantine keeps freed memory
# (quarantine_size_mb, 256 MiB by default) resident; elsewhere nothing.
sub sanitizer_slack_kb { $ENV{LLMGW_NGINX_PRELOAD} ? 256 * 1024 : 0 }

# ---- tests that cannot run: skipped on a developer's machine, failed in CI
#
# Every test that cannot run here (a missing redis-server, node packages,
# Chromium, root...) says so through these, never through Test::More's
# plan(skip_all) or skip() directly: under CI (the environment variable CI set
# to anything but "", "0" or "false", as CI services set it) a test that
# cannot run fails, with its reason, so that a machine missing something
# cannot pass by skipping. The integration target of the Makefile checks the
# same from the harness's side (t/lib/GwHarness.pm).

sub in_ci {
    my $v = $ENV{CI} // '';
    return $v ne '' && $v ne '0' && lc($v) ne 'false';
}

# The whole script cannot run: skip_all with $why, or under CI one failing
# test naming $why, and the script ends.
sub skip_all {
    my ($why) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    if (in_ci()) {
        Test::More::fail("cannot run: $why");
        Test::More::diag("CI is set: a test that cannot run fails the run instead of skipping");
        Test::More::done_testing();
        exit 1;
    }
    my $tb = Test::More->builder;
    if ($tb->current_test || $tb->has_plan) {    # tests already ran: the rest is one skipped test
        $tb->skip($why);
        Test::More::done_testing() unless $tb->has_plan;
        exit 0;
    }
    Test::More::plan(skip_all => $why);
}

# Skips the whole script with $why unless $cond holds (see skip_all).
sub need {
    my ($cond, $why) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    skip_all($why) unless $cond;
    return $cond;
}

# Inside a SKIP: { } block: skips $n tests with $why and leaves the block, or
# under CI fails one test naming $why and leaves the block.
sub skip {
    my ($why, $n) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    if (in_ci()) {
        Test::More::fail("cannot run: $why");
        Test::More::diag("CI is set: a test that cannot run fails the run instead of skipping");
        no warnings 'exiting';
        last SKIP;
    }
    Test::More::skip($why, $n // 1);
}

# Skips the whole test script unless LLMGW_MODULE names a readable file.
sub need_module {
    my $m = module_path();
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    skip_all('LLMGW_MODULE is not set') unless defined $m;
    skip_all("LLMGW_MODULE=$m is not a readable file") unless -r $m;
    return $m;
}

# True when t/js/node_modules holds the SDKs (after `npm ci` in t/js).
sub have_js_deps { -d "$JS_DIR/node_modules/openai" && -d "$JS_DIR/node_modules/\@openai/agents" }

# Skips the whole script unless t/js/node_modules is installed.
sub need_js_deps {
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    need(have_js_deps(), 't/js/node_modules is absent: run `make js` (npm ci in t/js)');
}

sub json_encode { $JSON->encode($_[0]) }
sub json_decode {
    my ($text) = @_;
    return undef unless defined $text && length $text;
    my $v = eval { $JSON->decode($text) };
    return $v;
}

# Re-arms the whole-script watchdog: after $secs the script fails and exits
# (END still stops nginx and mocks). 0 disarms it.
sub watchdog {
    my ($secs) = @_;
    $SIG{ALRM} = sub {
        return unless $$ == $OWNER_PID;
        Test::More::fail("Gw watchdog: test script exceeded ${secs}s");
        exit 124;
    };
    alarm($secs);
}

# A TCP port that is free on 127.0.0.1 right now.
sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                  Proto => 'tcp', Listen => 1, ReuseAddr => 0)
        or die "Gw::free_port: $!";
    my $port = $s->sockport;
    close $s;
    return $port;
}

# A port that refuses connections for the life of the test: a socket is
# bound to it and never listens, so no other test's server can take it.
my @held_ports;
sub closed_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp', ReuseAddr => 0)
        or die "Gw::closed_port: $!";
    push @held_ports, $s;
    return $s->sockport;
}

# True when something accepts TCP connections on 127.0.0.1:$port.
sub port_open {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                  Proto => 'tcp', Timeout => 1);
    return 0 unless $s;
    close $s;
    return 1;
}

sub _slurp {
    my ($path) = @_;
    open my $fh, '<:raw', $path or return '';
    local $/;
    my $t = <$fh>;
    return $t // '';
}

sub _spew {
    my ($path, $text) = @_;
    open my $fh, '>:raw', $path or die "Gw: cannot write $path: $!";
    print {$fh} $text;
    close $fh or die "Gw: cannot write $path: $!";
}

# Process state from /proc: undef when gone, 'Z' for a zombie, else a letter.
sub _proc_state {
    my ($pid) = @_;
    return undef unless $pid;
    my $stat = _slurp("/proc/$pid/stat");
    if ($stat eq '') { return kill(0, $pid) ? 'R' : undef }
    my $rest = substr($stat, rindex($stat, ')') + 2);
    return (split / /, $rest)[0];
}

sub _alive { my $s = _proc_state($_[0]); defined $s && $s ne 'Z' && $s ne 'X' }

# [pid, cmdline] of the live children of $ppid.
sub _children {
    my ($ppid) = @_;
    my @kids;
    opendir my $dh, '/proc' or return ();
    for my $pid (grep { /^\d+$/ } readdir $dh) {
        my $stat = _slurp("/proc/$pid/stat");
        next if $stat eq '';
        my @f = split / /, substr($stat, rindex($stat, ')') + 2);
        next unless $f[1] == $ppid && $f[0] ne 'Z' && $f[0] ne 'X';
        (my $cmd = _slurp("/proc/$pid/cmdline")) =~ s/\0+/ /g;
        $cmd =~ s/\s+$//;
        push @kids, [$pid + 0, $cmd];
    }
    closedir $dh;
    return sort { $a->[0] <=> $b->[0] } @kids;
}

# Waits (bounded) until $cond->() is true; returns its last value.
sub wait_until {
    my ($cond, %o) = @_;
    my $deadline = Time::HiRes::time() + ($o{timeout} // 10);
    my $step = $o{interval} // 0.02;
    while (1) {
        my $v = $cond->();
        return $v if $v;
        return $v if Time::HiRes::time() >= $deadline;
        Time::HiRes::sleep($step);
    }
}

# Runs a command with a bounded time. Returns {exit, stdout, stderr,
# timed_out}; exit is the exit code, or 128+signal.
#   Gw::run([cmd, args...], env => {K => V}, timeout => 60, cwd => $dir)
sub run {
    my ($cmd, %o) = @_;
    my $timeout = $o{timeout} // 60;
    my $dir = File::Temp::tempdir('llmgw-run-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $pid = fork // die "Gw::run: fork: $!";
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$dir/out";
        open STDERR, '>', "$dir/err";
        $ENV{$_} = $o{env}{$_} for keys %{ $o{env} || {} };
        if ($o{cwd}) { chdir $o{cwd} or POSIX::_exit(126) }
        exec { $cmd->[0] } @$cmd
            or do { print STDERR "exec $cmd->[0]: $!\n"; POSIX::_exit(127) };
    }
    my $status;
    wait_until(sub {
        my $w = waitpid($pid, POSIX::WNOHANG());
        $status = $? if $w == $pid;
        $w == $pid;
    }, timeout => $timeout);
    my $timed_out = !defined $status;
    if ($timed_out) {
        kill 'KILL', $pid;
        waitpid($pid, 0);
        $status = $?;
    }
    my $exit = ($status & 127) ? 128 + ($status & 127) : $status >> 8;
    return { exit => $exit, stdout => _slurp("$dir/out"), stderr => _slurp("$dir/err"),
             timed_out => $timed_out ? 1 : 0 };
}

# Runs a node script from t/js (or any path) with extra env; same result as
# Gw::run, plus json (stdout decoded when it is JSON).
sub run_node {
    my ($script, %o) = @_;
    $script = "$JS_DIR/$script" unless $script =~ m{/};
    my $r = run([node_bin(), $script, @{ $o{args} || [] }],
                env => $o{env}, timeout => $o{timeout} // 60, cwd => $o{cwd});
    $r->{json} = json_decode($r->{stdout});
    GwArtifacts::node($script, $r, [values(%{ $o{env} || {} }), @{ $o{args} || [] }]);
    return $r;
}

# ------------------------------------------------------------ log checks

# Offending lines in a text / a file (see $LOG_PROBLEM_RE), minus lines
# matching any regexp in allow => [...].
sub log_problems_in_text {
    my ($text, %o) = @_;
    my @allow = @{ $o{allow} || [] };
    my @bad;
    for my $line (split /\n/, $text // '') {
        next unless $line =~ $LOG_PROBLEM_RE;
        next if grep { $line =~ $_ } @allow;
        push @bad, $line;
    }
    return @bad;
}

sub log_problems_in_file {
    my ($path, %o) = @_;
    return log_problems_in_text(_slurp($path), %o);
}

# ------------------------------------------------------------ HTTP client

sub _body_and_type {
    my ($body, $headers) = @_;
    return (undef) unless defined $body;
    if (ref $body) {
        $headers->{'content-type'} //= 'application/json'
            unless grep { lc $_ eq 'content-type' } keys %$headers;
        return $JSON->encode($body);
    }
    return $body;
}

# One request through HTTP::Tiny (no keep-alive).
#   Gw::http($method, $url, headers => {...}, body => $str | $ref, timeout => 10)
# -> {status, reason, headers (lowercased keys; repeated ones as arrayref),
#     body, json (decoded body or undef), error (for status 599)}
sub http {
    my ($method, $url, %o) = @_;
    my %h = %{ $o{headers} || {} };
    my $content = _body_and_type($o{body}, \%h);
    my $ua = HTTP::Tiny->new(keep_alive => 0, timeout => $o{timeout} // 10,
                             max_redirect => 0, agent => 'llmgw-tests/1');
    my $res = $ua->request(uc $method, $url,
                           { headers => \%h, (defined $content ? (content => $content) : ()) });
    my %r = (status  => $res->{status}, reason => $res->{reason},
             headers => $res->{headers} || {}, body => $res->{content} // '');
    $r{json} = json_decode($r{body});
    $r{error} = $r{body} if $r{status} == 599;
    GwArtifacts::response($method, $url, \%r);
    return \%r;
}

# Incremental SSE splitter: feed bytes, get complete events. Lines may end in
# LF, CR or CRLF; an event ends at an empty line.
sub _sse_feed {
    my ($st, $data, $t, $final) = @_;
    $st->{buf} .= $data;
    my @events;
    while ($st->{buf} =~ /\A([^\r\n]*)(\r\n|\r|\n)/) {
        my ($line, $eol) = ($1, $2);
        # A CR at the very end may be the first half of a CRLF.
        last if $eol eq "\r" && length($line) + 1 == length($st->{buf}) && !$final;
        substr($st->{buf}, 0, length($line) + length($eol), '');
        if ($line ne '') { push @{ $st->{lines} }, $line; next }
        next unless @{ $st->{lines} || [] };
        push @events, _sse_event(delete $st->{lines}, $t);
    }
    return @events;
}

sub _sse_event {
    my ($lines, $t) = @_;
    my %ev = (text => join("\n", @$lines), (defined $t ? (t => $t) : ()));
    my @data;
    for my $l (@$lines) {
        next if $l =~ /^:/;
        my ($field, $value) = $l =~ /^([^:]*)(?::\s?(.*))?$/;
        $value //= '';
        if    ($field eq 'data')  { push @data, $value }
        elsif ($field eq 'event') { $ev{event} = $value }
        elsif ($field eq 'id')    { $ev{id} = $value }
        elsif ($field eq 'retry') { $ev{retry} = $value }
    }
    if (@data) {
        $ev{data} = join "\n", @data;
        $ev{json} = json_decode($ev{data});
    }
    return \%ev;
}

# Parses a complete SSE body: list of {text, event, data, id, json}.
sub sse_parse {
    my ($body) = @_;
    my %st = (buf => '');
    return _sse_feed(\%st, $body // '', undef, 1);
}

# A request over a raw socket that reads the response incrementally.
#   Gw::stream_request($method, $url, headers => {...}, body => $str|$ref,
#                      timeout => 10, abort_after_events => N, abort_after_bytes => N)
# -> {status, reason, headers (lowercased), body (dechunked), json,
#     pieces => [[time, bytes], ...] (body bytes per read, Time::HiRes times),
#     events => [{t, text, event, data, id, json}, ...] (SSE events as completed),
#     t_start, t_headers, t_end, complete (body fully framed), eof, aborted, error}
# The request is sent with "Connection: close" unless headers say otherwise.
sub stream_request {
    my ($method, $url, %o) = @_;
    my $timeout = $o{timeout} // 10;
    my ($host, $port, $path) = $url =~ m{^http://([^/:]+)(?::(\d+))?(/.*)?$}
        or die "Gw::stream_request: bad url $url";
    $port //= 80;
    $path //= '/';
    my %h = %{ $o{headers} || {} };
    my $content = _body_and_type($o{body}, \%h);
    my %lc = map { lc($_) => 1 } keys %h;
    my $req = uc($method) . " $path HTTP/1.1\r\n";
    $req .= "Host: $host:$port\r\n" unless $lc{host};
    $req .= "Connection: close\r\n" unless $lc{connection};
    $req .= "User-Agent: llmgw-tests/1\r\n" unless $lc{'user-agent'};
    $req .= "Content-Length: " . length($content) . "\r\n"
        if defined $content && !$lc{'content-length'} && !$lc{'transfer-encoding'};
    $req .= "$_: $h{$_}\r\n" for sort keys %h;
    $req .= "\r\n";
    $req .= $content if defined $content;

    my %r = (status => undef, headers => {}, body => '', pieces => [], events => [],
             complete => 0, eof => 0, aborted => 0);
    $r{t_start} = Time::HiRes::time();
    my $deadline = $r{t_start} + $timeout;
    my $sock = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => 'tcp',
                                     Timeout => $timeout);
    if (!$sock) { $r{error} = "connect: $!"; return \%r }
    binmode $sock;
    my $off = 0;
    while ($off < length $req) {
        my $n = syswrite($sock, $req, length($req) - $off, $off);
        if (!defined $n) { $r{error} = "write: $!"; return \%r }
        $off += $n;
    }

    my $sel = IO::Select->new($sock);
    my ($hbuf, $raw, $mode, $left, $cstate, $clen) = ('', '', undef, undef, 'size', 0);
    my %sse = (buf => '');
    my $total = 0;
    my $decode = sub {    # raw body bytes -> dechunked bytes; sets complete
        my ($in) = @_;
        return $in if $mode eq 'eof';
        if ($mode eq 'length') {
            my $take = substr($in, 0, $left);
            $left -= length $take;
            $r{complete} = 1 if $left == 0;
            return $take;
        }
        $raw .= $in;
        my $out = '';
        while (1) {
            if ($cstate eq 'size') {
                last unless $raw =~ s/\A([0-9a-fA-F]+)[^\r\n]*\r\n//;
                $clen = hex $1;
                $cstate = $clen ? 'data' : 'trailer';
            } elsif ($cstate eq 'data') {
                last unless length $raw;
                my $take = substr($raw, 0, $clen, '');
                $out .= $take;
                $clen -= length $take;
                $cstate = 'crlf' if $clen == 0;
            } elsif ($cstate eq 'crlf') {
                last if length($raw) < 2;
                if (substr($raw, 0, 2, '') ne "\r\n") { $r{error} = 'bad chunk framing'; last }
                $cstate = 'size';
            } else {    # trailer
                last unless $raw =~ s/\A([^\r\n]*)\r\n//;
                if ($1 eq '') { $r{complete} = 1; last }
            }
        }
        return $out;
    };
    my $on_body = sub {
        my ($data, $now) = @_;
        return unless length $data;
        push @{ $r{pieces} }, [$now, $data];
        $r{body} .= $data;
        $total += length $data;
        push @{ $r{events} }, _sse_feed(\%sse, $data, $now, 0);
    };

    READ: while (1) {
        my $now = Time::HiRes::time();
        if ($now >= $deadline) { $r{error} = "timeout after ${timeout}s"; last }
        my $wait = $deadline - $now;
        next READ unless $sel->can_read($wait > 0.5 ? 0.5 : $wait);
        my $n = sysread($sock, my $buf, 65536);
        $now = Time::HiRes::time();
        if (!defined $n) { $r{error} = "read: $!"; last }
        if ($n == 0) { $r{eof} = 1; $r{complete} = 1 if defined $mode && $mode eq 'eof'; last }
        if (!defined $r{status}) {
            $hbuf .= $buf;
            my $end = index($hbuf, "\r\n\r\n");
            next READ if $end < 0;
            my $head = substr($hbuf, 0, $end);
            $buf = substr($hbuf, $end + 4);
            my ($status_line, @lines) = split /\r\n/, $head;
            my (undef, $status, $reason) = $status_line =~ m{^HTTP/(\d\.\d) (\d{3})(?: (.*))?$}
                or do { $r{error} = "bad status line: $status_line"; last };
            ($r{status}, $r{reason}) = ($status + 0, $reason // '');
            for my $l (@lines) {
                my ($k, $v) = $l =~ /^([^:]+):\s*(.*?)\s*$/ or next;
                $k = lc $k;
                if (exists $r{headers}{$k}) {
                    $r{headers}{$k} = [ref $r{headers}{$k} ? @{ $r{headers}{$k} } : $r{headers}{$k}, $v];
                } else {
                    $r{headers}{$k} = $v;
                }
            }
            $r{t_headers} = $now;
            my $te = $r{headers}{'transfer-encoding'} // '';
            if (uc $method eq 'HEAD' || $r{status} == 204 || $r{status} == 304) {
                $mode = 'length'; $left = 0; $r{complete} = 1;
                last READ;
            } elsif ($te =~ /chunked/i) {
                $mode = 'chunked';
            } elsif (defined $r{headers}{'content-length'}) {
                $mode = 'length'; $left = $r{headers}{'content-length'} + 0;
                $r{complete} = 1 if $left == 0;
            } else {
                $mode = 'eof';
            }
        }
        $on_body->($decode->($buf), $now);
        last if $r{complete} || $r{error};
        if (($o{abort_after_events} && @{ $r{events} } >= $o{abort_after_events})
            || ($o{abort_after_bytes} && $total >= $o{abort_after_bytes})) {
            $r{aborted} = 1;
            last;
        }
    }
    push @{ $r{events} }, _sse_feed(\%sse, '', Time::HiRes::time(), 1) if $r{complete};
    $r{t_end} = Time::HiRes::time();
    close $sock;
    $r{json} = json_decode($r{body});
    GwArtifacts::response($method, $url, \%r);
    return \%r;
}

# Runs $code->($i) for $i in 0..$n-1 in $n forked processes that start at the
# same moment (they wait on a pipe the parent closes once all are forked).
# Each return value must be JSON-encodable (Gw::http results are). Returns the
# results in order (list, or arrayref in scalar context); a sub that died
# gives {error => $@}, one that did not finish within timeout => S (default
# 60) is killed and gives {error => 'timeout'}. Do not call Test::More
# functions inside $code.
sub parallel {
    my ($n, $code, %o) = @_;
    my $timeout = $o{timeout} // 60;
    my $dir = File::Temp::tempdir('llmgw-par-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    pipe(my $gate_r, my $gate_w) or die "Gw::parallel: pipe: $!";
    my %kids;    # pid -> index
    for my $i (0 .. $n - 1) {
        my $pid = fork;
        if (!defined $pid) {
            my $err = $!;
            kill 'KILL', keys %kids;
            waitpid($_, 0) for keys %kids;
            die "Gw::parallel: fork #$i: $err";
        }
        if (!$pid) {
            $SIG{$_} = 'DEFAULT' for qw(ALRM INT TERM);
            close $gate_w;
            sysread($gate_r, my $x, 1);    # EOF when the parent opens the gate
            my $res = eval { $code->($i) };
            $res = { error => "$@" } if $@;
            my $out = eval { $JSON->encode({ r => $res }) }
                // $JSON->encode({ r => { error => "result not JSON-encodable: $@" } });
            if (open my $fh, '>:raw', "$dir/$i.tmp") {
                print {$fh} $out;
                close $fh;
                rename "$dir/$i.tmp", "$dir/$i.json";
            }
            POSIX::_exit(0);
        }
        $kids{$pid} = $i;
    }
    close $gate_r;
    close $gate_w;
    wait_until(sub {
        for my $pid (keys %kids) {
            delete $kids{$pid} if waitpid($pid, POSIX::WNOHANG()) == $pid;
        }
        !%kids;
    }, timeout => $timeout, interval => 0.01);
    if (%kids) {
        Test::More::diag(sprintf 'Gw::parallel: %d of %d did not finish in %ss, killed',
                         scalar(keys %kids), $n, $timeout);
        kill 'KILL', keys %kids;
        waitpid($_, 0) for keys %kids;
    }
    my @res;
    for my $i (0 .. $n - 1) {
        my $d = json_decode(_slurp("$dir/$i.json"));
        push @res, $d ? $d->{r} : { error => 'timeout' };
    }
    return wantarray ? @res : \@res;
}

# ------------------------------------------------------------- nginx.conf

# Fills %%NAME%% placeholders from $vars; dies on unknown ones.
sub _fill {
    my ($text, $vars, $what) = @_;
    $text =~ s{%%([A-Za-z_][A-Za-z0-9_]*)%%}{
        my $k = $1;
        defined $vars->{$k} ? $vars->{$k}
          : die "Gw: unknown placeholder %%$k%% in $what (known: "
                . join(', ', sort keys %$vars) . ")\n";
    }ge;
    return $text;
}

# Ports for %%PORT%% / %%PORTn%% found in the texts.
sub _alloc_ports {
    my (@texts) = @_;
    my %ports;
    for my $t (@texts) {
        $ports{$1} //= free_port() while $t =~ /%%(PORT\d*)%%/g;
    }
    return \%ports;
}

# Builds nginx.conf. Returns (text, line number of the caller's first conf line).
sub _render_conf {
    my (%o) = @_;
    my $vars = $o{vars};
    my $conf = _fill($o{conf} // '', $vars, 'conf');
    my $main = defined $o{main_conf} ? _fill($o{main_conf}, $vars, 'main_conf') : '';
    my @env = (sort(keys %{ $o{env} || {} }), grep { exists $ENV{$_} } @SANITIZER_ENV);
    my %seen;
    @env = grep { !$seen{$_}++ } @env;
    my $module = (!$o{no_module} && module_path()) ? module_path() : undef;

    my $head = "# Generated by t/lib/Gw.pm\n";
    $head .= "load_module $module;\n" if $module;
    $head .= "worker_processes " . ($o{workers} // 1) . ";\n"
          .  "daemon on;\n"
          .  "master_process on;\n"
          .  "pid logs/nginx.pid;\n"
          .  "error_log logs/error.log " . ($o{error_log_level} // 'info') . ";\n"
          .  "worker_shutdown_timeout " . ($o{worker_shutdown_timeout} // '5s') . ";\n";
    $head .= "env $_;\n" for @env;
    $head .= "$main\n" if length $main;
    $head .= "events {\n    worker_connections " . ($o{worker_connections} // 1024) . ";\n}\n"
          .  "http {\n"
          .  "    access_log logs/access.log;\n"
          .  "    client_body_temp_path tmp/client_body;\n"
          .  "    proxy_temp_path tmp/proxy;\n"
          .  "    fastcgi_temp_path tmp/fastcgi;\n"
          .  "    uwsgi_temp_path tmp/uwsgi;\n"
          .  "    scgi_temp_path tmp/scgi;\n"
          .  "# ---- test conf\n";
    my $first = ($head =~ tr/\n//) + 1;
    $conf .= "\n" unless $conf =~ /\n\z/;
    return ($head . $conf . "}\n", $first);
}

sub _make_prefix {
    my ($keep, $template) = @_;
    my $prefix = File::Temp::tempdir($template // 'llmgw-nginx-XXXXXX', TMPDIR => 1, CLEANUP => !$keep);
    # Workers run as "nobody" when the tests run as root: they must be able
    # to reach the temp dirs below the prefix.
    chmod 0755, $prefix;
    for my $d (qw(conf logs tmp)) {
        mkdir "$prefix/$d" or die "Gw: mkdir $prefix/$d: $!";
        chmod 0755, "$prefix/$d";
    }
    return $prefix;
}

sub _vars {
    my ($prefix, $ports, $user) = @_;
    my %v = (PREFIX => $prefix, TMP => "$prefix/tmp", %$ports, %{ $user || {} });
    $v{MODULE} = module_path() if module_path() && !exists $v{MODULE};
    return \%v;
}

# `nginx -t` on a generated config.
#   my ($exit, $output, $conf_file, $first_line) = Gw::nginx_t($conf, %opts)
# %opts as for Gw::Nginx->start (vars, env, workers, no_module, main_conf).
# $first_line is the line of nginx.conf holding the first line of $conf, so a
# test can expect "in $conf_file:" . ($first_line + k).
sub nginx_t {
    my ($conf, %o) = @_;
    my $prefix = _make_prefix($ENV{LLMGW_KEEP});
    my $ports = _alloc_ports($conf, $o{main_conf} // '');
    my $vars = _vars($prefix, $ports, $o{vars});
    my ($text, $first) = _render_conf(%o, conf => $conf, vars => $vars);
    my $file = "$prefix/conf/nginx.conf";
    _spew($file, $text);
    my %env = %{ $o{env} || {} };
    $env{LD_PRELOAD} = $ENV{LLMGW_NGINX_PRELOAD} if $ENV{LLMGW_NGINX_PRELOAD};
    my $r = run([nginx_bin(), '-t', '-p', "$prefix/", '-c', $file],
                env => \%env, timeout => $o{timeout} // 30);
    GwArtifacts::nginx_t($text, $o{env}, "$prefix/conf", $r->{stdout} . $r->{stderr});
    return ($r->{exit}, $r->{stdout} . $r->{stderr}, $file, $first);
}

# ------------------------------------------------------------------ END

END {
    if ($$ == $OWNER_PID) {
        my $saved = $?;
        for my $obj (grep { defined } values %LIVE) {
            eval { $obj->_cleanup(1) };
            Test::More::diag("Gw END cleanup: $@") if $@;
        }
        $? = $saved;
    }
}

# Live instances are tracked weakly, so going out of scope still stops them.
sub _register {
    my ($obj) = @_;
    my $key = Scalar::Util::refaddr($obj);
    $LIVE{$key} = $obj;
    Scalar::Util::weaken($LIVE{$key});
}
sub _unregister { delete $LIVE{ Scalar::Util::refaddr($_[0]) } }

# =================================================================== nginx

package Gw::Nginx;

use strict;
use warnings;

# Gw::Nginx->start(conf => $http_block, workers => 1, env => {K => V},
#                  vars => {NAME => value}, no_module => 0, main_conf => $text,
#                  error_log_level => 'info', allow_log => [qr/.../],
#                  timeout => 10, keep => $ENV{LLMGW_KEEP})
sub start {
    my ($class, %o) = @_;
    defined $o{conf} or die "Gw::Nginx->start: conf is required\n";
    my $self = bless {
        opts    => { %o, workers => $o{workers} // 1 },
        allow   => [ @{ $o{allow_log} || [] } ],
        pid     => $$,
        stopped => 0,
    }, $class;
    $self->{prefix} = Gw::_make_prefix($o{keep} // $ENV{LLMGW_KEEP}, $o{prefix_template});
    $self->{conf_file} = "$self->{prefix}/conf/nginx.conf";

    my $attempts = 3;    # a chosen free port may be taken by another test meanwhile
    for my $attempt (1 .. $attempts) {
        $self->{ports} = Gw::_alloc_ports($o{conf}, $o{main_conf} // '');
        $self->_write_conf;
        my ($ok, $why) = $self->_launch;
        if ($ok) {
            Gw::_register($self);
            return $self;
        }
        next if $why =~ /Address already in use/ && $attempt < $attempts;
        $self->{stopped} = 1;    # nothing to stop; the die reports the failure
        die "Gw::Nginx->start failed: $why\n";
    }
}

sub _write_conf {
    my ($self) = @_;
    my $o = $self->{opts};
    $self->{vars} = Gw::_vars($self->{prefix}, $self->{ports}, $o->{vars});
    my ($text, $first) = Gw::_render_conf(%$o, vars => $self->{vars});
    ($self->{conf_text}, $self->{first_line}) = ($text, $first);
    Gw::_spew($self->{conf_file}, $text);
    GwArtifacts::nginx_conf($self);
}

sub _launch {
    my ($self) = @_;
    my $p = $self->{prefix};
    my $timeout = $self->{opts}{timeout} // 10;
    # A fresh attempt starts with fresh logs (an earlier attempt may have
    # logged "Address already in use").
    unlink map { "$p/logs/$_" } qw(nginx.pid startup.log error.log access.log);
    my $pid = fork // die "Gw::Nginx: fork: $!";
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$p/logs/startup.log";
        open STDERR, '>&', \*STDOUT;
        $ENV{$_} = $self->{opts}{env}{$_} for keys %{ $self->{opts}{env} || {} };
        # make test-asan: the sanitizer runtimes for a module built with them
        $ENV{LD_PRELOAD} = $ENV{LLMGW_NGINX_PRELOAD} if $ENV{LLMGW_NGINX_PRELOAD};
        exec { Gw::nginx_bin() } Gw::nginx_bin(), '-p', "$p/", '-c', $self->{conf_file}
            or do { print STDERR "exec " . Gw::nginx_bin() . ": $!\n"; POSIX::_exit(127) };
    }
    # With "daemon on" the launched process exits once the master is forked.
    my $status;
    Gw::wait_until(sub {
        my $w = waitpid($pid, POSIX::WNOHANG());
        $status = $? if $w == $pid;
        $w == $pid;
    }, timeout => $timeout);
    if (!defined $status) {
        kill 'KILL', $pid;
        waitpid($pid, 0);
        return (0, "nginx did not daemonize within ${timeout}s\n" . $self->_startup_text);
    }
    return (0, "nginx exited with status " . ($status >> 8) . ":\n" . $self->_startup_text)
        if $status != 0;

    my $master = Gw::wait_until(sub {
        my $m = Gw::_slurp("$p/logs/nginx.pid");
        $m =~ /^(\d+)/ && Gw::_alive($1) ? $1 + 0 : 0;
    }, timeout => $timeout);
    return (0, "no live pid in logs/nginx.pid after ${timeout}s\n" . $self->_startup_text)
        unless $master;
    $self->{master} = $master;

    if (my $port = $self->{ports}{PORT}) {
        Gw::wait_until(sub { Gw::port_open($port) }, timeout => $timeout, interval => 0.05)
            or do { $self->_kill_all; return (0, "port $port never accepted\n" . $self->_startup_text) };
    }
    my $want = $self->{opts}{workers};
    Gw::wait_until(sub { $self->worker_pids >= $want }, timeout => $timeout)
        or do { $self->_kill_all; return (0, "$want worker(s) never came up\n" . $self->_startup_text) };
    return (1, '');
}

sub _startup_text {
    my ($self) = @_;
    my $p = $self->{prefix};
    return join '', map { my $t = Gw::_slurp("$p/logs/$_"); length $t ? "--- $_\n$t" : '' }
        qw(startup.log error.log);
}

# ---- accessors

sub port       { my ($self, $n) = @_; $self->{ports}{ defined $n && $n ne '1' ? "PORT$n" : 'PORT' } }
sub url        { my ($self, $path, $n) = @_; 'http://127.0.0.1:' . $self->port($n) . ($path // '/') }
sub prefix     { $_[0]{prefix} }
sub conf_file  { $_[0]{conf_file} }
sub conf_text  { $_[0]{conf_text} }
sub first_line { $_[0]{first_line} }
sub vars       { $_[0]{vars} }
sub master_pid { $_[0]{master} }
sub error_log  { Gw::_slurp("$_[0]{prefix}/logs/error.log") }
sub access_log { Gw::_slurp("$_[0]{prefix}/logs/access.log") }

# Pids of the live worker processes (not those shutting down after a reload).
sub worker_pids {
    my ($self) = @_;
    my @pids = !$self->{master} ? ()
        : map { $_->[0] }
          grep { $_->[1] =~ /worker process/ && $_->[1] !~ /shutting down/ }
          Gw::_children($self->{master});
    return wantarray ? @pids : scalar @pids;
}

# Waits (bounded) for a line matching $re in the error log (file => 'access'
# for the access log, or a path below the prefix). Returns the line or undef.
sub wait_log {
    my ($self, $re, %o) = @_;
    my $file = $o{file} // 'error';
    $file = "logs/$file.log" if $file =~ /^(?:error|access)$/;
    my $path = "$self->{prefix}/$file";
    my $line;
    Gw::wait_until(sub {
        ($line) = grep { $_ =~ $re } split /\n/, Gw::_slurp($path);
        defined $line;
    }, timeout => $o{timeout} // 5, interval => 0.05);
    return $line;
}

# ---- control

# HUP and wait until a new set of workers is up. With conf => $text (and
# optionally vars/workers) the config is rewritten first, keeping the ports.
# Returns 1 on success; 0 when nginx refused the new config ([emerg] logged)
# or no new workers appeared within timeout => S (default 10).
sub reload {
    my ($self, %o) = @_;
    die "Gw::Nginx->reload: not running\n" if $self->{stopped};
    if (defined $o{conf} || $o{vars} || $o{workers}) {
        $self->{opts}{conf} = $o{conf} if defined $o{conf};
        $self->{opts}{vars} = { %{ $self->{opts}{vars} || {} }, %{ $o{vars} } } if $o{vars};
        $self->{opts}{workers} = $o{workers} if $o{workers};
        my %have = %{ $self->{ports} };
        my $more = Gw::_alloc_ports($self->{opts}{conf});
        $self->{ports} = { %$more, %have };
        $self->_write_conf;
    }
    my %old = map { $_ => 1 } $self->worker_pids;
    my $log = "$self->{prefix}/logs/error.log";
    my $size = -s $log // 0;
    kill 'HUP', $self->{master} or die "Gw::Nginx->reload: kill HUP $self->{master}: $!\n";
    my $want = $self->{opts}{workers};
    my $result = Gw::wait_until(sub {
        my $new = substr(Gw::_slurp($log), $size);
        return 'failed' if $new =~ /\[emerg\]/;
        my @w = $self->worker_pids;
        return 'ok' if @w >= $want && !grep { $old{$_} } @w;
        return 0;
    }, timeout => $o{timeout} // 10);
    return 1 if ($result // '') eq 'ok';
    Test::More::diag("Gw::Nginx->reload: " . ($result ? 'nginx rejected the new config'
                                                       : 'no new workers in time'));
    return 0;
}

# All processes of this nginx: the master and its children.
sub _all_pids {
    my ($self) = @_;
    return () unless $self->{master};
    return ($self->{master}, map { $_->[0] } Gw::_children($self->{master}));
}

sub _kill_all {
    my ($self) = @_;
    my @pids = grep { Gw::_alive($_) } $self->_all_pids;
    kill 'KILL', @pids if @pids;
}

# Graceful stop: QUIT, wait (bounded), then KILL; then check_logs. Returns
# the list of offending log lines (empty when clean).
sub stop {
    my ($self, %o) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return $self->_cleanup(0, %o);
}

sub _cleanup {
    my ($self, $implicit, %o) = @_;
    return () if $self->{stopped} || $self->{pid} != $$;
    $self->{stopped} = 1;
    Gw::_unregister($self);
    my @pids = $self->_all_pids;
    if (@pids) {
        kill 'QUIT', $self->{master};
        my $timeout = $o{timeout} // 15;
        my $gone = Gw::wait_until(sub { !grep { Gw::_alive($_) } @pids }, timeout => $timeout);
        if (!$gone) {
            Test::More::diag("Gw::Nginx: still running ${timeout}s after QUIT, killing");
            kill 'KILL', grep { Gw::_alive($_) } @pids;
            Gw::wait_until(sub { !grep { Gw::_alive($_) } @pids }, timeout => 5);
        }
    }
    GwArtifacts::nginx_stopped($self);
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my @bad = $self->log_problems;
    if ($implicit) {
        # After done_testing() no passing test may be added; report only failures.
        $self->_report(@bad) if @bad;
    } else {
        $self->_report(@bad);
    }
    return @bad;
}

# Lines matching any of these regexps are not reported by check_logs (for
# tests that provoke an [emerg] on purpose, e.g. a bad reload).
sub allow_log { my ($self, @re) = @_; push @{ $self->{allow} }, @re; return $self }

# Offending lines in the error logs (error.log, startup.log, any *error*
# file in logs/), without emitting a test.
sub log_problems {
    my ($self) = @_;
    my $dir = "$self->{prefix}/logs";
    opendir my $dh, $dir or return ();
    my @files = sort grep { /error|startup/ } readdir $dh;
    closedir $dh;
    return map { my $f = $_; map { "$f: $_" } Gw::log_problems_in_file("$dir/$f", allow => $self->{allow}) }
        @files;
}

# Emits one test: passes when the logs are clean, fails listing the lines.
sub check_logs {
    my ($self) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my @bad = $self->log_problems;
    $self->_report(@bad);
    return @bad;
}

sub _report {
    my ($self, @bad) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    Test::More::ok(!@bad, "nginx logs clean ($self->{prefix})")
        or Test::More::diag(join "\n", 'offending log lines:', @bad);
}

sub DESTROY {
    my ($self) = @_;
    $self->_cleanup(1) if !$self->{stopped} && $self->{pid} == $$;
}

# ==================================================================== mock

package Gw::Mock;

use strict;
use warnings;

# Gw::Mock->start(env => {K => V}, timeout => 10, script => 't/js/mcp_backend.mjs')
# Spawns `node <script>` (default t/mock/provider.mjs) and reads {"port":N}
# from its stdout.
sub start {
    my ($class, %o) = @_;
    my $timeout = $o{timeout} // 10;
    pipe(my $in_r, my $in_w)   or die "Gw::Mock: pipe: $!";
    pipe(my $out_r, my $out_w) or die "Gw::Mock: pipe: $!";
    my $pid = fork // die "Gw::Mock: fork: $!";
    if (!$pid) {
        close $in_w;
        close $out_r;
        open STDIN, '<&', $in_r   or POSIX::_exit(126);
        open STDOUT, '>&', $out_w or POSIX::_exit(126);
        $ENV{$_} = $o{env}{$_} for keys %{ $o{env} || {} };
        my $script = $o{script} ? "$Gw::ROOT/$o{script}" : $Gw::MOCK_SCRIPT;
        exec { Gw::node_bin() } Gw::node_bin(), $script
            or do { print STDERR "exec " . Gw::node_bin() . ": $!\n"; POSIX::_exit(127) };
    }
    close $in_r;
    close $out_w;
    my $self = bless { pid => $pid, owner => $$, stdin => $in_w, stdout => $out_r }, $class;
    my $line = '';
    my $sel = IO::Select->new($out_r);
    my $deadline = Time::HiRes::time() + $timeout;
    while ($line !~ /\n/ && Time::HiRes::time() < $deadline) {
        next unless $sel->can_read(0.1);
        my $n = sysread($out_r, my $buf, 4096);
        last unless $n;
        $line .= $buf;
    }
    my $info = Gw::json_decode((split /\n/, $line)[0] // '');
    if (!$info || !$info->{port}) {
        $self->stop;
        die "Gw::Mock->start: no {\"port\":N} line from the mock within ${timeout}s (got '$line')\n";
    }
    $self->{port} = $info->{port};
    Gw::_register($self);
    return $self;
}

sub port { $_[0]{port} }
sub pid  { $_[0]{pid} }
sub url  { my ($self, $path) = @_; "http://127.0.0.1:$self->{port}" . ($path // '/') }

sub _control {
    my ($self, $method, $path, $body) = @_;
    my $r = Gw::http($method, $self->url($path), (defined $body ? (body => $body) : ()), timeout => 10);
    die "Gw::Mock $method $path: $r->{status} $r->{body}\n" unless $r->{status} == 200;
    return $r->{json};
}

# Recorded requests: [{id, conn, time, method, path, query, headers, body,
# json, completed, aborted, scripted}, ...]
sub requests     { $_[0]->_control(GET => '/__mock/requests') }
sub clear        { $_[0]->_control(DELETE => '/__mock/requests'); return }
# Queues scripted responses: script({...}, {...}) or script([{...}, ...]).
# Returns the number of queued entries.
sub script {
    my ($self, @entries) = @_;
    @entries = @{ $entries[0] } if @entries == 1 && ref $entries[0] eq 'ARRAY';
    return $self->_control(POST => '/__mock/script', \@entries)->{queued};
}
sub pending_script { $_[0]->_control(GET => '/__mock/script') }
sub clear_script   { $_[0]->_control(DELETE => '/__mock/script'); return }
sub reset          { $_[0]->_control(POST => '/__mock/reset'); return }
sub stats          { $_[0]->_control(GET => '/__mock/stats') }

# Waits (bounded) until at least $n requests are recorded; returns them.
sub wait_requests {
    my ($self, $n, %o) = @_;
    my $reqs = [];
    Gw::wait_until(sub { $reqs = $self->requests; @$reqs >= $n }, timeout => $o{timeout} // 5,
                   interval => 0.05);
    return $reqs;
}

# Closes the mock's stdin (it exits on EOF), then TERM, then KILL; bounded.
sub stop {
    my ($self) = @_;
    return if $self->{stopped} || $self->{owner} != $$;
    $self->{stopped} = 1;
    Gw::_unregister($self);
    close delete $self->{stdin} if $self->{stdin};
    my $pid = $self->{pid};
    for my $sig (undef, 'TERM', 'KILL') {
        kill $sig, $pid if $sig;
        my $done = Gw::wait_until(sub { waitpid($pid, POSIX::WNOHANG()) != 0 }, timeout => 5);
        last if $done;
    }
    close delete $self->{stdout} if $self->{stdout};
    return;
}

sub _cleanup { $_[0]->stop }

sub DESTROY { $_[0]->stop }

1;
