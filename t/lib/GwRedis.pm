package GwRedis;

# Redis helpers for the shared-store tests (t/4*.t).
#
#   use lib 't/lib'; use Gw; use GwRedis;
#   GwRedis::need_redis();                           # Gw::skip_all without redis-server/redis-cli
#   my $rd = GwRedis->start();                       # plain, free port
#   my $rd = GwRedis->start(password => 'pw');       # requirepass
#   my $rd = GwRedis->start(tls => { cert => $c, key => $k, ca => $ca,
#                                    auth_clients => 'no',      # or 'yes'
#                                    client_cert => $cc, client_key => $ck });   # for redis-cli
#   $rd->port; $rd->cli('GET', 'k'); $rd->cli_db(3, 'GET', 'k'); $rd->get_num($key, $db);
#   $rd->commandstats; $rd->calls('evalsha');        # INFO commandstats
#   $rd->kill9; $rd->restart (same port, empty data); $rd->stop;
#
#   GwRedis::key('user', 'alice', 'req', 'day', time)  # llmgw:user:alice:req:day:YYYYMMDD (UTC)
#   GwRedis::make_pki($dir)          # CA, server cert (IP:127.0.0.1, DNS:localhost), client cert, 2nd CA
#
#   my $px = GwRedis::Proxy->start(target => $rd->port);   # counting TCP proxy
#   $px->stats  # {connections, reads, round_trips, bursts => [[VERB, ...], ...]}
#   $px->set_delay(3000)  # hold the server's replies 3 s (0: pass them at once again)
#
#   my $fk = GwRedis::Fake->start(reply => "*1\r\n*1\r\n:1\r\n");   # answers every command so
#   my $fk = GwRedis::Fake->start(reply => undef);                 # reads, never answers
#   my $fk = GwRedis::Fake->start(close_after_accept => 1);        # closes each connection
#   $fk->stats  # {connections, commands => [VERB, ...]}
#
# Every redis-server runs on 127.0.0.1 with "--save '' --appendonly no", in
# its own temp dir, with SIGKILL as its parent-death signal (setpriv) when
# available; all waits are bounded; every server, proxy and fake is killed
# when its object goes away and when the test script ends (also on die).

use strict;
use warnings;

use File::Temp ();
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Scalar::Util ();
use Test::More ();
use Time::HiRes ();
use Gw;

my $OWNER_PID = $$;
my %LIVE;    # refaddr -> weak ref

sub _register {
    my ($obj) = @_;
    my $k = Scalar::Util::refaddr($obj);
    $LIVE{$k} = $obj;
    Scalar::Util::weaken($LIVE{$k});
}
sub _unregister { delete $LIVE{ Scalar::Util::refaddr($_[0]) } }

END {
    if ($$ == $OWNER_PID) {
        my $saved = $?;
        for my $obj (grep { defined } values %LIVE) { eval { $obj->stop } }
        $? = $saved;
    }
}

my $SETPRIV;
sub _setpriv {
    return $SETPRIV if defined $SETPRIV;
    $SETPRIV = '';
    for my $d (qw(/usr/bin /bin /usr/sbin /sbin)) {
        if (-x "$d/setpriv") { $SETPRIV = "$d/setpriv"; last }
    }
    return $SETPRIV;
}

sub redis_server_bin { $ENV{REDIS_SERVER_BIN} || 'redis-server' }
sub redis_cli_bin    { $ENV{REDIS_CLI_BIN}    || 'redis-cli' }

# Skips the whole script unless redis-server and redis-cli run.
sub need_redis {
    for my $b (redis_server_bin(), redis_cli_bin()) {
        my $r = Gw::run([$b, '--version'], timeout => 10);
        Gw::skip_all("$b is not available (apt-get install redis-server, or make deps)") if $r->{exit} != 0;
    }
}

# Kills a child: TERM (unless $hard), bounded wait, then KILL; reaps it.
sub _kill_child {
    my ($pid, $hard) = @_;
    return unless $pid;
    for my $sig ($hard ? ('KILL') : ('TERM', 'KILL')) {
        kill $sig, $pid;
        my $gone = Gw::wait_until(sub { my $w = waitpid($pid, POSIX::WNOHANG()); $w == $pid || $w == -1 },
                                  timeout => 5, interval => 0.01);
        return if $gone;
    }
}

# ------------------------------------------------------------ key names

# UTC buckets of time $t: {min => YYYYMMDDHHMM, hour => YYYYMMDDHH,
# day => YYYYMMDD, month => YYYYMM}.
sub buckets {
    my ($t) = @_;
    my @g = gmtime($t // time);
    my $day = sprintf '%04d%02d%02d', $g[5] + 1900, $g[4] + 1, $g[3];
    return { month => substr($day, 0, 6), day => $day, hour => $day . sprintf('%02d', $g[2]),
             min => $day . sprintf('%02d%02d', $g[2], $g[1]) };
}

# llmgw:<kind>:<id>:<metric>:<window>:<bucket of time $t>
sub key {
    my ($kind, $id, $metric, $win, $t) = @_;
    return "llmgw:$kind:$id:$metric:$win:" . buckets($t)->{$win};
}

# TTLs of the windows in a shared store (spec "Limits").
our %TTL = (min => 120, hour => 48 * 3600, day => 35 * 86400, month => 400 * 86400);

# ------------------------------------------------------------------ PKI

# Generates, with openssl, in $dir: a CA (ca.pem, ca.key), a server
# certificate signed by it for IP:127.0.0.1 and DNS:localhost (server.pem,
# server.key), a client certificate signed by it (client.pem, client.key),
# and an unrelated second CA (ca2.pem, ca2.key). EC P-256 keys, 2 days.
# Returns {ca, ca_key, server_cert, server_key, client_cert, client_key,
# ca2, ca2_key}. Dies with openssl's output on failure.
sub make_pki {
    my ($dir) = @_;
    my $ossl = sub {
        my $r = Gw::run(['openssl', @_], timeout => 30, cwd => $dir);
        die "GwRedis::make_pki: openssl @_: exit $r->{exit}\n$r->{stdout}$r->{stderr}" if $r->{exit} != 0;
    };
    my @ec = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes');
    for my $ca (['ca', 'llmgw test CA'], ['ca2', 'llmgw other CA']) {
        $ossl->('req', '-x509', @ec, '-keyout', "$ca->[0].key", '-out', "$ca->[0].pem", '-days', '2',
                '-subj', "/CN=$ca->[1]", '-addext', 'basicConstraints=critical,CA:TRUE',
                '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
    }
    Gw::_spew("$dir/server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
                                 . "keyUsage=critical,digitalSignature,keyEncipherment\n");
    Gw::_spew("$dir/client.ext", "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n");
    my $serial = 1000;
    for my $leaf (['server', 'localhost'], ['client', 'llmgw-client']) {
        my $n = $leaf->[0];
        $ossl->('req', @ec, '-keyout', "$n.key", '-out', "$n.csr", '-subj', "/CN=$leaf->[1]");
        $ossl->('x509', '-req', '-in', "$n.csr", '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', $serial++,
                '-out', "$n.pem", '-days', '2', '-extfile', "$n.ext");
    }
    chmod 0644, map { "$dir/$_" } qw(ca.pem ca2.pem server.pem client.pem server.key client.key ca.key ca2.key);
    return { ca => "$dir/ca.pem", ca_key => "$dir/ca.key", ca2 => "$dir/ca2.pem", ca2_key => "$dir/ca2.key",
             server_cert => "$dir/server.pem", server_key => "$dir/server.key",
             client_cert => "$dir/client.pem", client_key => "$dir/client.key" };
}

# ================================================================== redis

# GwRedis->start(password => $pw, tls => {...}, port => $fixed, args => [...],
#                timeout => 10)
sub start {
    my ($class, %o) = @_;
    my $self = bless { opts => \%o, owner => $$ }, $class;
    $self->{dir} = File::Temp::tempdir('llmgw-redis-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LLMGW_KEEP});
    my $attempts = defined $o{port} ? 1 : 3;
    my $why = '';
    for my $i (1 .. $attempts) {
        $self->{port} = $o{port} // Gw::free_port();
        my ($ok, $err) = $self->_launch;
        if ($ok) { _register($self); return $self }
        $why = $err;
        last unless $err =~ /Address already in use|bind/i;
    }
    die "GwRedis->start failed: $why\n";
}

sub port { $_[0]{port} }
sub pid  { $_[0]{pid} }
sub dir  { $_[0]{dir} }
sub tls  { $_[0]{opts}{tls} }
sub log_text { Gw::_slurp("$_[0]{dir}/redis.log") . Gw::_slurp("$_[0]{dir}/stdout.log") }

sub _args {
    my ($self) = @_;
    my $o = $self->{opts};
    my @a = ('--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no',
             '--dir', $self->{dir}, '--logfile', "$self->{dir}/redis.log", '--protected-mode', 'no');
    if (my $t = $o->{tls}) {
        push @a, '--port', '0', '--tls-port', $self->{port},
                 '--tls-cert-file', $t->{cert}, '--tls-key-file', $t->{key},
                 '--tls-ca-cert-file', $t->{ca}, '--tls-auth-clients', $t->{auth_clients} // 'no';
    } else {
        push @a, '--port', $self->{port};
    }
    push @a, '--requirepass', $o->{password} if defined $o->{password};
    push @a, @{ $o->{args} || [] };
    return @a;
}

sub _launch {
    my ($self) = @_;
    my $timeout = $self->{opts}{timeout} // 10;
    unlink "$self->{dir}/redis.log", "$self->{dir}/stdout.log";
    my @cmd = (redis_server_bin(), $self->_args);
    unshift @cmd, _setpriv(), '--pdeathsig', 'KILL' if _setpriv();
    my $pid = fork // die "GwRedis: fork: $!";
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$self->{dir}/stdout.log";
        open STDERR, '>&', \*STDOUT;
        exec { $cmd[0] } @cmd or do { print STDERR "exec $cmd[0]: $!\n"; POSIX::_exit(127) };
    }
    $self->{pid} = $pid;
    $self->{down} = 0;
    my $exited;
    my $up = Gw::wait_until(sub {
        if (waitpid($pid, POSIX::WNOHANG()) == $pid) { $exited = 1; return 1 }
        return $self->ping;
    }, timeout => $timeout, interval => 0.05);
    if ($exited || !$up) {
        _kill_child($pid, 1) unless $exited;
        $self->{pid} = undef;
        return (0, "redis-server on port $self->{port} " . ($exited ? 'exited' : "did not answer PING in ${timeout}s")
                   . ":\n" . $self->log_text);
    }
    return (1, '');
}

# redis-cli arguments to reach this server (TLS, password).
sub cli_args {
    my ($self, %o) = @_;
    my @a = ('-h', '127.0.0.1', '-p', $self->{port});
    if (my $t = $self->{opts}{tls}) {
        push @a, '--tls', '--cacert', $t->{ca};
        push @a, '--cert', $t->{client_cert}, '--key', $t->{client_key} if $t->{client_cert};
    }
    push @a, '-a', $self->{opts}{password}, '--no-auth-warning' if defined $self->{opts}{password};
    push @a, '-n', $o{db} if defined $o{db};
    return @a;
}

# Runs one command in db 0; returns its output (raw mode) without the final
# newline. Dies when redis-cli fails or times out.
sub cli {
    my ($self, @cmd) = @_;
    return $self->cli_db(0, @cmd);
}

sub cli_db {
    my ($self, $db, @cmd) = @_;
    my $r = Gw::run([redis_cli_bin(), $self->cli_args(db => $db), @cmd], timeout => 10);
    die "GwRedis: redis-cli @cmd: exit $r->{exit}: $r->{stderr}\n" if $r->{exit} != 0 || $r->{timed_out};
    (my $out = $r->{stdout}) =~ s/\n\z//;
    return $out;
}

# GET in a db, as a number (0 for a missing key).
sub get_num {
    my ($self, $key, $db) = @_;
    my $v = $self->cli_db($db // 0, 'GET', $key);
    return $v eq '' ? 0 : $v;
}

sub ping {
    my ($self) = @_;
    my $r = Gw::run([redis_cli_bin(), $self->cli_args, 'PING'], timeout => 5);
    return $r->{exit} == 0 && $r->{stdout} =~ /^PONG/ ? 1 : 0;
}

# INFO commandstats -> { evalsha => {calls => N, failed_calls => N, ...}, ... }
sub commandstats {
    my ($self) = @_;
    my %s;
    for my $l (split /\r?\n/, $self->cli('INFO', 'commandstats')) {
        next unless $l =~ /^cmdstat_([^:]+):(.*)$/;
        my ($cmd, $rest) = (lc $1, $2);
        $s{$cmd} = { map { split /=/, $_, 2 } split /,/, $rest };
    }
    return \%s;
}

sub calls { my ($self, $cmd, $stats) = @_; $stats //= $self->commandstats; return ($stats->{lc $cmd} || {})->{calls} // 0 }

# SIGKILL, reaped; the port is free afterwards.
sub kill9 {
    my ($self) = @_;
    return unless $self->{pid};
    _kill_child($self->{pid}, 1);
    $self->{pid} = undef;
    $self->{down} = 1;
}

# Starts it again on the same port with the same options (empty data).
sub restart {
    my ($self) = @_;
    $self->kill9 if $self->{pid};
    my $why = '';
    for my $i (1 .. 20) {
        my ($ok, $err) = $self->_launch;
        return 1 if $ok;
        $why = $err;
        last unless $err =~ /Address already in use|bind/i;
        Time::HiRes::sleep(0.25);
    }
    die "GwRedis->restart on port $self->{port} failed: $why\n";
}

sub stop {
    my ($self) = @_;
    return if $self->{stopped} || $self->{owner} != $$;
    $self->{stopped} = 1;
    _unregister($self);
    _kill_child($self->{pid}, 0) if $self->{pid};
    $self->{pid} = undef;
}

sub DESTROY { $_[0]->stop }

# ===================================================== forked TCP servers

package GwRedis::Server;

# Common base of the proxy and the fake store: a forked Perl process that
# listens on a free 127.0.0.1 port, exits when its parent goes away, and
# keeps its counters in a JSON file (written atomically after each event).

use strict;
use warnings;

sub port { $_[0]{port} }
sub pid  { $_[0]{pid} }

sub stats {
    my ($self) = @_;
    return Gw::json_decode(Gw::_slurp("$self->{dir}/stats.json")) || {};
}

sub _save {
    my ($self) = @_;
    my $tmp = "$self->{dir}/stats.json.tmp";
    open my $fh, '>', $tmp or return;
    print {$fh} Gw::json_encode($self->{stats});
    close $fh;
    rename $tmp, "$self->{dir}/stats.json";
}

# Complete RESP commands at the start of $$buf (removed): list of argv refs.
# Inline commands (a line without '*') count as one command too.
sub _parse_commands {
    my ($buf) = @_;
    my @cmds;
    while (length $$buf) {
        if (substr($$buf, 0, 1) ne '*') {
            my $e = index($$buf, "\r\n");
            last if $e < 0;
            my $line = substr($$buf, 0, $e + 2, '');
            $line =~ s/\r\n\z//;
            push @cmds, [split ' ', $line];
            next;
        }
        my $pos = 0;
        my $e = index($$buf, "\r\n", $pos);
        last if $e < 0;
        my ($n) = substr($$buf, 1, $e - 1) =~ /^(-?\d+)$/ or die "bad multibulk header\n";
        $pos = $e + 2;
        my @argv;
        my $ok = 1;
        for (1 .. $n) {
            my $e2 = index($$buf, "\r\n", $pos);
            if ($e2 < 0) { $ok = 0; last }
            my ($len) = substr($$buf, $pos, $e2 - $pos) =~ /^\$(\d+)$/ or die "bad bulk header\n";
            if (length($$buf) < $e2 + 2 + $len + 2) { $ok = 0; last }
            push @argv, substr($$buf, $e2 + 2, $len);
            $pos = $e2 + 2 + $len + 2;
        }
        last unless $ok;
        substr($$buf, 0, $pos, '');
        push @cmds, \@argv;
    }
    return @cmds;
}

sub stop {
    my ($self) = @_;
    return if $self->{stopped} || ($self->{owner} // 0) != $$;
    $self->{stopped} = 1;
    GwRedis::_unregister($self);
    GwRedis::_kill_child($self->{pid}, 0);
}

sub DESTROY { $_[0]->stop }

# ------------------------------------------------------------------ proxy

package GwRedis::Proxy;

# A counting TCP proxy between nginx and a redis-server:
#   GwRedis::Proxy->start(target => $redis_port)
#   $px->stats -> {connections => N, reads => N (client reads),
#                  round_trips => N, bursts => [[VERB, ...], ...]}
# A burst (one round trip) is what the client sends after the server last
# answered on that connection: every command of a pipelined batch lands in
# the same burst; the next burst starts with client bytes that follow
# server bytes. bursts lists the command verbs (uppercased) of each one.
# $px->set_delay($ms) holds every reply from the server $ms milliseconds
# before passing it on (requests go through at once, so the server runs
# them); a client that has gone by then does not get them.

use strict;
use warnings;
our @ISA = ('GwRedis::Server');

sub start {
    my ($class, %o) = @_;
    defined $o{target} or die "GwRedis::Proxy->start: target is required\n";
    my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
                                       Listen => 64, ReuseAddr => 1)
        or die "GwRedis::Proxy: listen: $!";
    return GwRedis::Server::_spawn($class, $listen, %o);
}

sub set_delay {
    my ($self, $ms) = @_;
    my $tmp = "$self->{dir}/delay.tmp";
    open my $fh, '>', $tmp or die "GwRedis::Proxy: $tmp: $!";
    print {$fh} int($ms);
    close $fh;
    rename $tmp, "$self->{dir}/delay" or die "GwRedis::Proxy: rename: $!";
}

sub _write_all {
    my ($sock, $buf) = @_;
    my $off = 0;
    while ($off < length $buf) {
        my $w = syswrite($sock, $buf, length($buf) - $off, $off);
        last unless defined $w && $w > 0;
        $off += $w;
    }
}

sub _loop {
    my ($self, $listen) = @_;
    $self->{stats} = { connections => 0, reads => 0, round_trips => 0, bursts => [] };
    my @held;     # [release time, client socket, bytes] of delayed replies
    $self->_save;
    my $sel = IO::Select->new($listen);
    my %peer;     # fileno -> {sock, other, side => 'client'|'server', conn}
    my %conns;    # id -> {last => 'server'|'client', buf, burst}
    my $id = 0;
    while (1) {
        exit 0 if getppid() != $self->{parent};
        my $delay = (Gw::_slurp("$self->{dir}/delay") || 0) / 1000;
        my $now = Time::HiRes::time();
        while (@held && $held[0][0] <= $now) {
            my $h = shift @held;
            _write_all($h->[1], $h->[2]) if $h->[1]->opened;
        }
        my @ready = $sel->can_read(@held || $delay ? 0.02 : 0.2);
        for my $s (@ready) {
            if ($s == $listen) {
                my $c = $listen->accept or next;
                my $u = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->{target},
                                              Proto => 'tcp', Timeout => 2);
                if (!$u) { close $c; next }
                $id++;
                $conns{$id} = { last => 'server', buf => '', burst => undef };
                $peer{ fileno $c } = { sock => $c, other => $u, side => 'client', conn => $id };
                $peer{ fileno $u } = { sock => $u, other => $c, side => 'server', conn => $id };
                $sel->add($c, $u);
                $self->{stats}{connections}++;
                $self->_save;
                next;
            }
            my $p = $peer{ fileno $s } or next;
            my $n = sysread($s, my $buf, 1 << 20);
            if (!$n) {
                for my $x ($s, $p->{other}) { $sel->remove($x); delete $peer{ fileno $x }; close $x }
                delete $conns{ $p->{conn} };
                next;
            }
            my $cs = $conns{ $p->{conn} };
            if ($p->{side} eq 'client') {
                $self->{stats}{reads}++;
                if ($cs->{last} ne 'client') {
                    $self->{stats}{round_trips}++;
                    $cs->{burst} = [];
                    push @{ $self->{stats}{bursts} }, $cs->{burst};
                }
                $cs->{last} = 'client';
                $cs->{buf} .= $buf;
                my @cmds = eval { GwRedis::Server::_parse_commands(\$cs->{buf}) };
                push @{ $cs->{burst} }, map { uc($_->[0] // '') } @cmds;
            } else {
                $cs->{last} = 'server';
                if ($delay > 0) {
                    push @held, [Time::HiRes::time() + $delay, $p->{other}, $buf];
                    next;
                }
            }
            my $off = 0;
            while ($off < $n) {
                my $w = syswrite($p->{other}, $buf, $n - $off, $off);
                last unless defined $w && $w > 0;
                $off += $w;
            }
            $self->_save if $p->{side} eq 'client';
        }
    }
}

# ------------------------------------------------------------------- fake

package GwRedis::Fake;

use Digest::SHA ();

# A fake store: answers every complete command it receives with the same
# scripted bytes (reply => $bytes; undef: never answers, only reads), but
# SCRIPT LOAD (sent as each connection opens) with the script's SHA1, as a
# real server would, so the scripted bytes answer the gateway's admission.
# close_after_accept => 1 closes each connection at once.
#   $fk->stats -> {connections => N, commands => [[VERB, ...] per command]}

use strict;
use warnings;
our @ISA = ('GwRedis::Server');

sub start {
    my ($class, %o) = @_;
    my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
                                       Listen => 64, ReuseAddr => 1)
        or die "GwRedis::Fake: listen: $!";
    return GwRedis::Server::_spawn($class, $listen, %o);
}

sub _loop {
    my ($self, $listen) = @_;
    $self->{stats} = { connections => 0, commands => [] };
    $self->_save;
    my $sel = IO::Select->new($listen);
    my %buf;
    my %socks;
    while (1) {
        exit 0 if getppid() != $self->{parent};
        for my $s ($sel->can_read(0.2)) {
            if ($s == $listen) {
                my $c = $listen->accept or next;
                $self->{stats}{connections}++;
                $self->_save;
                if ($self->{close_after_accept}) { close $c; next }
                $sel->add($c);
                $socks{ fileno $c } = $c;
                $buf{ fileno $c } = '';
                next;
            }
            my $fd = fileno $s;
            my $n = sysread($s, my $data, 1 << 20);
            if (!$n) { $sel->remove($s); delete $buf{$fd}; delete $socks{$fd}; close $s; next }
            $buf{$fd} .= $data;
            my @cmds = eval { GwRedis::Server::_parse_commands(\$buf{$fd}) };
            for my $c (@cmds) {
                push @{ $self->{stats}{commands} }, uc($c->[0] // '');
                my $load = uc($c->[0] // '') eq 'SCRIPT' && uc($c->[1] // '') eq 'LOAD';
                if ($load || defined $self->{reply}) {
                    my $out = $load ? "\$40\r\n" . Digest::SHA::sha1_hex($c->[2] // '') . "\r\n" : $self->{reply};
                    my $off = 0;
                    while ($off < length $out) {
                        my $w = syswrite($s, $out, length($out) - $off, $off);
                        last unless defined $w && $w > 0;
                        $off += $w;
                    }
                }
            }
            $self->_save if @cmds;
        }
    }
}

# ------------------------------------------------------- shared spawn code

package GwRedis::Server;

sub _spawn {
    my ($class, $listen, %o) = @_;
    my $dir = File::Temp::tempdir('llmgw-rsrv-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LLMGW_KEEP});
    my $port = $listen->sockport;
    my $parent = $$;
    my $pid = fork // die "$class: fork: $!";
    if (!$pid) {
        $SIG{$_} = 'DEFAULT' for qw(ALRM INT TERM);
        alarm(0);
        my $self = bless { %o, dir => $dir, parent => $parent, port => $port }, $class;
        eval { $self->_loop($listen) };
        if ($@) { open my $fh, '>', "$dir/error"; print {$fh} $@; close $fh }
        POSIX::_exit(0);
    }
    close $listen;
    my $self = bless { %o, pid => $pid, port => $port, dir => $dir, owner => $$ }, $class;
    GwRedis::_register($self);
    # The stats file appears once the child runs.
    Gw::wait_until(sub { -e "$dir/stats.json" }, timeout => 5);
    return $self;
}

1;
