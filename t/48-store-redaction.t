#!/usr/bin/perl
# The store URL shown in logs and in the admin overview carries the
# [redacted] marker whenever a password is in effect, whether it was given in
# the URL or with password= (literal:, env:, file:), and the password itself
# never shows. The store here is a closed port: the first request fails to
# reach it and logs the latch line with the URL (fail-open, so it is served).

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwMeter;
use File::Temp ();
use Test::More;

Gw::need_module();

my $PW = 'store-pw-48-c0ffee';
my $dir = File::Temp::tempdir('llmgw-48-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $dir;
open my $fh, '>', "$dir/pw" or die $!;
print {$fh} "$PW\n";
close $fh;
chmod 0644, "$dir/pw";

my $mock = Gw::Mock->start();

# [name, store line (%%P%% = the closed port), expected URL]
my @rows = (
    ['password in the URL', 'redis://:' . $PW . '@127.0.0.1:%%P%%/3', 'redis://:[redacted]@127.0.0.1:%%P%%/3'],
    ['password=literal:', "redis://127.0.0.1:%%P%%/3 password=literal:$PW", 'redis://:[redacted]@127.0.0.1:%%P%%/3'],
    ['password=env:', 'redis://127.0.0.1:%%P%% password=env:LLMGW48_PW', 'redis://:[redacted]@127.0.0.1:%%P%%/0'],
    ['password=file:', "redis://127.0.0.1:%%P%% password=file:$dir/pw", 'redis://:[redacted]@127.0.0.1:%%P%%/0'],
    ['ACL user in the URL, password=', "redis://gw\@127.0.0.1:%%P%% password=literal:$PW",
     'redis://gw:[redacted]@127.0.0.1:%%P%%/0'],
    ['password= overrides the URL password', 'redis://:url-pw-48@127.0.0.1:%%P%% password=literal:' . $PW,
     'redis://:[redacted]@127.0.0.1:%%P%%/0'],
    ['no password: no marker', 'redis://127.0.0.1:%%P%%/1', 'redis://127.0.0.1:%%P%%/1'],
);

for my $row (@rows) {
    my ($name, $store, $want) = @$row;
    subtest $name => sub {
        my $port = Gw::free_port();
        s/%%P%%/$port/g for $store, $want;
        my $ng = Gw::Nginx->start(workers => 1, env => { LLMGW48_PW => $PW }, vars => { MOCK => $mock->port },
                                  conf => GwMeter::conf(users => ['llm_gateway_user alice key=sk-alice-48;'],
                                                        http => "llm_gateway_store $store fail_open=on;\n"));
        is(GwMeter::chat($ng, 'sk-alice-48')->{status}, 200, 'served (fail-open)');
        my $line = $ng->wait_log(qr/llm_gateway: limit store \S+ failed: /);
        like($line // '', qr/\[error\] \d+#\d+: llm_gateway: limit store \Q$want\E failed: .+; not contacting it for 5 s \(counting in shared memory meanwhile\)$/,
             "the log line shows $want");
        my $o = Gw::http(GET => $ng->url('/admin/api/overview'), headers => { 'x-api-key' => $GwMeter::ADMIN_KEY });
        is($o->{status}, 200, 'overview answers');
        is($o->{json}{store}{url}, $want, 'the overview shows the same URL');
        ok(index($ng->error_log, $PW) < 0, 'the password is not in error.log');
        ok(index($o->{body}, $PW) < 0, 'nor in the overview');
        $ng->stop;
    };
}

$mock->stop;
done_testing;
