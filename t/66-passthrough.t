#!/usr/bin/perl
# Native passthrough: <prefix>/<provider>/<path below its base>. Any method,
# path, query and body reach the provider's base with the provider's
# credential (never the caller's); status, headers and bytes come back as
# they are (SSE included, error statuses included); usage in a known shape is
# accounted, else the request counter alone; unknown and closed providers are
# 404; nothing can leave the provider's base.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Digest::SHA ();
use Test::More;

Gw::need_module();
GwRedis::need_redis();
Gw::need_js_deps();

my $KEY = 'sk-pt-alice-0a1b2c3d';
my $CAROL = 'sk-pt-carol-4e5f6a7b';
my $BOB = 'sk-pt-bob-8c9d0e1f';
my %PKEY = (oai => 'sk-prov-pt-oai', claude => 'sk-ant-prov-pt', gem => 'AIzaProvPtGem', vault => 'sk-prov-vault');

my $rd = GwRedis->start();
my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [
        { name => 'oai',    type => 'openai',    key => $PKEY{oai},    models => 'gpt-4o-mini' },
        { name => 'claude', type => 'anthropic', key => $PKEY{claude}, models => 'claude-sonnet-4-5' },
        { name => 'gem',    type => 'gemini',    key => $PKEY{gem},    models => 'gemini-2.5-flash' },
        { name => 'vault',  type => 'openai',    key => $PKEY{vault},  models => 'gpt-secret', groups => 'vip,staff' },
    ],
    http => "llm_gateway_store redis://127.0.0.1:" . $rd->port . "/0;\n"
          . "llm_gateway_user alice key=$KEY;\n"
          . "llm_gateway_user carol key=$CAROL group=vip;\n"
          . "llm_gateway_user bob key=$BOB requests_per_minute=2;\n"
          . "llm_gateway_price oai/gpt-4o-mini input=0.15 output=0.6;\n"
          . "llm_gateway_price claude/claude-sonnet-4-5 input=3 output=15;\n",
    server => "location /passthrough/ { llm_gateway_passthrough; llm_gateway_max_body_size 8m; }",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 2, vars => { MOCK => $mock->port });

sub counter { my ($kind, $id, $m) = @_; return $rd->get_num(GwRedis::key($kind, $id, $m, 'day', time)) }
sub counts { my ($kind, $id) = @_; return { map { $_ => counter($kind, $id, $_) } qw(req tokin tokout cost) } }

sub pt {
    my ($method, $path, %o) = @_;
    my %h = (($o{no_bearer} ? () : (Authorization => 'Bearer ' . ($o{key} // $KEY))), %{ $o{headers} || {} });
    return Gw::stream_request($method, $ng->url("/passthrough$path"), headers => \%h, body => $o{body},
                              timeout => 15);
}

sub last_rec { my $r = $mock->requests; return $r->[-1] }

subtest 'the official clients, pointed at the passthrough base' => sub {
    $mock->reset;
    my $r = Gw::run_node('media.mjs', timeout => 60, env => {
        GW_URL => $ng->url(''), GW_KEY => $KEY,
        STEPS => Gw::json_encode([
            { name => 'chat',   op => 'pt_openai',    provider => 'oai',    model => 'gpt-4o-mini' },
            { name => 'stream', op => 'pt_openai',    provider => 'oai',    model => 'gpt-4o-mini', stream => 1 },
            { name => 'claude', op => 'pt_anthropic', provider => 'claude', model => 'claude-sonnet-4-5' },
        ]) });
    is($r->{exit}, 0, 'client exits 0') or diag($r->{stderr});
    my $s = ($r->{json} || {})->{steps} || {};
    for my $n (qw(chat stream claude)) { ok($s->{$n}{ok}, "$n ok") or diag(Gw::json_encode($s->{$n})) }
    is($s->{chat}{model}, 'gpt-4o-mini', 'the provider\'s answer, as it is');
    is_deeply($s->{stream}{usage}, { prompt_tokens => 11, completion_tokens => 7, total_tokens => 18 },
              'stream usage chunk relayed');
    is($s->{claude}{usage}{input_tokens}, 11, 'anthropic answer relayed');
    my @recs = @{ $mock->requests };
    is($recs[0]{path}, '/v1/chat/completions', 'openai: the path below the /v1 base');
    is($recs[0]{headers}{authorization}, "Bearer $PKEY{oai}", 'the provider key, not the caller\'s');
    is($recs[2]{path}, '/v1/messages', 'anthropic: the path below the host root');
    is($recs[2]{headers}{'x-api-key'}, $PKEY{claude}, 'anthropic credential header');
    ok(!exists $recs[2]{headers}{authorization}, 'the caller\'s key is not forwarded');
    # Usage accounted: 11 + 7 twice for gpt-4o-mini, 11 + 7 for claude.
    is_deeply(counts('model', 'oai/gpt-4o-mini'), { req => 2, tokin => 22, tokout => 14, cost => 12 },
              'tokens and cost of the answers that carried usage, under the model they named');
    is_deeply(counts('model', 'claude/claude-sonnet-4-5'), { req => 1, tokin => 11, tokout => 7, cost => 138 },
              'anthropic usage priced');
    is(counter('user', 'alice', 'tokin'), 33, 'user tokens');
    is(counter('user', 'alice', 'req'), 3, 'user requests');
};

subtest 'GET with a query; POST with a JSON body byte-exact; other methods' => sub {
    $mock->reset;
    my $r = pt(GET => '/oai/models?limit=2&key=caller-secret&order=desc');
    is($r->{status}, 200, 'GET relayed');
    is(($r->{json} || {})->{object}, 'list', 'the provider\'s model list');
    my $rec = last_rec();
    is($rec->{method}, 'GET', 'method');
    is($rec->{path}, '/v1/models', 'path');
    is($rec->{query}, 'limit=2&order=desc', 'query kept, the caller\'s key= parameter dropped');
    ok(!defined $rec->{headers}{'content-length'}, 'no Content-Length on a bodiless GET');

    my $body = qq({ "model" : "gpt-4o-mini",\n  "messages": [ {"role":"user","content":"h\\u00e9"} ], "x_custom": [1, 2.50] });
    $r = pt(POST => '/oai/chat/completions', body => $body, headers => { 'Content-Type' => 'application/json' });
    is($r->{status}, 200, 'POST relayed');
    is(last_rec()->{body}, $body, 'the body arrived byte-exact (spacing, escapes, unknown fields)');
    is(last_rec()->{headers}{'content-type'}, 'application/json', 'its content type');

    $r = pt(DELETE => '/oai/files/file-123');
    is(last_rec()->{method}, 'DELETE', 'DELETE reaches the provider');
    is(last_rec()->{path}, '/v1/files/file-123', 'its path');
    is($r->{status}, 404, 'the provider\'s 404 relayed');
    like($r->{body}, qr/Unknown request URL: DELETE \/v1\/files\/file-123/, 'the provider\'s own body');
};

subtest 'SSE relayed as it arrives, usage read from it' => sub {
    $mock->reset;
    my @events = (
        { event => 'message_start', data => { type => 'message_start',
              message => { model => 'claude-sonnet-4-5', usage => { input_tokens => 40, output_tokens => 1 } } } },
        { event => 'content_block_delta', data => { type => 'content_block_delta', delta => { text => "a\r\nb" } } },
        { event => 'message_delta', data => { type => 'message_delta', usage => { output_tokens => 9 } } },
        { event => 'message_stop', data => { type => 'message_stop' } },
    );
    $mock->script({ match => { path => '/v1/messages' }, sse => \@events, delay_ms => 30,
                    headers => { 'request-id' => 'req_abc', 'content-type' => 'text/event-stream; charset=utf-8' } });
    my $before = counts('model', 'claude/claude-sonnet-4-5');
    my $r = pt(POST => '/claude/v1/messages', body => { model => 'claude-sonnet-4-5', max_tokens => 10, stream => \1,
                                                       messages => [{ role => 'user', content => 'hi' }] });
    is($r->{status}, 200, 'status 200');
    is($r->{headers}{'content-type'}, 'text/event-stream; charset=utf-8', 'the provider\'s content type');
    is($r->{headers}{'request-id'}, 'req_abc', 'the provider\'s headers');
    is(scalar @{ $r->{events} }, 4, 'four events');
    is($r->{events}[1]{event}, 'content_block_delta', 'event names kept');
    ok($r->{events}[3]{t} - $r->{events}[0]{t} > 0.05, 'events arrived over time, not at once');
    my $after = counts('model', 'claude/claude-sonnet-4-5');
    is($after->{tokin} - $before->{tokin}, 40, 'input tokens from message_start');
    is($after->{tokout} - $before->{tokout}, 9, 'output tokens from message_delta');
};

subtest 'a 5 MB upload goes through uncopied and byte-exact' => sub {
    $mock->reset;
    my $blob = join '', map { chr(($_ * 31 + 7) % 256) } 0 .. (5 * 1024 * 1024 - 1);
    my $r = pt(PUT => '/oai/uploads/up-1/parts', body => $blob,
               headers => { 'Content-Type' => 'application/octet-stream' });
    is($r->{status}, 404, 'the provider\'s answer (the mock has no such route)');
    my $rec = last_rec();
    is($rec->{method}, 'PUT', 'PUT');
    is($rec->{body_size}, length $blob, 'every byte arrived');
    is($rec->{body_sha256}, Digest::SHA::sha256_hex($blob), 'byte-exact');
    is($rec->{headers}{'content-type'}, 'application/octet-stream', 'its content type');
    is($rec->{headers}{'content-length'}, length $blob, 'with its length');
};

subtest 'upstream 4xx and 5xx relayed as they are' => sub {
    $mock->reset;
    $mock->script({ match => { path => '/v1/batches' }, status => 422,
                    headers => { 'x-request-id' => 'r-422', 'content-type' => 'application/json' },
                    body => '{"error":{"message":"bad batch","type":"invalid_request_error"}}' });
    $mock->script({ match => { path => '/v1/batches/b1' }, status => 503,
                    headers => { 'content-type' => 'text/plain', 'retry-after' => '7' }, body => 'overloaded, try later' });
    my $r = pt(POST => '/oai/batches', body => { input_file_id => 'f' });
    is($r->{status}, 422, '422 as it came');
    is($r->{body}, '{"error":{"message":"bad batch","type":"invalid_request_error"}}', 'its body, not an envelope');
    is($r->{headers}{'x-request-id'}, 'r-422', 'its headers');
    $r = pt(GET => '/oai/batches/b1');
    is($r->{status}, 503, '503 as it came');
    is($r->{body}, 'overloaded, try later', 'its body');
    is($r->{headers}{'content-type'}, 'text/plain', 'its content type');
    is($r->{headers}{'retry-after'}, '7', 'its Retry-After');
    is(scalar @{ $mock->requests }, 2, 'one call each: a passthrough is never retried');
};

subtest 'gemini: the provider key in its header, the caller\'s key nowhere' => sub {
    $mock->reset;
    my $r = pt(POST => '/gem/v1beta/models/gemini-2.5-flash:generateContent?key=' . $KEY, no_bearer => 1,
               headers => { 'x-goog-api-key' => $KEY },
               body => { contents => [{ role => 'user', parts => [{ text => 'hi' }] }] });
    is($r->{status}, 200, 'the gateway key in x-goog-api-key (Gemini\'s clients) is accepted');
    my $rec = last_rec();
    is($rec->{path}, '/v1beta/models/gemini-2.5-flash:generateContent', 'path with its colon');
    is($rec->{query}, '', 'the key= parameter dropped');
    is($rec->{headers}{'x-goog-api-key'}, $PKEY{gem}, 'the provider key');
    ok(index(Gw::json_encode($rec), $KEY) < 0, 'the caller\'s key appears nowhere in what the provider received');
    ok(Gw::wait_until(sub { counter('model', 'gem/gemini-2.5-flash', 'tokin') == 11 }, timeout => 5),
       'usageMetadata accounted under modelVersion: 11 prompt tokens');
    # candidatesTokenCount 7 + thoughtsTokenCount 3: thinking is completion (as when translated)
    ok(Gw::wait_until(sub { counter('model', 'gem/gemini-2.5-flash', 'tokout') == 10 }, timeout => 5),
       'completion tokens 10: the candidates\' 7 and the thoughts\' 3')
        or diag('tokout ' . counter('model', 'gem/gemini-2.5-flash', 'tokout'));
};

subtest 'unknown and closed providers: 404; refused paths: 400; nothing reaches a provider' => sub {
    $mock->reset;
    my $r = pt(GET => '/nope/v1/models');
    is($r->{status}, 404, 'unknown provider: 404');
    is(($r->{json} || {})->{error}{message}, 'unknown provider "nope"', 'message');
    is(($r->{json} || {})->{error}{code}, 'unknown_provider', 'code');
    $r = pt(GET => '/vault/models');
    is($r->{status}, 404, 'a provider closed to the caller\'s group: the same 404');
    is(($r->{json} || {})->{error}{message}, 'unknown provider "vault"', 'indistinguishable from an unknown one');
    $r = pt(GET => '/vault/models', key => $CAROL);
    is($r->{status}, 200, 'a caller of an allowed group is served');
    is(last_rec()->{headers}{authorization}, "Bearer $PKEY{vault}", 'with that provider\'s key');
    $mock->reset;
    my %seen;
    for my $path ('/oai', '/oai/files%3Fx=1', '/oai/files%23frag', '/oai/a%5Cb', '/oai/http:%2F%2Fevil.example/x',
                  '/oai/a%00b') {
        $seen{$path} = pt(GET => $path)->{status};
    }
    is($seen{'/oai'}, 400, '/oai (no path below the base): 400');
    is($seen{'/oai/files%3Fx=1'}, 400, 'encoded ? refused');
    is($seen{'/oai/files%23frag'}, 400, 'encoded # refused');
    is($seen{'/oai/a%5Cb'}, 400, 'backslash refused');
    is($seen{'/oai/http:%2F%2Fevil.example/x'}, 400, 'a URL in the path refused');
    is($seen{'/oai/a%00b'}, 400, 'NUL refused (by nginx)');
    # ../ resolved by nginx: it cannot climb out of the passthrough location
    # into another provider's base or anywhere else.
    my $up = pt(GET => '/oai/../claude/v1/models');
    my $out = pt(GET => '/oai/../../admin/api/usage');
    isnt($out->{status}, 200, 'climbing above the passthrough location reaches nothing of the gateway');
    my @paths = map { $_->{path} } @{ $mock->requests };
    ok(!grep({ $_ !~ m{^/v1/(models)$} } @paths), 'the provider saw only paths below a base: ' . join(',', @paths));
    is($up->{status}, 200, '/oai/../claude/... is /claude/..., a normal request (no traversal)');
};

subtest 'groups=: the closed provider is hidden from other groups on every route' => sub {
    $mock->reset;
    my $ids = sub {
        my ($key) = @_;
        my $r = Gw::http(GET => $ng->url('/v1/models'), headers => GwConf::bearer($key));
        return join ',', sort map { $_->{id} } @{ ($r->{json} || {})->{data} || [] };
    };
    unlike($ids->($KEY), qr{vault/}, '/v1/models of the default group leaves vault out');
    like($ids->($CAROL), qr{vault/gpt-secret}, 'the vip group sees it');
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                     body => GwConf::chat_body('vault/gpt-secret'));
    GwConf::is_envelope($r, 404, 'invalid_request_error', 'model_not_found', 'chat to a closed provider: 404');
    is(scalar @{ $mock->requests }, 0, 'never called');
};

subtest 'host and path override headers never reach the provider' => sub {
    $mock->reset;
    my $r = pt(GET => '/oai/models', headers => { 'X-Forwarded-Host' => 'evil.example', Forwarded => 'host=evil.example',
                                                 'X-Original-URL' => '/admin', 'X-Rewrite-URL' => '/admin',
                                                 'X-Api-Key' => $KEY, 'OpenAI-Organization' => 'org-caller' });
    is($r->{status}, 200, 'status 200');
    my $h = last_rec()->{headers};
    is($h->{host}, 'oai_up', 'Host is the one proxy_pass sets, never the caller\'s');
    ok(!exists $h->{$_}, "$_ stripped") for qw(x-forwarded-host forwarded x-original-url x-rewrite-url x-api-key openai-organization);
};

subtest 'admitted against request limits; no usage: the request counter alone' => sub {
    $mock->reset;
    GwMeter::wait_second_below(50);
    my @st = map { pt(GET => '/oai/models', key => $BOB)->{status} } 1 .. 3;
    is_deeply(\@st, [200, 200, 429], 'the third request in the minute is refused');
    is(scalar @{ $mock->requests }, 2, 'the refused one never reached the provider');
    is(counter('user', 'bob', 'req'), 2, 'two requests counted');
    is(counter('user', 'bob', 'tokin'), 0, 'no tokens: the model list carried no usage (never estimated)');
};

$ng->stop;
done_testing();
