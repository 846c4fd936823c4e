#!/usr/bin/perl
# Hostile model lists behind discovery (GET /v1/models): a provider whose
# pages are larger than discover_max_page=, one whose pages together pass
# discover_max_total=, a page that never comes and a walk slower than
# discover_timeout=. Each refresh stops at its bound (no further page
# asked), keeps the last good list, and logs a warn line naming the
# provider and the bound; the single worker's peak memory (VmHWM) grows by
# no more than discover_max_total= plus 16 MiB while two such walks run
# (docs/models.md#discovery). Then nginx -t refusing bad bounds.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;
use Time::HiRes ();

Gw::need_module();
Gw::watchdog(240);

my $MiB = 1024 * 1024;
my $KEY = 'sk-bad-disc-alice-5e6f';
my $mock = Gw::Mock->start();

sub conf {
    my (@providers) = @_;
    return GwConf::gateway(providers => [ { name => 'mock', key => 'sk-plain', models => 'gpt-4o-mini', default => 1 },
                                          @providers ],
                           http => "llm_gateway_user alice key=$KEY;\n");
}

sub models {
    my ($ng, %o) = @_;
    my $r = Gw::http(GET => $ng->url('/v1/models'), headers => { Authorization => "Bearer $KEY" },
                     timeout => $o{timeout} // 60);
    is($r->{status}, 200, '/v1/models: 200') or diag($r->{body});
    return [ sort grep { $_ ne 'mock/gpt-4o-mini' } map { $_->{id} } @{ ($r->{json} || {})->{data} || [] } ];
}

# The list pages of one provider (told apart by its key): page i (1-based)
# has the id "<p>i" and pad bytes of padding; has_more until the last.
sub pages {
    my ($p, $n, $pad, %o) = @_;
    my @entries;
    for my $i (1 .. $n) {
        push @entries, { match => { path => '/v1/models', query => $i == 1 ? '' : 'after=' . $p . ($i - 1),
                                    headers => { authorization => "Bearer sk-$p" } },
                         ($o{delay_ms} ? (delay_ms => $o{delay_ms}) : ()),
                         json => { object => 'list', has_more => ($i < $n ? JSON::PP::true() : JSON::PP::false()),
                                   last_id => "$p$i", data => [ { id => "$p$i", object => 'model',
                                                                  ($pad ? (pad => 'x' x $pad) : ()) } ] } };
    }
    $mock->script(\@entries);
}
sub asked { my ($p) = @_; return scalar grep { ($_->{headers}{authorization} // '') eq "Bearer sk-$p" } @{ $mock->requests } }

sub worker_mem {
    my ($ng) = @_;
    my ($pid) = $ng->worker_pids;
    my %kb = Gw::_slurp("/proc/$pid/status") =~ /^(VmHWM|VmRSS):\s+(\d+)\s+kB/mg;
    return \%kb;
}

subtest 'pages over discover_max_page, pages over discover_max_total: last good lists kept, memory bounded' => sub {
    my $ng = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port },
                              conf => conf({ name => 'pg', key => 'sk-pg', discover => '10s' },
                                           { name => 'tot', key => 'sk-tot', discover => '10s' }));
    $mock->reset;
    pages('pg', 2, 0);
    pages('tot', 2, 0);
    my $t0 = Time::HiRes::time();
    is_deeply(models($ng), [qw(pg/pg1 pg/pg2 tot/tot1 tot/tot2)], 'the good lists, fetched');

    # Stale after 10 s: the next /v1/models refreshes both, with pages of
    # 6 MiB (over the 4 MiB page bound) and of 3 MiB (the 16 MiB total is
    # passed at the sixth).
    Time::HiRes::sleep(10.3 - (Time::HiRes::time() - $t0)) if Time::HiRes::time() - $t0 < 10.3;
    $mock->reset;
    pages('pg', 10, 6 * $MiB);
    pages('tot', 10, 3 * $MiB);
    my $before = worker_mem($ng);
    is_deeply(models($ng), [qw(pg/pg1 pg/pg2 tot/tot1 tot/tot2)], 'the last good lists are kept');
    my $after = worker_mem($ng);
    my $grew = $after->{VmHWM} - $before->{VmHWM};
    diag(sprintf('two hostile walks: worker VmHWM %d kB -> %d kB (+%d kB), VmRSS %d kB', $before->{VmHWM},
                 $after->{VmHWM}, $grew, $after->{VmRSS}));
    is(asked('pg'), 1, 'pg: one page asked (its reading stopped at 4 MiB)');
    is(asked('tot'), 6, 'tot: six pages asked (the sixth crossed 16 MiB)');
    ok($ng->wait_log(qr/model discovery of provider "pg" failed: page 1 is larger than discover_max_page \(4194304 bytes\); the last good list is kept/),
       'pg: warn line naming the provider and the page bound');
    ok($ng->wait_log(qr/model discovery of provider "tot" failed: the pages are larger together than discover_max_total \(16777216 bytes\) at page 6; the last good list is kept/),
       'tot: warn line naming the provider and the total bound');
    cmp_ok($grew, '<', (16 + 16) * 1024 + Gw::sanitizer_slack_kb(),
           'the worker grew by less than discover_max_total (16 MiB) + 16 MiB');
    $mock->clear_script;
    $ng->stop;
};

subtest 'discover_timeout: a page that never comes, a walk too slow' => sub {
    my $ng = Gw::Nginx->start(workers => 1, vars => { MOCK => $mock->port },
                              conf => conf({ name => 'hung', key => 'sk-hung', discover => '10s discover_timeout=2s' },
                                           { name => 'crawl', key => 'sk-crawl', discover => '10s discover_timeout=2s' }));
    $mock->reset;
    $mock->script({ match => { path => '/v1/models', headers => { authorization => 'Bearer sk-hung' } }, hang => JSON::PP::true() });
    pages('crawl', 8, 0, delay_ms => 700);
    my $t0 = Time::HiRes::time();
    is_deeply(models($ng, timeout => 20), [], 'no list (none was good before)');
    my $took = Time::HiRes::time() - $t0;
    cmp_ok($took, '<', 5, sprintf('answered at the 2 s deadline (%.1f s), not at the proxy\'s 60 s', $took));
    ok($ng->wait_log(qr/model discovery of provider "hung" failed: the walk took longer than discover_timeout \(2000 ms\) at page 1; the last good list is kept/),
       'hung: warn line naming the provider and the deadline');
    ok($ng->wait_log(qr/model discovery of provider "crawl" failed: the walk took longer than discover_timeout \(2000 ms\) at page [2-4];/),
       'crawl: warn line naming the provider and the deadline');
    cmp_ok(asked('crawl'), '<=', 4, 'crawl: no page asked after the deadline');
    $mock->clear_script;
    $ng->stop;
};

subtest 'nginx -t refuses bad discovery bounds, with file and line' => sub {
    for my $case (['discover_max_page=0', qr/discover_max_page= of llm_gateway_provider "x" must be a size from 1k to 256m/],
                  ['discover_max_total=1g', qr/discover_max_total= of llm_gateway_provider "x" must be a size from 1k to 256m/],
                  ['discover_timeout=2m', qr/discover_timeout= of llm_gateway_provider "x" must be a time from 1s to 50s/],
                  ['discover_timeout=soon', qr/discover_timeout= of llm_gateway_provider "x" must be a time from 1s to 50s/]) {
        my ($exit, $out) = Gw::nginx_t(conf({ name => 'x', key => 'sk-x', discover => "10s $case->[0]" }),
                                       vars => { MOCK => $mock->port });
        isnt($exit, 0, "$case->[0]: refused");
        like($out, qr/\[emerg\] \d+#\d+: (?:$case->[1])[^\n]* in \S+:\d+/, '... with the sentence, file and line');
    }
};

done_testing();
