#!/usr/bin/perl
# The Debian package (`make deb`, scripts/make-deb; docs/install.md). Built
# from a copy of the module into a temp folder, its control fields and files
# read with dpkg-deb; then installed into this machine's nginx with dpkg -i:
# the module and its modules-enabled link in place, `nginx -t` of the system
# configuration loading it; an nginx of the test's own (a temp prefix) that
# includes /etc/nginx/modules-enabled/*.conf answers GET /v1/models; dpkg -r
# disables it (the link renamed .removed, as dh_nginx does), dpkg -P leaves
# the machine as it was.
#
# It changes the system, so: it needs root or passwordless sudo (in CI, env CI set, it fails
# without root; elsewhere it skips); it refuses to run when the package, or a
# module installed by hand, is already on the machine (an operator's copy is
# never removed); the END block purges the package whenever the test
# installed it; and runs of it on one machine take turns (a lock on
# /etc/nginx/modules-enabled). When the machine's nginx service is running,
# the package's nginx-reload trigger reloads it, as any module package does.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Cwd ();
use Digest::MD5 ();
use Fcntl qw(O_RDONLY O_DIRECTORY LOCK_EX LOCK_NB);
use File::Copy ();
use File::Temp ();
use Test::More;

my $module = Gw::need_module();

my $PKG     = 'libnginx-mod-http-llm-gateway';
my $SO      = 'ngx_http_llm_gateway_module.so';
my $NGINX   = '/usr/sbin/nginx';
my $MODDIR  = '/usr/lib/nginx/modules';
my $ENABLED = '/etc/nginx/modules-enabled';
my $AVAIL   = '/usr/share/nginx/modules-available';
my $LINK    = "$ENABLED/50-mod-http-llm-gateway.conf";
my $SNIPPET = "$AVAIL/mod-http-llm-gateway.conf";
my $DOC     = "/usr/share/doc/$PKG";
my $KEY     = 'sk-alice-deb-test';

my $OWNER = $$;
my $installed = 0;    # set before dpkg -i: from then on END purges
my $master;           # the test's own nginx, while it runs

# ---- what this test needs, before it touches anything

# Not applicable: the package is for Debian's own nginx and holds the release
# build of the module (make test-asan leaves this file out). Like everything
# that cannot run, these skip on a developer's machine and fail in CI
# (Gw::skip_all).
my $bin = Cwd::abs_path(Gw::nginx_bin()) // Gw::nginx_bin();
Gw::need(-x $NGINX && $bin eq (Cwd::abs_path($NGINX) // $NGINX),
         "NGINX_BIN=" . Gw::nginx_bin() . " is not Debian's $NGINX, which the package is for");
Gw::skip_all('the package holds the release module, not a sanitizer build (LLMGW_NGINX_PRELOAD is set)')
    if $ENV{LLMGW_NGINX_PRELOAD};

# Cannot run here: fails in CI, skips elsewhere (Gw::skip_all).
my @cannot;
# Not root: passwordless sudo will do (as scripts/install-deps uses it).
our @SUDO = ();
if ($> != 0) {
    if (Gw::run(['sudo', '-n', 'true'], timeout => 30)->{exit} == 0) {
        @SUDO = ('sudo', '-n');
    } else {
        push @cannot, 'it installs a package into the system nginx, which needs root (or passwordless sudo)';
    }
}
push @cannot, 'dpkg is missing (not a Debian system)' unless -x '/usr/bin/dpkg';
push @cannot, "$ENABLED is missing (Debian's nginx-common is not installed)" unless -d $ENABLED;
Gw::skip_all('t/03-deb.t cannot run: ' . join('; ', @cannot)) if @cannot;

# Stops the test with one failure (before anything is installed).
sub refuse {
    my ($why) = @_;
    fail($why);
    done_testing();
    exit;
}

# One run at a time on this machine (two would install and purge under each
# other): a lock on the modules-enabled folder itself, so no file is left.
sysopen(my $lock, $ENABLED, O_RDONLY | O_DIRECTORY) or refuse("cannot open $ENABLED: $!");
Gw::wait_until(sub { flock($lock, LOCK_EX | LOCK_NB) }, timeout => 120, interval => 0.25)
    or refuse("another run of t/03-deb.t has held the lock on $ENABLED for 120 s");

sub status_of {
    my $r = Gw::run(['dpkg-query', '-W', '-f=${Status}', $PKG], timeout => 30);
    return $r->{exit} == 0 ? $r->{stdout} : 'not-installed';
}
sub slurp { my ($p) = @_; open my $fh, '<:raw', $p or return undef; local $/; return <$fh> }

# The machine's module folders: name => link target, or "file".
sub snapshot {
    my %s;
    for my $dir ($ENABLED, $MODDIR, $AVAIL) {
        opendir my $dh, $dir or next;
        for my $n (sort grep { !/^\.\.?$/ } readdir $dh) {
            my $t = readlink "$dir/$n";
            $s{"$dir/$n"} = defined $t ? "-> $t" : 'file';
        }
    }
    return \%s;
}

# An operator's copy, packaged or by hand, is left alone.
my $status = status_of();
refuse("$PKG is already on this machine (dpkg status '$status'): this test installs and purges the package, "
       . "so it will not touch an operator's copy; purge it first (apt purge $PKG) or test on another machine")
    if $status !~ /\bnot-installed\b/;
refuse("$MODDIR/$SO exists but no package owns it (installed by hand?): dpkg -i would overwrite it and "
       . "dpkg -P delete it; remove it first or test on another machine")
    if -e "$MODDIR/$SO";
for my $f (glob("$ENABLED/*"), glob("$AVAIL/*")) {
    my $text = slurp($f) // '';
    refuse("$f loads the gateway module already (installed by hand?); remove it first or test on another "
           . "machine") if $text =~ /ngx_http_llm_gateway_module/ || $f =~ m{/50-mod-http-llm-gateway\.conf};
}
my $before = Gw::run([@SUDO, $NGINX, '-t'], timeout => 30);
refuse("the system's nginx configuration fails nginx -t before the package is installed:\n"
       . "$before->{stdout}$before->{stderr}") if $before->{exit} != 0;
my $snap = snapshot();

# The ABI the installed nginx package provides (the package owning $NGINX).
my $owner = Gw::run(['dpkg-query', '-S', $NGINX], timeout => 30);
my ($nginx_pkg) = $owner->{stdout} =~ /^([^:\s,]+)[^:]*: \Q$NGINX\E$/m;
my $prov = Gw::run(['dpkg-query', '-W', '-f=${Provides}', $nginx_pkg // 'nginx'], timeout => 30);
my ($ABI) = $prov->{stdout} =~ /(nginx-abi-[^\s,]+)/;
refuse("the package owning $NGINX (" . ($nginx_pkg // 'none') . ") provides no nginx-abi-*") unless $ABI;
my $ARCH = Gw::run(['dpkg', '--print-architecture'], timeout => 30)->{stdout} =~ s/\s+//gr;

# ---- cleanup, whatever happens below

# Stops the test's own nginx: QUIT, then KILL to it and its workers; true
# when it stopped on QUIT within 15 s.
sub stop_nginx {
    return 1 unless $master && Gw::_alive($master);
    my @pids = ($master, map { $_->[0] } Gw::_children($master));
    kill 'QUIT', $master;
    my $quit = Gw::wait_until(sub { !grep { Gw::_alive($_) } @pids }, timeout => 15);
    kill 'KILL', grep { Gw::_alive($_) } @pids unless $quit;
    $master = undef;
    return $quit;
}

END {
    if ($$ == $OWNER) {
        my $saved = $?;
        stop_nginx();
        if ($installed) {
            # An interrupted dpkg -i may still hold dpkg's lock for a moment.
            my $r;
            Gw::wait_until(sub {
                $r = Gw::run([@SUDO, 'dpkg', '-P', $PKG], timeout => 120);
                $r->{exit} == 0 || "$r->{stdout}$r->{stderr}" !~ /lock/;
            }, timeout => 60, interval => 1);
            diag("END: purged $PKG: exit $r->{exit}" . ($r->{exit} ? "\n$r->{stdout}$r->{stderr}" : ''));
        }
        $? = $saved;
    }
}

# ---- build

my $tmp = File::Temp::tempdir('llmgw-deb-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LLMGW_KEEP});
my $copy = "$tmp/$SO";
File::Copy::copy($module, $copy) or die "copy $module: $!";
my $build = Gw::run(["$Gw::ROOT/scripts/make-deb"], timeout => 180,
                    env => { LLMGW_MODULE => $copy, LLMGW_DEB_DIR => "$tmp/deb" });
is($build->{exit}, 0, 'scripts/make-deb succeeds') or diag("$build->{stdout}$build->{stderr}");
my ($deb) = $build->{stdout} =~ /([^\n]+)\n?\z/;
$deb //= '';
like($deb, qr{^\Q$tmp\E/deb/${PKG}_[0-9][A-Za-z0-9.+~]*_\Q$ARCH\E\.deb$},
     'it prints the path of the .deb, named package_version_arch, in LLMGW_DEB_DIR');
ok(-f $deb, 'the .deb exists') or do { done_testing(); exit };

subtest 'control: name, version, Depends on the nginx ABI and the shared libraries' => sub {
    my %f;
    my $info = Gw::run(['dpkg-deb', '-f', $deb], timeout => 30);
    is($info->{exit}, 0, 'dpkg-deb -f') or diag($info->{stderr});
    %f = $info->{stdout} =~ /^([A-Za-z-]+): (.*)$/mg;
    is($f{Package}, $PKG, 'Package');
    is($f{Architecture}, $ARCH, 'Architecture');
    my ($file_version) = $deb =~ m{/${PKG}_([^_/]+)_[^_/]+\.deb$};
    is($f{Version}, $file_version, 'Version as in the file name');
    is($f{Section}, 'httpd', 'Section httpd');
    like($f{Recommends} // '', qr/^nginx$/, 'Recommends nginx');
    my @dep = split /,\s*/, $f{Depends} // '';
    ok((grep { $_ eq $ABI } @dep), "Depends on $ABI, which the installed nginx provides")
        or diag("Depends: $f{Depends}");
    ok((grep { /^libhiredis/ } @dep), 'Depends on libhiredis');
    ok((grep { /^(?:libssl|libcrypto)/ } @dep), 'Depends on libssl (libcrypto)');
    ok((grep { /^libstdc\+\+/ } @dep), 'Depends on libstdc++');

    my $I = Gw::run(['dpkg-deb', '-I', $deb], timeout => 30);
    like($I->{stdout}, qr/^\s+\d+ bytes,\s+\d+ lines\s+\*\s+$_\s/m, "control archive: $_, executable")
        for qw(postinst prerm postrm);
    like($I->{stdout}, qr/^\s+\d+ bytes,\s+\d+ lines\s+md5sums\s/m, 'control archive: md5sums');
    Gw::run(['dpkg-deb', '-e', $deb, "$tmp/control"], timeout => 30);
    my $postinst = slurp("$tmp/control/postinst") // '';
    like($postinst, qr{50-mod-http-llm-gateway\.conf}, 'postinst names the modules-enabled link');
    like($postinst, qr{dpkg-trigger --no-await nginx-reload}, 'postinst activates the nginx-reload trigger');
};

subtest 'files: the module, the snippet, the documentation and examples, owned by root' => sub {
    my $c = Gw::run(['dpkg-deb', '-c', $deb], timeout => 30);
    is($c->{exit}, 0, 'dpkg-deb -c') or diag($c->{stderr});
    my %files;
    for my $line (split /\n/, $c->{stdout}) {
        my ($mode, $own, $path) = $line =~ m{^(\S+)\s+(\S+)\s+\d+\s+\S+\s+\S+\s+\./(.*)$} or next;
        next if $mode =~ /^d/;
        $files{$path} = "$mode $own";
    }
    my @want = ("usr/lib/nginx/modules/$SO", 'usr/share/nginx/modules-available/mod-http-llm-gateway.conf',
                map({ "usr/share/doc/$PKG/$_" } qw(README.md changelog.Debian.gz copyright)),
                map({ "usr/share/doc/$PKG/examples/$_" }
                    qw(anthropic-provider.conf example.conf gateway-errors.conf gateway-log.conf
                       gemini-provider.conf openai-provider.conf)));
    is_deeply([sort keys %files], [sort @want], 'exactly these files') or diag($c->{stdout});
    my @bad = grep { $files{$_} ne '-rw-r--r-- root/root' } sort keys %files;
    ok(!@bad, 'every file -rw-r--r-- root/root') or diag(join "\n", map { "$_: $files{$_}" } @bad);

    my $x = "$tmp/x";
    is(Gw::run(['dpkg-deb', '-x', $deb, $x], timeout => 60)->{exit}, 0, 'dpkg-deb -x');
    is(slurp("$x/usr/share/nginx/modules-available/mod-http-llm-gateway.conf"),
       "load_module modules/$SO;\n", 'the snippet loads the module from modules/ (relative to nginx\'s prefix)');
    my $sections = Gw::run(['readelf', '-S', "$x/usr/lib/nginx/modules/$SO"], timeout => 30)->{stdout};
    unlike($sections, qr/\.debug_info|\.symtab\b/, 'the module is stripped');
    like($sections, qr/\.dynsym\b/, '... keeping its dynamic symbols');
    my $sums = slurp("$tmp/control/md5sums") // '';
    my @sum_bad;
    my $n = 0;
    for my $line (split /\n/, $sums) {
        my ($md5, $path) = $line =~ /^([0-9a-f]{32})  (.+)$/ or do { push @sum_bad, "bad line: $line"; next };
        $n++;
        open my $fh, '<:raw', "$x/$path" or do { push @sum_bad, "$path: missing"; next };
        my $got = Digest::MD5->new->addfile($fh)->hexdigest;
        push @sum_bad, "$path: $got, md5sums says $md5" if $got ne $md5;
    }
    is($n, scalar @want, 'md5sums lists every file');
    ok(!@sum_bad, 'md5sums match the files') or diag(join "\n", @sum_bad);
    like(slurp("$x/usr/share/doc/$PKG/copyright") // '', qr{^Format: https://www\.debian\.org/doc/}m,
         'copyright in the machine-readable format');
};

# ---- install into the machine's nginx

$installed = 1;
my $inst = Gw::run([@SUDO, 'dpkg', '-i', $deb], timeout => 180);
is($inst->{exit}, 0, 'dpkg -i') or diag("$inst->{stdout}$inst->{stderr}");
is(status_of(), 'install ok installed', 'dpkg status: installed');
ok(-f "$MODDIR/$SO", "$MODDIR/$SO installed");
ok(-f $SNIPPET, "$SNIPPET installed");
is(readlink($LINK), $SNIPPET, "$LINK -> $SNIPPET (enabled on a fresh install)");
ok(-f "$DOC/examples/example.conf" && -f "$DOC/copyright", "documentation and examples in $DOC");

my $t = Gw::run([@SUDO, $NGINX, '-t'], timeout => 60);
is($t->{exit}, 0, 'nginx -t of the system configuration passes with the module enabled')
    or diag("$t->{stdout}$t->{stderr}");
like($t->{stderr}, qr/test is successful/, '... "test is successful"');
is_deeply([Gw::log_problems_in_text("$t->{stdout}$t->{stderr}")], [], '... no [alert], [crit] or [emerg]');
my $T = Gw::run([@SUDO, $NGINX, '-T'], timeout => 60);
like($T->{stdout}, qr{^# configuration file \Q$LINK\E:\nload_module modules/\Q$SO\E;$}m,
     'nginx -T: the system configuration includes the link and its load_module line');

# ---- an nginx of the test's own loading every enabled module

subtest 'an nginx with include /etc/nginx/modules-enabled/*.conf serves GET /v1/models' => sub {
    my $p = "$tmp/nginx";
    for my $d ('', qw(/conf /logs /tmp)) {
        mkdir "$p$d" or die "mkdir $p$d: $!";
        chmod 0755, "$p$d";    # workers run as nobody under root
    }
    chmod 0755, $tmp;
    # Debian's snippets name modules/ relative to nginx's prefix
    # (/usr/share/nginx/modules -> /usr/lib/nginx/modules): the same here.
    symlink($MODDIR, "$p/modules") or die "symlink: $!";
    my $port = Gw::free_port();
    my $gw = GwConf::gateway(
        providers => [ { name => 'deb', upstream => 'UP', key => 'sk-provider-unused',
                         models => 'gpt-4o-mini', default => 1 } ],
        http => "llm_gateway_user alice key=$KEY;\n");
    my %vars = (PORT => $port, UP => Gw::closed_port());
    $gw =~ s/%%(\w+)%%/$vars{$1} \/\/ die "unknown placeholder $1"/ge;
    my $conf = "include $ENABLED/*.conf;\n"
             . "worker_processes 1;\ndaemon on;\nmaster_process on;\n"
             . "pid logs/nginx.pid;\nerror_log logs/error.log info;\n"
             . "events {\n    worker_connections 64;\n}\n"
             . "http {\n    access_log logs/access.log;\n"
             . join('', map { "    ${_}_temp_path tmp/$_;\n" } qw(client_body proxy fastcgi uwsgi scgi))
             . $gw . "}\n";
    open my $fh, '>', "$p/conf/nginx.conf" or die "$p/conf/nginx.conf: $!";
    print {$fh} $conf;
    close $fh;

    my $start = Gw::run([$NGINX, '-p', "$p/", '-c', "$p/conf/nginx.conf"], timeout => 30);
    is($start->{exit}, 0, 'nginx starts') or diag("$start->{stdout}$start->{stderr}" . (slurp("$p/logs/error.log") // ''));
    $master = Gw::wait_until(sub { my $m = slurp("$p/logs/nginx.pid") // ''; $m =~ /^(\d+)/ && Gw::_alive($1) ? $1 : 0 },
                             timeout => 10);
    ok($master, 'its master is running');
    ok(Gw::wait_until(sub { Gw::port_open($port) }, timeout => 10, interval => 0.05), "it listens on $port");

    my $r = Gw::http(GET => "http://127.0.0.1:$port/v1/models", headers => GwConf::bearer($KEY));
    is($r->{status}, 200, 'GET /v1/models with the user\'s key: 200') or diag($r->{body});
    like($r->{headers}{'content-type'} // '', qr{^application/json}, 'JSON');
    is($r->{json}{object}, 'list', 'a list');
    is_deeply([map { $_->{id} } @{ $r->{json}{data} || [] }], ['deb/gpt-4o-mini'], 'the configured model');

    ok(stop_nginx(), 'it stops on QUIT');
    my @bad = (Gw::log_problems_in_file("$p/logs/error.log"),
               Gw::log_problems_in_text("$start->{stdout}$start->{stderr}"));
    ok(!@bad, 'its error log has no [alert], [crit] or [emerg]') or diag(join "\n", @bad);
};

# ---- remove, then purge

my $rm = Gw::run([@SUDO, 'dpkg', '-r', $PKG], timeout => 180);
is($rm->{exit}, 0, 'dpkg -r') or diag("$rm->{stdout}$rm->{stderr}");
is(status_of(), 'deinstall ok config-files', 'dpkg status: removed, not purged');
ok(!-e "$MODDIR/$SO", 'the module is gone');
ok(!-e $SNIPPET, 'the snippet is gone');
ok(!-e $DOC, 'the documentation is gone');
ok(!-e $LINK && !-l $LINK, 'the modules-enabled link is gone');
is(readlink("$LINK.removed"), $SNIPPET, '... kept as .removed (dh_nginx\'s way: a reinstall enables it again)');
$t = Gw::run([@SUDO, $NGINX, '-t'], timeout => 60);
is($t->{exit}, 0, 'nginx -t of the system configuration passes after the remove') or diag("$t->{stdout}$t->{stderr}");

my $purge = Gw::run([@SUDO, 'dpkg', '-P', $PKG], timeout => 180);
is($purge->{exit}, 0, 'dpkg -P') or diag("$purge->{stdout}$purge->{stderr}");
ok(!-e "$LINK.removed" && !-l "$LINK.removed", 'the .removed link is gone');
my $s = Gw::run(['dpkg', '-s', $PKG], timeout => 30);
ok($s->{exit} != 0 && $s->{stderr} =~ /is not installed/, "dpkg -s: $PKG is not installed")
    or diag("$s->{stdout}$s->{stderr}");
$installed = 0 if status_of() =~ /\bnot-installed\b/;
is_deeply(snapshot(), $snap, "$ENABLED, $MODDIR and $AVAIL as before the test");

done_testing();
