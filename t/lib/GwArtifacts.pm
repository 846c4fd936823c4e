package GwArtifacts;

# What each test script's gateways said, kept for t/99-no-secret-anywhere.t.
#
# With LLMGW_ARTIFACTS=<dir> (make integration sets it to
# build/test-artifacts), Gw.pm keeps, per test script, in <dir>/<script>/
# (e.g. build/test-artifacts/10-auth/; emptied when the script starts):
#
#   nginx-<n>/conf/, nginx-<n>/logs/   each nginx's configuration and logs
#                                      (error.log, startup.log, access logs),
#                                      copied when it stops
#   responses.log                      every response a Gw::http or
#                                      Gw::stream_request got from one of the
#                                      script's nginx ports: status line,
#                                      headers, body (test processes forked by
#                                      Gw::parallel append too)
#   nginx-t.log                        the output of every Gw::nginx_t
#   node.log                           stdout and stderr of every Gw::run_node
#                                      (the official clients' view), each
#                                      record headed by the client's own
#                                      inputs (its environment and arguments
#                                      as hex): what a client reports of what
#                                      it was given is not the gateway's
#   secrets.txt                        every configured secret, one per line:
#                                      hex of its bytes, a tab, where it was
#                                      configured (never the value in clear)
#
# Secrets are read from each configuration when it is written (start,
# reload, nginx -t): llm_gateway_provider key=, llm_gateway_user key=,
# llm_gateway_store's URL password and password=, llm_gateway_mcp
# session_key=, and the "key" of every user in llm_gateway_users_file; each
# given literally, as literal:, env:NAME (the value nginx was given) or
# file:/path (the file's bytes, one trailing newline removed). Users files
# and secret files are read again whenever they changed, when a response is
# recorded and when nginx stops, so keys a test writes later are known too.
#
# Without LLMGW_ARTIFACTS nothing is kept and every hook returns at once.

use strict;
use warnings;

use Fcntl qw(O_WRONLY O_APPEND O_CREAT);
use File::Basename ();
use File::Copy ();
use File::Path ();
use JSON::PP ();

my $OWNER = $$;
my $DIR;          # <root>/<script>, made when the script starts
my %PORTS;        # ports of this script's nginx instances
my %SEEN;         # secret bytes -> 1 (in this process)
my %TRACKED;      # path -> {sig, kind => users|file, env => {...}, from}
my $NGINX_SEQ = 0;

sub enabled { defined $ENV{LLMGW_ARTIFACTS} && length $ENV{LLMGW_ARTIFACTS} }

# The script's folder: <root>/<script name without .t>.
sub script_dir {
    return undef unless enabled();
    return $DIR if defined $DIR;
    (my $name = File::Basename::basename($0)) =~ s/\.t\z//;
    $name =~ s/[^A-Za-z0-9._-]/_/g;
    $DIR = "$ENV{LLMGW_ARTIFACTS}/$name";
    return $DIR;
}

# Called once by Gw's import in the test script: an empty folder.
sub init {
    my $d = script_dir() or return;
    return unless $$ == $OWNER;
    File::Path::remove_tree($d) if -d $d;
    File::Path::make_path($d);
}

sub _append {
    my ($file, $text) = @_;
    my $d = script_dir() or return;
    File::Path::make_path($d) unless -d $d;
    # One write with O_APPEND: records from forked processes do not interleave.
    sysopen(my $fh, "$d/$file", O_WRONLY | O_APPEND | O_CREAT, 0644) or return;
    binmode $fh;
    syswrite($fh, $text);
    close $fh;
}

sub _slurp {
    my ($path) = @_;
    open my $fh, '<:raw', $path or return undef;
    local $/;
    my $t = <$fh>;
    return $t // '';
}

sub _sig { my @s = stat $_[0]; @s ? "$s[7]/$s[9]/$s[1]" : '' }

# ------------------------------------------------------------ secrets

sub _add_secret {
    my ($value, $from) = @_;
    return unless defined $value && length $value;
    return if $SEEN{$value}++;
    $from =~ s/[\t\n\r]/ /g;
    _append('secrets.txt', unpack('H*', $value) . "\t$from\n");
}

# The value of a secret reference (docs/directives.md#secret-references).
sub resolve_ref {
    my ($ref, $env) = @_;
    return undef unless defined $ref && length $ref;
    if ($ref =~ /\Aenv:(.+)\z/s) {
        my $n = $1;
        return exists $env->{$n} ? $env->{$n} : $ENV{$n};
    }
    if ($ref =~ /\Afile:(.+)\z/s) {
        my $v = _slurp($1);
        return undef unless defined $v;
        $v =~ s/\r?\n\z//;
        return $v;
    }
    return $1 if $ref =~ /\Aliteral:(.*)\z/s;
    return $ref;
}

sub _track {
    my ($path, $kind, $env, $from) = @_;
    $TRACKED{$path} = { sig => '', kind => $kind, env => $env, from => $from };
    _read_tracked($path);
}

sub _read_tracked {
    my ($path) = @_;
    my $t = $TRACKED{$path};
    my $sig = _sig($path);
    return if $sig eq '' || $sig eq $t->{sig};
    $t->{sig} = $sig;
    if ($t->{kind} eq 'file') {
        _add_secret(resolve_ref("file:$path"), $t->{from});
        return;
    }
    my $doc = eval { JSON::PP->new->decode(_slurp($path) // '') };
    return unless ref $doc eq 'HASH' && ref $doc->{users} eq 'ARRAY';
    for my $u (@{ $doc->{users} }) {
        next unless ref $u eq 'HASH' && defined $u->{key} && !ref $u->{key};
        my $ref = $u->{key};
        utf8::encode($ref) if utf8::is_utf8($ref);
        my $name = defined $u->{name} && !ref $u->{name} ? $u->{name} : '?';
        my $from = "users file $path user \"$name\" key=" . _describe($ref);
        _track($1, 'file', {}, $from) if $ref =~ /\Afile:(.+)\z/s && !$TRACKED{$1};
        _add_secret(resolve_ref($ref, $t->{env}), $from);
    }
}

# Re-reads the users files and secret files that changed.
sub refresh {
    return unless enabled();
    _read_tracked($_) for sort keys %TRACKED;
}

sub _describe {
    my ($ref) = @_;
    return $ref if $ref =~ /\A(?:env|file):/;
    return 'literal';
}

# Statements of an nginx configuration text: [[token, ...], ...] (comments
# dropped, quotes removed; good enough for the directives read here).
sub _statements {
    my ($text) = @_;
    my (@st, @tok, $cur);
    my $flush_tok = sub { if (defined $cur) { push @tok, $cur; undef $cur } };
    my $i = 0;
    my $n = length $text;
    while ($i < $n) {
        my $c = substr($text, $i, 1);
        if ($c eq '#' && !defined $cur) {
            my $e = index($text, "\n", $i);
            $i = $e < 0 ? $n : $e;
            next;
        }
        if ($c eq '"' || $c eq "'") {
            my $q = $c;
            my $j = $i + 1;
            my $v = '';
            while ($j < $n && substr($text, $j, 1) ne $q) {
                my $d = substr($text, $j, 1);
                if ($d eq '\\' && $j + 1 < $n) {
                    my $e = substr($text, $j + 1, 1);
                    $v .= $e eq 'n' ? "\n" : $e eq 'r' ? "\r" : $e eq 't' ? "\t" : $e;
                    $j += 2;
                    next;
                }
                $v .= $d;
                $j++;
            }
            $cur = ($cur // '') . $v;
            $i = $j + 1;
            next;
        }
        if ($c =~ /\s/) { $flush_tok->(); $i++; next }
        if ($c eq ';' || $c eq '{' || $c eq '}') {
            $flush_tok->();
            push @st, [@tok] if @tok;
            @tok = ();
            $i++;
            next;
        }
        $cur = ($cur // '') . $c;
        $i++;
    }
    $flush_tok->();
    push @st, [@tok] if @tok;
    return @st;
}

# The secrets of a configuration text (after its placeholders were filled).
# $env: the environment nginx was given (env:NAME falls back to %ENV, which
# nginx inherits); $conf_dir: the folder relative users files are in.
sub collect_conf {
    my ($text, %o) = @_;
    return unless enabled();
    my $env = $o{env} || {};
    my $conf_dir = $o{conf_dir} // '.';
    for my $st (_statements($text)) {
        my ($name, @args) = @$st;
        if ($name eq 'llm_gateway_provider' || $name eq 'llm_gateway_user') {
            my $who = $args[0] // '?';
            for my $a (@args) {
                next unless $a =~ /\Akey=(.+)\z/s;
                my $ref = $1;
                my $from = "$name $who key=" . _describe($ref);
                _track($1, 'file', {}, $from) if $ref =~ /\Afile:(.+)\z/s;
                _add_secret(resolve_ref($ref, $env), $from);
            }
        } elsif ($name eq 'llm_gateway_store') {
            my $url = $args[0] // '';
            if ($url =~ m{\Arediss?://([^/?#@]*)@}) {
                my $info = $1;
                my $pw = $info =~ /:(.*)\z/s ? $1 : undef;
                $pw =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge if defined $pw;
                _add_secret($pw, 'llm_gateway_store URL password') if defined $pw && length $pw;
            }
            for my $a (@args) {
                next unless $a =~ /\Apassword=(.+)\z/s;
                my $ref = $1;
                my $from = 'llm_gateway_store password=' . _describe($ref);
                _track($1, 'file', {}, $from) if $ref =~ /\Afile:(.+)\z/s;
                _add_secret(resolve_ref($ref, $env), $from);
            }
        } elsif ($name eq 'llm_gateway_mcp') {
            for my $a (@args) {
                next unless $a =~ /\Asession_key=(.+)\z/s;
                my $ref = $1;
                my $from = 'llm_gateway_mcp session_key=' . _describe($ref);
                _track($1, 'file', {}, $from) if $ref =~ /\Afile:(.+)\z/s;
                _add_secret(resolve_ref($ref, $env), $from);
            }
        } elsif ($name eq 'llm_gateway_users_file' && defined $args[0]) {
            my $path = $args[0] =~ m{\A/} ? $args[0] : "$conf_dir/$args[0]";
            _track($path, 'users', { %ENV, %$env }, 'users file');
        }
    }
}

# ------------------------------------------------------------ hooks

# A Gw::Nginx wrote its configuration (start or reload).
sub nginx_conf {
    my ($ng) = @_;
    return unless enabled();
    $PORTS{$_} = 1 for values %{ $ng->{ports} || {} };
    collect_conf($ng->{conf_text}, env => $ng->{opts}{env}, conf_dir => "$ng->{prefix}/conf");
}

# A Gw::Nginx stopped: its conf/ and logs/ are copied.
sub nginx_stopped {
    my ($ng) = @_;
    return unless enabled();
    refresh();
    my $d = script_dir() or return;
    $NGINX_SEQ++;
    my $to = sprintf '%s/nginx-%d-%d', $d, $$, $NGINX_SEQ;
    for my $sub (qw(conf logs)) {
        my $from = "$ng->{prefix}/$sub";
        opendir my $dh, $from or next;
        File::Path::make_path("$to/$sub");
        for my $f (sort grep { -f "$from/$_" } readdir $dh) {
            File::Copy::copy("$from/$f", "$to/$sub/$f");
        }
        closedir $dh;
    }
}

# Gw::nginx_t ran.
sub nginx_t {
    my ($text, $env, $conf_dir, $output) = @_;
    return unless enabled();
    collect_conf($text, env => $env, conf_dir => $conf_dir);
    _append('nginx-t.log', "### nginx -t\n" . ($output // '') . "\n");
}

# A response from one of the script's nginx ports (others, such as the
# mock's control routes, are not the gateway's output).
sub response {
    my ($method, $url, $r) = @_;
    return unless enabled();
    my ($port) = $url =~ m{\Ahttps?://[^/:]+:(\d+)};
    return unless $port && $PORTS{$port};
    refresh();
    my ($path) = $url =~ m{\Ahttps?://[^/]+([^?#]*)};
    my $h = $r->{headers} || {};
    my $head = '';
    for my $k (sort keys %$h) {
        $head .= "$k: $_\n" for ref $h->{$k} eq 'ARRAY' ? @{ $h->{$k} } : ($h->{$k});
    }
    my $body = $r->{body} // '';
    utf8::encode($body) if utf8::is_utf8($body);
    $body = substr($body, 0, 8 << 20) . "\n[cut at 8 MiB]" if length $body > (8 << 20);
    _append('responses.log', sprintf("### response pid=%d %s %s -> %s\n%s\n%s\n", $$, uc $method,
                                     $path // '', $r->{status} // '-', $head, $body));
}

# Gw::run_node ran a client; $inputs: the values the test gave it
# (environment, arguments).
sub node {
    my ($script, $r, $inputs) = @_;
    return unless enabled();
    refresh();
    my $in = join ',', map { my $v = $_ // ''; utf8::encode($v) if utf8::is_utf8($v); unpack('H*', $v) } @{ $inputs || [] };
    _append('node.log', "### node $script exit=" . ($r->{exit} // '-') . " inputs=$in\n"
                        . ($r->{stdout} // '') . "\n" . ($r->{stderr} // '') . "\n");
}

1;
