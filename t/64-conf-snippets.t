#!/usr/bin/perl
# The operator snippets conf/openai-provider.conf, conf/anthropic-provider.conf
# and conf/gemini-provider.conf as shipped, with only what a test must change
# (each change must find its text, so a snippet cannot drift silently): the
# provider host's address, the listen port, the CA bundle and the include
# path. A TLS server in the same nginx stands in for the provider's host (a
# certificate for the real host names from a test CA) and passes what it saw
# (SNI, Host, its connection number) to the mock provider.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use Test::More;
use File::Temp ();
use Cwd ();

Gw::need_module();

my $REPO = Cwd::abs_path('.');
my $ADMIN = 'sk-gw-admin-snippets';
my %ENVKEYS = (OPENAI_API_KEY => 'sk-proj-openai-test-key', ANTHROPIC_API_KEY => 'sk-ant-test-key',
               GEMINI_API_KEY => 'AIza-gemini-test-key', GATEWAY_ADMIN_KEY => $ADMIN);
my $dir = File::Temp::tempdir('llmgw-snip-XXXXXX', TMPDIR => 1, CLEANUP => 1);

# A test CA, a server certificate for the three API host names, and an
# unrelated CA.
sub ossl {
    my $r = Gw::run(['openssl', @_], timeout => 30, cwd => $dir);
    die "openssl @_: $r->{stdout}$r->{stderr}" if $r->{exit} != 0;
}
my @ec = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes');
for my $ca ('ca', 'ca2') {
    ossl('req', '-x509', @ec, '-keyout', "$ca.key", '-out', "$ca.pem", '-days', '2', '-subj', "/CN=llmgw snippets $ca",
         '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
}
open my $ext, '>', "$dir/srv.ext" or die;
print $ext "subjectAltName=DNS:api.openai.com,DNS:api.anthropic.com,DNS:generativelanguage.googleapis.com\n"
         . "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n";
close $ext;
ossl('req', @ec, '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=api.openai.com');
ossl('x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', 7, '-out', 'srv.pem',
     '-days', '2', '-extfile', 'srv.ext');
chmod 0644, glob("$dir/*");

my $mock = Gw::Mock->start();

# The snippet with the test's changes, plus the TLS stand-in.
sub conf_for {
    my ($file, $host, $ca) = @_;
    open my $fh, '<', "$REPO/conf/$file" or die "$file: $!";
    my $text = do { local $/; <$fh> };
    my @subst = (
        ["server $host:443;", 'server 127.0.0.1:%%PORT2%%;'],
        ['listen 127.0.0.1:8080;', 'listen 127.0.0.1:%%PORT%%;'],
        ['proxy_ssl_trusted_certificate /etc/ssl/certs/ca-certificates.crt;', "proxy_ssl_trusted_certificate $dir/$ca;"],
        ['include gateway-errors.conf;', "include $REPO/conf/gateway-errors.conf;"],
    );
    for my $s (@subst) {
        my $n = () = $text =~ /\Q$s->[0]\E/g;
        die "$file: '$s->[0]' found $n times, want 1\n" unless $n == 1;
        $text =~ s/\Q$s->[0]\E/$s->[1]/;
    }
    return $text . <<"TLS";
server {
    listen 127.0.0.1:%%PORT2%% ssl;
    ssl_certificate $dir/srv.pem;
    ssl_certificate_key $dir/srv.key;
    location / {
        proxy_pass http://127.0.0.1:%%MOCK%%;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header X-Test-SNI \$ssl_server_name;
        proxy_set_header X-Test-Host \$host;
        proxy_set_header X-Test-Conn \$connection;
    }
}
TLS
}

sub start_for {
    my ($file, $host, $ca) = @_;
    return Gw::Nginx->start(workers => 1, env => \%ENVKEYS,
                            vars => { MOCK => $mock->port }, conf => conf_for($file, $host, $ca));
}

sub chat {
    my ($ng, $model) = @_;
    return Gw::http(POST => $ng->url('/v1/chat/completions'), headers => { Authorization => "Bearer $ADMIN" },
                    body => { model => $model, messages => [{ role => 'user', content => 'Say hello' }] }, timeout => 15);
}

my @CASES = (
    ['openai-provider.conf',    'api.openai.com',                    'gpt-4o-mini',      '/v1/chat/completions',
     sub { $_[0]{authorization} eq "Bearer $ENVKEYS{OPENAI_API_KEY}" }],
    ['anthropic-provider.conf', 'api.anthropic.com',                 'claude-sonnet-4-5', '/v1/messages',
     sub { $_[0]{'x-api-key'} eq $ENVKEYS{ANTHROPIC_API_KEY} && $_[0]{'anthropic-version'} eq '2023-06-01' }],
    ['gemini-provider.conf',    'generativelanguage.googleapis.com', 'gemini-2.5-flash', '/v1beta/models/gemini-2.5-flash:generateContent',
     sub { $_[0]{'x-goog-api-key'} eq $ENVKEYS{GEMINI_API_KEY} }],
);

for my $c (@CASES) {
    my ($file, $host, $model, $path, $auth_ok) = @$c;
    subtest "$file as shipped" => sub {
        $mock->reset;
        my $ng = start_for($file, $host, 'ca.pem');
        my $r1 = chat($ng, $model);
        is($r1->{status}, 200, 'a chat completion through TLS to the provider') or diag($r1->{body});
        is($r1->{json}{choices}[0]{message}{content}, 'Hello world', 'answered (translated for non-OpenAI types)');
        my $r2 = chat($ng, $model);
        is($r2->{status}, 200, 'a second one');
        my $q = $mock->requests;
        is_deeply([map { $_->{path} } @$q], [$path, $path], "the provider's path");
        is($q->[0]{headers}{'x-test-sni'}, $host, 'SNI is the API host name');
        is($q->[0]{headers}{'x-test-host'}, $host, 'Host is the API host name');
        ok($auth_ok->($q->[0]{headers}), "the provider key in the type's header");
        ok(!(grep { join(' ', values %{ $_->{headers} }) =~ /\Q$ADMIN\E/ } @$q), 'never the caller key');
        is($q->[1]{headers}{'x-test-conn'}, $q->[0]{headers}{'x-test-conn'}, 'the TLS connection was kept alive');
        if ($file =~ /anthropic/) {
            my $m = Gw::http(POST => $ng->url('/v1/messages'), headers => { 'x-api-key' => $ADMIN },
                             body => { model => 'sonnet', max_tokens => 20, messages => [{ role => 'user', content => 'hi' }] });
            is($m->{status}, 200, '/v1/messages (native) through the snippet');
            is($m->{json}{content}[0]{text}, 'Hello world', 'answered');
        }
        $ng->stop;
    };
    subtest "$file verifies the certificate" => sub {
        $mock->reset;
        my $ng = start_for($file, $host, 'ca2.pem');
        $ng->allow_log(qr/upstream SSL certificate verify error/, qr/SSL_do_handshake\(\) failed/);
        my $r = chat($ng, $model);
        is($r->{status}, 502, 'an untrusted certificate: 502');
        is($r->{json}{error}{code}, 'bad_gateway', 'in the envelope');
        is(scalar @{ $mock->requests }, 0, 'nothing reached the provider');
        $ng->stop;
    };
}

# make run's example (conf/example.conf, rendered as scripts/run-example
# renders it): nginx -t passes without a single warning, so the first thing
# a newcomer sees is clean.
subtest 'conf/example.conf: nginx -t without warnings' => sub {
    my $ex = File::Temp::tempdir('llmgw-example-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    mkdir "$ex/$_" for qw(conf logs tmp);
    my $text = Gw::_slurp("$REPO/conf/example.conf");
    my %sub = (MODULE => Gw::module_path(), PORT => Gw::free_port(), DEMO_PORT => Gw::free_port(),
               TOOLS_PORT => Gw::free_port());
    $text =~ s/%%(\w+)%%/$sub{$1} \/\/ die "unknown placeholder $1"/ge;
    Gw::_spew("$ex/conf/nginx.conf", $text);
    Gw::_spew("$ex/conf/$_", Gw::_slurp("$REPO/conf/$_")) for qw(gateway-errors.conf gateway-log.conf);
    my $r = Gw::run([Gw::nginx_bin(), '-t', '-p', "$ex/", '-e', 'logs/error.log', '-c', "$ex/conf/nginx.conf"],
                    timeout => 30);
    is($r->{exit}, 0, 'nginx -t passes') or diag("$r->{stdout}$r->{stderr}");
    my @warn = grep { /\[(warn|error|crit|alert|emerg)\]/ } split /\n/, "$r->{stdout}$r->{stderr}";
    is_deeply(\@warn, [], 'and warns about nothing');
};

done_testing();
