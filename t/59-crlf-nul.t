#!/usr/bin/perl
# CR, LF or NUL in a value that reaches a header or a log line is refused or
# escaped. One row per value and the way it could get there (t/51-bad-caller.t
# holds the rows of the gateway's own log lines about a request):
#
# 1. The module's variables in response headers (add_header ... always) and
#    in an access log written with escape=none: a model name a caller chose,
#    a users-file user and group name. Control bytes and backslashes are
#    written \xHH; no header or log line is split.
# 2. A Retry-After (and any header) from the provider: a bare CR or a NUL
#    inside a header line is refused by nginx's reading of the answer (502);
#    the caller never sees a header the provider smuggled in.
# 3. A provider key (sent in a request header) holding CR, LF, NUL or another
#    control byte, given literally, by env: or by file:, is refused by
#    nginx -t, naming the reference, never the value.
# 4. llm_gateway_public_url from a variable holding CR/LF: the agent card
#    names the connection's own scheme and Host instead, and the warning
#    about it is one escaped line; literally in nginx.conf, nginx -t refuses.
# 5. A users-file path holding a LF: the lines naming it are escaped.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use File::Temp ();
use IO::Socket::INET;
use Test::More;

Gw::need_module();

my $dir = File::Temp::tempdir('llmgw-59-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $dir;
sub spew {
    my ($path, $text) = @_;
    open my $fh, '>:raw', $path or die "$path: $!";
    print {$fh} $text;
    close $fh;
    chmod 0644, $path;
}

# The head of a response as bytes, and its headers split only at CRLF.
sub raw_exchange {
    my ($port, $req) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 5) or return {};
    print {$s} $req;
    my $buf = '';
    my $deadline = time + 10;
    while (time < $deadline) {
        my $n = sysread($s, my $c, 65536);
        last unless $n;
        $buf .= $c;
    }
    close $s;
    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    my ($status_line, @lines) = split /\r\n/, $head // '';
    my %h;
    for my $l (@lines) {
        my ($k, $v) = $l =~ /^([^:]*):[ \t]*(.*)$/s or do { $h{'(no colon)'} = $l; next };
        push @{ $h{ lc $k } }, $v;
    }
    my ($status) = ($status_line // '') =~ m{^HTTP/1\.1 (\d{3})};
    return { status => $status // 0, head => $head // '', headers => \%h, body => $body // '' };
}

sub chat_req {
    my ($port, $key, $model) = @_;
    my $body = Gw::json_encode(GwConf::chat_body($model));
    return raw_exchange($port, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                             . "Authorization: Bearer $key\r\nContent-Type: application/json\r\n"
                             . 'Content-Length: ' . length($body) . "\r\n\r\n$body");
}

# No header name the test forged, and no CR, LF or NUL inside any header line.
sub head_clean {
    my ($r, $what) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my @forged = grep { /injected/ } keys %{ $r->{headers} };
    is_deeply(\@forged, [], "$what: no forged header");
    my @bad = grep { /[\r\n\0]/ } split /\r\n/, $r->{head};
    is_deeply(\@bad, [], "$what: no CR, LF or NUL inside a header line");
}

# Every line of a log text starts with nginx's timestamp.
sub lines_whole {
    my ($text, $what) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my @bad = grep { !/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[\w+\] / } split /\n/, $text;
    is_deeply(\@bad, [], "$what: every line starts with a timestamp");
}

# ------------------------------------------------------------------ 1

my $users = "$dir/users.json";
spew($users, Gw::json_encode({
    groups => [{ name => "grp\nX-Injected-Group: 1" }],
    users  => [{ name => "mal\r\nX-Injected-User: 1", key => 'sk-59-mallory-key', group => "grp\nX-Injected-Group: 1" }] }));

my $mock = Gw::Mock->start();
my $ng = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port }, conf => GwConf::gateway(
    http => "llm_gateway_user alice key=sk-59-alice-key;\n"
          . "llm_gateway_users_file $users;\n"
          . "log_format gwraw escape=none '\$llm_gateway_user|\$llm_gateway_group|\$llm_gateway_model|\$llm_gateway_route';\n",
    server => "access_log logs/raw.log gwraw;",
    api_extra => "add_header X-LLM-Model \$llm_gateway_model always;\n"
               . "        add_header X-LLM-User \$llm_gateway_user always;\n"
               . "        add_header X-LLM-Group \$llm_gateway_group always;\n"
               . "        add_header X-LLM-Provider \$llm_gateway_provider always;",
));

my @var_rows = (
    { name => 'a model name with CR/LF and a forged header', key => 'sk-59-alice-key',
      model => "gpt-4o-mini\r\nX-Injected: 1", want => { 'x-llm-model' => 'mock/gpt-4o-mini\x0D\x0AX-Injected: 1',
                                                          'x-llm-user' => 'alice', 'x-llm-group' => 'default' },
      log => 'alice|default|mock/gpt-4o-mini\x0D\x0AX-Injected: 1|chat/completions' },
    { name => 'NUL, DEL, ESC, a TAB and a backslash in a model name', key => 'sk-59-alice-key',
      model => "a\x00b\x7fc\x1b[2Jd\te\\f", want => { 'x-llm-model' => 'mock/a\x00b\x7Fc\x1B[2Jd\x09e\x5Cf' },
      log => 'alice|default|mock/a\x00b\x7Fc\x1B[2Jd\x09e\x5Cf|chat/completions' },
    { name => 'a users-file user and group named with CR/LF', key => 'sk-59-mallory-key', model => 'gpt-4o-mini',
      want => { 'x-llm-user' => 'mal\x0D\x0AX-Injected-User: 1', 'x-llm-group' => 'grp\x0AX-Injected-Group: 1',
                'x-llm-model' => 'mock/gpt-4o-mini', 'x-llm-provider' => 'mock' },
      log => 'mal\x0D\x0AX-Injected-User: 1|grp\x0AX-Injected-Group: 1|mock/gpt-4o-mini|chat/completions' },
);
for my $row (@var_rows) {
    subtest "variables: $row->{name}" => sub {
        my $from = length Gw::_slurp($ng->prefix . '/logs/raw.log');
        my $r = chat_req($ng->port, $row->{key}, $row->{model});
        is($r->{status}, 200, 'status 200');
        head_clean($r, 'the response');
        for my $h (sort keys %{ $row->{want} }) {
            is_deeply($r->{headers}{$h}, [$row->{want}{$h}], "$h escaped");
        }
        my $log;
        Gw::wait_until(sub { $log = substr(Gw::_slurp($ng->prefix . '/logs/raw.log'), $from); $log =~ /\n/ });
        is($log, "$row->{log}\n", 'one escape=none access log line, escaped');
    };
}

# ------------------------------------------------------------------ 2

my $json429 = '{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limited"}}';
my $head = sub { my ($status, @h) = @_; join('', "HTTP/1.1 $status\r\n", map({ "$_\r\n" } @h, 'Connection: close'), "\r\n") };
my @up_rows = (
    ['a plain Retry-After: relayed as it is (the control row)',
     $head->('429 Too Many Requests', 'Content-Type: application/json', 'Retry-After: 7',
             'Content-Length: ' . length $json429) . $json429, 429, '7'],
    ['a bare CR inside Retry-After: refused',
     $head->('429 Too Many Requests', 'Content-Type: application/json', "Retry-After: 7\rX-Injected: 1",
             'Content-Length: ' . length $json429) . $json429, 502, undef],
    ['a NUL inside Retry-After: refused',
     $head->('429 Too Many Requests', 'Content-Type: application/json', "Retry-After: 7\0X-Injected: 1",
             'Content-Length: ' . length $json429) . $json429, 502, undef],
    ['a NUL inside another header: refused',
     $head->('200 OK', 'Content-Type: application/json', "X-Request-Id: req\0X-Injected: 1",
             'Content-Length: ' . length $json429) . $json429, 502, undef],
);
for my $row (@up_rows) {
    my ($name, $wire, $status, $ra) = @$row;
    subtest "from the provider: $name" => sub {
        $mock->reset;
        $mock->script({ wire => $wire });
        $ng->allow_log(qr/upstream sent invalid header/);
        my $r = chat_req($ng->port, 'sk-59-alice-key', 'gpt-4o-mini');
        is($r->{status}, $status, "status $status");
        head_clean($r, 'the response');
        is_deeply($r->{headers}{'retry-after'}, defined $ra ? [$ra] : undef, 'Retry-After: ' . ($ra // 'none'));
    };
}
lines_whole($ng->error_log, 'error.log after rows 1 and 2');
$ng->stop;

# ------------------------------------------------------------------ 3

spew("$dir/crlf.key", "sk-59-file-key\r\nX-Injected: 1\n");
spew("$dir/nul.key", "sk-59-nul\0key\n");
spew("$dir/ok.key", "sk-59-file-key-ok\r\n");
my @key_rows = (
    ['a literal key holding CR/LF (nginx.conf\'s \\r\\n escapes)', 'sk-59-literal\r\nX-Injected:1', {}, 'literal'],
    ['an env: key holding a LF', 'env:LLMGW59_KEY', { LLMGW59_KEY => "sk-59-env\nX-Injected: 1" }, 'env:LLMGW59_KEY'],
    ['a file: key holding CR/LF inside', "file:$dir/crlf.key", {}, "file:$dir/crlf.key"],
    ['a file: key holding a NUL', "file:$dir/nul.key", {}, "file:$dir/nul.key"],
    ['an env: key holding a TAB', 'env:LLMGW59_KEY', { LLMGW59_KEY => "sk-59\tenv" }, 'env:LLMGW59_KEY'],
    ['a file: key whose only CRLF ends it: accepted (the control row)', "file:$dir/ok.key", {}, undef],
);
for my $row (@key_rows) {
    my ($name, $ref, $env, $named) = @$row;
    subtest "provider key: $name" => sub {
        my $conf = "llm_gateway_provider p type=openai location=/_p key=$ref default;\n";
        my ($exit, $out, $file, $first) = Gw::nginx_t($conf, env => $env);
        if (!defined $named) {
            is($exit, 0, 'nginx -t passes') or diag($out);
            return;
        }
        isnt($exit, 0, 'nginx -t fails');
        like($out, qr/\[emerg\] (?:\d+#\d+: )?llm_gateway_provider "p": its key \(\Q$named\E\) holds a control byte \(CR, LF, NUL, another below 0x20 or DEL\); a key is sent in a request header and may hold none in \Q$file\E:$first\b/,
             'the sentence names the reference and the line');
        unlike($out, qr/sk-59/, 'never the value');
    };
}

# ------------------------------------------------------------------ 4

subtest 'llm_gateway_public_url from a variable holding CR/LF' => sub {
    $mock->reset;
    my $ng4 = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port }, conf => GwConf::gateway(
        http => "llm_gateway_user alice key=sk-59-alice-key;\nllm_gateway_agent echo location=/_a/echo;\n",
        server => "location /a2a/ { set \$pub \"https://gw.example.com/x\\r\\nX-Injected: 1\"; "
                . "llm_gateway_public_url \$pub; llm_gateway_target_proxy agent; }\n"
                . "    location /_a/echo { internal; proxy_pass http://127.0.0.1:%%MOCK%%/agent; }\n"));
    $mock->script({ status => 200, headers => { 'content-type' => 'application/json' },
                    body => '{"name":"echo","url":"http://10.0.0.59:9999/","version":"1"}' });
    my $from = length $ng4->error_log;
    my $r = Gw::http(GET => $ng4->url('/a2a/echo/.well-known/agent-card.json'), headers => GwConf::bearer('sk-59-alice-key'));
    is($r->{status}, 200, 'the card: 200');
    is(($r->{json} // {})->{url}, $ng4->url('/a2a/echo/'), 'its url: the connection\'s scheme and Host');
    unlike($r->{body}, qr/Injected/, 'nothing of the bad value in the card');
    my $log = substr($ng4->error_log, $from);
    like($log, qr/\[warn\] \d+#\d+: \*\d+ llm_gateway: llm_gateway_public_url "https:\/\/gw\.example\.com\/x\\x0D\\x0AX-Injected: 1": the public URL's path may not hold a query, a fragment, a space or that byte; the agent card names the connection's scheme and Host/,
         'the warning, the value escaped');
    lines_whole($ng4->error_log, 'error.log');
    $ng4->stop;
    my ($exit, $out) = Gw::nginx_t(GwConf::gateway(server => "location /a/ { llm_gateway_public_url \"https://gw.example.com/x\\r\\nX: 1\"; "
                                                           . "llm_gateway_target_proxy agent; }"), vars => { MOCK => 1 });
    isnt($exit, 0, 'literally in nginx.conf: nginx -t fails');
    like($out, qr/llm_gateway_public_url: the public URL's path may not hold a query, a fragment, a space or that byte/,
         'and says why');
};

# ------------------------------------------------------------------ 5

subtest 'a users-file path holding a LF: every line naming it escaped' => sub {
    my $odd = "$dir/odd\nX-Injected: 1";
    mkdir $odd or die "$odd: $!";
    chmod 0755, $odd;
    spew("$odd/users.json", Gw::json_encode({ users => [{ name => 'uf', key => 'sk-59-users-file-key' }] }));
    (my $conf_path = "$odd/users.json") =~ s/\n/\\n/g;
    my $ng5 = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port }, conf => GwConf::gateway(
        http => "llm_gateway_users_file \"$conf_path\" interval=1s;\n"));
    is(Gw::http(POST => $ng5->url('/v1/chat/completions'), headers => GwConf::bearer('sk-59-users-file-key'),
                body => GwConf::chat_body('gpt-4o-mini'))->{status}, 200, 'its user is served');
    my $from = length $ng5->error_log;
    spew("$odd/users.json", Gw::json_encode({ users => [{ name => 'uf', key => 'sk-59-users-file-key-2' }] }));
    my $line = $ng5->wait_log(qr/users file ".*" reloaded/, timeout => 5);
    like($line // '', qr/llm_gateway: users file "\Q$dir\E\/odd\\x0AX-Injected: 1\/users\.json" reloaded: 1 users/,
         'the reload line: the path escaped');
    like(substr($ng5->error_log, $from), qr/users file .* holds 1 key and can be read/, 'and its warning (mode 0644)');
    lines_whole($ng5->error_log . Gw::_slurp($ng5->prefix . '/logs/startup.log'), 'error.log and startup.log');
    $ng5->stop;
};

done_testing();
