#!/usr/bin/perl
# Configuration errors: nginx -t fails with the exact message and the
# file:line of the offending directive; a valid configuration passes; secret
# values never appear in nginx -t output.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use File::Temp ();
use Test::More;

Gw::need_module();

my $tmp = File::Temp::tempdir('llmgw-14conf-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $tmp;
my $secret_file = "$tmp/provider.key";
my $FILE_SECRET = 'sk-file-secret-value-2b7e151628aed2a6';
open my $fh, '>', $secret_file or die "$secret_file: $!";
print {$fh} "$FILE_SECRET\n";
close $fh;
chmod 0644, $secret_file;

my $ENV_SECRET = 'sk-env-secret-value-abf7158809cf4f3c';
my $LIT_SECRET = 'sk-literal-secret-value-762e7160f38b4da5';
my $USER_SECRET = 'sk-user-secret-value-56a1b2c3d4e5f607';
delete $ENV{LLMGW_T14_UNSET};

# 1-based line of $conf holding $marker (the first such line; the nth with $nth).
sub line_of {
    my ($conf, $marker, $nth) = @_;
    $nth //= 1;
    my @lines = split /\n/, $conf;
    for my $i (0 .. $#lines) {
        next if index($lines[$i], $marker) < 0;
        return $i + 1 if --$nth == 0;
    }
    die "marker '$marker' not in conf\n";
}

# A gateway config with one provider ("mock") and more http-level lines.
sub conf_with {
    my ($http, %o) = @_;
    return GwConf::gateway(http => $http, %o);
}

# nginx -t must fail with "[emerg] $msg in FILE:LINE" where LINE is the line
# of $conf holding $marker (nth occurrence). With at => 'inside', the
# file:line is inside $msg itself (cross-checks after the http block).
sub fails_with {
    my ($name, $conf, $marker, $msg, %o) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    subtest $name => sub {
        my ($exit, $out, $file, $first) = Gw::nginx_t($conf, vars => { MOCK => 1 }, env => $o{env});
        isnt($exit, 0, 'nginx -t fails');
        my $line = $first + line_of($conf, $marker, $o{nth}) - 1;
        my $want = $msg =~ s/%%AT%%/$file:$line/r;
        my $re = $o{at_inside}
            ? qr/\[emerg\] (?:\d+#\d+: )?\Q$want\E$/m
            : qr/\[emerg\] (?:\d+#\d+: )?\Q$want\E in \Q$file\E:$line$/m;
        like($out, $re, "message: $want" . ($o{at_inside} ? '' : " in ...:$line"));
        my @emerg = grep { /\[emerg\]/ } split /\n/, $out;
        is(scalar @emerg, 1, 'exactly one [emerg] line') or diag($out);
        like($out, qr/test failed/, 'nginx says the test failed');
        for my $s (@{ $o{secrets} || [] }) {
            ok(index($out, $s) < 0, "secret value not in the output") or diag($out);
        }
    };
}

my $P = 'llm_gateway_provider';

fails_with('alias to an unknown provider',
           conf_with("llm_gateway_alias fast nope/gpt-4o;\n"),
           'llm_gateway_alias fast', 'alias "fast" names unknown provider "nope" in %%AT%%', at_inside => 1);

fails_with('alias to an alias',
           conf_with("llm_gateway_alias a1 mock/gpt-4o;\nllm_gateway_alias a2 a1;\n"),
           'llm_gateway_alias a2',
           'alias "a2" points to another alias "a1"; aliases must name <provider>/<model> in %%AT%%',
           at_inside => 1);

fails_with('alias target without a provider',
           conf_with("llm_gateway_alias a3 gpt-4o;\n"),
           'llm_gateway_alias a3',
           'alias "a3" target "gpt-4o" is not of the form <provider>/<model> in %%AT%%', at_inside => 1);

fails_with('duplicate provider',
           conf_with("$P mock type=openai location=/_llm/other;\n"),
           'location=/_llm/other', 'duplicate provider "mock"');

fails_with('duplicate user',
           conf_with("llm_gateway_user alice key=sk-a-1;\nllm_gateway_user bob key=sk-b-1;\n"
                   . "llm_gateway_user alice key=sk-a-2;\n"),
           'key=sk-a-2', 'duplicate user "alice"');

fails_with('duplicate alias',
           conf_with("llm_gateway_alias x mock/a;\nllm_gateway_alias x mock/b;\n"),
           'llm_gateway_alias x mock/b', 'duplicate alias "x"');

fails_with('bad provider name',
           conf_with(qq($P "bad name!" type=openai location=/_llm/bad;\n)),
           '"bad name!"', 'invalid provider name "bad name!": it must match ^[A-Za-z0-9._-]+$');

fails_with('bad provider name with a slash',
           conf_with("$P a/b type=openai location=/_llm/ab;\n"),
           'location=/_llm/ab', 'invalid provider name "a/b": it must match ^[A-Za-z0-9._-]+$');

fails_with('reserved provider name "admin"',
           conf_with("$P admin type=openai location=/_llm/admin;\n"),
           "$P admin", 'provider name "admin" is reserved');

fails_with('unreadable secret file',
           conf_with("llm_gateway_user carol key=file:$tmp/no-such.key;\n"),
           'no-such.key', qq(llm_gateway_user: secret file "$tmp/no-such.key" cannot be read: No such file or directory));

fails_with('secret file is a directory',
           conf_with("$P other type=openai location=/_llm/other key=file:$tmp;\n"),
           "key=file:$tmp", qq(llm_gateway_provider: secret file "$tmp" is a directory));

fails_with('unset env secret',
           conf_with("llm_gateway_user dan key=env:LLMGW_T14_UNSET;\n"),
           'LLMGW_T14_UNSET', 'llm_gateway_user: environment variable "LLMGW_T14_UNSET" is not set');

fails_with('env: with an invalid name is not echoed',
           conf_with("llm_gateway_user dan key=env:$LIT_SECRET;\n"),
           'llm_gateway_user dan',
           'llm_gateway_user: secret reference "env:..." does not name a valid environment variable',
           secrets => [$LIT_SECRET]);

fails_with('provider without type',
           conf_with("$P notype location=/_llm/notype;\n"),
           "$P notype", 'llm_gateway_provider "notype" needs type=openai, type=anthropic or type=gemini');

fails_with('unknown provider type',
           conf_with("$P weird type=foo location=/_llm/weird;\n"),
           "$P weird", 'unknown provider type "foo": use openai, anthropic or gemini');

fails_with('provider without location',
           conf_with("$P noloc type=openai;\n"),
           "$P noloc", 'provider "noloc" needs location=/internal/prefix (an absolute URI)');

fails_with('negative limit (user)',
           conf_with("llm_gateway_user erin key=sk-e requests_per_minute=-1;\n"),
           'requests_per_minute=-1', 'invalid value "-1" for requests_per_minute: must be an integer >= 0');

fails_with('negative limit (group, spec name)',
           conf_with("llm_gateway_group eng tokensPerDay=-5;\n"),
           'tokensPerDay=-5', 'invalid value "-5" for tokensPerDay: must be an integer >= 0');

fails_with('NaN cost',
           conf_with("llm_gateway_group eng cost_per_day=NaN;\n"),
           'cost_per_day=NaN', 'invalid value "NaN" for cost_per_day: must be a finite number >= 0');

fails_with('infinite cost',
           conf_with("llm_gateway_user fay key=sk-f costPerMonthUSD=inf;\n"),
           'costPerMonthUSD=inf', 'invalid value "inf" for costPerMonthUSD: must be a finite number >= 0');

fails_with('negative cost',
           conf_with("llm_gateway_user gus key=sk-g cost_per_month=-0.5;\n"),
           'cost_per_month=-0.5', 'invalid value "-0.5" for cost_per_month: must be a finite number >= 0');

fails_with('llm_gateway twice in a location',
           conf_with('', api_extra => 'llm_gateway;'),
           'llm_gateway;', '"llm_gateway" directive is duplicate', nth => 2);

fails_with('llm_gateway and llm_gateway_admin in one location',
           conf_with('', api_extra => 'llm_gateway_admin;'),
           'llm_gateway_admin;',
           'llm_gateway, llm_gateway_admin, llm_gateway_passthrough, llm_gateway_metrics, llm_gateway_mcp and llm_gateway_target_proxy cannot share a location');

fails_with('llm_gateway and llm_gateway_passthrough in one location',
           conf_with('', api_extra => 'llm_gateway_passthrough;'),
           'llm_gateway_passthrough;',
           'llm_gateway, llm_gateway_admin, llm_gateway_passthrough, llm_gateway_metrics, llm_gateway_mcp and llm_gateway_target_proxy cannot share a location');

# Tools and agents (docs/mcp.md).
fails_with('llm_gateway_mcp_server with a bad name',
           conf_with("llm_gateway_mcp_server bad/name location=/_t/x;\n"),
           'bad/name', 'llm_gateway_mcp_server name must match ^[A-Za-z0-9._-]+$ (and not be "." or "..")');
fails_with('llm_gateway_mcp_server without location=',
           conf_with("llm_gateway_mcp_server tools url=http://127.0.0.1:1/mcp;\n"),
           'llm_gateway_mcp_server tools', 'llm_gateway_mcp_server "tools" needs location=/uri');
fails_with('llm_gateway_mcp_server defined twice',
           conf_with("llm_gateway_mcp_server tools location=/_t/a;\nllm_gateway_mcp_server tools location=/_t/b;\n"),
           'location=/_t/b', 'llm_gateway_mcp_server "tools" is defined twice');
fails_with('llm_gateway_mcp_server with a url= that is not http(s)',
           conf_with("llm_gateway_mcp_server tools location=/_t/a url=ftp://h/x;\n"),
           'url=ftp', 'llm_gateway_mcp_server "tools" url= must begin with http:// or https://');
fails_with('llm_gateway_mcp_server with an unknown parameter',
           conf_with("llm_gateway_mcp_server tools location=/_t/a card=/x;\n"),
           'card=/x', 'invalid parameter "card" of llm_gateway_mcp_server');
fails_with('llm_gateway_agent with a card= that is not a path',
           conf_with("llm_gateway_agent helper location=/_t/a card=card.json;\n"),
           'card=card.json', 'llm_gateway_agent "helper" card= must be a path beginning with /');
fails_with('llm_gateway_target_proxy with an unknown kind',
           conf_with('', server => 'location /t/ { llm_gateway_target_proxy tools; }'),
           'llm_gateway_target_proxy tools', 'llm_gateway_target_proxy takes mcp or agent, not "tools"');
fails_with('llm_gateway_target_proxy in an exact location',
           conf_with('', server => 'location = /t { llm_gateway_target_proxy mcp; }'),
           'llm_gateway_target_proxy mcp',
           'llm_gateway_target_proxy needs a prefix location, e.g. location /mcp/ { llm_gateway_target_proxy mcp; }');
fails_with('llm_gateway_mcp with a short session key',
           conf_with('', server => 'location = /mcp { llm_gateway_mcp session_key=literal:short; }'),
           'session_key=', 'session_key= of llm_gateway_mcp must be at least 16 bytes long');
fails_with('llm_gateway_mcp with a session key from an unset variable',
           conf_with('', server => 'location = /mcp { llm_gateway_mcp session_key=env:LLMGW_NO_SUCH_VAR; }'),
           'session_key=', 'llm_gateway_mcp: environment variable "LLMGW_NO_SUCH_VAR" is not set');
fails_with('llm_gateway_mcp with a bad time-out',
           conf_with('', server => 'location = /mcp { llm_gateway_mcp list_timeout=5ms; }'),
           'list_timeout', 'list_timeout= of llm_gateway_mcp must be a time from 100ms to 30d');
fails_with('llm_gateway_mcp and llm_gateway in one location',
           conf_with('', api_extra => 'llm_gateway_mcp;'),
           'llm_gateway_mcp;', 'llm_gateway, llm_gateway_admin, llm_gateway_passthrough, llm_gateway_metrics, llm_gateway_mcp and llm_gateway_target_proxy cannot share a location');

my $DRAIN = 'llm_gateway_cancel_drain takes off, or a time from 1ms to 10m and an optional size (e.g. 30s 1m)';
my $DRAIN_SIZE = 'llm_gateway_cancel_drain size must be a size of at least 1 byte (e.g. 512k, 1m)';
fails_with('llm_gateway_cancel_drain 0s', conf_with("llm_gateway_cancel_drain 0s;\n"), 'llm_gateway_cancel_drain', $DRAIN);
fails_with('llm_gateway_cancel_drain over 10m', conf_with("llm_gateway_cancel_drain 11m;\n"), 'llm_gateway_cancel_drain', $DRAIN);
fails_with('llm_gateway_cancel_drain with a zero size', conf_with("llm_gateway_cancel_drain 10s 0;\n"),
           'llm_gateway_cancel_drain', $DRAIN_SIZE);
fails_with('llm_gateway_cancel_drain with a size that is not one', conf_with("llm_gateway_cancel_drain 10s lots;\n"),
           'llm_gateway_cancel_drain', $DRAIN_SIZE);
my $BM_TTL = 'llm_gateway_budget_mode ttl= must be a whole number of seconds from 1s to 1d (e.g. 10m); it must outlive the providers\' proxy_read_timeout';
fails_with('llm_gateway_budget_mode with an unknown mode', conf_with("llm_gateway_budget_mode strict;\n"),
           'llm_gateway_budget_mode', 'llm_gateway_budget_mode takes "check" or "reserve", not "strict"');
fails_with('llm_gateway_budget_mode check with parameters', conf_with("llm_gateway_budget_mode check ttl=5m;\n"),
           'llm_gateway_budget_mode', 'llm_gateway_budget_mode check takes no parameters');
fails_with('llm_gateway_budget_mode reserve ttl=0', conf_with("llm_gateway_budget_mode reserve ttl=0s;\n"),
           'llm_gateway_budget_mode', $BM_TTL);
fails_with('llm_gateway_budget_mode reserve ttl=500ms', conf_with("llm_gateway_budget_mode reserve ttl=500ms;\n"),
           'llm_gateway_budget_mode', $BM_TTL);
fails_with('llm_gateway_budget_mode reserve ttl=2d', conf_with("llm_gateway_budget_mode reserve ttl=2d;\n"),
           'llm_gateway_budget_mode', $BM_TTL);
fails_with('llm_gateway_budget_mode reserve output=0', conf_with("llm_gateway_budget_mode reserve output=0;\n"),
           'llm_gateway_budget_mode', 'llm_gateway_budget_mode output= must be a number of tokens from 1 to 10000000');
fails_with('llm_gateway_budget_mode reserve with an unknown parameter',
           conf_with("llm_gateway_budget_mode reserve hold=1;\n"),
           'llm_gateway_budget_mode', 'invalid parameter "hold" of llm_gateway_budget_mode: use ttl=time output=N');
fails_with('llm_gateway_budget_mode twice', conf_with("llm_gateway_budget_mode reserve;\nllm_gateway_budget_mode check;\n"),
           'llm_gateway_budget_mode', '"llm_gateway_budget_mode" directive is duplicate', nth => 2);
fails_with('llm_gateway_cancel_drain twice', conf_with("llm_gateway_cancel_drain 10s;\nllm_gateway_cancel_drain 20s;\n"),
           'llm_gateway_cancel_drain', '"llm_gateway_cancel_drain" directive is duplicate', nth => 2);
fails_with('llm_gateway_ratelimit_headers with a value that is not on or off',
           conf_with("llm_gateway_ratelimit_headers maybe;\n"), 'llm_gateway_ratelimit_headers',
           'invalid value "maybe" in "llm_gateway_ratelimit_headers" directive, it must be "on" or "off"');
fails_with('llm_gateway_stream_cutoff with a value that is not on or off',
           conf_with("llm_gateway_stream_cutoff yes;\n"), 'llm_gateway_stream_cutoff',
           'invalid value "yes" in "llm_gateway_stream_cutoff" directive, it must be "on" or "off"');
fails_with('llm_gateway_stream_cutoff in a location',
           conf_with('', server => 'location /x { llm_gateway_stream_cutoff on; }'), 'llm_gateway_stream_cutoff',
           '"llm_gateway_stream_cutoff" directive is not allowed here');

fails_with('llm_gateway_passthrough in a regex location',
           conf_with('', server => 'location ~ ^/pt/ { llm_gateway_passthrough; }'),
           'llm_gateway_passthrough;',
           'llm_gateway_passthrough needs a prefix location, e.g. location /passthrough/ { llm_gateway_passthrough; }');

fails_with('llm_gateway_passthrough in an exact location',
           conf_with('', server => 'location = /pt { llm_gateway_passthrough; }'),
           'llm_gateway_passthrough;',
           'llm_gateway_passthrough needs a prefix location, e.g. location /passthrough/ { llm_gateway_passthrough; }');

fails_with('llm_gateway_metrics in a named location',
           conf_with('', server => 'location @m { llm_gateway_metrics; }'),
           'llm_gateway_metrics;',
           'llm_gateway_metrics needs a location whose path begins with /, e.g. location = /metrics');

fails_with('llm_gateway_metrics with a bad CIDR',
           conf_with('', server => 'location = /metrics { llm_gateway_metrics allow=10.0.0.0/33; }'),
           'llm_gateway_metrics allow',
           'allow= of llm_gateway_metrics: "10.0.0.0/33" is not an address or CIDR block');

fails_with('llm_gateway_metrics with an unknown parameter',
           conf_with('', server => 'location = /metrics { llm_gateway_metrics modelLabel=yes; }'),
           'llm_gateway_metrics modelLabel',
           'invalid parameter "modelLabel" of llm_gateway_metrics');

fails_with('provider groups= without a group',
           conf_with("$P closed type=openai location=/_llm/closed groups=;\n"),
           'groups=;', 'groups= of llm_gateway_provider "closed" must name at least one group '
                     . '(omit it to open the provider to all)');

fails_with('llm_gateway_zone with a too small size',
           conf_with("llm_gateway_zone llm_gateway:1k;\n"),
           'llm_gateway_zone', 'llm_gateway_zone "llm_gateway:1k": size must be at least 32k');

fails_with('llm_gateway_zone with a bad size',
           conf_with("llm_gateway_zone gwzone:lots;\n"),
           'llm_gateway_zone', 'llm_gateway_zone "gwzone:lots": size must be at least 32k');

fails_with('llm_gateway_zone without a size',
           conf_with("llm_gateway_zone gwzone;\n"),
           'llm_gateway_zone', 'llm_gateway_zone takes name:size, e.g. llm_gateway:10m');

fails_with('user without a key',
           conf_with("llm_gateway_user hal group=eng;\n"),
           'llm_gateway_user hal', 'llm_gateway_user "hal" needs key= or key_sha256=');

fails_with('bad key_sha256',
           conf_with("llm_gateway_user ivy key_sha256=abc123;\n"),
           'key_sha256=abc123', 'key_sha256 of user "ivy" must be 64 hex digits');

# Secrets resolved before a later directive fails stay out of the output.
fails_with('secret values never in nginx -t output',
           conf_with("$P second type=openai location=/_llm/second key=$LIT_SECRET;\n"
                   . "$P third type=openai location=/_llm/third key=env:LLMGW_T14_SECRET;\n"
                   . "$P fourth type=openai location=/_llm/fourth key=file:$secret_file;\n"
                   . "llm_gateway_user joe key=$USER_SECRET;\n"
                   . "llm_gateway_user kim key=literal:$USER_SECRET-2;\n"
                   . "llm_gateway_user joe key=sk-other-joe;\n"),
           'key=sk-other-joe', 'duplicate user "joe"',
           env => { LLMGW_T14_SECRET => $ENV_SECRET },
           secrets => [$LIT_SECRET, $ENV_SECRET, $FILE_SECRET, $USER_SECRET]);

fails_with('same key for two users: no key in the message',
           conf_with("llm_gateway_user lee key=$USER_SECRET;\nllm_gateway_user max key=$USER_SECRET;\n"),
           'llm_gateway_user max', 'user "max" has the same key as user "lee"', secrets => [$USER_SECRET]);

subtest 'a valid configuration passes nginx -t' => sub {
    my $conf = GwConf::gateway(
        providers => [
            { name => 'mock', key => "file:$secret_file", models => 'gpt-4o-mini,text-embedding-3-small', default => 1 },
            { name => 'other.v2_x-1', key => 'env:LLMGW_T14_SECRET', models => 'm1' },
            { name => 'nokey', models => 'm2' },
        ],
        http => "llm_gateway_zone gwzone:1m;\n"
              . "llm_gateway_group eng requests_per_minute=50 tokensPerDay=100000 cost_per_day=2.5 costPerMonthUSD=0;\n"
              . "llm_gateway_user alice key=$USER_SECRET group=eng requests_per_day=1000 admin;\n"
              . "llm_gateway_user bob key=literal:sk-bob;\n"
              . "llm_gateway_user dora key_sha256=" . ('ab' x 32) . " group=ops;\n"
              . "llm_gateway_user carol key=env:LLMGW_T14_SECRET2;\n"
              . "llm_gateway_alias smart mock/gpt-4o;\n"
              . "llm_gateway_alias other-smart other.v2_x-1/m1;\n"
              . "llm_gateway_price mock/gpt-4o input=2.5 output=10;\n"
              . "llm_gateway_price mock/free-model free;\n"
              . "llm_gateway_allow_unpriced off;\n"
              . "llm_gateway_max_body_size 2m;\n",
        server => "location /admin { llm_gateway_admin; }",
        api_extra => 'llm_gateway_max_body_size 1m;',
    );
    my ($exit, $out) = Gw::nginx_t($conf, vars => { MOCK => 1 },
                                   env => { LLMGW_T14_SECRET => $ENV_SECRET, LLMGW_T14_SECRET2 => 'sk-carol-env' });
    is($exit, 0, 'nginx -t exits 0') or diag($out);
    like($out, qr/test is successful/, 'test is successful');
    unlike($out, qr/\[(?:emerg|alert|crit)\]/, 'no error');
    # What it allows but an operator should know, logged at warn (and shown by the admin overview).
    my @warn = map { s/^.*\[warn\] \d+#\d+: //r } grep { /\[warn\]/ } split /\n/, $out;
    s/ \(\S+:\d+\)//g, s/ in \S+$// for @warn;
    is_deeply(\@warn, ['llm_gateway: model "other.v2_x-1/m1" has no price: under a cost budget, token-billed requests for it are refused (402)',
                       'llm_gateway: provider "nokey" has no key=: its calls carry no credential',
                       'llm_gateway: model "nokey/m2" has no price: under a cost budget, token-billed requests for it are refused (402)'],
              'the warnings: unpriced models under a cost budget, a provider without a key');
    for my $s ($ENV_SECRET, $FILE_SECRET, $USER_SECRET) {
        ok(index($out, $s) < 0, 'secret value not in the output');
    }
};

done_testing;
