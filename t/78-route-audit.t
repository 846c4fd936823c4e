# Every route that carries model traffic is metered, table-driven: chat
# completions (whole, streamed, translated to Anthropic and to Gemini),
# messages (native and translated to OpenAI), embeddings, images, speech,
# transcriptions and the passthrough. For each, on shared memory and on
# Redis: a user's own limit and a group's limit both refuse the second call
# with 429 before anything reaches the provider; the admitted call is counted
# once on the user, the group and the total (requests, and tokens where the
# route bills them); both answers carry the remaining-allowance headers.
# Again with reservations on (llm_gateway_budget_mode reserve, both stores):
# the same, and every route settles what it reserved (nothing stays held).
use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Test::More;

Gw::need_module();
GwRedis::need_redis();

my $mock = Gw::Mock->start();
my $ADMIN = 'sk-audit-admin';

my $WAV = "RIFF\x24\x00\x00\x00WAVEfmt " . ("\x00" x 64);
my $BOUNDARY = 'llmgwaudit7f3a';
my $FORM = join '', "--$BOUNDARY\r\n", qq{Content-Disposition: form-data; name="model"\r\n\r\n}, "oai/whisper-1\r\n",
                    "--$BOUNDARY\r\n", qq{Content-Disposition: form-data; name="file"; filename="a.wav"\r\n},
                    "Content-Type: audio/wav\r\n\r\n", $WAV, "\r\n--$BOUNDARY--\r\n";

my $chat = sub { my ($m, %x) = @_; return { model => $m, messages => [{ role => 'user', content => 'hi' }], %x } };
# name, method, path, body, extra headers, streamed, tokens in and out the route bills
my @ROUTES = (
    ['chat',                   POST => '/v1/chat/completions', $chat->('oai/gpt-4o-mini'), {}, 0, 11, 7],
    ['chat, streamed',         POST => '/v1/chat/completions',
     $chat->('oai/gpt-4o-mini', stream => \1, stream_options => { include_usage => \1 }), {}, 1, 11, 7],
    ['chat to Anthropic',      POST => '/v1/chat/completions', $chat->('claude/claude-sonnet-4-5'), {}, 0, 11, 7],
    ['chat to Anthropic, streamed', POST => '/v1/chat/completions', $chat->('claude/claude-sonnet-4-5', stream => \1), {}, 1, 11, 7],
    ['chat to Gemini',         POST => '/v1/chat/completions', $chat->('gem/gemini-2.5-flash'), {}, 0, undef, undef],
    ['messages',               POST => '/v1/messages', $chat->('claude/claude-sonnet-4-5', max_tokens => 16),
     { 'anthropic-version' => '2023-06-01' }, 0, 11, 7],
    ['messages, streamed',     POST => '/v1/messages', $chat->('claude/claude-sonnet-4-5', max_tokens => 16, stream => \1),
     { 'anthropic-version' => '2023-06-01' }, 1, 11, 7],
    ['messages to OpenAI',     POST => '/v1/messages', $chat->('oai/gpt-4o-mini', max_tokens => 16),
     { 'anthropic-version' => '2023-06-01' }, 0, 11, 7],
    ['embeddings',             POST => '/v1/embeddings', { model => 'oai/text-embedding-3-small', input => 'hi' }, {}, 0, 5, 0],
    ['images',                 POST => '/v1/images/generations', { model => 'oai/gpt-image-1', prompt => 'a fox' }, {}, 0, 0, 0],
    ['speech',                 POST => '/v1/audio/speech', { model => 'oai/gpt-4o-mini-tts', input => 'hi', voice => 'alloy' },
     {}, 0, 0, 0],
    ['transcriptions',         POST => '/v1/audio/transcriptions', $FORM,
     { 'Content-Type' => "multipart/form-data; boundary=$BOUNDARY" }, 0, 0, 0],
    ['passthrough',            POST => '/passthrough/oai/chat/completions', $chat->('gpt-4o-mini'), {}, 0, 11, 7],
    ['passthrough, GET',       GET => '/passthrough/oai/models', undef, {}, 0, 0, 0],
);

my (@users, @groups);
for my $i (0 .. $#ROUTES) {
    push @groups, "llm_gateway_group own$i;", "llm_gateway_group shared$i requests_per_minute=1;";
    push @users, "llm_gateway_user u$i key=sk-audit-u$i group=own$i requests_per_minute=1 tokens_per_day=100000000 cost_per_day=1000;",
                 "llm_gateway_user v$i key=sk-audit-v$i group=shared$i;";
}

sub gateway {
    my ($store, $mode) = @_;
    my $conf = GwConf::gateway(
        providers => [
            { name => 'oai', type => 'openai', key => 'sk-prov-audit',
              models => 'gpt-4o-mini,text-embedding-3-small,gpt-image-1,gpt-4o-mini-tts,whisper-1' },
            { name => 'claude', type => 'anthropic', key => 'sk-ant-audit', models => 'claude-sonnet-4-5' },
            { name => 'gem', type => 'gemini', key => 'AIzaAudit', models => 'gemini-2.5-flash' },
        ],
        http => join("\n", "llm_gateway_ratelimit_headers on;", "llm_gateway_user root key=$ADMIN admin;", @groups, @users,
                     ($store ? "llm_gateway_store $store;" : ()), ($mode ? "llm_gateway_budget_mode $mode;" : ()),
                     "llm_gateway_allow_unpriced on;") . "\n",
        server => "location /passthrough/ { llm_gateway_passthrough; }\n    location /admin { llm_gateway_admin; }",
    );
    return Gw::Nginx->start(conf => $conf, workers => 2, vars => { MOCK => $mock->port });
}

sub call {
    my ($ng, $route, $key) = @_;
    my (undef, $method, $path, $body, $extra, $streamed) = @$route;
    my %h = (Authorization => "Bearer $key", %$extra);
    return Gw::stream_request($method, $ng->url($path), headers => \%h, body => $body, timeout => 15) if $streamed;
    return Gw::http($method => $ng->url($path), headers => \%h, body => $body, timeout => 15);
}

sub provider_calls { return scalar @{ $mock->requests } }

sub usage_of {
    my ($ng) = @_;
    my $r = Gw::http(GET => $ng->url('/admin/api/usage'), headers => { 'x-api-key' => $ADMIN });
    return $r->{json};
}

for my $pass ([undef, undef], ['redis', undef], [undef, 'reserve'], ['redis', 'reserve']) {
    my ($store, $mode) = @$pass;
    my $rd = $store ? GwRedis->start() : undef;
    my $ng = gateway($rd ? 'redis://127.0.0.1:' . $rd->port : undef, $mode);
    GwMeter::wait_second_below(20);   # the whole table within one minute
    my $total0 = usage_of($ng)->{total}{requestsPerMinute};
    my $admitted = 0;
    for my $i (0 .. $#ROUTES) {
        my $route = $ROUTES[$i];
        my ($name, undef, undef, undef, undef, undef, $tin, $tout) = @$route;
        subtest(($store // 'shm') . ($mode ? " $mode" : '') . ": $name" => sub {
            for my $who (["u$i", 'its own limit'], ["v$i", "its group's limit"]) {
                my ($user, $limit) = @$who;
                my $before = provider_calls();
                my $ok = call($ng, $route, "sk-audit-$user");
                ok($ok->{status} >= 200 && $ok->{status} < 300, "$user: the first call is served ($ok->{status})")
                    or diag($ok->{body});
                is(provider_calls() - $before, 1, "$user: it reached the provider once");
                is($ok->{headers}{'x-ratelimit-remaining-requests'}, '0', "$user: its answer says none is left");
                is($ok->{headers}{'x-ratelimit-limit-requests'}, '1', "$user: of 1 a minute");
                my $mid = provider_calls();
                my $no = call($ng, $route, "sk-audit-$user");
                is($no->{status}, 429, "$user: the second call is refused by $limit");
                is(provider_calls() - $mid, 0, "$user: nothing reached the provider");
                is($no->{headers}{'x-ratelimit-remaining-requests'}, '0', "$user: the 429 says so too");
                ok($no->{headers}{'retry-after'}, "$user: with Retry-After");
                $admitted++;
            }
            my $u = usage_of($ng);
            my $ur = GwMeter::row($u, user => "u$i");
            my $gr = GwMeter::row($u, group => "shared$i");
            is($ur->{requestsPerDay}, 1, "u$i: one request counted");
            is($ur->{rejectionsPerDay}, 1, "u$i: one rejection counted");
            is($gr->{requestsPerDay}, 1, "shared$i: one request counted");
            is($gr->{rejectionsPerDay}, 1, "shared$i: one rejection");
            is($u->{total}{requestsPerMinute} - $total0, $admitted, "the total: every admitted call, once");
            if (defined $tin) {
                is($ur->{tokensInPerDay}, $tin, "u$i: $tin input tokens, counted once");
                is($ur->{tokensOutPerDay}, $tout, "u$i: $tout output tokens, counted once");
            } else {
                ok($ur->{tokensInPerDay} > 0 && $ur->{tokensOutPerDay} > 0, "u$i: tokens counted");
            }
            if ($mode) {
                is($ur->{reservedTokens}, 0, "u$i: no tokens left reserved");
                is($ur->{reservedCostMicroUsd}, 0, "u$i: no cost left reserved");
            }
        });
    }
    $ng->stop;
    $rd->stop if $rd;
}

done_testing();
