#!/usr/bin/perl
# No configured secret in anything the gateway said, over the whole suite.
#
# make integration runs every test file with LLMGW_ARTIFACTS set, so that
# t/lib/GwArtifacts.pm keeps, per file, what the gateways said (error logs,
# startup output, access logs written with the gateway's variables, every
# response a test received from a gateway port: status, headers, body; the
# events and metrics routes are among them; nginx -t output; the official
# clients' output) and every configured secret (provider keys, user keys,
# users-file keys, the store password, the MCP session key; given literally,
# by env: and by file:). t/testrules.yml runs this file last, alone. It then
# looks for every secret of 8 bytes or more (the gateway does not mask
# shorter ones from relayed answers, and nginx -t warns about them) in every
# output of every file, and fails naming the file, the output, where the
# secret was configured and the line with the secret replaced.
#
# Only the gateway's outputs are read, not the tests' inputs: not the
# configurations, not what a mock recorded (providers are sent their keys),
# not the default access log (its request line and User-Agent are the
# client's), not the context nginx appends to an error line (", request:
# "...", host: "...", referrer: "..."), which repeats the client's own request
# line, not nginx's own lines about a request it could not read ("client sent
# duplicate header line: ..." while reading client request headers), which
# quote the client's own headers, and not nginx's own debug lines, which print
# every request header and every request sent upstream, credentials included
# (the gateway's own debug lines are read, as t/83-debug-trace.t does), and
# in the official clients' output not what the test gave that client (its
# own key, which the dashboard's runner reports back from sessionStorage). A
# secret a mock echoes on purpose must arrive masked ('*' for each byte,
# t/58-secret-echo.t), so it is not found.
#
# It always runs a small representative workload of its own first (every
# kind of secret, each given literally, by env: and by file:; chat whole and
# streamed on the three provider types, unknown and almost-right keys,
# providers echoing their key in errors, the passthrough, every admin route,
# events, metrics, /mcp, a reload, nginx -t failures; the error log at debug
# level), so that run alone it does not pass vacuously. Under CI without the
# suite's artifacts (LLMGW_ARTIFACTS unset or holding no other file) it
# fails: the point is the whole suite.

use strict;
use warnings;

my $SUITE_ROOT;
BEGIN {
    # Run alone: this file's own artifacts go to a temporary folder.
    $SUITE_ROOT = $ENV{LLMGW_ARTIFACTS};
    if (!defined $SUITE_ROOT || !length $SUITE_ROOT) {
        require File::Temp;
        $ENV{LLMGW_ARTIFACTS} = File::Temp::tempdir('llmgw-99-artifacts-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    }
}

use lib 't/lib';
use Gw;
use GwArtifacts;
use GwConf;
use GwRedis;
use File::Basename ();
use File::Temp ();
use Test::More;

Gw::need_module();
GwRedis::need_redis();

my $MIN = 8;    # kMinRedactedSecret (src/core/http/redact.h)
my $ROOT = $ENV{LLMGW_ARTIFACTS};

# ------------------------------------------------------------------ workload

my %S = (
    prov_lit  => 'sk-prov-99-literal-a1b2c3d4e5',
    prov_env  => 'sk-ant-prov-99-env-f6a7b8c9d0',
    prov_file => 'AIzaProv99FileSecret-0123456789',
    alice     => 'sk-user-99-alice-literal-11aa22',
    bob       => 'sk-user-99-bob-env-33bb44cc',
    carol     => 'sk-user-99-carol-file-55dd66ee',
    dave      => 'sk-user-99-dave-usersfile-77ff',
    erin      => 'sk-user-99-erin-usersfile-env-88',
    frank     => 'sk-user-99-frank-usersfile-file-99',
    gina      => 'sk-user-99-gina-added-on-reload-00',
    admin     => 'sk-user-99-admin-literal-abcdef',
    store     => 'store-pw-99-file-0f1e2d3c4b5a',
    store_url => 'store-pw-99-in-the-url-1a2b3c',
    mcp       => 'mcp-session-key-99-env-9a8b7c6d5e',
);

my $dir = File::Temp::tempdir('llmgw-99-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $dir;
sub spew {
    my ($path, $text, $mode) = @_;
    open my $fh, '>', $path or die "$path: $!";
    print {$fh} $text;
    close $fh;
    chmod $mode // 0644, $path;
}
spew("$dir/prov.key", "$S{prov_file}\n");
spew("$dir/carol.key", "$S{carol}\r\n");
spew("$dir/frank.key", "$S{frank}\n");
spew("$dir/store.pw", "$S{store}\n");
my @file_users = ({ name => 'dave',  key => $S{dave} },
                  { name => 'erin',  key => 'env:LLMGW99_ERIN' },
                  { name => 'frank', key => "file:$dir/frank.key" });
spew("$dir/users.json", Gw::json_encode({ users => \@file_users }), 0600);

my $rd = GwRedis->start(password => $S{store});
my $mock = Gw::Mock->start();
my %ENVS = (LLMGW99_PROV => $S{prov_env}, LLMGW99_BOB => $S{bob}, LLMGW99_ERIN => $S{erin}, LLMGW99_MCP => $S{mcp});
my $conf = GwConf::gateway(
    providers => [
        { name => 'oai',    type => 'openai',    key => $S{prov_lit},        models => 'gpt-4o-mini', default => 1 },
        { name => 'claude', type => 'anthropic', key => 'env:LLMGW99_PROV',  models => 'claude-sonnet-4-5' },
        { name => 'gem',    type => 'gemini',    key => "file:$dir/prov.key", models => 'gemini-2.5-flash' },
    ],
    http => "llm_gateway_store redis://127.0.0.1:" . $rd->port . " password=file:$dir/store.pw fail_open=on;\n"
          . "llm_gateway_user alice key=$S{alice} requests_per_minute=1000;\n"
          . "llm_gateway_user bob key=env:LLMGW99_BOB;\n"
          . "llm_gateway_user carol key=file:$dir/carol.key;\n"
          . "llm_gateway_user root key=literal:$S{admin} admin;\n"
          . "llm_gateway_users_file $dir/users.json interval=1s;\n"
          . "llm_gateway_mcp_server tools location=/_t/tools;\n"
          . "include $Gw::ROOT/conf/gateway-log.conf;\n",
    server => "access_log logs/llm.log llm_gateway;\n"
            . "    location /admin { llm_gateway_admin; }\n"
            . "    location = /metrics { llm_gateway_metrics; }\n"
            . "    location /passthrough/ { llm_gateway_passthrough; }\n"
            . "    location = /mcp { llm_gateway_mcp session_key=env:LLMGW99_MCP; }\n"
            . "    location /_t/tools { internal; proxy_pass http://127.0.0.1:%%MOCK%%/mcp; }\n",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, env => \%ENVS, vars => { MOCK => $mock->port },
                          error_log_level => 'debug');

my %KEYED = (alice => ['Authorization', "Bearer $S{alice}"], bob => ['x-api-key', $S{bob}],
             carol => ['Authorization', "Bearer $S{carol}"], dave => ['Authorization', "Bearer $S{dave}"],
             erin => ['x-api-key', $S{erin}], frank => ['Authorization', "Bearer $S{frank}"]);
sub hdr { my ($who) = @_; my ($k, $v) = @{ $KEYED{$who} }; return { $k => $v } }

subtest 'workload: every user, every provider type, whole and streamed' => sub {
    for my $who (sort keys %KEYED) {
        for my $model (qw(gpt-4o-mini claude-sonnet-4-5 gemini-2.5-flash)) {
            my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => hdr($who),
                             body => GwConf::chat_body($model));
            is($r->{status}, 200, "$who, $model: 200");
        }
        my $s = Gw::stream_request(POST => $ng->url('/v1/chat/completions'), headers => hdr($who),
                                   body => GwConf::chat_body('claude-sonnet-4-5', stream => JSON::PP::true()));
        is($s->{status}, 200, "$who: a translated stream");
    }
    my $m = Gw::http(POST => $ng->url('/v1/messages'), headers => hdr('bob'),
                     body => { model => 'claude-sonnet-4-5', max_tokens => 16, messages => [{ role => 'user', content => 'hi' }] });
    is($m->{status}, 200, '/v1/messages');
    is(Gw::http(GET => $ng->url('/v1/models'), headers => hdr('carol'))->{status}, 200, '/v1/models');
    is(Gw::http(GET => $ng->url('/passthrough/oai/models'), headers => hdr('alice'))->{status}, 200, 'passthrough');
};

subtest 'workload: refused keys' => sub {
    my @bad = ({}, { Authorization => 'Bearer sk-nobody-99-0000000000' },
               { Authorization => "Bearer $S{alice}x" }, { 'x-api-key' => substr($S{bob}, 0, -1) },
               { Authorization => "Basic $S{carol}" });
    for my $i (0 .. $#bad) {
        my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => $bad[$i], body => GwConf::chat_body('gpt-4o-mini'));
        is($r->{status}, 401, "refused key #$i: 401");
    }
    is(Gw::http(GET => $ng->url('/admin/api/overview'), headers => hdr('alice'))->{status}, 403, 'non-admin: 403');
};

subtest 'workload: providers echoing their keys, upstream errors' => sub {
    $mock->script({ status => 401, headers => { 'content-type' => 'application/json', 'x-echo' => "Bearer $S{prov_lit}" },
                    body => qq({"error":{"message":"Incorrect API key provided: $S{prov_lit}.","type":"invalid_request_error"}}) });
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => hdr('alice'), body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 401, 'the provider\'s 401 relayed');
    $mock->script({ status => 429, headers => { 'content-type' => 'application/json', 'retry-after' => '1' },
                    body => qq({"type":"error","error":{"type":"rate_limit_error","message":"key $S{prov_env} is limited"}}) });
    $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => hdr('bob'), body => GwConf::chat_body('claude-sonnet-4-5'));
    is($r->{status}, 429, 'a 429 relayed');
    $mock->script({ status => 500, headers => { 'content-type' => 'text/plain' }, body => "internal error for $S{prov_file}" });
    $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => hdr('carol'), body => GwConf::chat_body('gemini-2.5-flash'));
    cmp_ok($r->{status}, '>=', 500, 'a 500: an upstream error');
    $mock->script({ status => 403, headers => { 'content-type' => 'application/json' },
                    body => qq({"error":{"message":"$S{prov_lit} may not list models"}}) });
    $r = Gw::http(GET => $ng->url('/passthrough/oai/models'), headers => hdr('dave'));
    is($r->{status}, 403, 'passthrough: the 403 relayed');
    $mock->clear_script;
};

subtest 'workload: admin routes, events, metrics, /mcp' => sub {
    my $adm = { Authorization => "Bearer $S{admin}" };
    for my $p (qw(/admin/api/usage /admin/api/overview /admin/api/events /admin/api/targets /admin/api/catalog
                  /admin/api/consumers /admin/api/config /admin/api/usage/history?scope=total&metric=req /admin/)) {
        is(Gw::http(GET => $ng->url($p), headers => $adm)->{status}, 200, "$p: 200");
    }
    is(Gw::http(GET => $ng->url('/metrics'), headers => $adm)->{status}, 200, 'metrics: 200');
    my $init = { jsonrpc => '2.0', id => 1, method => 'initialize',
                 params => { protocolVersion => '2025-06-18', capabilities => {}, clientInfo => { name => 't99', version => '1' } } };
    my $r = Gw::http(POST => $ng->url('/mcp'), headers => { %{ hdr('erin') }, Accept => 'application/json, text/event-stream' },
                     body => $init);
    is($r->{status}, 200, '/mcp initialize: 200');
    my $sid = $r->{headers}{'mcp-session-id'};
    ok($sid, 'a session id');
    $r = Gw::http(POST => $ng->url('/mcp'), body => { jsonrpc => '2.0', id => 2, method => 'tools/list' },
                  headers => { %{ hdr('erin') }, Accept => 'application/json, text/event-stream', 'Mcp-Session-Id' => $sid // '' });
    ok($r->{status} == 200 || $r->{status} >= 400, "/mcp tools/list answered ($r->{status})");
};

subtest 'workload: a reload with a new users-file key, nginx -t failures' => sub {
    push @file_users, { name => 'gina', key => $S{gina} };
    spew("$dir/users.json", Gw::json_encode({ users => \@file_users }), 0600);
    ok($ng->reload, 'reloaded');
    is(Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($S{gina}),
                body => GwConf::chat_body('gpt-4o-mini'))->{status}, 200, 'the new key answers');
    my ($rc, $out) = Gw::nginx_t("llm_gateway_provider p type=openai location=/_p key=$S{prov_lit} bogus=1;\n",
                                 vars => { MOCK => 1 });
    isnt($rc, 0, 'nginx -t: an unknown parameter after a literal key');
    ($rc, $out) = Gw::nginx_t("llm_gateway_user u key=env:LLMGW99_UNSET;\nllm_gateway_user v key=$S{alice} requests_per_minute=x;\n");
    isnt($rc, 0, 'nginx -t: an unset variable, a bad limit');
    ($rc, $out) = Gw::nginx_t("llm_gateway_store redis://:$S{store_url}\@127.0.0.1:1 timeout=x;\n");
    isnt($rc, 0, 'nginx -t: a bad store line with a password in the URL');
};

# Redis holds the mirrored events: they are the gateway's output too.
my $events = join "\n", map { $rd->cli('LRANGE', $_, 0, -1) } grep { length } split /\n/, $rd->cli('KEYS', 'llmgw:events*');
$ng->stop;
{
    my $d = GwArtifacts::script_dir();
    open my $fh, '>', "$d/store-events.log" or die;
    print {$fh} $events;
    close $fh;
}

# ------------------------------------------------------------------ the scan

# [bytes, where] of a script's secrets.txt
sub secrets_of {
    my ($d) = @_;
    open my $fh, '<', "$d/secrets.txt" or return ();
    my @s;
    while (my $l = <$fh>) {
        chomp $l;
        my ($hex, $from) = split /\t/, $l, 2;
        push @s, [pack('H*', $hex), $from // '?'];
    }
    return @s;
}

sub slurp { my $t = GwArtifacts::_slurp($_[0]); return $t // '' }

# The gateway's outputs kept in a script's folder: [name, text].
sub outputs_of {
    my ($d) = @_;
    my @out;
    for my $f (qw(nginx-t.log store-events.log)) {
        push @out, [$f, slurp("$d/$f")] if -f "$d/$f";
    }
    # The clients' records: what a client reports of its own inputs (the key
    # the test gave it, which the dashboard's runner reads back from the
    # page's sessionStorage) is not the gateway's output.
    for my $rec (split /^(?=### node )/m, slurp("$d/node.log")) {
        next unless $rec =~ s/\A### node (\S+) exit=\S* inputs=([0-9a-f,]*)\n//;
        push @out, ["node.log ($1)", $rec, [map { pack 'H*', $_ } grep { length } split /,/, $2]];
    }
    if (-f "$d/responses.log") {
        # The record lines name the request's path: the test's input.
        (my $t = slurp("$d/responses.log")) =~ s/^### response .*$//mg;
        push @out, ['responses.log', $t];
    }
    opendir my $dh, $d or return @out;
    for my $n (sort grep { /^nginx-/ && -d "$d/$_" } readdir $dh) {
        my $conf = slurp("$d/$n/conf/nginx.conf");
        my (%fmt, %gw_access, %errlog);
        $errlog{'error.log'} = $errlog{'startup.log'} = 1;
        for my $st (GwArtifacts::_statements($conf)) {
            my ($name, @a) = @$st;
            if ($name eq 'log_format' && @a >= 2) {
                my $fname = shift @a;
                shift @a if $a[0] =~ /^escape=/;
                $fmt{$fname} = join '', @a;
            } elsif ($name eq 'access_log' && @a >= 2 && $a[0] =~ m{(?:^|/)logs/([^/]+)$}) {
                $gw_access{$1} = $a[1];
            } elsif ($name eq 'error_log' && @a && $a[0] =~ m{(?:^|/)logs/([^/]+)$}) {
                $errlog{$1} = 1;
            }
        }
        $fmt{llm_gateway} //= '$llm_gateway_';    # conf/gateway-log.conf, included
        opendir my $lh, "$d/$n/logs" or next;
        for my $f (sort grep { -f "$d/$n/logs/$_" } readdir $lh) {
            my $text = slurp("$d/$n/logs/$f");
            if ($errlog{$f} || $f =~ /error/) {
                # At debug level nginx itself logs every request header and
                # the whole request it sends upstream (credentials included),
                # in lines and continuation lines of its own: those are not
                # the gateway's lines (docs/troubleshooting.md); the gateway's
                # own debug lines ("llm_gateway: ...") are read.
                # So are nginx's lines about a request it could not read
                # ("client sent duplicate header line: ..."): they quote the
                # client's own request line and headers.
                my ($keep, @lines) = (1);
                for my $l (split /\n/, $text) {
                    if ($l =~ /^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[(\w+)\] \d+#\d+: (?:\*\d+ )?(.*)/) {
                        my ($level, $msg) = ($1, $2);
                        $keep = !($level eq 'debug' && $msg !~ /^llm_gateway/)
                             && !($msg !~ /^llm_gateway/ && $msg =~ / while reading client request (?:line|headers)(?:,|$)/);
                    }
                    push @lines, $l if $keep;
                }
                $text = join "\n", @lines;
                # nginx's context after the message repeats the client's request.
                $text =~ s/, request: ".*?"(?=, (?:subrequest|upstream|host|referrer): |$)//mg;
                $text =~ s/, host: ".*?"(?=, referrer: |$)//mg;
                $text =~ s/, referrer: ".*"$//mg;
                push @out, ["$n/logs/$f", $text];
            } elsif (my $format = $gw_access{$f}) {
                next unless ($fmt{$format} // '') =~ /\$llm_gateway_/;
                if ($format eq 'llm_gateway') {    # JSON: the gateway's fields, not uri/method
                    $text = join "\n", map {
                        my $j = Gw::json_decode($_);
                        ref $j eq 'HASH' ? join(' ', map { $j->{$_} // '' } grep { !/^(?:time|status|request_time|method|uri)$/ } sort keys %$j) : $_
                    } split /\n/, $text;
                }
                push @out, ["$n/logs/$f", $text];
            }
        }
        closedir $lh;
    }
    closedir $dh;
    return @out;
}

opendir my $rh, $ROOT or die "$ROOT: $!";
my @scripts = sort grep { !/^\./ && -d "$ROOT/$_" } readdir $rh;
closedir $rh;
(my $self_name = File::Basename::basename($0)) =~ s/\.t\z//;
my @others = grep { $_ ne $self_name } @scripts;

subtest 'this file\'s own workload left every kind of secret and output' => sub {
    my %from = map { $_->[1] => 1 } secrets_of("$ROOT/$self_name");
    for my $kind ('llm_gateway_provider oai key=literal', 'llm_gateway_provider claude key=env:LLMGW99_PROV',
                  "llm_gateway_provider gem key=file:$dir/prov.key", 'llm_gateway_user alice key=literal',
                  'llm_gateway_user bob key=env:LLMGW99_BOB', "llm_gateway_user carol key=file:$dir/carol.key",
                  qq(users file $dir/users.json user "dave" key=literal), qq(users file $dir/users.json user "erin" key=env:LLMGW99_ERIN),
                  qq(users file $dir/users.json user "frank" key=file:$dir/frank.key),
                  qq(users file $dir/users.json user "gina" key=literal),
                  "llm_gateway_store password=file:$dir/store.pw", 'llm_gateway_mcp session_key=env:LLMGW99_MCP',
                  'llm_gateway_store URL password') {
        ok($from{$kind}, "secret collected: $kind");
    }
    my %secret = map { $_->[0] => 1 } secrets_of("$ROOT/$self_name");
    ok($secret{ $S{$_} }, "the value of $_ collected") for sort keys %S;
    my %text = map { $_->[0] => $_->[1] } outputs_of("$ROOT/$self_name");
    my %out = map { $_ => length $text{$_} } keys %text;
    cmp_ok($out{'responses.log'} // 0, '>', 10000, 'responses recorded');
    cmp_ok($out{'nginx-t.log'} // 0, '>', 100, 'nginx -t output recorded');
    cmp_ok($out{'store-events.log'} // 0, '>', 10, 'events from the store recorded');
    my ($err) = grep { /logs\/error\.log$/ } keys %text;
    cmp_ok(scalar(() = ($text{$err // ''} // '') =~ /\[debug\] \d+#\d+: \*\d+ llm_gateway: /g), '>', 100,
           'the gateway\'s own debug lines in error.log');
    ok((grep { /logs\/llm\.log$/ && $out{$_} > 100 } keys %out), 'the gateway\'s access log');
};

if (Gw::in_ci()) {
    ok(defined $SUITE_ROOT && @others, 'CI: the whole suite\'s artifacts are here (run by make integration, which sets '
                                       . 'LLMGW_ARTIFACTS)')
        or diag('without them this file only proves its own workload');
    if (@others) {
        my %have = map { $_ => 1 } @others;
        my @missing = grep { !$have{$_} } map { m{t/(.*)\.t$} ? $1 : () } grep { !/\/(?:99|87)-/ } glob("$Gw::ROOT/t/*.t");   # t/87 starts no gateway
        is_deeply(\@missing, [], 'CI: every test file left its artifacts');
    }
} else {
    diag(@others ? sprintf('scanning the artifacts of %d test files in %s', scalar @others, $ROOT)
                 : 'run alone: only this file\'s own workload is scanned (make integration scans the whole suite)');
}

# Every secret of every file, then every output of every file.
my (%where, @short);
for my $s (@scripts) {
    for my $sec (secrets_of("$ROOT/$s")) {
        my ($v, $from) = @$sec;
        if (length $v < $MIN) { push @short, "$s: $from"; next }
        $where{$v} //= "$s: $from";
    }
}
diag(sprintf '%d secrets shorter than %d bytes not looked for (the gateway does not mask them either; nginx -t warns '
             . 'about short provider keys)', scalar @short, $MIN) if @short;
cmp_ok(scalar keys %where, '>=', scalar keys %S, scalar(keys %where) . ' distinct secrets looked for');

my $alt = join '|', map { quotemeta } sort { length $b <=> length $a || $a cmp $b } keys %where;
my $re = qr/($alt)/;
my ($bytes, $n_outputs, @hits) = (0, 0);
for my $s (@scripts) {
    for my $o (outputs_of("$ROOT/$s")) {
        my ($name, $text, $inputs) = @$o;
        $n_outputs++;
        $bytes += length $text;
        while ($text =~ /$re/g) {
            my ($secret, $at) = ($1, $-[0]);
            next if grep { index($_, $secret) >= 0 } @{ $inputs || [] };
            my $ls = rindex($text, "\n", $at) + 1;
            my $le = index($text, "\n", $at);
            $le = length $text if $le < 0;
            my $line = substr($text, $ls, $le - $ls);
            $line =~ s/\Q$_\E/<SECRET>/g for grep { index($line, $_) >= 0 } keys %where;
            $line = substr($line, 0, 300) . '...' if length $line > 300;
            $line =~ s/([^\x20-\x7e])/sprintf '\\x%02X', ord $1/ge;
            push @hits, "$s/$name: the secret of $where{$secret}: $line";
            last if @hits > 200;
        }
    }
}
diag(sprintf 'looked through %d outputs of %d test files, %.1f MB', $n_outputs, scalar @scripts, $bytes / 1e6);
ok(!@hits, 'no configured secret in any log line, response, header, event or metric of the gateway')
    or diag(join "\n", 'secrets found (each shown replaced by <SECRET>):', @hits);

done_testing();
