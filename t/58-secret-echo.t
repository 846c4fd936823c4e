#!/usr/bin/perl
# Hostile upstreams, second round: a provider (or a tool server, an agent)
# that echoes the credential the gateway sent it, in its body or a header,
# whole or split across two reads, must not hand it to the caller: every
# occurrence of a configured secret becomes as many '*' as it has bytes, on
# every route (passthrough, the per-target proxies, native and translated
# chat, messages, embeddings, images), with the upstream's Content-Length
# kept where the bytes are relayed. The per-target proxies drop the caller's
# key= parameter and credential headers as the passthrough does. A HEAD of
# an agent card is relayed (status and headers), not read as a card.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();

my $KEY = 'sk-echo-alice-58-0a1b2c';
my %PKEY = (oai    => 'sk-live-echo-oai-5f3a9c0d1e2f',
            claude => 'claude-echo-secret-58-7b8c9d0e1f',     # no shape the log scrubber knows
            gem    => 'AIzaEchoGemini58-0123456789abcdef');
sub stars { '*' x length $_[0] }

my $mock = Gw::Mock->start();
sub target_loc {
    my ($name, $path) = @_;
    return "    location /_t/$name { internal; proxy_pass http://127.0.0.1:%%MOCK%%$path; proxy_http_version 1.1; "
         . "proxy_set_header Connection \"\"; proxy_buffering off; }\n";
}
my $conf = GwConf::gateway(
    providers => [
        { name => 'oai',    type => 'openai',    key => $PKEY{oai},    models => 'gpt-4o-mini,text-embedding-3-small,gpt-image-1',
          default => 1 },
        { name => 'claude', type => 'anthropic', key => $PKEY{claude}, models => 'claude-sonnet-4-5' },
        { name => 'gem',    type => 'gemini',    key => $PKEY{gem},    models => 'gemini-2.5-flash' },
    ],
    http => "llm_gateway_user alice key=$KEY;\n"
          . "llm_gateway_mcp_server tools location=/_t/tools;\n"
          . "llm_gateway_agent helper location=/_t/helper;\n"
          . "llm_gateway_agent oldcard location=/_t/oldcard card=/.well-known/agent.json;\n",
    server => "location /passthrough/ { llm_gateway_passthrough; }\n"
            . "    location /mcp/ { llm_gateway_target_proxy mcp; }\n"
            . "    location /a2a/ { llm_gateway_target_proxy agent; }\n"
            . target_loc('tools', '/mcp')
            . target_loc('helper/', '/agent/')
            . target_loc('oldcard/', '/old/'),
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 1, vars => { MOCK => $mock->port });

sub req {
    my ($method, $path, %o) = @_;
    my %h = (Authorization => "Bearer $KEY", %{ $o{headers} || {} });
    return Gw::stream_request($method, $ng->url($path), headers => \%h, body => $o{body}, timeout => 10);
}

my $head = sub { my ($status, @h) = @_; join('', "HTTP/1.1 $status\r\n", map({ "$_\r\n" } @h, 'Connection: close'), "\r\n") };
my $chunk = sub { sprintf("%x\r\n%s\r\n", length $_[0], $_[0]) };

# ---------------------------------------------------------------- defect 1

subtest 'passthrough: a 401 echoing the key in its body and a header, Content-Length kept' => sub {
    $mock->reset;
    my $body = qq({"error":{"message":"Incorrect API key provided: $PKEY{oai}. You can find your API key at )
             . qq(https://platform.openai.com/account/api-keys.","type":"invalid_request_error","code":"invalid_api_key"}});
    $mock->script({ status => 401, body => $body,
                    headers => { 'content-type' => 'application/json', 'x-echo-auth' => "Bearer $PKEY{oai}",
                                 'x-request-id' => 'req_58' } });
    my $size = length $ng->error_log;
    my $r = req(GET => '/passthrough/oai/models');
    is($r->{status}, 401, 'the provider\'s status');
    (my $want = $body) =~ s/\Q$PKEY{oai}\E/stars($PKEY{oai})/ge;
    is($r->{body}, $want, 'the body, the key masked byte for byte');
    is($r->{headers}{'content-length'}, length $body, 'the upstream\'s Content-Length, kept');
    ok(!defined $r->{headers}{'transfer-encoding'}, 'not chunked');
    is($r->{headers}{'x-echo-auth'}, 'Bearer ' . stars($PKEY{oai}), 'the key masked in a header value');
    is($r->{headers}{'x-request-id'}, 'req_58', 'other headers as they came');
    is($mock->requests->[-1]{headers}{authorization}, "Bearer $PKEY{oai}", 'the provider did get its key');
    ok($ng->wait_log(qr/1 occurrence\(s\) of a configured secret redacted from the answer of "oai"/),
       'the redaction is logged (info), naming the provider');
    ok(index(substr($ng->error_log, $size), $PKEY{oai}) < 0, 'the key is not in the error log');
};

subtest 'passthrough: the key split across two reads, Content-Length and chunked' => sub {
    for my $framing (qw(length chunked)) {
        $mock->reset;
        my $body = qq({"error":{"message":"invalid x-goog-api-key $PKEY{gem} for project 58"}});
        my $cut = index($body, $PKEY{gem}) + 11;
        my @pieces = (substr($body, 0, $cut), substr($body, $cut));
        my $wire = $framing eq 'length'
            ? [$head->('400 Bad Request', 'Content-Type: application/json', 'Content-Length: ' . length $body) . $pieces[0],
               $pieces[1]]
            : [$head->('400 Bad Request', 'Content-Type: application/json', 'Transfer-Encoding: chunked')
                 . $chunk->($pieces[0]), $chunk->($pieces[1]) . "0\r\n\r\n"];
        $mock->script({ wire => $wire, delay_ms => 150 });
        my $r = req(POST => '/passthrough/gem/v1beta/models/gemini-2.5-flash:countTokens', body => { contents => [] });
        is($r->{status}, 400, "$framing: status");
        (my $want = $body) =~ s/\Q$PKEY{gem}\E/stars($PKEY{gem})/ge;
        is($r->{body}, $want, "$framing: the key masked across the two reads");
        ok($r->{complete}, "$framing: the answer is complete");
        is($r->{headers}{'content-length'}, $framing eq 'length' ? length $body : undef, "$framing: its length as sent");
        is($mock->requests->[-1]{headers}{'x-goog-api-key'}, $PKEY{gem}, "$framing: the provider's key went up");
    }
};

subtest 'passthrough: an SSE stream echoing the key across two events\' writes' => sub {
    $mock->reset;
    my ($a, $b) = (substr($PKEY{claude}, 0, 9), substr($PKEY{claude}, 9));
    my @w = (qq(event: ping\ndata: {"k":"$a), qq($b"}\n\n), qq(event: message_stop\ndata: {"type":"message_stop"}\n\n));
    $mock->script({ wire => [$head->('200 OK', 'Content-Type: text/event-stream', 'Transfer-Encoding: chunked')
                             . $chunk->($w[0]), $chunk->($w[1]), $chunk->($w[2]) . "0\r\n\r\n"], delay_ms => 120 });
    my $r = req(POST => '/passthrough/claude/v1/messages', body => { model => 'claude-sonnet-4-5', stream => JSON::PP::true });
    is($r->{status}, 200, 'status');
    is($r->{body}, qq(event: ping\ndata: {"k":") . stars($PKEY{claude}) . qq("}\n\n) . $w[2], 'every byte of the key masked');
    is(scalar @{ $r->{events} }, 2, 'both events, as they came');
};

subtest 'per-target proxies: a tool server and an agent echoing a provider key' => sub {
    $mock->reset;
    my $rpc = qq({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"upstream said: bad key $PKEY{oai}"}]}});
    $mock->script({ status => 200, body => $rpc, headers => { 'content-type' => 'application/json',
                                                              'x-upstream-key' => $PKEY{oai} } });
    my $r = req(POST => '/mcp/tools', body => { jsonrpc => '2.0', id => 1, method => 'tools/call',
                                                params => { name => 'x', arguments => {} } });
    is($r->{status}, 200, 'mcp: status');
    (my $want = $rpc) =~ s/\Q$PKEY{oai}\E/stars($PKEY{oai})/ge;
    is($r->{body}, $want, 'mcp: the body masked');
    is($r->{headers}{'content-length'}, length $rpc, 'mcp: its Content-Length kept');
    is($r->{headers}{'x-upstream-key'}, stars($PKEY{oai}), 'mcp: the header masked');

    $mock->reset;
    my $err = qq({"error":"agent backend refused key $PKEY{claude}"});
    my $cut = index($err, $PKEY{claude}) + 1;
    $mock->script({ wire => [$head->('500 Internal Server Error', 'Content-Type: application/json', 'Transfer-Encoding: chunked',
                                     "WWW-Authenticate: Bearer realm=\"$PKEY{claude}\"")
                             . $chunk->(substr($err, 0, $cut)), $chunk->(substr($err, $cut)) . "0\r\n\r\n"],
                    delay_ms => 150 });
    $r = req(POST => '/a2a/helper/', body => { jsonrpc => '2.0', id => 2, method => 'message/send', params => {} });
    is($r->{status}, 500, 'a2a: status');
    ($want = $err) =~ s/\Q$PKEY{claude}\E/stars($PKEY{claude})/ge;
    is($r->{body}, $want, 'a2a: the key masked across the two reads');
    is($r->{headers}{'www-authenticate'}, 'Bearer realm="' . stars($PKEY{claude}) . '"', 'a2a: the header masked');
};

# Native and translated routes: [name, path, body, scripted answer, want status, want body (a sub of the
# scripted body), provider]
my @routes = (
    ['native chat: OpenAI error relayed', '/v1/chat/completions', GwConf::chat_body('gpt-4o-mini'),
     { status => 401, body => qq({"error":{"message":"Incorrect API key provided: $PKEY{oai}","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}),
       headers => { 'content-type' => 'application/json' } }, 401, 'same'],
    ['native messages: Anthropic error relayed', '/v1/messages',
     { model => 'claude-sonnet-4-5', max_tokens => 10, messages => [{ role => 'user', content => 'hi' }] },
     { status => 401, body => qq({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key $PKEY{claude}"}}),
       headers => { 'content-type' => 'application/json' } }, 401, 'same'],
    ['native embeddings', '/v1/embeddings', { model => 'text-embedding-3-small', input => 'x' },
     { status => 403, body => qq({"error":{"message":"key $PKEY{oai} may not use this model","type":"invalid_request_error","param":null,"code":null}}),
       headers => { 'content-type' => 'application/json' } }, 403, 'same'],
    ['native images', '/v1/images/generations', { model => 'gpt-image-1', prompt => 'x' },
     { status => 401, body => qq({"error":{"message":"Incorrect API key provided: $PKEY{oai}","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}),
       headers => { 'content-type' => 'application/json' } }, 401, 'same'],
    ['translated chat to Anthropic: the envelope\'s message', '/v1/chat/completions', GwConf::chat_body('claude-sonnet-4-5'),
     { status => 401, body => qq({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key $PKEY{claude}"}}),
       headers => { 'content-type' => 'application/json' } }, 401,
     '{"error":{"message":"upstream returned status 401: invalid x-api-key ' . stars($PKEY{claude})
     . '","type":"authentication_error","code":"upstream_error","param":null}}'],
    ['translated messages to Gemini: the envelope\'s message', '/v1/messages',
     { model => 'gemini-2.5-flash', max_tokens => 10, messages => [{ role => 'user', content => 'hi' }] },
     { status => 400, body => qq({"error":{"code":400,"message":"API key not valid: $PKEY{gem}","status":"INVALID_ARGUMENT"}}),
       headers => { 'content-type' => 'application/json' } }, 400,
     '{"type":"error","error":{"type":"invalid_request_error","message":"upstream returned status 400: API key not valid: '
     . stars($PKEY{gem}) . '"}}'],
);
for my $row (@routes) {
    my ($name, $path, $body, $answer, $status, $want) = @$row;
    subtest $name => sub {
        $mock->reset;
        $mock->script($answer);
        my $size = length $ng->error_log;
        my $r = req(POST => $path, body => $body);
        is($r->{status}, $status, 'status');
        if ($want eq 'same') {
            ($want = $answer->{body}) =~ s/(\Q$PKEY{oai}\E|\Q$PKEY{claude}\E|\Q$PKEY{gem}\E)/stars($1)/ge;
        }
        is($r->{body}, $want, 'the body, every key masked');
        my $log = substr($ng->error_log, $size);
        ok(index($log, $_) < 0, 'the key is not in the error log') for values %PKEY;
    };
}

subtest 'native chat: success headers and a Retry-After echoing the key' => sub {
    $mock->reset;
    $mock->script({ status => 200, json => { id => 'c', object => 'chat.completion', model => 'gpt-4o-mini',
                                             choices => [{ index => 0, message => { role => 'assistant', content => 'ok' },
                                                           finish_reason => 'stop' }],
                                             usage => { prompt_tokens => 1, completion_tokens => 1, total_tokens => 2 } },
                    headers => { 'x-debug-auth' => "key=$PKEY{oai};scope=all" } });
    my $r = req(POST => '/v1/chat/completions', body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 200, 'status');
    is($r->{headers}{'x-debug-auth'}, 'key=' . stars($PKEY{oai}) . ';scope=all', 'a header of a success, masked');

    $mock->reset;
    $mock->script({ status => 429, json => { error => { message => 'slow down', type => 'rate_limit_error' } },
                    headers => { 'retry-after' => $PKEY{oai} } });
    $r = req(POST => '/v1/chat/completions', body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 429, 'status');
    is($r->{headers}{'retry-after'}, stars($PKEY{oai}), 'Retry-After relayed, masked');
};

# ---------------------------------------------------------------- defect 2

subtest 'per-target proxies drop the caller\'s key= and credential headers, as the passthrough does' => sub {
    my %creds = ('x-api-key' => 'sk-caller-xapi-58', 'x-goog-api-key' => 'sk-caller-goog-58', 'api-key' => 'sk-caller-azure-58');
    for my $path ('/mcp/tools/messages', '/a2a/helper/tasks', '/passthrough/oai/files') {
        $mock->reset;
        my $r = req(GET => "$path?a=1&key=$KEY&b=2", headers => \%creds);
        ok($r->{status} > 0, "$path: answered");
        my $rec = $mock->requests->[-1];
        is($rec->{query}, 'a=1&b=2', "$path: the caller's key= parameter dropped, the rest kept");
        my $auth = $rec->{headers}{authorization};
        ok(!defined $auth || index($auth, $KEY) < 0, "$path: no caller Authorization");
        ok(!exists $rec->{headers}{$_}, "$path: no caller $_") for sort keys %creds;
    }
};

# ---------------------------------------------------------------- defect 3

subtest 'HEAD of an agent card: status and headers relayed, no rewrite' => sub {
    for my $c (['helper', '/agent/.well-known/agent-card.json', '/.well-known/agent-card.json'],
               ['oldcard', '/old/.well-known/agent.json', '/.well-known/agent.json']) {
        my ($agent, $upath, $cpath) = @$c;
        $mock->reset;
        my $card = qq({"name":"$agent","url":"http://10.0.0.58:9999/","version":"1"});
        $mock->script({ match => { method => 'HEAD' }, status => 200, body => $card,
                        headers => { 'content-type' => 'application/json', 'etag' => '"card-58"' } });
        my $r = req(HEAD => "/a2a/$agent$cpath");
        is($r->{status}, 200, "$agent: the agent's status, not 502");
        is($r->{headers}{'content-type'}, 'application/json', "$agent: its content type");
        is($r->{headers}{etag}, '"card-58"', "$agent: its headers");
        is($r->{headers}{'content-length'}, length $card, "$agent: its length (no rewrite)");
        ok(!defined $r->{headers}{'cache-control'}, "$agent: not the rewritten card's Cache-Control");
        is($r->{body}, '', "$agent: no body");
        my $rec = $mock->requests->[-1];
        is($rec->{method}, 'HEAD', "$agent: the agent got a HEAD");
        is($rec->{path}, $upath, "$agent: of its card");

        # A GET of the card is still read and rewritten.
        $mock->reset;
        $mock->script({ status => 200, body => $card, headers => { 'content-type' => 'application/json' } });
        $r = req(GET => "/a2a/$agent$cpath");
        is($r->{status}, 200, "$agent: GET status");
        is(($r->{json} || {})->{url}, $ng->url("/a2a/$agent/"), "$agent: GET rewrites the card");
        is($r->{headers}{'cache-control'}, 'no-store', "$agent: GET's Cache-Control");
    }
};

$ng->check_logs;
done_testing;
