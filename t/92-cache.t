#!/usr/bin/perl
# The response cache (llm_gateway_cache, docs/cache.md) on nginx's own
# proxy_cache, through the official clients (t/js/cache.mjs): a miss then a
# hit for chat (stream and not, OpenAI type), messages (stream and not,
# Anthropic type), the Responses API translated to a Gemini-type provider and
# embeddings; what the provider received (once); groups that never share
# answers and a shared scope; the caller's bypass and the temperature bound;
# answers that call a tool not stored unless tool_calls=on; a hit counted as
# a request with its tokens apart and no cost; eviction by nginx's own
# inactive= and max_size=; a 10 MB cached stream read by a slow client
# without the worker holding it; and nginx -t's sentences.

use strict;
use warnings;
use lib 't/lib';
use Cwd ();
use Socket qw(PF_INET SOCK_STREAM SOL_SOCKET SO_RCVBUF inet_aton sockaddr_in);
use Time::HiRes ();
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Test::More;

Gw::need_module();
Gw::need_js_deps();
GwRedis::need_redis();

my %KEY = (alice => 'sk-cache-alice-1a2b', carol => 'sk-cache-carol-3c4d', bob => 'sk-cache-bob-5e6f');
my %PKEY = (oai => 'sk-prov-oai-cache-1', claude => 'sk-ant-prov-cache-2', gem => 'AIzaProvCache3');
my $SNIPPET = Cwd::abs_path('conf/gateway-cache.conf');

my $mock = Gw::Mock->start();
my @providers = (
    { name => 'oai',    type => 'openai',    key => $PKEY{oai},    models => 'gpt-4o-mini,text-embedding-3-small' },
    { name => 'claude', type => 'anthropic', key => $PKEY{claude}, models => 'claude-sonnet-4-5' },
    { name => 'gem',    type => 'gemini',    key => $PKEY{gem},    models => 'gemini-2.5-flash' },
);
$_->{loc_extra} = "include $SNIPPET;" for @providers;
my $conf = GwConf::gateway(
    providers => \@providers,
    http => "proxy_cache_path %%TMP%%/cache-llm levels=1:2 keys_zone=llm:1m inactive=10m;\n"
          . "proxy_cache_path %%TMP%%/cache-short levels=1:2 keys_zone=short:1m inactive=2s;\n"
          . "proxy_cache_path %%TMP%%/cache-small levels=1:2 keys_zone=small:1m max_size=8k;\n"
          . "llm_gateway_group eng;\nllm_gateway_group ops;\n"
          . "llm_gateway_user alice key=$KEY{alice} group=eng;\n"
          . "llm_gateway_user carol key=$KEY{carol} group=eng;\n"
          . "llm_gateway_user bob key=$KEY{bob} group=ops;\n"
          . "llm_gateway_user root key=$GwMeter::ADMIN_KEY admin;\n"
          . "llm_gateway_price oai/gpt-4o-mini input=1 output=2;\n"
          . "llm_gateway_price claude/claude-sonnet-4-5 input=3 output=15;\n"
          . "llm_gateway_price gem/gemini-2.5-flash input=0.3 output=2.5;\n"
          . "log_format cache '\$request_uri \$status \$llm_gateway_user cache=\$llm_gateway_cache_status';\n",
    api_extra => "llm_gateway_cache zone=llm; access_log logs/cache.log cache;",
    server => join("\n    ",
        "location /admin { llm_gateway_admin; }",
        "location = /metrics { llm_gateway_metrics model_label=on; }",
        "location /shared/v1/ { llm_gateway; llm_gateway_cache zone=llm scope=shared tool_calls=on max_temperature=0.5; access_log logs/cache.log cache; }",
        "location /engonly/v1/ { llm_gateway; llm_gateway_cache zone=llm groups=eng; access_log logs/cache.log cache; }",
        "location /off/v1/ { llm_gateway; access_log logs/cache.log cache; }",
        "location /short/v1/ { llm_gateway; llm_gateway_cache zone=short; access_log logs/cache.log cache; }",
        "location /small/v1/ { llm_gateway; llm_gateway_cache zone=small; access_log logs/cache.log cache; }"),
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 1, vars => { MOCK => $mock->port });
my $shm_ng = $ng;

sub run_steps {
    my ($user, @steps) = @_;
    my $r = Gw::run_node('cache.mjs', timeout => 60,
                         env => { GW_URL => $ng->url(''), GW_KEY => $KEY{$user}, STEPS => Gw::json_encode(\@steps) });
    is($r->{exit}, 0, 'client script exits 0') or diag("stdout: $r->{stdout}\nstderr: $r->{stderr}");
    return ($r->{json} || {})->{steps} || {};
}

# The cache statuses of the next $n requests logged (nginx writes a
# request's line once it has sent it: waited for, bounded).
my $seen_lines = 0;
sub log_lines { return split /\n/, (Gw::_slurp($ng->prefix . '/logs/cache.log') // '') }
sub statuses {
    my ($n) = @_;
    my @lines;
    Gw::wait_until(sub { @lines = log_lines(); @lines >= $seen_lines + $n }, timeout => 5, interval => 0.02);
    my @new = @lines[$seen_lines .. $#lines];
    $seen_lines = @lines;
    diag(join "\n", @new) if $ENV{LLMGW_DEBUG};
    return [map { (split / /)[3] =~ s/^cache=//r } @new];
}
sub skip_logged { Time::HiRes::sleep(0.1); $seen_lines = () = log_lines() }

sub chat {
    my ($user, %o) = @_;
    my $path = $o{path} // '/v1/chat/completions';
    my %h = (%{ GwConf::bearer($KEY{$user}) }, %{ $o{headers} || {} });
    return Gw::http(POST => $ng->url($path), headers => \%h,
                    body => GwConf::chat_body($o{model} // 'gpt-4o-mini', %{ $o{extra} || {} }));
}

sub provider_calls { scalar @{ $mock->requests } }

subtest 'the official clients: a miss, then the same answer from the cache' => sub {
    $mock->reset;
    skip_logged();
    my @steps;
    for my $op (qw(chat chat_stream)) {
        push @steps, map { { name => "$op$_", op => $op, model => 'gpt-4o-mini' } } 1, 2;
    }
    for my $op (qw(messages messages_stream)) {
        push @steps, map { { name => "$op$_", op => $op, model => 'claude-sonnet-4-5' } } 1, 2;
    }
    push @steps, map { { name => "responses$_", op => 'responses', model => 'gemini-2.5-flash' } } 1, 2;
    push @steps, map { { name => "embeddings$_", op => 'embeddings', model => 'text-embedding-3-small' } } 1, 2;
    my $s = run_steps('alice', @steps);
    for my $n (qw(chat chat_stream messages messages_stream responses embeddings)) {
        my ($a, $b) = ($s->{"${n}1"} || {}, $s->{"${n}2"} || {});
        ok($a->{ok} && $b->{ok}, "$n: both answered") or diag(Gw::json_encode([$a, $b]));
        is(Gw::json_encode($b->{usage}), Gw::json_encode($a->{usage}), "$n: the same usage");
        next if $n eq 'embeddings';
        is($b->{text}, $a->{text}, "$n: the same text");
        is($a->{text}, 'Hello world', "$n: the provider's text");
    }
    is($s->{chat2}{id}, $s->{chat1}{id}, 'chat: the stored answer itself (its provider id)');
    is_deeply($s->{chat_stream2}{ids}, $s->{chat_stream1}{ids}, 'chat stream: the stored stream replayed');
    is($s->{chat_stream2}{chunks}, $s->{chat_stream1}{chunks}, 'chat stream: as many chunks');
    is_deeply($s->{embeddings2}{first}, $s->{embeddings1}{first}, 'embeddings: the same vector');
    is_deeply(statuses(12), [('MISS', 'HIT') x 6], '$llm_gateway_cache_status: a miss, then a hit, for each');
    my $reqs = $mock->requests;
    is_deeply([map { "$_->{method} $_->{path}" } @$reqs],
              ['POST /v1/chat/completions', 'POST /v1/chat/completions', 'POST /v1/messages', 'POST /v1/messages',
               'POST /v1beta/models/gemini-2.5-flash:generateContent', 'POST /v1/embeddings'],
              'the provider was called once per distinct request');
    ok($ng->wait_log(qr/usage user="alice" model="claude\/claude-sonnet-4-5" .* cost_micro_usd=0 \(cache hit\)/),
       'a hit\'s usage line says so, at no cost');
};

subtest 'groups never share answers; scope=shared does' => sub {
    $mock->reset;
    skip_logged();
    my $extra = { extra => { messages => [{ role => 'user', content => 'groups?' }] } };
    is(chat('alice', %$extra)->{status}, 200, 'alice (eng): 200');
    is(chat('carol', %$extra)->{status}, 200, 'carol (eng): 200');
    is(chat('bob', %$extra)->{status}, 200, 'bob (ops): 200');
    is_deeply(statuses(3), [qw(MISS HIT MISS)], 'eng\'s answer serves eng, not ops');
    is(provider_calls(), 2, 'two provider calls');
    my %shared = (%$extra, path => '/shared/v1/chat/completions');
    chat('alice', %shared);
    chat('bob', %shared);
    is_deeply(statuses(2), [qw(MISS HIT)], 'scope=shared: ops gets eng\'s answer');
    chat('alice', %$extra, path => '/engonly/v1/chat/completions');
    chat('bob', %$extra, path => '/engonly/v1/chat/completions');
    is_deeply(statuses(2), [qw(HIT BYPASS)], 'groups=eng: ops is not cached');
    chat('alice', %$extra, path => '/off/v1/chat/completions');
    is_deeply(statuses(1), ['-'], 'no llm_gateway_cache: no status');
};

subtest 'the caller\'s bypass and the temperature bound' => sub {
    $mock->reset;
    skip_logged();
    my %q = (extra => { messages => [{ role => 'user', content => 'bypass?' }] });
    chat('alice', %q);
    chat('alice', %q, headers => { 'Cache-Control' => 'no-cache' });
    chat('alice', %q, headers => { 'Cache-Control' => 'max-age=0, no-store' });
    chat('alice', %q, headers => { 'Cache-Control' => 'max-age=60' });
    is_deeply(statuses(4), [qw(MISS BYPASS BYPASS HIT)], 'no-cache and no-store bypass the cache');
    is(provider_calls(), 3, 'a bypass calls the provider');
    my %hot = (extra => { messages => [{ role => 'user', content => 'hot?' }], temperature => 1.5 });
    chat('alice', %hot) for 1, 2;
    my %warm = (extra => { messages => [{ role => 'user', content => 'warm?' }], temperature => 0.7 });
    chat('alice', %warm) for 1, 2;
    chat('alice', %warm, path => '/shared/v1/chat/completions');
    is_deeply(statuses(5), [qw(BYPASS BYPASS MISS HIT BYPASS)],
              'above max_temperature (1 by default; 0.5 in /shared/): neither looked up nor stored');
};

subtest 'an answer that calls a tool is not stored unless tool_calls=on' => sub {
    $mock->reset;
    skip_logged();
    my $tool_answer = { json => { id => 'chatcmpl-tool', object => 'chat.completion', created => 1, model => 'gpt-4o-mini',
        choices => [{ index => 0, finish_reason => 'tool_calls', message => { role => 'assistant', content => undef,
            tool_calls => [{ id => 'call_1', type => 'function', function => { name => 'get_weather', arguments => '{"city":"Oslo"}' } }] } }],
        usage => { prompt_tokens => 20, completion_tokens => 5, total_tokens => 25 } }, times => 4 };
    $mock->script($tool_answer);
    my %q = (extra => { messages => [{ role => 'user', content => 'weather in Oslo?' }] });
    my $r = chat('alice', %q);
    is($r->{status}, 200, 'answered');
    is($r->{json}{choices}[0]{message}{tool_calls}[0]{function}{name}, 'get_weather', 'the tool call');
    chat('alice', %q);
    is_deeply(statuses(2), [qw(MISS MISS)], 'never stored');
    chat('alice', %q, path => '/shared/v1/chat/completions') for 1, 2;
    is_deeply(statuses(2), [qw(MISS HIT)], 'tool_calls=on: stored');
    is(provider_calls(), 3, 'three provider calls');
    my @left = glob($ng->prefix . '/tmp/cache-llm/*/*/*');
    my @temps = grep { /\.\d+$/ } @left;
    is(scalar @temps, 0, 'no temporary file left behind') or diag("@temps");
};

subtest 'a hit is a request; its tokens count apart, at no cost' => sub {
    $mock->reset;
    skip_logged();
    my @F = qw(requestsPerDay tokensInPerDay tokensOutPerDay costPerDayMicroUsd);
    my $row0 = GwMeter::row(GwMeter::usage($ng), user => 'bob');
    my $before = GwMeter::fields($row0, @F) || { map { $_ => 0 } @F };
    my $cache0 = ($row0 || {})->{cache}{day} || {};
    $_ //= 0 for values %$before;
    my $hit_re = qr/usage user="bob" model="oai\/gpt-4o-mini" prompt_tokens=11 completion_tokens=7 cost_micro_usd=0 \(cache hit\)/;
    my $hits_before = grep { $_ =~ $hit_re } split /\n/, $ng->error_log;
    my %q = (extra => { messages => [{ role => 'user', content => 'count me' }] });
    chat('bob', %q) for 1 .. 3;
    is_deeply(statuses(3), [qw(MISS HIT HIT)], 'one miss, two hits');
    my $after;
    Gw::wait_until(sub { $after = GwMeter::row(GwMeter::usage($ng), user => 'bob');
                         $after && ($after->{requestsPerDay} // 0) >= $before->{requestsPerDay} + 3 }, timeout => 5);
    my %d = map { $_ => ($after->{$_} // 0) - $before->{$_} } @F;
    is_deeply(\%d, { requestsPerDay => 3, tokensInPerDay => 11, tokensOutPerDay => 7, costPerDayMicroUsd => 25 },
              'three requests; the provider\'s tokens and cost of the miss only (11*1 + 7*2 micro-USD)');
    is(scalar(grep { $_ =~ $hit_re } split /\n/, $ng->error_log) - $hits_before, 2,
       'two hits logged with their tokens, at no cost');
    my $cache1 = $after->{cache}{day} || {};
    is_deeply({ map { $_ => ($cache1->{$_} // 0) - ($cache0->{$_} // 0) } qw(hits misses hitTokensIn hitTokensOut) },
              { hits => 2, misses => 1, hitTokensIn => 22, hitTokensOut => 14 },
              'the usage view: two hits, one miss, the hits\' tokens apart');
    my $rate = $cache1->{hits} / ($cache1->{hits} + $cache1->{misses});
    is($cache1->{hitRate}, $rate, 'and the hit rate');
    my $m = Gw::http(GET => $ng->url('/metrics'), headers => GwConf::bearer($GwMeter::ADMIN_KEY));
    like($m->{body}, qr/^llmgateway_cache_requests_total\{scope_kind="user",scope="bob",result="hit"\} $cache1->{hits}$/m,
         'Prometheus: bob\'s hits this month');
    like($m->{body}, qr/^llmgateway_model_cache_tokens_total\{provider="oai",model="gpt-4o-mini",direction="out"\} [1-9]\d*$/m,
         'Prometheus: per model, the completion tokens served from the cache');
};

subtest 'eviction: nginx\'s own inactive= and max_size=' => sub {
    $mock->reset;
    skip_logged();
    my %q = (extra => { messages => [{ role => 'user', content => 'short-lived' }] });
    chat('alice', %q, path => '/short/v1/chat/completions') for 1, 2;
    is_deeply(statuses(2), [qw(MISS HIT)], 'stored');
    my $dir = $ng->prefix . '/tmp/cache-short';
    ok(Gw::wait_until(sub { !grep { -f } glob("$dir/*/*/*") }, timeout => 25, interval => 0.5),
       'the cache manager removed the entry once inactive for 2 s');
    chat('alice', %q, path => '/short/v1/chat/completions');
    is_deeply(statuses(1), ['MISS'], 'then a miss');

    my $small = $ng->prefix . '/tmp/cache-small';
    for my $i (1 .. 4) {
        chat('alice', path => '/small/v1/chat/completions', extra => { messages => [{ role => 'user', content => "big $i " . ('x' x 3000) }] });
    }
    ok(Gw::wait_until(sub { my @f = grep { -f } glob("$small/*/*/*"); @f <= 2 }, timeout => 25, interval => 0.5),
       'max_size=8k: the manager evicted the least recently used');
    chat('alice', path => '/small/v1/chat/completions', extra => { messages => [{ role => 'user', content => "big 1 " . ('x' x 3000) }] });
    is_deeply([(@{ statuses(5) })[-1]], ['MISS'], 'the first one is gone');
};

# VmRSS of the (one) worker, in kB.
sub worker_rss {
    my ($pid) = $ng->worker_pids;
    my $st = Gw::_slurp("/proc/$pid/status") // '';
    return $st =~ /^VmRSS:\s+(\d+)/m ? $1 : 0;
}

# A client that reads slowly through a small receive buffer (or at once,
# $fast): bytes read and the worker's largest RSS seen meanwhile.
sub slow_read {
    my ($path, $body, $fast) = @_;
    socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
    setsockopt($s, SOL_SOCKET, SO_RCVBUF, 16384) or die "setsockopt: $!" unless $fast;
    connect($s, sockaddr_in($ng->port, inet_aton('127.0.0.1'))) or die "connect: $!";
    my $req = "POST $path HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer $KEY{alice}\r\n"
            . "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
    syswrite($s, $req) == length $req or die "write: $!";
    my ($n, $peak, $reads) = (0, 0, 0);
    my $deadline = time + 60;
    while (time < $deadline) {
        my $got = sysread($s, my $buf, $fast ? 1 << 20 : 16384);
        last unless $got;
        $n += $got;
        if (!$fast && ++$reads % 8 == 0) {
            my $rss = worker_rss();
            $peak = $rss if $rss > $peak;
            Time::HiRes::sleep(0.004);
        }
    }
    close $s;
    return ($n, $peak);
}

subtest 'a cached 10 MB stream, read slowly: the worker does not hold it' => sub {
    $mock->reset;
    skip_logged();
    my $piece = 'y' x 16000;
    my @sse = map { 'data: ' . Gw::json_encode({ id => 'chatcmpl-big', object => 'chat.completion.chunk', created => 1,
        model => 'gpt-4o-mini', choices => [{ index => 0, delta => { content => $piece }, finish_reason => undef }] }) } 1 .. 640;
    push @sse, 'data: ' . Gw::json_encode({ id => 'chatcmpl-big', object => 'chat.completion.chunk', created => 1,
        model => 'gpt-4o-mini', choices => [], usage => { prompt_tokens => 9, completion_tokens => 2560000, total_tokens => 2560009 } });
    push @sse, 'data: [DONE]';
    $mock->script({ sse => \@sse, headers => { 'content-type' => 'text/event-stream' } });
    my $body = Gw::json_encode(GwConf::chat_body('gpt-4o-mini', stream => JSON::PP::true(),
                                                 messages => [{ role => 'user', content => 'a long one' }]));
    my ($n1) = slow_read('/v1/chat/completions', $body, 1);   # the miss: read at once
    cmp_ok($n1, '>', 10_000_000, 'the miss: over 10 MB relayed');
    my $base = worker_rss();
    my ($n2, $peak) = slow_read('/v1/chat/completions', $body);
    is_deeply(statuses(2), [qw(MISS HIT)], 'then a hit');
    cmp_ok(abs($n2 - $n1), '<', 200, 'the hit relayed as much (the chunked framing aside)');
    diag("worker RSS: $base kB before the hit, $peak kB at most during it");
    cmp_ok($peak - $base, '<', 3 * 1024, 'the worker grew by less than 3 MB while relaying 10 MB from the cache');
};

subtest 'on Redis: a hit and a miss counted in the store' => sub {
    my $rd = GwRedis->start();
    (my $rconf = $conf) =~ s/^(llm_gateway_group eng;)/llm_gateway_store redis:\/\/127.0.0.1:%%REDIS%%\/0;\n$1/m;
    $ng = Gw::Nginx->start(conf => $rconf, workers => 2, vars => { MOCK => $mock->port, REDIS => $rd->port });
    $seen_lines = 0;
    $mock->reset;
    my %q = (extra => { messages => [{ role => 'user', content => 'on redis' }] });
    chat('carol', %q) for 1 .. 3;
    is_deeply(statuses(3), [qw(MISS HIT HIT)], 'a miss, then hits (the cache is nginx\'s, whatever the store)');
    my $row;
    Gw::wait_until(sub { $row = GwMeter::row(GwMeter::usage($ng), user => 'carol');
                         $row && ($row->{requestsPerDay} // 0) >= 3 }, timeout => 5);
    is_deeply(GwMeter::fields($row, qw(requestsPerDay tokensInPerDay tokensOutPerDay costPerDayMicroUsd)),
              { requestsPerDay => 3, tokensInPerDay => 11, tokensOutPerDay => 7, costPerDayMicroUsd => 25 },
              'Redis: three requests, the miss\'s tokens and cost');
    is_deeply({ map { $_ => $row->{cache}{day}{$_} } qw(hits misses hitTokensIn hitTokensOut) },
              { hits => 2, misses => 1, hitTokensIn => 22, hitTokensOut => 14 }, 'Redis: the cache counters');
    like($rd->cli('KEYS', "llmgw:user:carol:chit:*"), qr/llmgw:user:carol:chit:/, 'the chit keys in Redis');
    $ng->check_logs;
    $ng->stop;
    $ng = $shm_ng;
};

subtest 'nginx -t: what is wrong, and where' => sub {
    my $bad = GwConf::gateway(api_extra => 'llm_gateway_cache zone=nowhere;',
                              http => "llm_gateway_user alice key=sk-a;\n");
    my ($exit, $out, $file, $first) = Gw::nginx_t($bad, vars => { MOCK => $mock->port });
    isnt($exit, 0, 'an unknown zone fails');
    like($out, qr/llm_gateway_cache: zone "nowhere" is not a shared memory zone: declare it with proxy_cache_path \.\.\. keys_zone=nowhere:<size> \(llm_gateway_cache in \S+:\d+\)/,
         'names the zone and the directive\'s place');
    ($exit, $out) = Gw::nginx_t(GwConf::gateway(api_extra => 'llm_gateway_cache zone=llm max_temperature=3;'),
                                vars => { MOCK => $mock->port });
    isnt($exit, 0, 'a bad parameter fails');
    like($out, qr/llm_gateway_cache: max_temperature= must be a number from 0 to 2 in \S+:\d+/, 'says which and where');
    ($exit, $out) = Gw::nginx_t(GwConf::gateway(api_extra => 'llm_gateway_cache off; llm_gateway_cache off;'),
                                vars => { MOCK => $mock->port });
    isnt($exit, 0, 'twice fails');
    like($out, qr/"llm_gateway_cache" directive is duplicate/, 'as nginx says it');
};

$ng->check_logs;
done_testing;
