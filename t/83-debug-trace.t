#!/usr/bin/perl
# The debug trace (docs/troubleshooting.md): with error_log ... debug, every
# decision a metered request goes through leaves an llm_gateway line, in
# order: route, model resolution, admission (plan, the store's answer and its
# round trip), each attempt, the failover decision, the answer, the
# accounting. None of the gateway's lines holds a secret: the caller's key,
# the provider keys, the store password.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Test::More;

Gw::need_module();

my $KEY = 'sk-trace-caller-7f3a9c1d';
my $PKEY = 'sk-trace-provider-0b8e4d2a';
my $PKEY2 = 'sk-trace-second-6c1f9a3e';
my $PASS = 'trace-store-pass-5d2e';

my $rd = GwRedis->start(password => $PASS);
my $bad = Gw::Mock->start();
my $good = Gw::Mock->start();
my $ng = Gw::Nginx->start(workers => 1, error_log_level => 'debug',
    vars => { BAD => $bad->port, GOOD => $good->port }, conf => GwConf::gateway(
    providers => [{ name => 'bad', upstream => 'BAD', key => $PKEY, models => 'gpt-4o-mini' },
                  { name => 'good', upstream => 'GOOD', key => $PKEY2, models => 'gpt-4o-mini' }],
    http => "llm_gateway_store redis://:$PASS\@127.0.0.1:" . $rd->port . "/0;\n"
          . "llm_gateway_alias smart bad/gpt-4o-mini good/gpt-4o-mini;\n"
          . "llm_gateway_user alice key=$KEY group=team requests_per_minute=100;\n"));

# The first target answers 503: the request fails over to the second.
$bad->script({ status => 503, body => '{"error":{"message":"overloaded"}}' });
my $start = length $ng->error_log;
my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                 body => GwConf::chat_body('smart'));
is($r->{status}, 200, 'the request fails over and is answered') or diag($r->{body});
ok($ng->wait_log(qr/llm_gateway: accounting: \d+ counter deltas/), 'the accounting line came');

my $log = substr($ng->error_log, $start);
my @gw = grep { /llm_gateway: / } split /\n/, $log;
my @want = (
    qr/\[debug\].*llm_gateway: route "chat\/completions" for "\/v1\/chat\/completions"/,
    qr/\[debug\].*llm_gateway: model "smart" resolved to "bad\/gpt-4o-mini" \(2 failover targets, group "team"\)/,
    qr/\[debug\].*llm_gateway: admission of user "alice" group "team": \d+ checks, \d+ reservations .*store "redis"/,
    qr/\[debug\].*llm_gateway: store: 1 commands queued/,
    qr/\[debug\].*llm_gateway: store: 1 replies in \d+ ms/,
    qr/\[debug\].*llm_gateway: admission answered in \d+ ms: admitted/,
    qr/\[debug\].*llm_gateway: attempt 1: provider "bad" model "gpt-4o-mini" \(target 1 of 2\)/,
    qr/\[debug\].*llm_gateway: provider "bad" failed \(status 503\): fail over to the next target, wait 0 ms/,
    qr/\[debug\].*llm_gateway: attempt 2: provider "good" model "gpt-4o-mini" \(target 2 of 2\)/,
    qr/\[debug\].*llm_gateway: answering from attempt 2 \(status 200, answer complete, head not sent\)/,
    qr/\[debug\].*llm_gateway: accounting: \d+ counter deltas to the "redis" store, reservation (none|released in the same call)/,
);
my $at = 0;
for my $re (@want) {
    my $found;
    for my $i ($at .. $#gw) {
        if ($gw[$i] =~ $re) { $found = $i; last }
    }
    ok(defined $found, "in order: $re") or diag(join("\n", @gw));
    $at = $found + 1 if defined $found;
}

# nginx's own debug lines print request headers (the caller's key among
# them): the gateway's lines never do.
for my $secret ($KEY, $PKEY, $PKEY2, $PASS) {
    my @leak = grep { index($_, $secret) >= 0 } @gw;
    is(scalar @leak, 0, "no gateway line holds \"" . substr($secret, 0, 8) . "...\"") or diag(join("\n", @leak));
}

# A rejection names its check.
subtest 'a rejected request: the admission says why' => sub {
    my $s = length $ng->error_log;
    my $bob = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer('sk-nobody'),
                       body => GwConf::chat_body('smart'));
    is($bob->{status}, 401, 'an unknown key: 401');
    my $l = substr($ng->error_log, $s);
    like($l, qr/llm_gateway: route "chat\/completions"/, 'the route line');
    unlike($l, qr/llm_gateway: admission of/, 'no admission for an unknown key');
};

$ng->stop;
$rd->stop;
done_testing();
