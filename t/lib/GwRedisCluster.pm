package GwRedisCluster;

# A real local Redis Cluster for the shared-store tests (t/4*.t).
#
#   use lib 't/lib'; use Gw; use GwRedis; use GwRedisCluster;
#   GwRedis::need_redis();
#   my $cl = GwRedisCluster->start();                   # 3 masters + 3 replicas, plain
#   my $cl = GwRedisCluster->start(masters => 3, replicas => 1,
#                                  password => 'pw',    # requirepass + masterauth on every node
#                                  tls => { cert => $c, key => $k, ca => $ca,   # as GwRedis's tls:
#                                           auth_clients => 'no',               # or 'yes'
#                                           client_cert => $cc, client_key => $ck,   # required, see below
#                                           node_cert => $nc, node_key => $nk },     # optional
#                                  node_timeout => 1000,   # cluster-node-timeout, ms
#                                  args => [...],          # extra redis-server args, every node
#                                  timeout => 60);         # bound on the whole creation, s
#   $cl->nodes                # every node: GwRedis objects (->port, ->pid, ->kill9, ->restart, ->cli ...)
#   $cl->seed_ports           # ports of the masters right after creation
#   $cl->masters              # the nodes that are up now and whose role is master (CLUSTER NODES)
#   $cl->replicas_of($m)      # the live nodes replicating master $m
#   $cl->id_of($node)         # its cluster node id
#   $cl->slot_of($key)        # CLUSTER KEYSLOT (cached)
#   $cl->node_for_key($key)   # the live master that serves $key's slot now (undef: none)
#   $cl->cli('SET', $k, 1)    # redis-cli -c (follows MOVED/ASK), output as GwRedis::cli
#   $cl->get_num($key)        # GET through the cluster, 0 when missing
#   $cl->keys('llmgw:*')      # sorted union of KEYS over the current masters
#   $cl->flushall             # FLUSHALL on every master
#   $cl->wait_replicated      # bounded wait until every live replica has processed all
#                             #   of its master's writes (true/false)
#   $cl->wait_ok              # bounded wait until every live node reports cluster_state:ok
#   $cl->kill_master_of($key) # SIGKILL the master of $key's slot, wait (20 s) until a replica
#                             #   took over and the cluster is ok; returns the killed node
#   $cl->move_slot_of($key, $to)   # reshard $key's slot (with its keys) to master $to
#                             #   (undef: any other master); returns the target node
#   my ($slot, $src, $dst) = $cl->migrate_keys_of($key, $to)   # its first half: IMPORTING,
#                             #   MIGRATING, keys migrated (commands get ASK meanwhile)
#   $cl->finish_move($slot, $src, $dst)   # its second half: SETSLOT NODE everywhere
#   $cl->stop                 # stops every node (also when the object goes away and at END)
#   $cl->info($node)          # its CLUSTER INFO as a hash (undef: no answer)
#   $cl->node_by_id($id); $cl->logs; $cl->timings; $cl->last_failover_secs   # diagnostics
#
# Every node is a GwRedis server (127.0.0.1, own temp dir, parent-death
# signal) started with cluster-enabled yes, cluster-config-file nodes.conf
# (in its own dir, so $node->kill9 + $node->restart rejoins the cluster, as a
# replica when it was failed over), cluster-node-timeout, replica validity
# factor 0 (a replica may always fail over), no replica migration and
# repl-diskless-sync-delay 0 (replicas attach at once, not after 5 s). Its
# port is chosen so that port+10000 (the cluster bus) is free too. With tls
# every node is TLS-only (port 0, tls-port, tls-cluster yes, tls-replication
# yes) and presents node_cert, else client_cert, on its own connections:
# the cluster bus always checks that certificate (even with auth_clients
# 'no') and refuses a serverAuth-only one such as make_pki's server.pem, so
# tls without client_cert/client_key (or node_cert/node_key) dies at once.
# CLUSTER SLOTS / NODES and MOVED then name the TLS ports.
# The cluster is made with `redis-cli --cluster create` and start() returns
# once every node sees cluster_state:ok, all 16384 slots and every replica
# linked. Failures die with the nodes' logs. All waits are bounded.
#
# Notes: WAIT on a fresh redis-cli connection returns at once (it only
# waits for that connection's own writes); use $cl->wait_replicated before
# killing a master whose data must survive. Right after start(), CLUSTER
# SLOTS lists the masters only: a replica appears there once its
# replication offset is non-zero (after a first replicated write). Each
# node entry of CLUSTER SLOTS has a 4th element (empty hostname metadata).
# redis-cli exits 0 on an error reply: $cl->cli returns "ERR ..." then.

use strict;
use warnings;

use IO::Socket::INET;
use Scalar::Util ();
use Time::HiRes ();
use Gw;
use GwRedis;

my $OWNER_PID = $$;
my %LIVE;    # refaddr -> weak ref

END {
    if ($$ == $OWNER_PID) {
        my $saved = $?;
        for my $obj (grep { defined } values %LIVE) { eval { $obj->stop } }
        $? = $saved;
    }
}

# ---------------------------------------------------------------- ports

# True when $port can be bound on 127.0.0.1 right now.
sub _bindable {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port, Proto => 'tcp',
                                  Listen => 1, ReuseAddr => 0);
    return 0 unless $s;
    close $s;
    return 1;
}

# A free port p < 55535 whose bus port p+10000 is free too, and that
# collides with none of %$taken (ports and bus ports already handed out).
sub _cluster_port {
    my ($taken) = @_;
    for (1 .. 200) {
        my $p = Gw::free_port();
        next if $p >= 55535 || $taken->{$p} || $taken->{ $p + 10000 };
        next unless _bindable($p + 10000);
        return $p;
    }
    die "GwRedisCluster: no free port p with p+10000 free after 200 tries\n";
}

# ------------------------------------------------------------- creation

sub start {
    my ($class, %o) = @_;
    my $nm = $o{masters} // 3;
    my $nr = $o{replicas} // 1;
    die "GwRedisCluster->start: masters must be >= 3\n" if $nm < 3;
    my $self = bless { opts => \%o, owner => $$, nodes => [], ids => {}, slots => {},
                       masters_n => $nm, replicas_n => $nr }, $class;
    my $k = Scalar::Util::refaddr($self);
    $LIVE{$k} = $self;
    Scalar::Util::weaken($LIVE{$k});

    my $t0 = Time::HiRes::time();
    my $budget = $o{timeout} // 60;
    my @args = ('--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
                '--cluster-node-timeout', $o{node_timeout} // 1000,
                '--cluster-replica-validity-factor', '0',
                '--cluster-allow-replica-migration', 'no',
                '--repl-diskless-sync-delay', '0');
    push @args, '--masterauth', $o{password} if defined $o{password};
    if (my $t = $o{tls}) {
        push @args, '--tls-cluster', 'yes', '--tls-replication', 'yes';
        # The cluster bus always verifies the connecting node's certificate
        # (whatever tls-auth-clients says), and a node presents tls-cert-file
        # unless tls-client-cert-file is set: GwRedis::make_pki's server
        # certificate (serverAuth only) is refused there, so the nodes use
        # node_cert/node_key, else the client certificate.
        my ($nc, $nk) = $t->{node_cert} ? ($t->{node_cert}, $t->{node_key}) : ($t->{client_cert}, $t->{client_key});
        die "GwRedisCluster->start: tls needs client_cert/client_key (or node_cert/node_key): a certificate "
            . "with clientAuth usage for the nodes' own connections (cluster bus, replication, MIGRATE)\n"
            unless $nc && $nk;
        push @args, '--tls-client-cert-file', $nc, '--tls-client-key-file', $nk;
    }
    push @args, @{ $o{args} || [] };

    my %taken;
    for my $i (1 .. $nm * (1 + $nr)) {
        my ($node, $why);
        for my $try (1 .. 10) {
            my $p = _cluster_port(\%taken);
            $node = eval {
                GwRedis->start(port => $p, args => \@args,
                               (defined $o{password} ? (password => $o{password}) : ()),
                               ($o{tls} ? (tls => $o{tls}) : ()));
            };
            if ($node) { $taken{$p} = $taken{ $p + 10000 } = 1; last }
            $why = $@;
            last unless $why =~ /Address already in use|bind/i;
        }
        if (!$node) {
            my $logs = $self->_logs;
            $self->stop;
            die "GwRedisCluster->start: node $i did not start: $why\n$logs";
        }
        push @{ $self->{nodes} }, $node;
    }
    $self->{t_nodes} = Time::HiRes::time() - $t0;

    for my $n (@{ $self->{nodes} }) {
        my $id = _q($n, 'CLUSTER', 'MYID');
        $self->_fail("CLUSTER MYID on port " . $n->port . " failed") unless defined $id && $id =~ /^[0-9a-f]{40}$/;
        $self->{ids}{ Scalar::Util::refaddr($n) } = $id;
        $self->{by_id}{$id} = $n;
    }

    my $r = Gw::run([GwRedis::redis_cli_bin(), $self->_conn_args, '--cluster', 'create',
                     (map { '127.0.0.1:' . $_->port } @{ $self->{nodes} }),
                     '--cluster-replicas', $nr, '--cluster-yes'],
                    timeout => _left($t0, $budget, 5));
    $self->_fail("redis-cli --cluster create: exit $r->{exit}" . ($r->{timed_out} ? ' (timed out)' : '')
                 . "\n$r->{stdout}$r->{stderr}")
        if $r->{exit} != 0 || $r->{timed_out} || $r->{stdout} !~ /All 16384 slots covered/;
    $self->{create_out} = $r->{stdout};
    $self->{t_create} = Time::HiRes::time() - $t0;

    my $why = '';
    my $ok = Gw::wait_until(sub { $why = $self->_formed; $why eq '' }, timeout => _left($t0, $budget, 5),
                            interval => 0.1);
    $self->_fail("cluster not formed in time: $why") unless $ok;
    $self->{t_ready} = Time::HiRes::time() - $t0;
    $self->{seed_ports} = [map { $_->port } $self->masters];
    return $self;
}

sub _left {
    my ($t0, $budget, $min) = @_;
    my $left = $budget - (Time::HiRes::time() - $t0);
    return $left < $min ? $min : $left;
}

# '' when every node reports state ok, all slots ok, knows every node, and
# sees the expected masters and replicas linked; else what is missing.
sub _formed {
    my ($self) = @_;
    my $n = @{ $self->{nodes} };
    for my $node (@{ $self->{nodes} }) {
        my $p = $node->port;
        my $info = $self->info($node) or return "node $p does not answer CLUSTER INFO";
        return "node $p: cluster_state:" . ($info->{cluster_state} // '?') if ($info->{cluster_state} // '') ne 'ok';
        return "node $p: cluster_slots_ok:" . ($info->{cluster_slots_ok} // '?')
            if ($info->{cluster_slots_ok} // 0) != 16384;
        return "node $p: cluster_known_nodes:" . ($info->{cluster_known_nodes} // '?')
            if ($info->{cluster_known_nodes} // 0) != $n;
        my $view = $self->_view($node) or return "node $p does not answer CLUSTER NODES";
        my ($m, $s) = (0, 0);
        for my $e (@$view) {
            return "node $p sees $e->{addr} $e->{flags_s} $e->{link}"
                if $e->{link} ne 'connected' || $e->{flags}{fail} || $e->{flags}{'fail?'} || $e->{flags}{handshake}
                   || $e->{flags}{noaddr};
            $m++ if $e->{flags}{master};
            $s++ if $e->{flags}{slave};
        }
        return "node $p sees $m masters and $s replicas"
            if $m != $self->{masters_n} || $s != $self->{masters_n} * $self->{replicas_n};
        my $me = (grep { $_->{flags}{myself} } @$view)[0];
        if ($me->{flags}{slave}) {
            my $role = _q($node, 'ROLE') // '';
            my @r = split /\n/, $role;
            return "replica $p: ROLE @r" unless ($r[0] // '') eq 'slave' && ($r[3] // '') eq 'connected';
        }
    }
    return '';
}

sub _fail {
    my ($self, $msg) = @_;
    my $logs = $self->_logs;
    $self->stop;
    die "GwRedisCluster: $msg\n$logs";
}

# The last lines of every node's log.
sub _logs {
    my ($self, $lines) = @_;
    $lines //= 40;
    my $out = '';
    for my $n (@{ $self->{nodes} }) {
        my @l = split /\n/, $n->log_text;
        @l = @l[-$lines .. -1] if @l > $lines;
        $out .= "---- redis node 127.0.0.1:" . $n->port . ' (pid ' . ($n->pid // 'down') . ', '
                . $n->dir . ") ----\n" . join("\n", @l) . "\n";
    }
    return $out;
}
sub logs { $_[0]->_logs($_[1]) }

# ------------------------------------------------------------ accessors

sub nodes      { @{ $_[0]{nodes} } }
sub seed_ports { @{ $_[0]{seed_ports} || [] } }
sub id_of      { $_[0]{ids}{ Scalar::Util::refaddr($_[1]) } }
sub node_by_id { $_[0]{by_id}{ $_[1] } }
sub tls        { $_[0]{opts}{tls} }
sub password   { $_[0]{opts}{password} }
# Seconds from start() to: all nodes up, `--cluster create` done, cluster ready.
sub timings    { { nodes => $_[0]{t_nodes}, create => $_[0]{t_create}, ready => $_[0]{t_ready} } }

sub _up { grep { $_->pid } @{ $_[0]{nodes} } }

# redis-cli arguments for TLS and the password (no host, port or db).
sub _conn_args {
    my ($self) = @_;
    my @a;
    if (my $t = $self->{opts}{tls}) {
        push @a, '--tls', '--cacert', $t->{ca};
        push @a, '--cert', $t->{client_cert}, '--key', $t->{client_key} if $t->{client_cert};
    }
    push @a, '-a', $self->{opts}{password}, '--no-auth-warning' if defined $self->{opts}{password};
    return @a;
}

# One command on one node: output (raw, final newline removed), or undef
# when the node is down, redis-cli fails or times out.
sub _q {
    my ($node, @cmd) = @_;
    return undef unless $node->pid;
    my $r = Gw::run([GwRedis::redis_cli_bin(), $node->cli_args, @cmd], timeout => 5);
    return undef if $r->{exit} != 0 || $r->{timed_out};
    (my $out = $r->{stdout}) =~ s/\n\z//;
    return $out;
}

# Like _q, but dies unless the reply is $want (a string or a regexp).
sub _must {
    my ($self, $want, $node, @cmd) = @_;
    my $out = _q($node, @cmd);
    my $ok = defined $out && (ref $want ? $out =~ $want : $out eq $want);
    die "GwRedisCluster: @cmd on port " . $node->port . ': ' . ($out // 'no answer') . "\n" unless $ok;
    return $out;
}

# CLUSTER INFO of a node as a hash (undef when it does not answer).
sub info {
    my ($self, $node) = @_;
    my $t = _q($node, 'CLUSTER', 'INFO');
    return undef unless defined $t && $t =~ /cluster_state:/;
    return { map { /^([^:]+):(.*?)\r?$/ ? ($1, $2) : () } split /\n/, $t };
}

# CLUSTER NODES of a node, parsed: list ref of {id, addr, port, flags
# => {..}, flags_s, master, epoch, link, slots => [[lo, hi], ...],
# migrating => {slot => id}, importing => {slot => id}}; undef when it
# does not answer.
sub _view {
    my ($self, $node) = @_;
    my $t = _q($node, 'CLUSTER', 'NODES');
    return undef unless defined $t && $t =~ /myself/;
    my @v;
    for my $l (split /\n/, $t) {
        my ($id, $addr, $flags, $master, undef, undef, $epoch, $link, @sl) = split ' ', $l;
        next unless defined $link;
        my %e = (id => $id, addr => $addr, flags_s => $flags, flags => { map { $_ => 1 } split /,/, $flags },
                 master => $master, epoch => $epoch, link => $link, slots => [], migrating => {}, importing => {});
        ($e{port}) = $addr =~ /:(\d+)@/;
        for my $s (@sl) {
            if    ($s =~ /^\[(\d+)->-(\w+)\]$/) { $e{migrating}{$1} = $2 }
            elsif ($s =~ /^\[(\d+)-<-(\w+)\]$/) { $e{importing}{$1} = $2 }
            elsif ($s =~ /^(\d+)-(\d+)$/)        { push @{ $e{slots} }, [$1, $2] }
            elsif ($s =~ /^(\d+)$/)              { push @{ $e{slots} }, [$1, $1] }
        }
        push @v, \%e;
    }
    return \@v;
}

sub _owns { my ($e, $slot) = @_; for (@{ $e->{slots} }) { return 1 if $slot >= $_->[0] && $slot <= $_->[1] } 0 }

# [node, its own entry, its view] for every live node that answers.
sub _self_views {
    my ($self) = @_;
    my @r;
    for my $n ($self->_up) {
        my $v = $self->_view($n) or next;
        my ($me) = grep { $_->{flags}{myself} } @$v;
        push @r, [$n, $me, $v] if $me;
    }
    return @r;
}

# Live nodes whose own CLUSTER NODES entry says master, by port.
sub masters {
    my ($self) = @_;
    my @m = sort { $a->port <=> $b->port } map { $_->[0] } grep { $_->[1]{flags}{master} } $self->_self_views;
    $self->{last_masters} = [@m];
    return @m;
}

# Live nodes that replicate $master (from their own views).
sub replicas_of {
    my ($self, $master) = @_;
    my $id = $self->id_of($master) // return ();
    return sort { $a->port <=> $b->port } map { $_->[0] }
           grep { $_->[1]{flags}{slave} && $_->[1]{master} eq $id } $self->_self_views;
}

sub slot_of {
    my ($self, $key) = @_;
    return $self->{slots}{$key} if defined $self->{slots}{$key};
    for my $n ($self->_up) {
        my $s = _q($n, 'CLUSTER', 'KEYSLOT', $key);
        return $self->{slots}{$key} = $s if defined $s && $s =~ /^\d+$/;
    }
    die "GwRedisCluster: CLUSTER KEYSLOT $key: no live node answers\n";
}

# The live master that claims $slot in its own entry (highest config epoch
# when several do, e.g. an old master back before its demotion).
sub _node_for_slot {
    my ($self, $slot) = @_;
    my @c = sort { $b->[1]{epoch} <=> $a->[1]{epoch} }
            grep { $_->[1]{flags}{master} && _owns($_->[1], $slot) } $self->_self_views;
    return @c ? $c[0][0] : undef;
}

sub node_for_key { my ($self, $key) = @_; return $self->_node_for_slot($self->slot_of($key)) }

# ------------------------------------------------------------- commands

# redis-cli -c on a live node (the masters first); the output as
# GwRedis::cli (raw, final newline removed; an error reply is output too).
# Dies when no node can run it.
sub cli {
    my ($self, @cmd) = @_;
    my @up = $self->_up;
    my %m = map { Scalar::Util::refaddr($_) => 1 } @{ $self->{last_masters} || [] };
    my @order = ((grep { $m{ Scalar::Util::refaddr($_) } } @up), (grep { !$m{ Scalar::Util::refaddr($_) } } @up));
    my $why = 'no live node';
    for my $n (@order) {
        my $r = Gw::run([GwRedis::redis_cli_bin(), '-c', $n->cli_args, @cmd], timeout => 10);
        if ($r->{exit} == 0 && !$r->{timed_out}) {
            (my $out = $r->{stdout}) =~ s/\n\z//;
            return $out;
        }
        $why = "exit $r->{exit}" . ($r->{timed_out} ? ' (timed out)' : '') . ": $r->{stderr}";
        last if $r->{timed_out};
    }
    die "GwRedisCluster: redis-cli -c @cmd: $why\n";
}

sub get_num {
    my ($self, $key) = @_;
    my $v = $self->cli('GET', $key);
    return $v eq '' ? 0 : $v;
}

sub keys {
    my ($self, $pattern) = @_;
    my %k;
    for my $m ($self->masters) {
        my $out = _q($m, 'KEYS', $pattern // '*');
        die "GwRedisCluster: KEYS on port " . $m->port . " failed\n" unless defined $out;
        $k{$_} = 1 for grep { length } split /\n/, $out;
    }
    return sort { $a cmp $b } CORE::keys %k;
}

sub flushall {
    my ($self) = @_;
    $self->_must('OK', $_, 'FLUSHALL') for $self->masters;
    return 1;
}

# Bounded wait (timeout s, 10 by default) until every live replica has
# processed its master's replication stream up to the master's offset
# when called. True on success.
sub wait_replicated {
    my ($self, %o) = @_;
    my @pairs;
    for my $m ($self->masters) {
        my $i = _q($m, 'INFO', 'replication') // next;
        my ($off) = $i =~ /master_repl_offset:(\d+)/;
        push @pairs, [$_, $off // 0] for $self->replicas_of($m);
    }
    return Gw::wait_until(sub {
        for my $p (@pairs) {
            my $i = _q($p->[0], 'INFO', 'replication') // return 0;
            return 0 unless $i =~ /master_link_status:up/;
            my ($off) = $i =~ /slave_repl_offset:(\d+)/;
            return 0 unless defined $off && $off >= $p->[1];
        }
        1;
    }, timeout => $o{timeout} // 10, interval => 0.05) ? 1 : 0;
}

# Bounded wait (timeout s, 20 by default) until every live node reports
# cluster_state:ok. True on success.
sub wait_ok {
    my ($self, %o) = @_;
    return Gw::wait_until(sub {
        my @up = $self->_up or return 0;
        for my $n (@up) { my $i = $self->info($n); return 0 unless $i && $i->{cluster_state} eq 'ok' }
        1;
    }, timeout => $o{timeout} // 20, interval => 0.1) ? 1 : 0;
}

# SIGKILLs the master of $key's slot; waits (timeout s, 20 by default) until
# a replica is master of that slot in the view of every live master and
# every live master reports cluster_state:ok. Returns the killed node.
sub kill_master_of {
    my ($self, $key, %o) = @_;
    my $slot = $self->slot_of($key);
    my $m = $self->_node_for_slot($slot) or die "GwRedisCluster: no live master serves slot $slot\n";
    my $mid = $self->id_of($m);
    my @reps = $self->replicas_of($m);
    die "GwRedisCluster: master " . $m->port . " of slot $slot has no live replica\n" unless @reps;
    my %rep = map { $self->id_of($_) => 1 } @reps;
    my $t0 = Time::HiRes::time();
    $m->kill9;
    my $why = '';
    my $ok = Gw::wait_until(sub {
        my @sv = grep { $_->[1]{flags}{master} } $self->_self_views;
        my $new = (grep { _owns($_->[1], $slot) } @sv)[0];
        if (!$new) { $why = "no live master claims slot $slot"; return 0 }
        my $nid = $new->[1]{id};
        if (!$rep{$nid}) { $why = "slot $slot claimed by " . $new->[0]->port . ", not a replica of the killed node"; return 0 }
        for my $s (@sv) {
            my ($owner) = grep { _owns($_, $slot) } @{ $s->[2] };
            if (!$owner || $owner->{id} ne $nid) {
                $why = 'master ' . $s->[0]->port . " still maps slot $slot to " . ($owner ? $owner->{addr} : 'nobody');
                return 0;
            }
            my $i = $self->info($s->[0]);
            if (!$i || $i->{cluster_state} ne 'ok') {
                $why = 'master ' . $s->[0]->port . ': cluster_state ' . ($i ? $i->{cluster_state} : '?');
                return 0;
            }
        }
        1;
    }, timeout => $o{timeout} // 20, interval => 0.1);
    $self->_fail("failover of slot $slot after killing port " . $m->port . " did not complete: $why") unless $ok;
    $self->{t_failover} = Time::HiRes::time() - $t0;
    return $m;
}
sub last_failover_secs { $_[0]{t_failover} }

# Moves $key's slot and every key in it to master $to (undef: the first
# other master); waits (timeout s, 20 by default) until every live node maps
# the slot to $to. Returns $to.
sub move_slot_of {
    my ($self, $key, $to, %o) = @_;
    my ($slot, $src, $dst) = $self->migrate_keys_of($key, $to);
    return $self->finish_move($slot, $src, $dst, %o);
}

# The first half of a reshard: $key's slot marked IMPORTING on $to (undef:
# any other master) and MIGRATING on its master, and every key of the slot
# migrated. Commands on the slot's keys now get ASK from the source.
# Returns ($slot, $source, $target); finish_move ends it.
sub migrate_keys_of {
    my ($self, $key, $to) = @_;
    my $slot = $self->slot_of($key);
    my $src = $self->_node_for_slot($slot) or die "GwRedisCluster: no live master serves slot $slot\n";
    my @m = $self->masters;
    $to //= (grep { $_ != $src } @m)[0];
    die "GwRedisCluster->move_slot_of: no target master\n" unless $to;
    die "GwRedisCluster->move_slot_of: port " . $to->port . " already serves slot $slot\n" if $to == $src;
    die "GwRedisCluster->move_slot_of: port " . $to->port . " is not a live master\n" unless grep { $_ == $to } @m;
    my ($sid, $did) = ($self->id_of($src), $self->id_of($to));

    $self->_must('OK', $to, 'CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $sid);
    $self->_must('OK', $src, 'CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $did);
    my @auth = defined $self->password ? ('AUTH', $self->password) : ();
    my $done = 0;
    for my $round (1 .. 1000) {
        my $out = _q($src, 'CLUSTER', 'GETKEYSINSLOT', $slot, 100);
        die "GwRedisCluster: CLUSTER GETKEYSINSLOT $slot on port " . $src->port . " failed\n" unless defined $out;
        my @k = grep { length } split /\n/, $out;
        if (!@k) { $done = 1; last }
        # MIGRATE speaks TLS to the target when tls-cluster is yes.
        $self->_must(qr/^(?:OK|NOKEY)$/, $src, 'MIGRATE', '127.0.0.1', $to->port, '', 0, 5000, 'REPLACE', @auth,
                     'KEYS', @k);
    }
    die "GwRedisCluster: slot $slot still has keys after 1000 MIGRATE rounds\n" unless $done;
    return ($slot, $src, $to);
}

# The second half: the slot given to the target on every master; waits
# (bounded) until every node agrees. Returns the target.
sub finish_move {
    my ($self, $slot, $src, $to, %o) = @_;
    my @m = $self->masters;
    my $did = $self->id_of($to);
    # The target first (it bumps its epoch), then the source, then the rest.
    $self->_must('OK', $_, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $did) for $to, $src, grep { $_ != $to && $_ != $src } @m;

    my $why = '';
    my $ok = Gw::wait_until(sub {
        my @sv = $self->_self_views;
        return 0 unless @sv;
        for my $s (@sv) {
            my ($owner) = grep { _owns($_, $slot) } @{ $s->[2] };
            if (!$owner || $owner->{id} ne $did) {
                $why = 'node ' . $s->[0]->port . " maps slot $slot to " . ($owner ? $owner->{addr} : 'nobody');
                return 0;
            }
            if ($s->[1]{migrating}{$slot} || $s->[1]{importing}{$slot}) {
                $why = 'node ' . $s->[0]->port . " still migrating/importing slot $slot";
                return 0;
            }
        }
        1;
    }, timeout => $o{timeout} // 20, interval => 0.05);
    $self->_fail("slot $slot moved to port " . $to->port . " but not agreed: $why") unless $ok;
    return $to;
}

sub stop {
    my ($self) = @_;
    return if $self->{stopped} || $self->{owner} != $$;
    $self->{stopped} = 1;
    delete $LIVE{ Scalar::Util::refaddr($self) };
    $_->stop for @{ $self->{nodes} };
}

sub DESTROY { $_[0]->stop }

1;
