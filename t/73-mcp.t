#!/usr/bin/perl
# Tools and agents: the federated /mcp endpoint (the official MCP client
# against two SDK-built servers, one stateless answering SSE and one that
# demands a session answering JSON), the handshake retry and its DELETE,
# no handshake after a 5xx or a time-out, a hung server not holding the
# merged list, the all-failing error, the protocol allowlist, 405 before
# authentication, legacy /sse servers left out of federation, sealed
# session ids (forged ones refused, a session continued on another
# replica), per-target proxies for a tool server and an agent (the official
# A2A client), access refusals, counters, events and the targets view.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use Test::More;
use Time::HiRes ();

Gw::need_module();
Gw::need_js_deps();

my %KEY = (pat => 'sk-mcp-pat-5e6f7a', alice => 'sk-mcp-alice-1a2b3c', erin => 'sk-mcp-erin-4d5e6f', olga => 'sk-mcp-olga-7a8b9c',
           bruno => 'sk-mcp-bruno-0d1e2f', admin => 'sk-mcp-admin-3a4b5c');
my $SESSION_KEY = 'mcp-session-key-for-tests-0123456789';

sub backend {
    my (%env) = @_;
    return Gw::Mock->start(script => 't/js/mcp_backend.mjs', env => \%env);
}
my %be = (
    alpha  => backend(MCP_NAME => 'alpha', MCP_MODE => 'stateless', MCP_TOOLS => 'echo,alpha_only'),
    beta   => backend(MCP_NAME => 'beta', MCP_MODE => 'session', MCP_JSON => 1, MCP_TOOLS => 'echo,beta_only'),
    gamma  => backend(MCP_NAME => 'gamma', MCP_TOOLS => 'g', MCP_PROMPTS => 'greet,solo', MCP_RESOURCES => 'doc',
                      MCP_TEMPLATE => 1),
    delta  => backend(MCP_NAME => 'delta', MCP_MODE => 'session', MCP_TOOLS => 'd', MCP_PROMPTS => 'greet',
                      MCP_RESOURCES => 'doc', MCP_TEMPLATE => 1),
    hang   => backend(MCP_NAME => 'hang', MCP_FAULT => 'hang'),
    boom   => backend(MCP_NAME => 'boom', MCP_FAULT => '500'),
    bad    => backend(MCP_NAME => 'bad', MCP_FAULT => 'bad'),
);
my $agent = Gw::Mock->start(script => 't/js/a2a_agent.mjs', env => { A2A_NAME => 'echo-agent', A2A_CARD => 'sdk' });
my $sick_agent = Gw::Mock->start(script => 't/js/a2a_agent.mjs', env => { A2A_FAULT => '500' });

# The tool servers' locations map /_t/<name>[/...] to <path>[/...]; an
# agent's ends in / so that /_t/<name>/<path> reaches /<path>.
sub internal_location {
    my ($name, $port_var, $path) = @_;
    $name .= '/' if $path eq '/';
    return "    location /_t/$name { internal; proxy_pass http://127.0.0.1:%%$port_var%%$path; "
         . "proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; proxy_read_timeout 30s; }\n";
}

sub conf {
    my $http = '';
    $http .= "llm_gateway_user $_ key=$KEY{$_}" . ($_ eq 'admin' ? ' admin' : $_ eq 'alice' ? '' : " group=$_") . ";\n"
        for sort keys %KEY;
    $http .= "llm_gateway_mcp_server gamma location=/_t/gamma groups=pat;\n"
          .  "llm_gateway_mcp_server delta location=/_t/delta groups=pat;\n";
    $http .= "llm_gateway_mcp_server alpha location=/_t/alpha url=http://127.0.0.1:%%ALPHA%%/mcp groups=default,erin,olga;\n"
          .  "llm_gateway_mcp_server beta location=/_t/beta url=https://ops:hunter2\@127.0.0.1:%%BETA%%/mcp?token=abc groups=default,erin;\n"
          .  "llm_gateway_mcp_server hang location=/_t/hang url=http://127.0.0.1:%%HANG%%/mcp groups=olga;\n"
          .  "llm_gateway_mcp_server boom location=/_t/boom groups=olga,bruno;\n"
          .  "llm_gateway_mcp_server bad location=/_t/bad groups=bruno;\n"
          .  "llm_gateway_mcp_server legacy location=/_t/legacy url=http://127.0.0.1:%%ALPHA%%/legacy/sse;\n"
          .  "llm_gateway_mcp_server closed location=/_t/closed groups=;\n"
          .  "llm_gateway_agent echo location=/_t/agent url=http://127.0.0.1:%%AGENT%%;\n"
          .  "llm_gateway_agent sick location=/_t/sick groups=default;\n"
          .  "llm_gateway_agent gone location=/_t/gone;\n";
    my $server = "location = /mcp { llm_gateway_mcp session_key=literal:$SESSION_KEY list_timeout=2s; }\n"
               . "    location /mcp/ { llm_gateway_target_proxy mcp; }\n"
               . "    location /a2a/ { llm_gateway_target_proxy agent; }\n"
               . "    location /pub-a2a/ { llm_gateway_public_url https://gw.example.com/llm/; llm_gateway_target_proxy agent; }\n"
               . "    location /fwd-a2a/ { llm_gateway_public_url \$http_x_forwarded_proto://\$http_x_forwarded_host;"
               . " llm_gateway_target_proxy agent; }\n"
               . "    location /admin { llm_gateway_admin; }\n"
               . internal_location('alpha', 'ALPHA', '/mcp')
               . internal_location('gamma', 'GAMMA', '/mcp')
               . internal_location('delta', 'DELTA', '/mcp')
               . internal_location('beta', 'BETA', '/mcp')
               . internal_location('hang', 'HANG', '/mcp')
               . internal_location('boom', 'BOOM', '/mcp')
               . internal_location('bad', 'BAD', '/mcp')
               . internal_location('legacy', 'ALPHA', '/legacy/sse')
               . internal_location('closed', 'ALPHA', '/mcp')
               . internal_location('agent', 'AGENT', '/')
               . internal_location('sick', 'SICK', '/')
               . "    location /_t/gone { internal; proxy_pass http://127.0.0.1:1; }\n";
    return GwConf::gateway(http => $http, server => $server);
}
my %vars = (ALPHA => $be{alpha}->port, BETA => $be{beta}->port, HANG => $be{hang}->port, BOOM => $be{boom}->port,
            BAD => $be{bad}->port, AGENT => $agent->port, SICK => $sick_agent->port,
            GAMMA => $be{gamma}->port, DELTA => $be{delta}->port,
            MOCK => $be{alpha}->port);   # the default provider, unused here
my $ng = Gw::Nginx->start(conf => conf(), workers => 2, vars => \%vars);

sub mcp_client {
    my ($url, @args) = @_;
    my $r = Gw::run_node('mcp_client.mjs', args => ['--url', $url, @args], timeout => 60);
    diag("mcp_client: $r->{stdout} $r->{stderr}") unless $r->{json} && $r->{json}{ok};
    return $r->{json} // {};
}

sub rpc {
    my ($body, %o) = @_;
    my %h = ('Content-Type' => 'application/json', Accept => 'application/json, text/event-stream',
             ($o{no_key} ? () : (Authorization => 'Bearer ' . ($o{key} // $KEY{alice}))), %{ $o{headers} || {} });
    return Gw::http($o{method} // 'POST', ($o{ng} // $ng)->url($o{path} // '/mcp'), headers => \%h,
                    (defined $body ? (body => ref $body ? Gw::json_encode($body) : $body) : ()),
                    timeout => $o{timeout} // 30);
}
sub call_msg { my ($id, $method, $params) = @_; return { jsonrpc => '2.0', id => $id, method => $method, params => $params // {} } }

sub rpc_methods { my ($m) = @_; return [ map { $_->{rpc_method} // $_->{method} } @{ $m->requests } ] }
sub events {
    my $r = Gw::http(GET => $ng->url('/admin/api/events?limit=200'), headers => GwConf::bearer($KEY{admin}));
    return $r->{json}{events} // [];
}
sub targets_view {
    my $r = Gw::http(GET => $ng->url('/admin/api/targets'), headers => GwConf::bearer($KEY{admin}));
    is($r->{status}, 200, 'targets view: 200') or diag($r->{body});
    return { map { ("$_->{kind}/$_->{name}" => $_) } @{ $r->{json}{targets} // [] } }, $r->{json};
}

subtest 'the official MCP client through /mcp: merged list, routing, the handshake and its DELETE' => sub {
    $_->reset for values %be;
    my $out = mcp_client($ng->url('/mcp'), '--key', $KEY{alice}, 'list', 'call:alpha_only:hi', 'call:beta__echo:x',
                         'call:beta_only:y', 'call:alpha__echo:z', 'ping');
    ok($out->{ok}, 'the client connected, listed, called and pinged');
    like($out->{sessionId} // '', qr/^g1\.[A-Za-z0-9_-]+$/, 'a sealed session id was handed out');
    is($out->{protocolVersion}, '2025-11-25', 'the SDK\'s protocol version was accepted');
    is($out->{serverInfo}{name}, 'llm-gateway', 'serverInfo names the gateway');
    is_deeply($out->{results}[0]{tools}, [qw(alpha__echo alpha_only beta__echo beta_only)],
              'one merged list: unique names kept, colliding ones prefixed with their server');
    is_deeply([ map { $_->{text} } @{ $out->{results} }[1 .. 4] ],
              ['alpha:alpha_only:hi', 'beta:echo:x', 'beta:beta_only:y', 'alpha:echo:z'],
              'each call reached the server that owns the tool, under its own name there');

    my @alpha = @{ $be{alpha}->requests };
    ok(!grep({ ($_->{rpc_method} // '') eq 'initialize' } @alpha), 'the stateless server was never sent a handshake');
    ok(!grep({ defined $_->{headers}{authorization} || defined $_->{headers}{'mcp-session-id'} } @alpha),
       'no caller credential and no gateway session id reached a server');
    my @beta = @{ $be{beta}->requests };
    my @first = map { [$_->{method}, $_->{rpc_method} // '', $_->{status}, defined $_->{headers}{'mcp-session-id'} ? 1 : 0] }
                @beta[0 .. 4];
    is_deeply(\@first, [['POST', 'tools/list', 400, 0], ['POST', 'initialize', 200, 0],
                        ['POST', 'notifications/initialized', 202, 1], ['POST', 'tools/list', 200, 1],
                        ['DELETE', '', 200, 1]],
              'session server: bare call refused (400), initialize, initialized, the retry with the session, then DELETE')
        or diag(explain(\@first));
    my %sessions = map { ($_->{headers}{'mcp-session-id'} // '') => 1 } grep { $_->{headers}{'mcp-session-id'} } @beta[2 .. 4];
    is(scalar keys %sessions, 1, 'the retry and the DELETE carry the session initialize gave');
    ok(!grep({ defined $_->{headers}{authorization} } @beta), 'the caller\'s key never reached the session server');
};

subtest 'initialize: the protocol version allowlist; notifications; other methods' => sub {
    for my $case (['2025-06-18', '2025-06-18'], ['2024-11-05', '2024-11-05'], ['2025-03-26', '2025-03-26'],
                  ['2025-11-25', '2025-11-25'], ['2099-01-01', '2025-11-25'], ['', '2025-11-25']) {
        my $r = rpc(call_msg(1, 'initialize', { protocolVersion => $case->[0], capabilities => {},
                                                 clientInfo => { name => 't', version => '1' } }));
        is($r->{json}{result}{protocolVersion}, $case->[1], "asked '$case->[0]': answered $case->[1]");
    }
    my $r = rpc({ jsonrpc => '2.0', method => 'notifications/initialized' });
    is($r->{status}, 202, 'a notification: 202');
    is($r->{body}, '', '... with no body');
    $r = rpc(call_msg('p', 'ping'));
    is_deeply($r->{json}, { jsonrpc => '2.0', id => 'p', result => {} }, 'ping answers');
    for my $m (qw(resources/subscribe logging/setLevel sampling/createMessage)) {
        $r = rpc(call_msg(3, $m));
        is($r->{json}{error}{code}, -32601, "$m: method not found");
    }
    # Servers that serve no prompts or resources: empty lists, not failures.
    is_deeply(rpc(call_msg(5, 'prompts/list'))->{json}{result}, { prompts => [] }, 'prompts/list: empty');
    is_deeply(rpc(call_msg(6, 'resources/list'))->{json}{result}, { resources => [] }, 'resources/list: empty');
    is(rpc(call_msg(7, 'prompts/get', { name => 'nope' }))->{json}{error}{code}, -32602, 'an unknown prompt: -32602');
    is(rpc(call_msg(8, 'resources/read', {}))->{json}{error}{code}, -32602, 'resources/read without a uri: -32602');
    my $caps = rpc(call_msg(9, 'initialize', { protocolVersion => '2025-11-25' }))->{json}{result}{capabilities};
    is_deeply([ sort keys %$caps ], [qw(completions prompts resources tools)], 'capabilities: what is federated');
    $r = rpc('{"jsonrpc":"2.0","id":1,"method":');
    is($r->{status}, 400, 'unparseable JSON: 400');
    is($r->{json}{error}{code}, -32700, '... a parse error');
    $r = rpc('[{"jsonrpc":"2.0","id":1,"method":"ping"}]');
    is($r->{json}{error}{code}, -32600, 'a batch: invalid request');
    $r = rpc(call_msg(4, 'tools/list'), headers => { 'MCP-Protocol-Version' => '1999-01-01' });
    is($r->{status}, 400, 'an unknown MCP-Protocol-Version header: 400');
};

subtest '405 with Allow: POST before authentication' => sub {
    for my $m (qw(GET DELETE PUT)) {
        my $r = rpc(undef, method => $m, no_key => 1);
        is($r->{status}, 405, "$m without a key: 405, not 401");
        is($r->{headers}{allow}, 'POST', '... Allow: POST');
    }
    is(rpc(call_msg(1, 'ping'), no_key => 1)->{status}, 401, 'POST without a key: 401');
};

subtest 'session ids: forged, altered and foreign ones refused; another replica continues a session' => sub {
    my $init = rpc(call_msg(1, 'initialize', { protocolVersion => '2025-06-18' }));
    my $sid = $init->{headers}{'mcp-session-id'};
    like($sid, qr/^g1\./, 'initialize hands out a session id');
    is(rpc(call_msg(2, 'ping'), headers => { 'Mcp-Session-Id' => $sid })->{status}, 200, 'the session is honoured');
    my $altered = $sid;
    substr($altered, 10, 1) = substr($altered, 10, 1) eq 'A' ? 'B' : 'A';
    for my $bad (['forged', 'g1.' . ('A' x 60)], ['altered', $altered], ['a server\'s uuid', '4f1c2d3e-aaaa-bbbb-cccc-0123456789ab']) {
        my $r = rpc(call_msg(3, 'tools/list'), headers => { 'Mcp-Session-Id' => $bad->[1] });
        is($r->{status}, 404, "$bad->[0] session id: 404");
        is($r->{json}{error}{code}, -32001, '... session not found');
    }
    is(rpc(call_msg(4, 'ping'), key => $KEY{erin}, headers => { 'Mcp-Session-Id' => $sid })->{status}, 404,
       'a session of another user: 404');

    # A second replica with the same session key, and one with another key.
    my $ng2 = Gw::Nginx->start(conf => conf(), workers => 1, vars => \%vars);
    my $out = mcp_client($ng2->url('/mcp'), '--key', $KEY{alice}, '--session', $sid, '--protocol', '2025-06-18',
                         'list', 'call:alpha_only:again');
    ok($out->{ok}, 'the official client resumed the session on another replica');
    is($out->{results}[1]{text}, 'alpha:alpha_only:again', '... and its calls work there');
    (my $conf3 = conf()) =~ s/\Q$SESSION_KEY\E/another-session-key-0000000000000/;
    my $ng3 = Gw::Nginx->start(conf => $conf3, workers => 1, vars => \%vars);
    is(rpc(call_msg(5, 'ping'), ng => $ng3, headers => { 'Mcp-Session-Id' => $sid })->{status}, 404,
       'a replica with another key does not know the session');
    $_->stop for $ng2, $ng3;
};

subtest 'failures: no handshake after a 5xx or a time-out; a hung server does not hold the list' => sub {
    $_->reset for values %be;
    my $t0 = Time::HiRes::time();
    my $r = rpc(call_msg(1, 'tools/list'), key => $KEY{olga});
    my $took = Time::HiRes::time() - $t0;
    is($r->{status}, 200, 'tools/list: 200');
    is_deeply([ map { $_->{name} } @{ $r->{json}{result}{tools} // [] } ], [qw(echo alpha_only)],
              'the reachable server\'s tools, under their own names (unique in this group)');
    cmp_ok($took, '>=', 1.8, 'the hung server was waited for up to its time-out ...');
    cmp_ok($took, '<', 5, '... and not longer (list_timeout=2s)');
    is_deeply(rpc_methods($be{boom}), ['tools/list'], 'the 5xx server: one bare call, no handshake');
    my $hung = $be{hang}->wait_requests(1);
    is_deeply([ map { $_->{rpc_method} } @$hung ], ['tools/list'], 'the hung server: one bare call, no handshake');
    my @ev = grep { $_->{route} eq 'mcp-federated' } @{ events() };
    ok((grep { $_->{kind} eq 'timeout' && $_->{status} == 504 && $_->{provider} eq 'hang' } @ev),
       'event: the time-out, route mcp-federated') or diag(explain(\@ev));
    ok((grep { $_->{kind} eq 'upstream' && $_->{status} == 500 && $_->{provider} eq 'boom'
               && $_->{message} eq 'mcp-federated upstream returned status 500' } @ev), 'event: the 500');
    is($ev[0]{user}, 'olga', 'events name the user');

    # A client that leaves while a server is still awaited: its calls end with
    # it, and the worker goes on (any alert in error.log fails the test).
    $r = rpc(call_msg(9, 'tools/list'), key => $KEY{olga}, timeout => 0.5);
    ok($r->{status} == 599 || $r->{status} == 0, 'a client gone before the hung server timed out');
    sleep 2;
    is(rpc(call_msg(10, 'ping'), key => $KEY{olga})->{status}, 200, 'the gateway serves on');

    $r = rpc(call_msg(2, 'tools/list'), key => $KEY{bruno});
    is_deeply($r->{json}, { jsonrpc => '2.0', id => 2, error => { code => -32603, message => 'no MCP server reachable' } },
              'every server failing: the JSON-RPC internal error');
    is_deeply(rpc_methods($be{bad}), ['tools/list'], 'a reply with neither result nor error is a failure, not retried');
    $r = rpc(call_msg(3, 'tools/call', { name => 'echo', arguments => {} }), key => $KEY{bruno});
    is($r->{json}{error}{code}, -32603, 'tools/call with no server reachable: internal error');
    $r = rpc(call_msg(4, 'tools/call', { name => 'nope', arguments => {} }), key => $KEY{alice});
    is($r->{json}{error}{code}, -32602, 'an unknown tool: invalid params');
    like($r->{json}{error}{message}, qr/Unknown tool: nope/, '... naming it');
};

subtest 'prompts and resources: merged lists, names, owners, template URIs, completion' => sub {
    $_->reset for @be{qw(gamma delta)};
    my $r = rpc(call_msg(1, 'prompts/list'), key => $KEY{pat});
    is_deeply([ map { $_->{name} } @{ $r->{json}{result}{prompts} // [] } ], [qw(gamma__greet solo delta__greet)],
              'prompts: the naming rule of tools');
    $r = rpc(call_msg(2, 'prompts/get', { name => 'delta__greet' }), key => $KEY{pat});
    is($r->{json}{result}{messages}[0]{content}{text}, 'delta:greet', 'prompts/get goes to the owner under its own name');
    $r = rpc(call_msg(3, 'resources/list'), key => $KEY{pat});
    is_deeply([ map { $_->{uri} } @{ $r->{json}{result}{resources} // [] } ], ['test://gamma/doc', 'test://delta/doc'],
              'resources: every server\'s URIs');
    $r = rpc(call_msg(4, 'resources/read', { uri => 'test://delta/doc' }), key => $KEY{pat});
    is($r->{json}{result}{contents}[0]{text}, 'delta:doc', 'resources/read goes to the URI\'s owner');
    $r = rpc(call_msg(5, 'resources/templates/list'), key => $KEY{pat});
    is_deeply([ map { $_->{uriTemplate} } @{ $r->{json}{result}{resourceTemplates} // [] } ],
              ['test://gamma/item/{id}', 'test://delta/item/{id}'], 'resource templates merged');
    $_->reset for @be{qw(gamma delta)};
    $r = rpc(call_msg(6, 'resources/read', { uri => 'test://delta/item/42' }), key => $KEY{pat});
    is($r->{json}{result}{contents}[0]{text}, 'delta:item:42', 'a URI no list names: every server asked, the one that has it answers');
    ok((grep { ($_->{rpc_method} // '') eq 'resources/read' } @{ $be{gamma}->requests }), '... gamma was asked too');
    $r = rpc(call_msg(7, 'resources/read', { uri => 'test://nobody/x' }), key => $KEY{pat});
    ok($r->{json}{error}, 'a URI nobody has: the first server\'s error') or diag($r->{body});
    $_->reset for @be{qw(gamma delta)};
    $r = rpc(call_msg(8, 'completion/complete', { ref => { type => 'ref/prompt', name => 'solo' },
                                                   argument => { name => 'x', value => '' } }), key => $KEY{pat});
    is($r->{json}{error}{code}, -32601, 'completion/complete: the owner\'s own answer (it has no completions)');
    ok((grep { ($_->{rpc_method} // '') eq 'completion/complete' } @{ $be{gamma}->requests }), '... asked of the owner of "solo"');
    ok(!grep({ ($_->{rpc_method} // '') eq 'completion/complete' } @{ $be{delta}->requests }), '... and of no other server');
};

subtest 'legacy /sse servers: left out of federation, reachable through their proxy' => sub {
    $be{alpha}->reset;
    my $r = rpc(call_msg(1, 'tools/list'), key => $KEY{erin});
    my @names = map { $_->{name} } @{ $r->{json}{result}{tools} // [] };
    is(scalar(grep { /legacy/ } @names), 0, 'no tool of the legacy server');
    ok(!grep({ $_->{path} =~ m{/sse} } @{ $be{alpha}->requests }), 'the legacy server was not asked');
    my $p = Gw::http(GET => $ng->url('/mcp/legacy'), headers => GwConf::bearer($KEY{erin}), timeout => 10);
    is($p->{status}, 200, 'GET /mcp/legacy: 200 through the proxy');
    like($p->{headers}{'content-type'}, qr{^text/event-stream}, '... the server\'s event stream');
    like($p->{body}, qr/event: endpoint/, '... its first event relayed');
};

subtest 'per-target proxy for a tool server: the official client, credentials stripped, refusals' => sub {
    $be{beta}->reset;
    my $out = mcp_client($ng->url('/mcp/beta'), '--key', $KEY{erin}, 'list', 'call:echo:direct');
    ok($out->{ok}, 'the official client works through /mcp/beta (a session server)');
    is_deeply($out->{results}[0]{tools}, [qw(echo beta_only)], 'the server\'s own tool names');
    is($out->{results}[1]{text}, 'beta:echo:direct', 'the call reached it');
    my @reqs = @{ $be{beta}->requests };
    ok(@reqs >= 3, 'every request went through');
    ok(!grep({ defined $_->{headers}{authorization} } @reqs), 'the caller\'s key was stripped');
    ok((grep { ($_->{headers}{'mcp-session-id'} // '') ne '' } @reqs), 'the server\'s own session id passes both ways');

    $be{alpha}->reset;
    my $r = Gw::http(POST => $ng->url('/mcp/closed'), headers => GwConf::bearer($KEY{alice}), body => '{}');
    GwConf::is_envelope($r, 403, 'permission_error', 'target_forbidden', 'groups= empty: 403 for everyone');
    $r = Gw::http(POST => $ng->url('/mcp/beta'), headers => GwConf::bearer($KEY{olga}), body => '{}');
    GwConf::is_envelope($r, 403, 'permission_error', 'target_forbidden', 'a group outside the list: 403');
    is(scalar @{ $be{alpha}->requests }, 0, 'the backend saw nothing');
    $r = Gw::http(POST => $ng->url('/mcp/nope'), headers => GwConf::bearer($KEY{alice}), body => '{}');
    GwConf::is_envelope($r, 404, 'invalid_request_error', 'unknown_target', 'an unknown tool server: 404');
    $r = Gw::http(POST => $ng->url('/mcp/beta'), body => '{}');
    is($r->{status}, 401, 'no key: 401');
};

subtest 'the agent card behind a load balancer: llm_gateway_public_url' => sub {
    my $card = sub {
        my ($path, %h) = @_;
        my $r = Gw::http(GET => $ng->url("$path/echo/.well-known/agent-card.json"),
                         headers => { %{ GwConf::bearer($KEY{alice}) }, %h });
        return ($r->{status}, ($r->{json} // {})->{url} // '');
    };
    my ($st, $url) = $card->('/pub-a2a');
    is($st, 200, 'the card: 200');
    like($url, qr{^https://gw\.example\.com/llm/pub-a2a/echo(/|$)}, "a literal public URL: $url");
    ($st, $url) = $card->('/fwd-a2a', 'X-Forwarded-Proto' => 'https', 'X-Forwarded-Host' => 'lb.example.com:8443');
    like($url, qr{^https://lb\.example\.com:8443/fwd-a2a/echo(/|$)}, "from the forwarding headers the operator trusts: $url");
    my $from = length $ng->error_log;
    ($st, $url) = $card->('/fwd-a2a', 'X-Forwarded-Proto' => 'https', 'X-Forwarded-Host' => 'evil.example/x?y=<1>');
    my $own = $ng->url('/fwd-a2a/echo');
    like($url, qr{^\Q$own\E(/|$)}, 'a value that is not a URL: the connection\'s scheme and Host instead');
    like(substr($ng->error_log, $from), qr/\[warn\].*llm_gateway_public_url .*the public URL's path may not hold a query/,
         'and a warning says why');
    ($st, $url) = $card->('/a2a');
    like($url, qr{^\Q${\ $ng->url('/a2a/echo')}\E(/|$)}, 'without the directive: as before');
    for my $case (['ftp://gw.example.com', qr/llm_gateway_public_url: the public URL must start with http:\/\/ or https:\/\//],
                  ['https://gw.example.com/a?b', qr/path may not hold a query/],
                  ['https://:8443', qr/has no valid host/]) {
        my ($rc, $out, $file) = Gw::nginx_t(GwConf::gateway(server => "location /a/ { llm_gateway_public_url $case->[0]; "
                                                                    . "llm_gateway_target_proxy agent; }"),
                                            vars => { MOCK => 1 });
        isnt($rc, 0, "$case->[0]: nginx -t fails");
        like($out, $case->[1], "$case->[0]: the sentence says why");
        like($out, qr/ in \Q$file\E:\d+/, "$case->[0]: file and line");
    }
};

subtest 'per-target proxy for an agent: the official A2A client, the card rewritten, events' => sub {
    $agent->reset;
    my $card_url = $ng->url('/a2a/echo/.well-known/agent-card.json');
    my $r = Gw::run_node('a2a_client.mjs', args => ['--card', $card_url, '--key', $KEY{alice}, 'card', 'send:hello', 'stream:world'],
                         timeout => 60);
    my $out = $r->{json} // {};
    ok($out->{ok}, 'the official A2A client: card, message/send, message/stream') or diag($r->{stdout} . $r->{stderr});
    my $base = $ng->url('/a2a/echo/');
    like($out->{cardUrl} // '', qr/^\Q$base\E/, 'the card points at the gateway');
    is($out->{results}[1]{text}, 'echo: hello', 'message/send answered');
    is($out->{results}[2]{text}, 'echo: world', 'message/stream answered');
    cmp_ok(scalar @{ $out->{results}[2]{events} // [] }, '>=', 2, '... as a stream of events');
    my @reqs = @{ $agent->requests };
    ok((grep { ($_->{rpc_method} // '') =~ /stream|Streaming/i } @reqs), 'the stream went through the gateway');
    ok(!grep({ defined $_->{headers}{authorization} } @reqs), 'the caller\'s key never reached the agent');
    my $card = Gw::http(GET => $card_url, headers => GwConf::bearer($KEY{alice}));
    unlike($card->{body}, qr/127\.0\.0\.1:${\ $agent->port}/, 'no address of the agent left in the card');

    $r = Gw::http(POST => $ng->url('/a2a/sick/a2a/jsonrpc'), headers => GwConf::bearer($KEY{alice}),
                  body => Gw::json_encode(call_msg(1, 'message/send', {})));
    is($r->{status}, 500, 'an agent\'s 500 is relayed as it is');
    $r = Gw::http(POST => $ng->url('/a2a/gone/'), headers => GwConf::bearer($KEY{alice}), body => '{}');
    is($r->{status}, 502, 'no answer at all: 502');
    $r = Gw::http(GET => $ng->url('/a2a/sick/.well-known/agent-card.json'), headers => GwConf::bearer($KEY{erin}));
    GwConf::is_envelope($r, 403, 'permission_error', 'target_forbidden', 'an agent closed to the group: 403');
    my @ev = grep { $_->{route} eq 'a2a' } @{ events() };
    ok((grep { $_->{status} == 500 && $_->{message} eq 'a2a upstream returned status 500' && $_->{provider} eq 'sick' } @ev),
       'event: a2a upstream returned status 500') or diag(explain(\@ev));
    ok((grep { $_->{status} == 502 && $_->{message} eq 'upstream connection error' && $_->{provider} eq 'gone' } @ev),
       'event: upstream connection error');
};

subtest 'the targets view: sorted, counters, sanitized URLs, null versus []' => sub {
    # A federated call to beta in this minute (not at its end), so that its
    # minute window holds a request when the view is read.
    GwMeter::wait_second_below(50);
    ok(mcp_client($ng->url('/mcp'), '--key', $KEY{alice}, 'call:beta__echo:now')->{ok}, 'a call to beta this minute');
    my ($t, $doc) = targets_view();
    is_deeply([ map { "$_->{kind}/$_->{name}" } @{ $doc->{targets} } ],
              [qw(agent/echo agent/gone agent/sick mcp/alpha mcp/bad mcp/beta mcp/boom mcp/closed mcp/delta mcp/gamma mcp/hang mcp/legacy)],
              'sorted by kind and name');
    is_deeply($t->{'mcp/alpha'}{access}, [qw(default erin olga)], 'a list of groups');
    ok(exists $t->{'mcp/legacy'}{access} && !defined $t->{'mcp/legacy'}{access}, 'every group: null');
    is_deeply($t->{'mcp/closed'}{access}, [], 'no group: []');
    is($t->{'mcp/beta'}{url}, "https://127.0.0.1:$vars{BETA}/mcp", 'userinfo and query removed from the URL');
    unlike($doc && Gw::json_encode($doc), qr/hunter2|token=abc/, 'no secret of a URL anywhere');
    is($t->{'mcp/legacy'}{federated}, JSON::PP::false, 'the legacy server is marked as not federated');
    cmp_ok($t->{'mcp/beta'}{requests}{day}, '>=', 5, 'beta counted its federated and proxied requests');
    cmp_ok($t->{'mcp/beta'}{requests}{min}, '>=', 1, '... in the minute window too');
    cmp_ok($t->{'agent/echo'}{requests}{month}, '>=', 3, 'the agent counted its requests');
    is($t->{'mcp/closed'}{requests}{day}, 0, 'a refused request is not counted');
    is(Gw::http(GET => $ng->url('/admin/api/targets'), headers => GwConf::bearer($KEY{alice}))->{status}, 403,
       'a non-admin: 403');
};

done_testing();
