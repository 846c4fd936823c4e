#!/usr/bin/perl
# Hostile callers.
#
# 1. Log forging: a model name, a path or a user name holding quotes, CR/LF,
#    control bytes or bytes over 0x7E is escaped (\xHH) in every log line the
#    gateway writes, so it can neither start a line of its own nor close the
#    quotes around itself. One row per hostile input: the status and the exact
#    llm_gateway lines the request leaves in error.log.
# 2. Requests nginx refuses before the gateway runs (a repeated header, a bad
#    Content-Length, an unknown Transfer-Encoding, %00, an oversized header or
#    URI) get the gateway's JSON envelope from conf/gateway-errors.conf. They
#    are sent as raw bytes over a socket.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use Cwd ();
use File::Temp ();
use IO::Socket::INET;
use Test::More;

Gw::need_module();

my $ERRCONF = Cwd::abs_path('conf/gateway-errors.conf');
ok(-r $ERRCONF, 'conf/gateway-errors.conf exists');

# A users-file user whose name holds CR/LF (the file is JSON: any string is a name).
my $dir = File::Temp::tempdir('llmgw-51-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $dir;
my $users = "$dir/users.json";
open my $fh, '>', $users or die $!;
print {$fh} Gw::json_encode({ users => [ { name => "mal\r\nlory", key => 'sk-mallory-51',
                                           limits => { requestsPerMinute => 1 } } ] });
close $fh;
chmod 0644, $users;

my $mock = Gw::Mock->start();
my $ng = Gw::Nginx->start(workers => 2, vars => { MOCK => $mock->port, ERRCONF => $ERRCONF }, conf => GwConf::gateway(
    http => "llm_gateway_user alice key=sk-alice-51;\n"
          . "llm_gateway_user bob key=sk-bob-51 cost_per_day=1;\n"
          . "llm_gateway_users_file $users;\n"
          . "llm_gateway_max_body_size 1k;\n",
    server => "include %%ERRCONF%%;",
) . "server {\n    listen 127.0.0.1:%%PORT2%%;\n    location /v1/ { llm_gateway; }\n}\n");

# ---------------------------------------------------------------- log forging

# The llm_gateway messages of the error-log lines after byte $from, without
# the context nginx appends (" while sending to client", ", client: ...").
sub gw_messages {
    my ($from) = @_;
    return map { /llm_gateway: (.*?)(?: while [a-z ]+)?(?:, client: .*)?$/ ? $1 : () }
           GwMeter::log_lines($ng, qr/\] \d+#\d+: \*\d+ llm_gateway: /, $from);
}

my $FORGED = "gpt-4o-mini\" prompt_tokens=0\r\n2026/01/01 00:00:00 [info] 1#1: *1 llm_gateway: usage user=\"bob\" "
           . "model=\"mock/gpt-4o\" prompt_tokens=900000 completion_tokens=900000 cost_micro_usd=9000000";

my @log_rows = (
    { name => 'a model name with CR/LF and a forged usage line',
      key => 'sk-alice-51', model => $FORGED, status => 200,
      lines => [ 'authenticated user="alice" route="chat/completions"',
                 'usage user="alice" model="mock/gpt-4o-mini\x22 prompt_tokens=0\x0D\x0A2026/01/01 00:00:00 [info] '
                 . '1#1: *1 llm_gateway: usage user=\x22bob\x22 model=\x22mock/gpt-4o\x22 prompt_tokens=900000 '
                 . 'completion_tokens=900000 cost_micro_usd=9000000" prompt_tokens=11 completion_tokens=7 cost_micro_usd=0' ] },
    { name => 'a quote and a backslash in a model name',
      key => 'sk-alice-51', model => "gpt\"4o\\", status => 200,
      lines => [ 'authenticated user="alice" route="chat/completions"',
                 'usage user="alice" model="mock/gpt\x224o\x5C" prompt_tokens=11 completion_tokens=7 cost_micro_usd=0' ] },
    { name => 'NUL, DEL, ESC and bytes over 0x7E in a model name',
      key => 'sk-alice-51', model => "m\x00\x7f\x1b[2J\x{e9}", status => 200,
      lines => [ 'authenticated user="alice" route="chat/completions"',
                 'usage user="alice" model="mock/m\x00\x7F\x1B[2J\xC3\xA9" prompt_tokens=11 completion_tokens=7 cost_micro_usd=0' ] },
    { name => 'an over-long model name is cut with a marker',
      key => 'sk-alice-51', model => ('x' x 300), status => 200,
      lines => [ 'authenticated user="alice" route="chat/completions"',
                 'usage user="alice" model="mock/' . ('x' x 251) . '...[cut]" prompt_tokens=11 completion_tokens=7 cost_micro_usd=0' ] },
    { name => 'an unpriced model name with LF under a cost budget (402)',
      key => 'sk-bob-51', model => "evil\nmodel", status => 402,
      lines => [ 'authenticated user="bob" route="chat/completions"',
                 'model "mock/evil\x0Amodel" has no price and a cost budget applies to user "bob"' ] },
    { name => 'a path with %0d%0a in an authentication failure (no key)',
      method => 'GET', path => '/v1/x%0d%0a2026/01/01%2000:00:00%20[warn]%201%231:%20forged/models', status => 401,
      lines => [ 'authentication failed (no key): method=GET path=/v1/x\x0D\x0A2026/01/01 00:00:00 [warn] 1#1: forged/models client=127.0.0.1' ] },
    { name => 'a quote and a byte over 0x7E in a path (unknown key)',
      key => 'sk-nobody-51', path => '/v1/%22%ff/chat/completions', model => 'gpt-4o-mini', status => 401,
      lines => [ 'authentication failed (unknown key): method=POST path=/v1/\x22\xFF/chat/completions client=127.0.0.1' ] },
    { name => 'a users-file user named with CR/LF: admitted',
      key => 'sk-mallory-51', model => 'gpt-4o-mini', status => 200, same_minute => 1,
      lines => [ 'authenticated user="mal\x0D\x0Alory" route="chat/completions"',
                 'usage user="mal\x0D\x0Alory" model="mock/gpt-4o-mini" prompt_tokens=11 completion_tokens=7 cost_micro_usd=6' ] },
    { name => 'a users-file user named with CR/LF: rejected',
      key => 'sk-mallory-51', model => 'gpt-4o-mini', status => 429,
      lines => [ 'authenticated user="mal\x0D\x0Alory" route="chat/completions"',
                 'rejected user="mal\x0D\x0Alory": rate limit exceeded: user "mal\x0D\x0Alory" requestsPerMinute 1' ] },
);

for my $row (@log_rows) {
    subtest $row->{name} => sub {
        GwMeter::wait_second_below(50) if $row->{same_minute};   # the next row must fall in the same minute
        my $from = length $ng->error_log;
        my $method = $row->{method} // 'POST';
        my $r = Gw::http($method, $ng->url($row->{path} // '/v1/chat/completions'),
                         headers => $row->{key} ? GwConf::bearer($row->{key}) : {},
                         $method eq 'POST' ? (body => GwConf::chat_body($row->{model})) : ());
        is($r->{status}, $row->{status}, "status $row->{status}");
        my $want = scalar @{ $row->{lines} };
        Gw::wait_until(sub { gw_messages($from) >= $want }, timeout => 5);
        is_deeply([ gw_messages($from) ], $row->{lines}, 'exactly the expected llm_gateway lines, escaped');
        my @raw = split /\n/, substr($ng->error_log, $from);
        is(scalar(grep { !/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[\w+\] / } @raw), 0, 'no line starts without a timestamp');
    };
}

is(scalar(GwMeter::log_lines($ng, qr/llm_gateway: usage user="bob"/)), 0, 'no usage line for bob was forged');
is(scalar(GwMeter::log_lines($ng, qr/forged/)),
   scalar(GwMeter::log_lines($ng, qr/authentication failed \(no key\): method=GET path=\/v1\/x\\x0D\\x0A/)),
   'the forged text appears only inside the escaped path');

# ------------------------------------------------- nginx's own error pages

# Sends raw bytes, reads one response (headers, then Content-Length bytes);
# bounded by 5 s. nginx may keep the socket open while it discards a body,
# so the read stops at the end of the body, not at EOF.
sub raw_request {
    my ($port, $bytes) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 5)
        or return { error => "connect: $!" };
    $s->autoflush(1);
    print {$s} $bytes;
    my $buf = '';
    my $deadline = time + 5;
    while (time < $deadline) {
        my $rin = '';
        vec($rin, fileno($s), 1) = 1;
        last unless select(my $rout = $rin, undef, undef, 0.5) >= 0;
        next unless vec($rout, fileno($s), 1);
        my $n = sysread($s, my $chunk, 65536);
        last unless $n;
        $buf .= $chunk;
        if ($buf =~ /\r\n\r\n/) {
            my ($head, $body) = split /\r\n\r\n/, $buf, 2;
            my ($len) = $head =~ /^Content-Length: (\d+)\r?$/mi;
            last if defined $len && length $body >= $len;
        }
    }
    close $s;
    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    my ($status) = ($head // '') =~ m{^HTTP/1\.1 (\d{3}) };
    my ($ct) = ($head // '') =~ /^Content-Type: ([^\r\n]*)/mi;
    return { status => $status // 0, content_type => $ct // '', body => $body // '' };
}

sub envelope {
    my ($message, $code) = @_;
    return qq({"error":{"message":"$message","type":"invalid_request_error","code":"$code","param":null}});
}
my $BAD = envelope('malformed request', 'bad_request');

my @page_rows = (
    { name => 'a repeated Authorization header', status => 400, body => $BAD,
      req => "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-alice-51\r\n"
           . "Authorization: Bearer sk-dup-second-51\r\n\r\n" },
    { name => 'Content-Length: -1', status => 400, body => $BAD,
      req => "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n" },
    { name => 'a repeated Content-Length header', status => 400, body => $BAD,
      req => "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}" },
    { name => 'Content-Length with Transfer-Encoding: chunked', status => 400, body => $BAD,
      req => "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
           . "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" },
    { name => 'Transfer-Encoding: gzip', status => 501,
      body => envelope('this Transfer-Encoding is not supported', 'not_implemented'),
      req => "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" },
    { name => 'a 64 KiB header', status => 400, body => envelope('request header is too large', 'bad_request'),
      req => "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " . ('a' x 65536) . "\r\n\r\n" },
    { name => '%00 in the URI', status => 400, body => $BAD,
      req => "GET /v1/a%00b/models HTTP/1.1\r\nHost: x\r\n\r\n" },
    { name => 'a URI longer than large_client_header_buffers', status => 414,
      body => envelope('request URI is too long', 'bad_request'),
      req => "GET /v1/" . ('u' x 9000) . "/models HTTP/1.1\r\nHost: x\r\n\r\n" },
    { name => 'a Content-Length over llm_gateway_max_body_size (same envelope as the gateway\'s own)', status => 413,
      body => envelope('request body is larger than the gateway accepts', 'request_too_large'),
      req => "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-alice-51\r\n"
           . "Content-Type: application/json\r\nContent-Length: 2000\r\n\r\n" },
);

for my $row (@page_rows) {
    subtest "nginx refuses $row->{name}: JSON envelope" => sub {
        my $r = raw_request($ng->port, $row->{req});
        is($r->{status}, $row->{status}, "status $row->{status}");
        is($r->{content_type}, 'application/json', 'Content-Type: application/json');
        is($r->{body}, $row->{body}, 'exact body');
    };
}

subtest 'without the recipe nginx answers with its HTML page' => sub {
    my $r = raw_request($ng->port(2), $page_rows[0]{req});
    is($r->{status}, 400, 'status 400');
    is($r->{content_type}, 'text/html', 'HTML');
    like($r->{body}, qr/<title>400 Bad Request<\/title>/, 'nginx\'s page');
};

# docs/errors.md: nginx core logs a malformed header line with its value at
# info, including an Authorization header. Production error_log: notice or higher.
is(scalar(GwMeter::log_lines($ng, qr/\[info\] .*client sent duplicate header line: "Authorization: Bearer sk-dup-second-51"/)),
   2, 'nginx itself logs the repeated Authorization value at info, with and without the recipe');

$ng->stop;
$mock->stop;
done_testing;
