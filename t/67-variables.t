#!/usr/bin/perl
# The $llm_gateway_* variables in a real access log, through the log_format
# of conf/gateway-log.conf: a chat answer, a failover, a rate-limit
# rejection, an unknown key, media, passthrough with usage.

use strict;
use warnings;
use lib 't/lib';
use Cwd qw(abs_path);
use Gw;
use GwConf;
use GwMeter;
use Test::More;

Gw::need_module();

my $KEY = 'sk-var-alice-1a2b';
my $BOB = 'sk-var-bob-3c4d';
my $snippet = abs_path('conf/gateway-log.conf');

my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [
        { name => 'oai', type => 'openai', key => 'sk-prov', models => 'gpt-4o-mini,whisper-1' },
        { name => 'alt', type => 'openai', key => 'sk-prov2', models => 'gpt-4o' },
    ],
    http => "include $snippet;\n"
          . "llm_gateway_user alice key=$KEY group=eng;\n"
          . "llm_gateway_user bob key=$BOB requests_per_minute=1;\n"
          . "llm_gateway_price oai/gpt-4o-mini input=0.15 output=0.6;\n"
          . "llm_gateway_alias sturdy alt/gpt-4o oai/gpt-4o-mini;\n",
    server => "access_log logs/llm.log llm_gateway;\n"
            . "    location /passthrough/ { llm_gateway_passthrough; }",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 1, vars => { MOCK => $mock->port });

# The JSON lines of the access log, in order.
sub lines {
    my $text = Gw::_slurp($ng->prefix . '/logs/llm.log');
    return map { Gw::json_decode($_) } grep { length } split /\n/, $text;
}

# The access log line is written when the request ends, before the client
# has read the whole answer at times: wait for it.
my $seen = 0;
sub last_line {
    Gw::wait_until(sub { scalar(lines()) > $seen }, timeout => 5);
    my @l = lines();
    $seen = @l;
    return $l[-1];
}

sub fields { my ($l, @k) = @_; return { map { $_ => $l->{$_} } @k } }
my @ALL = qw(status user group route model provider tokens_in tokens_out cost_micro_usd attempts reject_kind);

subtest 'chat answered' => sub {
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                     body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 200, 'status');
    is_deeply(fields(last_line(), @ALL),
              { status => '200', user => 'alice', group => 'eng', route => 'chat/completions',
                model => 'oai/gpt-4o-mini', provider => 'oai', tokens_in => '11', tokens_out => '7',
                cost_micro_usd => '6', attempts => '1', reject_kind => '' }, 'every field');
};

subtest 'failover: the answering provider and two attempts' => sub {
    $mock->script({ match => { model => 'gpt-4o' }, status => 503, json => { error => { message => 'down' } } });
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($KEY),
                     body => GwConf::chat_body('sturdy'));
    is($r->{status}, 200, 'served by the second target');
    is_deeply(fields(last_line(), qw(model provider attempts tokens_in)),
              { model => 'oai/gpt-4o-mini', provider => 'oai', attempts => '2', tokens_in => '11' }, 'fields');
};

subtest 'rate limit rejection and unknown key' => sub {
    GwMeter::wait_second_below(55);
    Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($BOB), body => GwConf::chat_body('gpt-4o-mini'));
    last_line();
    my $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer($BOB),
                     body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 429, 'status 429');
    is_deeply(fields(last_line(), @ALL),
              { status => '429', user => 'bob', group => 'default', route => 'chat/completions',
                model => 'oai/gpt-4o-mini', provider => 'oai', tokens_in => '', tokens_out => '',
                cost_micro_usd => '', attempts => '0', reject_kind => 'rate_limit' }, 'every field');
    $r = Gw::http(POST => $ng->url('/v1/chat/completions'), headers => GwConf::bearer('sk-nobody'),
                  body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 401, 'status 401');
    is_deeply(fields(last_line(), qw(status user group route model provider)),
              { status => '401', user => '', group => '', route => 'chat/completions', model => '', provider => '' },
              'no user, no model');
};

subtest 'media: the model, zero tokens; passthrough: its usage' => sub {
    my $body = "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
             . "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF\r\n--b--\r\n";
    my $r = Gw::http(POST => $ng->url('/v1/audio/transcriptions'), body => $body,
                     headers => { %{ GwConf::bearer($KEY) }, 'Content-Type' => 'multipart/form-data; boundary=b' });
    is($r->{status}, 200, 'transcription');
    is_deeply(fields(last_line(), qw(route model tokens_in tokens_out cost_micro_usd)),
              { route => 'audio/transcriptions', model => 'oai/whisper-1', tokens_in => '0', tokens_out => '0',
                cost_micro_usd => '0' }, 'requests only');
    $r = Gw::http(POST => $ng->url('/passthrough/oai/chat/completions'), headers => GwConf::bearer($KEY),
                  body => GwConf::chat_body('gpt-4o-mini'));
    is($r->{status}, 200, 'passthrough');
    is_deeply(fields(last_line(), qw(route model provider tokens_in tokens_out cost_micro_usd attempts)),
              { route => 'passthrough', model => 'oai/gpt-4o-mini', provider => 'oai', tokens_in => '11',
                tokens_out => '7', cost_micro_usd => '6', attempts => '1' }, 'usage from the answer');
};

$ng->stop;
done_testing();
