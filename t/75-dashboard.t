# The admin dashboard (docs/admin.md#the-dashboard). Over HTTP: the page and
# its files, their policy, validators, 304s, HEAD, 404 and 405, under two
# location prefixes. In Debian's Chromium, driven by playwright-core
# (t/js/dashboard.mjs): with traffic on a real gateway, the page loads with
# no console error, failed request, CSP violation or request to another
# host; a wrong key and a non-admin key show their error and no data; the
# admin key shows users and groups with usage, limits and the total (and,
# with response-cache counters in the store, each scope's hit rate), the
# model ranking, a history chart with a hover read-out, the failure feed with
# a real rejection, targets, catalog and configuration; tables sort; the key
# is in sessionStorage only (never localStorage or the URL) and sign-out
# removes it. With Redis killed, every counter view shows a store outage,
# never zeros, and the overview shows the store down with its last error.
#
# LLMGW_DASHBOARD_SHOTS=<dir> keeps the screenshots there (make screenshots:
# docs/img/dashboard/*.png, and the outage's in docs/img/dashboard/outage/).
use strict;
use utf8;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use File::Temp ();
use Test::More;

Gw::need_module();
GwRedis::need_redis();
Gw::need(Gw::have_js_deps() && -d "t/js/node_modules/playwright-core", 't/js/node_modules missing (make js)');
my $chromium = $ENV{CHROMIUM_BIN} || '/usr/bin/chromium';
Gw::need(-x $chromium, "$chromium missing (scripts/install-deps installs Debian's chromium)");

my $ADMIN = $GwMeter::ADMIN_KEY;
my $mock = Gw::Mock->start();
my @USERS = (
    'llm_gateway_group eng requests_per_day=100 tokens_per_day=100000;',
    'llm_gateway_group glim requests_per_minute=2;',
    'llm_gateway_user alice key=sk-alice-dash group=eng cost_per_day=1;',
    'llm_gateway_user bob key=sk-bob-dash group=eng;',
    'llm_gateway_user lim key=sk-lim-dash group=glim;',
);

sub gateway {
    my (%o) = @_;
    # A long directory: the configuration's warnings name their file, and a
    # long path must stay inside its card (the Warnings card overflowed).
    return Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port },
                            prefix_template => 'llmgw_nginx_a_rather_long_directory_name_for_the_warnings_card_XXXXXX',
                            conf => GwMeter::conf(users => \@USERS, http => $o{http} // '',
                                                  server => "    location /ops/admin { llm_gateway_admin; }\n"));
}

sub browse {
    my (%o) = @_;
    my $r = Gw::run_node('dashboard.mjs', args => [Gw::json_encode(\%o)], timeout => 150,
                         env => { CHROMIUM_BIN => $chromium });
    ok($r->{json} && !$r->{json}{fatal}, 'the browser run finished')
        or diag("exit $r->{exit}\nstdout: $r->{stdout}\nstderr: $r->{stderr}\n"
                . ($r->{json} ? "fatal: $r->{json}{fatal}" : ''));
    return $r->{json} || {};
}

sub slurp { my ($f) = @_; open my $fh, '<:raw', $f or die "$f: $!"; local $/; return <$fh> }

# Usage rows by name.
sub by_name { my ($rows) = @_; return { map { ($_->{name} => $_) } @{ $rows || [] } } }

my $PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
             . "base-uri 'self'; form-action 'none'; frame-ancestors 'none'";

# ============================================================ over HTTP

my $ng = gateway();

subtest 'the page and its files' => sub {
    for my $prefix ('/admin', '/ops/admin') {
        my $r = Gw::http(GET => $ng->url($prefix));
        is($r->{status}, 200, "GET $prefix: 200 without a key");
        is($r->{headers}{'content-type'}, 'text/html; charset=utf-8', "$prefix: text/html");
        is($r->{headers}{'content-security-policy'}, $PAGE_CSP, "$prefix: the page's policy");
        is($r->{headers}{'x-content-type-options'}, 'nosniff', "$prefix: nosniff");
        is($r->{headers}{'cache-control'}, 'no-cache', "$prefix: revalidated on each use");
        is($r->{headers}{'referrer-policy'}, 'no-referrer', "$prefix: no referrer");
        like($r->{headers}{etag} // '', qr/^"[0-9a-f]{20}"$/, "$prefix: a strong ETag");
        like($r->{body}, qr{<head>\n?<base href="admin/">}, "$prefix: a base, so ui/ resolves under $prefix/");
        like($r->{body}, qr{<script type="module" src="ui/app\.js"></script>}, "$prefix: the script is a file");
        my $s = Gw::http(GET => $ng->url("$prefix/"));
        is($s->{status}, 200, "GET $prefix/: 200");
        unlike($s->{body}, qr/<base/, "$prefix/: no base needed");
        isnt($s->{headers}{etag}, $r->{headers}{etag}, 'each form has its own ETag');

        my $js = Gw::http(GET => $ng->url("$prefix/ui/app.js"));
        is($js->{status}, 200, "$prefix/ui/app.js: 200");
        is($js->{headers}{'content-type'}, 'text/javascript; charset=utf-8', 'app.js: JavaScript');
        is($js->{headers}{'content-length'}, -s 'src/admin-ui/app.js', 'app.js: the file as kept in src/admin-ui');
        is($js->{body}, slurp('src/admin-ui/app.js'), 'app.js: byte for byte');
        is($js->{headers}{'content-security-policy'}, $PAGE_CSP, 'app.js: the same policy');
    }
    my %type = ('app.css' => 'text/css; charset=utf-8', 'icon.svg' => 'image/svg+xml',
                map { ("$_.js" => 'text/javascript; charset=utf-8') } qw(api format chart table views));
    for my $f (sort keys %type) {
        my $r = Gw::http(GET => $ng->url("/admin/ui/$f"));
        is("$r->{status} $r->{headers}{'content-type'}", "200 $type{$f}", "$f: 200 $type{$f}");
    }

    my $first = Gw::http(GET => $ng->url('/admin/ui/app.css'));
    my $etag = $first->{headers}{etag};
    my $again = Gw::http(GET => $ng->url('/admin/ui/app.css'), headers => { 'If-None-Match' => $etag });
    is($again->{status}, 304, 'If-None-Match with the ETag: 304');
    is($again->{body}, '', '304: no body');
    is($again->{headers}{etag}, $etag, '304: the same ETag');
    my $other = Gw::http(GET => $ng->url('/admin/ui/app.css'), headers => { 'If-None-Match' => '"0000"' });
    is($other->{status}, 200, 'another ETag: 200');
    my $page = Gw::http(GET => $ng->url('/admin'), headers => { 'If-None-Match' => Gw::http(GET => $ng->url('/admin'))->{headers}{etag} });
    is($page->{status}, 304, 'the page: 304 too');

    my $head = Gw::http(HEAD => $ng->url('/admin/ui/chart.js'));
    is($head->{status}, 200, 'HEAD: 200');
    is($head->{headers}{'content-length'}, -s 'src/admin-ui/chart.js', 'HEAD: the length');
    is($head->{body}, '', 'HEAD: no body');

    GwConf::is_envelope(Gw::http(GET => $ng->url('/admin/ui/nope.js')), 404, 'invalid_request_error', 'unknown_url',
                        'an unknown file: 404 unknown_url');
    GwConf::is_envelope(Gw::http(GET => $ng->url('/admin/ui/')), 404, 'invalid_request_error', 'unknown_url',
                        'the folder itself: 404');
    GwConf::is_envelope(Gw::http(GET => $ng->url('/admin/ui/x/app.js')), 404, 'invalid_request_error', 'unknown_url',
                        'a file in a subfolder: 404');
    my $post = Gw::http(POST => $ng->url('/admin/ui/app.js'), body => 'x');
    is($post->{status}, 405, 'POST to a file: 405');
    is($post->{headers}{allow}, 'GET, HEAD', 'Allow: GET, HEAD');
    # A dot-segment is resolved by nginx first: it reaches the API, which wants a key.
    GwConf::is_envelope(Gw::http(GET => $ng->url('/admin/ui/%2e%2e/api/usage')), 401, 'invalid_request_error',
                        'missing_api_key', 'ui/../api/usage is the API: 401 without a key');

    my $json = Gw::http(GET => $ng->url('/admin/api/usage'), headers => GwMeter::auth($ADMIN));
    is($json->{headers}{'cache-control'}, 'no-store', 'the JSON stays no-store');
    is($json->{headers}{'content-security-policy'}, "default-src 'none'; frame-ancestors 'none'", 'the JSON: its own policy');
    ok(!exists $json->{headers}{etag}, 'the JSON: no ETag');
};

# ============================================================ in the browser

subtest 'with the admin key: every view, with traffic on the gateway' => sub {
    sleep 1 while GwMeter::secs_to_midnight() < 150;   # one UTC day for the whole check
    GwMeter::wait_second_below(40);
    is(GwMeter::chat($ng, 'sk-alice-dash')->{status}, 200, "alice: chat $_") for 1 .. 3;
    is(GwMeter::chat($ng, 'sk-bob-dash')->{status}, 200, 'bob: chat');
    my @lim = map { GwMeter::chat($ng, 'sk-lim-dash')->{status} } 1 .. 3;
    is_deeply(\@lim, [200, 200, 429], 'lim: the third request within the minute is refused');
    my $u = GwMeter::usage($ng);
    my $alice = GwMeter::row($u, user => 'alice');

    my $shots = $ENV{LLMGW_DASHBOARD_SHOTS} || File::Temp::tempdir('llmgw-shots-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my @views = qw(overview usage history models events targets catalog config);
    my $b = browse(url => $ng->url('/admin'), key => $ADMIN, badKey => 'sk-not-a-key', plainKey => 'sk-bob-dash',
                   oddKey => "sk-caf\x{e9} key",
                   views => \@views, history => { scope => 'user:alice' }, shots => $shots, narrow => \1, sort => \1);
    my $s = $b->{steps} || {};

    # Before any key.
    is($s->{load}{status}, 200, 'the page: 200');
    ok($s->{load}{signinVisible}, 'the page asks for the key');
    ok(!$s->{load}{tabsVisible}, 'no view before a key');

    # The page's conduct over the whole run.
    is_deeply($b->{pageErrors}, [], 'no script error');
    is_deeply($b->{failedRequests}, [], 'no failed request');
    is_deeply($b->{otherHosts}, [], 'no request to another host');
    is_deeply($b->{csp}, [], 'no Content-Security-Policy violation');
    is_deeply([map { "$_->{status} $_->{url}" } @{ $b->{badResponses} || [] }],
              ['401 ' . $ng->url('/admin/api/overview'), '403 ' . $ng->url('/admin/api/overview')],
              'the only error answers: the wrong key (401) and the non-admin key (403)');
    is_deeply([grep { $_->{type} eq 'error' && $_->{text} !~ /status of 40[13] \((Unauthorized|Forbidden)\)/ } @{ $b->{console} || [] }],
              [], 'no console error but the browser noting those two');
    is_deeply([grep { $_->{type} eq 'warning' } @{ $b->{console} || [] }], [], 'no console warning');
    is_deeply($s->{signedInErrors}, { badResponses => [], console => [] }, 'signed in: not one error');

    # A wrong key, a user's key: the error, and nothing else.
    like($s->{badKey}{banner}, qr/^The gateway did not accept this key \(401: Incorrect API key provided\.?\)\. Sign in with an admin key\.$/,
         'wrong key: says the key was not accepted');
    is($s->{badKey}{text}, '', 'wrong key: no data');
    ok($s->{badKey}{signinVisible} && !$s->{badKey}{tabsVisible}, 'wrong key: asked again, no views');
    is_deeply($s->{badKey}{storage}{session}, [], 'wrong key: not kept');
    like($s->{plainKey}{banner}, qr/^This key is not an admin key \(403: this key is not an admin key\)\./,
         'a non-admin key: 403 said as such');
    is($s->{plainKey}{text}, '', 'non-admin key: no data');
    is($s->{oddKey}{banner}, 'An API key is printable ASCII without spaces; this is not one.',
       'a key with a space and a non-ASCII letter: refused in the page');
    ok($s->{oddKey}{signinVisible} && $s->{oddKey}{text} eq '', 'that key: asked again, no data');
    is_deeply($s->{oddKey}{storage}{session}, [], 'that key: not kept');

    # Overview.
    like($s->{overview}{text}, qr/replica\n\S+/, 'overview: the replica');
    like($s->{overview}{text}, qr{has no key=}, 'overview: the warning of the provider without a key, with its file');
    for my $v (@views) {
        is_deeply($s->{$v}{overflowing}, [], "$v: every card holds its content");
    }
    is_deeply($s->{narrowOverview}{overflowing}, [], 'overview on a narrow screen: every card holds its content');
    like($s->{overview}{text}, qr/type\nthis nginx only \(shared memory\)\nstate\nup/, 'overview: the store, up');
    is(scalar @{ $s->{overview}{tables}{providers}{rows} || [] }, 1, 'overview: one provider');
    is($s->{overview}{tables}{providers}{rows}[0]{name}, 'mock', 'overview: the provider by name');

    # Usage: every user and group, their usage against their limits, the total.
    my $users = by_name($s->{usage}{tables}{'usage-users'}{rows});
    my $groups = by_name($s->{usage}{tables}{'usage-groups'}{rows});
    is_deeply([sort keys %$users], [qw(alice bob lim root)], 'usage: every user');
    is_deeply([sort keys %$groups], [qw(default eng glim)], 'usage: every group');
    is($users->{alice}{rpd}, '3', 'alice: 3 requests today');
    is($users->{alice}{group}, 'eng', 'alice: her group');
    my $tok = $alice->{tokensInPerDay} + $alice->{tokensOutPerDay};
    is($users->{alice}{tpd}, $tok, "alice: $tok tokens today");
    is($users->{alice}{'tpd.detail'}, "$alice->{tokensInPerDay} in · $alice->{tokensOutPerDay} out", 'alice: in and out');
    is($users->{alice}{cpd}, sprintf('$0.%06d', $alice->{costPerDayMicroUsd}) =~ s/0+$//r, 'alice: her cost, in dollars');
    is($users->{alice}{'cpd.of'}, 'of $1.00 · 0%', 'alice: against her cost budget of $1');
    is($groups->{eng}{rpd}, '4', 'eng: 4 requests today');
    is($groups->{eng}{'rpd.of'}, 'of 100 · 4%', 'eng: 4% of its 100 a day');
    is($groups->{eng}{'tpd.of'}, sprintf('of 100,000 · %d%%', 0), 'eng: its token budget');
    is($groups->{glim}{rpm}, '2', 'glim: 2 admitted this minute');
    is($groups->{glim}{'rpm.of'}, 'of 2 · 100%', 'glim: at its limit');
    is($users->{lim}{rej}, '1', 'lim: one rejection today');
    is($groups->{glim}{rej}, '1', 'glim: one rejection today');
    is($users->{bob}{rej}, '0', 'bob: none');
    ok(!exists $users->{bob}{'rpd.of'}, 'bob: no limit of his own, no bar');
    ok(!exists $users->{alice}{cache} && !exists $groups->{eng}{cache}, 'usage: no cache column without a cache lookup');
    is($s->{usage}{tables}{'usage-groups'}{bars}, 3, 'groups: a bar per limit set (eng: 2, glim: 1, the total: none)')
        or diag explain $s->{usage}{tables}{'usage-groups'};
    my $total = $s->{usage}{tables}{'usage-groups'}{foot}[0] || {};
    is($total->{name}, 'Total (all traffic)', 'the total row');
    is($total->{rpd}, '6', 'total: 6 requests today (the admin\'s reads are not LLM traffic)');
    is($total->{rej}, '1', 'total: the one rejection');

    # Sorting.
    is_deeply($s->{sort}{asc}, [qw(alice bob lim root)], 'a click on User: A to Z');
    is_deeply($s->{sort}{desc}, [qw(root lim bob alice)], 'a second click: Z to A');

    # History: alice's requests per day, today's bar 3, read out on hover.
    my $c = $s->{history}{chart} || {};
    is($c->{title}, 'requests of user:alice per day (UTC)', 'history: the chosen scope');
    is($c->{bars}, 30, 'history: 30 days');
    is($c->{values}[-1], 3, "history: today's bar is 3");
    is((grep { $_ } @{ $c->{values} || [] }), 1, 'history: the other days are 0');
    my @day = gmtime;
    my $today = sprintf('%04d-%02d-%02d', $day[5] + 1900, $day[4] + 1, $day[3]);
    is($c->{readout}, "$today (UTC): 3", 'history: hovering the last bar reads it out');
    ok((grep { $_ eq $today } @{ $c->{ticks} || [] }), 'history: the newest bucket is labelled');
    is_deeply([@{ $c->{ticks} || [] }[0 .. 4]], [qw(0 1 2 3 4)], 'history: a y axis 0..4');

    # The model ranking.
    my $m = $s->{models}{tables}{models}{rows} || [];
    is(scalar @$m, 1, 'ranking: one model with usage');
    is($m->[0]{model}, 'mock/gpt-4o-mini', 'ranking: the model');
    is($m->[0]{requests}, '6', 'ranking: its 6 requests');

    # The failure feed, with the real rejection.
    my $ev = $s->{events}{tables}{events}{rows} || [];
    my ($rej) = grep { $_->{kind} eq 'rate_limit' } @$ev;
    ok($rej, 'feed: the rejection is there');
    is($rej->{status}, '429', 'feed: 429');
    is($rej->{user}, 'lim', 'feed: by lim');
    is($rej->{route}, 'chat/completions', 'feed: the route');
    is($rej->{message}, 'rate limit exceeded: group "glim" requestsPerMinute 2', 'feed: the message');
    like($s->{events}{text}, qr/from replica \S+'s own ring/, 'feed: its source');

    # Targets, catalog and configuration.
    is_deeply($s->{targets}{empties}, ['no tool servers or agents configured'], 'targets: an empty state that says so');
    my ($cat) = grep { $_->{id} eq 'mock/gpt-4o-mini' } @{ $s->{catalog}{tables}{catalog}{rows} || [] };
    is_deeply([@$cat{qw(source in out)}], ['built-in table', '$0.15', '$0.60'], 'catalog: the price and its source');
    like($s->{config}{text}, qr/"keySource": "literal"/, 'configuration: as the API returns it');
    unlike($s->{config}{text}, qr/sk-alice-dash|sk-root/, 'configuration: no key');

    # The key: this tab's session only.
    is_deeply($s->{storage}{local}, [], 'localStorage: empty');
    is_deeply($s->{storage}{session}, [['llmgw-admin-key', $ADMIN]], 'sessionStorage: the key');
    unlike($s->{storage}{url}, qr/\Q$ADMIN\E|sk-/, 'the URL: no key');
    is_deeply($s->{signout}{storage}{session}, [], 'sign-out: the key is gone');
    ok($s->{signout}{signinVisible} && $s->{signout}{text} eq '', 'sign-out: no data, the key asked for');
    is($s->{pause}{label}, 'Resume', 'pause: the refresh stops');
    is($s->{narrow}{scrollWidth}, 390, 'a narrow screen: the page fits (tables scroll inside)');

    for my $v (qw(signin wrong-key usage-narrow), @views) {
        ok(-s "$shots/$v.png" > 2000, "screenshot $v.png");
    }
};

$ng->stop;

# ============================================================ the response cache

subtest 'the response cache: hit rate and hits per scope, a dash without a lookup' => sub {
    my $rd = GwRedis->start();
    # The cache on (docs/cache.md): the usage view reads its counters.
    my $g = gateway(http => 'llm_gateway_store redis://127.0.0.1:' . $rd->port . ";\n"
                          . "proxy_cache_path %%TMP%%/cache keys_zone=llm:1m;\nllm_gateway_cache zone=llm;\n");
    # The counters accounting writes for alice's requests (docs/cache.md): today
    # and this month 2 hits and 1 miss, in her scope, her group's and the total.
    sleep 1 while GwMeter::secs_to_midnight() < 60;
    my %c = (chit => 2, cmiss => 1, chitin => 30, chitout => 12);
    for my $scope ([user => 'alice'], [group => 'eng'], [total => 'all']) {
        for my $win (qw(day month)) {
            $rd->cli('SET', GwRedis::key(@$scope, $_, $win), $c{$_}) for sort keys %c;
        }
    }
    my $shots = $ENV{LLMGW_DASHBOARD_SHOTS} ? "$ENV{LLMGW_DASHBOARD_SHOTS}/cache" : undef;
    mkdir $shots if $shots;
    my $b = browse(url => $g->url('/admin/'), key => $ADMIN, views => ['usage'], ($shots ? (shots => $shots) : ()));
    my $s = ($b->{steps} || {})->{usage} || {};
    my $users = by_name($s->{tables}{'usage-users'}{rows});
    my $groups = by_name($s->{tables}{'usage-groups'}{rows});
    is($users->{alice}{cache}, '66%', 'alice: 2 of 3 lookups today answered from the cache');
    is($users->{alice}{'cache.detail'}, '2 hits · 1 miss', 'alice: her hits and misses');
    is($users->{bob}{cache}, '—', 'bob: no lookup, a dash');
    is($groups->{eng}{cache}, '66%', 'eng: the same');
    is(($s->{tables}{'usage-groups'}{foot}[0] || {})->{cache}, '66%', 'the total row');
    is_deeply($s->{overflowing}, [], 'every card holds its content');
    is_deeply($b->{pageErrors}, [], 'no script error');
    is_deeply($b->{csp}, [], 'no policy violation');
    $g->stop;
    $rd->stop;
};

# ============================================================ a store outage

subtest 'the store down: an outage, never zeros' => sub {
    my $rd = GwRedis->start();
    my $g = gateway(http => 'llm_gateway_store redis://127.0.0.1:' . $rd->port . ";\n");
    is(GwMeter::chat($g, 'sk-alice-dash')->{status}, 200, 'a request while the store is up');
    $rd->kill9;
    my $shots = $ENV{LLMGW_DASHBOARD_SHOTS} ? "$ENV{LLMGW_DASHBOARD_SHOTS}/outage" : undef;
    mkdir $shots if $shots;
    my $b = browse(url => $g->url('/admin/'), key => $ADMIN, views => [qw(usage history models targets events overview)],
                   ($shots ? (shots => $shots) : ()));
    my $s = $b->{steps} || {};
    for my $v (qw(usage history models targets)) {
        ok($s->{$v}{outage}, "$v: shown as an outage");
        like($s->{$v}{text}, qr/Store outage: the limit store could not be read \(503\)\. Counters are unavailable, not zero\./,
             "$v: says so");
        is_deeply($s->{$v}{tables}, {}, "$v: no table of zeros");
    }
    like($s->{events}{text}, qr/Degraded: the store could not be read/, 'feed: degraded, from the ring');
    like($s->{overview}{text}, qr/state\ndown\n/, 'overview: the store is down');
    like($s->{overview}{text}, qr/last error\n.+ — \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/, 'overview: its last error and time');
    is_deeply($b->{pageErrors}, [], 'no script error');
    is_deeply($b->{otherHosts}, [], 'no request to another host');
    is_deeply($b->{csp}, [], 'no policy violation');
    $g->stop;
};

done_testing();
