# nginx -t on bad llm_gateway_store / llm_gateway_replica / llm_gateway_instance
# directives: each fails with one clear [emerg] sentence naming file:line,
# and the store password never shows in the output.
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use GwRedis;
use Test::More;

Gw::need_module();

my $PW = 'S3cr3t-PW-45xyz';

# [name, http-level directive line(s), expected message (regexp, before " in FILE:LINE")]
my @cases = (
    ['bad scheme', "llm_gateway_store http://:$PW\@127.0.0.1:6379;",
     qr/llm_gateway_store: the store URL must begin with redis:\/\/ or rediss:\/\//],
    ['no scheme', "llm_gateway_store 127.0.0.1:6379;",
     qr/llm_gateway_store: the store URL must begin with redis:\/\/ or rediss:\/\//],
    ['port out of range', "llm_gateway_store redis://:$PW\@127.0.0.1:99999;",
     qr/llm_gateway_store: the store URL has an invalid port: it must be a number from 1 to 65535/],
    ['port not a number', "llm_gateway_store redis://:$PW\@127.0.0.1:63x9;",
     qr/llm_gateway_store: the store URL has an invalid port: it must be a number from 1 to 65535/],
    ['port 0', "llm_gateway_store redis://127.0.0.1:0;",
     qr/llm_gateway_store: the store URL has an invalid port: it must be a number from 1 to 65535/],
    ['bad db in the path', "llm_gateway_store redis://:$PW\@127.0.0.1:6379/abc;",
     qr/llm_gateway_store: the store URL path must be the database number: the database must be a number from 0 to 2147483647/],
    ['negative db', "llm_gateway_store redis://:$PW\@127.0.0.1:6379/-1;",
     qr/llm_gateway_store: the store URL path must be the database number: the database must be a number from 0 to 2147483647/],
    ['db too large', "llm_gateway_store redis://127.0.0.1:6379/2147483648;",
     qr/llm_gateway_store: the store URL path must be the database number: the database must be a number from 0 to 2147483647/],
    ['bad ?db=', "llm_gateway_store redis://:$PW\@127.0.0.1:6379?db=x;",
     qr/llm_gateway_store: invalid db parameter in the store URL: the database must be a number from 0 to 2147483647/],
    ['db twice', "llm_gateway_store redis://127.0.0.1:6379/1?db=2;",
     qr/llm_gateway_store: the store URL gives the database twice \(in the path and as \?db=\)/],
    ['unknown URL parameter', "llm_gateway_store redis://:$PW\@127.0.0.1:6379?foo=1;",
     qr/llm_gateway_store: the store URL has an unknown parameter \(known: db, tls_ca, tls_cert, tls_key, tls_sni, tls_verify\)/],
    ['tls_* with redis://', "llm_gateway_store redis://:$PW\@127.0.0.1:6379?tls_ca=/x;",
     qr/llm_gateway_store: the store URL has tls_\* parameters but the redis:\/\/ scheme: use rediss:\/\/ for TLS/],
    ['unreadable tls_ca', "llm_gateway_store rediss://:$PW\@127.0.0.1:6379?tls_ca=/nonexistent/llmgw45/ca.pem;",
     qr/llm_gateway_store: cannot load the CA file "\/nonexistent\/llmgw45\/ca\.pem"/],
    ['tls_cert without tls_key', "llm_gateway_store rediss://127.0.0.1:6379?tls_cert=/nonexistent/c.pem;",
     qr/llm_gateway_store: the store URL parameters tls_cert and tls_key go together/],
    ['unreadable client certificate',
     "llm_gateway_store rediss://:$PW\@127.0.0.1:6379?tls_cert=/nonexistent/llmgw45/c.pem&tls_key=/nonexistent/llmgw45/k.pem;",
     qr/llm_gateway_store: cannot load the client certificate "\/nonexistent\/llmgw45\/c\.pem"/],
    ['password=file: missing', "llm_gateway_store redis://127.0.0.1:6379 password=file:/nonexistent/llmgw45/pw;",
     qr/llm_gateway_store: secret file "\/nonexistent\/llmgw45\/pw" cannot be read: No such file or directory/],
    ['password=env: unset', "llm_gateway_store redis://127.0.0.1:6379 password=env:LLMGW45_NO_SUCH_VAR;",
     qr/llm_gateway_store: environment variable "LLMGW45_NO_SUCH_VAR" is not set/],
    ['bad fail_open', "llm_gateway_store redis://:$PW\@127.0.0.1:6379 fail_open=maybe;",
     qr/invalid parameter "fail_open" of llm_gateway_store/],
    ['unknown parameter', "llm_gateway_store redis://:$PW\@127.0.0.1:6379 pasword=$PW;",
     qr/invalid parameter "pasword" of llm_gateway_store/],
    ['timeout=0', "llm_gateway_store redis://:$PW\@127.0.0.1:6379 timeout=0;",
     qr/llm_gateway_store: invalid timeout "0"/],
    ['timeout not a time', "llm_gateway_store redis://:$PW\@127.0.0.1:6379 timeout=soon;",
     qr/llm_gateway_store: invalid timeout "soon"/],
    ['unresolvable host', "llm_gateway_store redis://:$PW\@no-such-host.invalid:6379;",
     qr/llm_gateway_store: cannot resolve "no-such-host\.invalid:6379": host not found/],
    ['no host', "llm_gateway_store redis://:$PW\@:6379;",
     qr/llm_gateway_store: the store URL has no host/],
    ['duplicate store', "llm_gateway_store redis://127.0.0.1:6379;\nllm_gateway_store redis://:$PW\@127.0.0.1:6380;",
     qr/"llm_gateway_store" directive is duplicate/, 2],
    ['duplicate replica', "llm_gateway_replica a;\nllm_gateway_replica b;",
     qr/"llm_gateway_replica" directive is duplicate/, 2],
    ['duplicate instance', "llm_gateway_instance a;\nllm_gateway_instance b;",
     qr/"llm_gateway_instance" directive is duplicate/, 2],
    ['store in a server block', "llm_gateway_store redis://:$PW\@127.0.0.1:6379;", qr/"llm_gateway_store" directive is not allowed here/,
     1, 'server'],
);

for my $c (@cases) {
    my ($name, $directive, $re, $which, $where) = @$c;
    $which //= 1;
    my %o = (vars => { MOCK => 1 });
    my $conf = ($where // '') eq 'server' ? GwMeter::conf(server => "    $directive") : GwMeter::conf(http => $directive);
    my ($exit, $out, $file, $first) = Gw::nginx_t($conf, %o);
    # The line of the ($which)th line of $directive inside nginx.conf.
    my @lines = split /\n/, $conf;
    my @dl = split /\n/, $directive;
    my $want_line = $dl[$which - 1];
    my ($idx) = grep { $lines[$_] =~ /^\s*\Q$want_line\E\s*$/ } 0 .. $#lines;
    my $line = $first + ($idx // -9999);
    subtest $name => sub {
        isnt($exit, 0, 'nginx -t fails');
        my @emerg = grep { /\[emerg\]/ } split /\n/, $out;
        like($emerg[-1] // '', qr/\[emerg\] \d+#\d+: $re in \Q$file\E:$line$/, "message and $file:$line")
            or diag($out);
        unlike($out, qr/\Q$PW\E/, 'the password is not in the output');
    };
}

subtest 'good store directives pass nginx -t' => sub {
    my $dir = File::Temp::tempdir('llmgw45-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    open my $fh, '>', "$dir/pw" or die $!;
    print {$fh} "$PW\n";
    close $fh;
    my $pki = GwRedis::make_pki($dir);
    for my $d ("llm_gateway_store redis://127.0.0.1:6379;",
               "llm_gateway_store rediss://127.0.0.1:6380?tls_ca=$pki->{ca}&tls_cert=$pki->{client_cert}&tls_key=$pki->{client_key};",
               "llm_gateway_store redis://:$PW\@127.0.0.1/15 fail_open=off timeout=500ms;",
               "llm_gateway_store redis://user:$PW\@localhost:6380?db=2;",
               "llm_gateway_store redis://[::1]:6379 password=file:$dir/pw fail_open=on;",
               "llm_gateway_store redis://127.0.0.1 password=env:LLMGW45_PW;\nllm_gateway_replica r1;\nllm_gateway_instance i1;",
               "llm_gateway_store rediss://127.0.0.1:6380?tls_verify=off&tls_sni=cache.internal;") {
        my ($exit, $out) = Gw::nginx_t(GwMeter::conf(http => $d), vars => { MOCK => 1 }, env => { LLMGW45_PW => $PW });
        (my $name = $d) =~ s/\n/ /g;
        is($exit, 0, "nginx -t passes: $name") or diag($out);
        unlike($out, qr/\Q$PW\E/, 'the password is not in the output');
    }
};

done_testing;
