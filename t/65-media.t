#!/usr/bin/perl
# Images, speech and transcription: the official openai client against the
# gateway (t/js/media.mjs), what the provider received (the model part of a
# multipart body rewritten, every other byte as sent), the 400s of the
# multipart rules, 413 and 429 with no upstream call, 501 for provider
# types without these APIs, request-only accounting (counters read from
# Redis), and the worker's private memory during a 25 MB upload.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use GwMeter;
use GwRedis;
use Digest::SHA qw(sha256_hex);
use File::Temp qw(tempdir);
use POSIX ();
use Test::More;

Gw::need_module();
GwRedis::need_redis();
Gw::need_js_deps();

my $KEY = 'sk-media-alice-1a2b3c4d';
my $BOB = 'sk-media-bob-5e6f7a8b';
my $PKEY = 'sk-prov-media-999';

my $rd = GwRedis->start();
my $mock = Gw::Mock->start();
my $conf = GwConf::gateway(
    providers => [
        { name => 'oai', type => 'openai', key => $PKEY,
          models => 'gpt-image-1,gpt-4o-mini-tts,whisper-1,gpt-4o-transcribe' },
        { name => 'claude', type => 'anthropic', key => 'sk-ant-x', models => 'claude-sonnet-4-5' },
        { name => 'gem', type => 'gemini', key => 'AIzaX', models => 'imagen-4' },
    ],
    http => "llm_gateway_store redis://127.0.0.1:" . $rd->port . "/0;\n"
          . "llm_gateway_user alice key=$KEY;\n"
          . "llm_gateway_user bob key=$BOB requests_per_minute=2;\n"
          . "llm_gateway_alias stt oai/whisper-1;\n"
          . "llm_gateway_alias painter oai/gpt-image-1;\n"
          . "llm_gateway_alias voice oai/gpt-4o-mini-tts;\n"
          . "llm_gateway_alias opus claude/claude-sonnet-4-5;\n"
          . "llm_gateway_alias mixed claude/claude-sonnet-4-5 oai/gpt-image-1;\n",
    api_extra => 'llm_gateway_max_body_size 30m;',
    server => "location /small/v1/ { llm_gateway; llm_gateway_max_body_size 64k; }",
);
my $ng = Gw::Nginx->start(conf => $conf, workers => 1, vars => { MOCK => $mock->port });

my $dir = tempdir(CLEANUP => 1);

sub run_steps {
    my (@steps) = @_;
    my $r = Gw::run_node('media.mjs', timeout => 90,
                         env => { GW_URL => $ng->url(''), GW_KEY => $KEY, STEPS => Gw::json_encode(\@steps) });
    is($r->{exit}, 0, 'client script exits 0') or diag("stdout: $r->{stdout}\nstderr: $r->{stderr}");
    return ($r->{json} || {})->{steps} || {};
}

sub counter { my ($kind, $id, $m) = @_; return $rd->get_num(GwRedis::key($kind, $id, $m, 'day', time)) }

sub model_counts {
    my ($model) = @_;
    return { map { $_ => counter('model', $model, $_) } qw(req tokin tokout cost) };
}

sub recorded { my $r = $mock->requests; return grep { $_->{path} =~ m{^/v1/(images|audio)/} } @$r }

# A file of $n bytes in which every byte value occurs (CR, LF and "--" too).
sub audio_file {
    my ($name, $n) = @_;
    my $path = "$dir/$name";
    open my $fh, '>:raw', $path or die $!;
    my $block = join '', map { chr($_ % 256) } 0 .. 65535;
    $block .= "\r\n--not-a-boundary\r\n";
    my $left = $n;
    while ($left > 0) {
        my $piece = substr($block, 0, $left < length $block ? $left : length $block);
        print $fh $piece;
        $left -= length $piece;
    }
    close $fh;
    return $path;
}

subtest 'images.generate through an alias' => sub {
    $mock->reset;
    my $s = run_steps({ name => 'img', op => 'image', model => 'painter', prompt => 'a red fox', n => 2 });
    my $i = $s->{img} || {};
    ok($i->{ok}, 'ok') or diag(Gw::json_encode($i));
    is($i->{count}, 2, 'two images');
    is($i->{first}, 'image 0 of a red fox', 'the provider\'s image');
    my @r = recorded();
    is(scalar @r, 1, 'one provider call');
    is($r[0]{path}, '/v1/images/generations', 'path');
    is($r[0]{json}{model}, 'gpt-image-1', 'the provider\'s own model id, never the alias');
    is($r[0]{headers}{authorization}, "Bearer $PKEY", 'the provider key');
    is_deeply(model_counts('oai/gpt-image-1'), { req => 1, tokin => 0, tokout => 0, cost => 0 },
              'model request counted, no tokens or cost (the answer carried usage)');
};

subtest 'audio.speech.create: bytes identical, relayed as they arrive' => sub {
    $mock->reset;
    my $s = run_steps({ name => 'sp', op => 'speech', model => 'voice', input => 'Hello there, gateway' });
    my $p = $s->{sp} || {};
    ok($p->{ok}, 'ok') or diag(Gw::json_encode($p));
    ok($p->{identical}, 'audio bytes identical to what the mock sent');
    is($p->{size}, 3000 + 97 * length('Hello there, gateway'), 'size');
    is($p->{content_type}, 'audio/mpeg', 'the upstream content type');
    is($p->{transfer_encoding}, 'chunked', 'relayed as it arrived (chunked), not buffered to a length');
    my @r = recorded();
    is($r[0]{json}{model}, 'gpt-4o-mini-tts', 'the provider\'s model id');
    is(counter('model', 'oai/gpt-4o-mini-tts', 'req'), 1, 'model request counted');
};

subtest 'audio.transcriptions.create with a real file' => sub {
    $mock->reset;
    my $file = audio_file('clip.wav', 200_000);
    my $s = run_steps({ name => 'alias', op => 'transcription', model => 'stt', file => $file },
                      { name => 'canon', op => 'transcription', model => 'oai/whisper-1', file => $file,
                        response_format => 'text' },
                      { name => 'bare', op => 'transcription', model => 'gpt-4o-transcribe', file => $file });
    my $want = sha256_hex(do { open my $fh, '<:raw', $file or die; local $/; <$fh> });
    for my $n (qw(alias canon bare)) {
        ok($s->{$n}{ok}, "$n ok") or diag(Gw::json_encode($s->{$n}));
    }
    is($s->{alias}{text}, 'transcribed 200000 bytes with whisper-1', 'alias: the provider saw whisper-1');
    is($s->{canon}{text}, 'transcribed 200000 bytes with whisper-1', 'canonical id: text response_format relayed');
    is($s->{bare}{text}, 'transcribed 200000 bytes with gpt-4o-transcribe', 'the provider\'s own id, unchanged');
    my @r = recorded();
    is(scalar @r, 3, 'three provider calls');
    for my $rec (@r) {
        my @models = grep { ($_->{name} // '') eq 'model' } @{ $rec->{parts} || [] };
        is(scalar @models, 1, 'exactly one model part');
        my ($f) = grep { ($_->{name} // '') eq 'file' } @{ $rec->{parts} || [] };
        is($f->{sha256}, $want, 'the file arrived byte-exact');
        is($f->{filename}, 'clip.wav', 'its file name kept');
        is($rec->{headers}{authorization}, "Bearer $PKEY", 'the provider key');
        like($rec->{headers}{'content-type'}, qr{^multipart/form-data; boundary=}, 'the caller\'s content type');
    }
    is((grep { $_->{name} eq 'model' } @{ $r[0]{parts} })[0]{value}, 'whisper-1', 'model part holds the upstream id');
    is(counter('model', 'oai/whisper-1', 'req'), 2, 'two requests for oai/whisper-1');
    is(counter('model', 'oai/gpt-4o-transcribe', 'req'), 1, 'one for oai/gpt-4o-transcribe');
    is(counter('model', 'oai/whisper-1', 'tokin'), 0, 'no tokens (the answer carried usage)');
};

# A raw multipart body, sent by hand.
sub multipart {
    my (%o) = @_;
    my $b = $o{boundary} // 'XyZ123';
    my $body = '';
    for my $p (@{ $o{parts} }) {
        my ($name, $value, $filename) = @$p;
        $body .= "--$b\r\nContent-Disposition: form-data; name=\"$name\""
               . (defined $filename ? "; filename=\"$filename\"\r\nContent-Type: audio/wav" : '') . "\r\n\r\n$value\r\n";
    }
    $body .= "--$b--\r\n" unless $o{unclosed};
    return ($body, "multipart/form-data; boundary=$b");
}

sub post_form {
    my ($path, $body, $ct, %o) = @_;
    return Gw::http(POST => $ng->url($path), body => $body,
                    headers => { Authorization => 'Bearer ' . ($o{key} // $KEY), 'Content-Type' => $ct });
}

subtest 'the multipart rules: 400s with their own messages, no upstream call' => sub {
    $mock->reset;
    my $CT = 'malformed multipart body: the Content-Type must be multipart/form-data with a boundary';
    my @rows = (
        [ 'JSON content type', '{"model":"stt"}', 'application/json', $CT, 'invalid_content_type' ],
        [ 'multipart/mixed', (multipart(parts => [[ model => 'stt' ]]))[0], 'multipart/mixed; boundary=XyZ123',
          $CT, 'invalid_content_type' ],
        [ 'no boundary', 'x', 'multipart/form-data', $CT, 'invalid_content_type' ],
        [ 'unclosed body', multipart(parts => [[ model => 'stt' ], [ file => 'RIFF', 'a.wav' ]], unclosed => 1),
          'malformed multipart body', 'invalid_multipart' ],
        [ 'wrong boundary', (multipart(parts => [[ model => 'stt' ]]))[0], 'multipart/form-data; boundary=Other',
          'malformed multipart body', 'invalid_multipart' ],
        [ 'part without name', "--B\r\nContent-Disposition: form-data\r\n\r\nx\r\n--B--\r\n",
          'multipart/form-data; boundary=B', 'malformed multipart body', 'invalid_multipart' ],
        [ 'truncated in a part', substr((multipart(parts => [[ model => 'stt' ], [ file => 'R' x 500, 'a.wav' ]]))[0], 0, 200),
          'multipart/form-data; boundary=XyZ123', 'malformed multipart body', 'invalid_multipart' ],
        [ 'no model', multipart(parts => [[ file => 'RIFF', 'a.wav' ]]), 'model is required', 'missing_model' ],
        [ 'empty model', multipart(parts => [[ model => '' ], [ file => 'RIFF', 'a.wav' ]]), 'model is required',
          'missing_model' ],
        [ 'two models', multipart(parts => [[ model => 'stt' ], [ file => 'RIFF', 'a.wav' ], [ model => 'stt' ]]),
          'duplicate model field', 'duplicate_model' ],
    );
    for my $row (@rows) {
        my ($what, $body, $ct, $msg, $code) = @$row;
        my $r = post_form('/v1/audio/transcriptions', $body, $ct);
        GwConf::is_envelope($r, 400, 'invalid_request_error', $code, "$what: 400 $code");
        is(($r->{json} || {})->{error}{message}, $msg, "$what: message");
    }
    my $r = post_form('/v1/audio/transcriptions', multipart(parts => [[ model => 'nope' ], [ file => 'x', 'a.wav' ]]));
    is($r->{status}, 404, 'unknown model: 404');
    is(scalar(recorded()), 0, 'no upstream call for any of them');
};

subtest '413 before any upstream call' => sub {
    $mock->reset;
    my ($body, $ct) = multipart(parts => [[ model => 'stt' ], [ file => 'A' x 100_000, 'big.wav' ]]);
    my $r = post_form('/small/v1/audio/transcriptions', $body, $ct);
    is($r->{status}, 413, 'status 413');
    is(($r->{json} || {})->{error}{code}, 'request_too_large', 'in the envelope');
    my ($ok) = multipart(parts => [[ model => 'stt' ], [ file => 'A' x 1000, 'small.wav' ]]);
    is(post_form('/small/v1/audio/transcriptions', $ok, $ct)->{status}, 200, 'a body under the bound passes');
    is(scalar(recorded()), 1, 'only the one under the bound reached the provider');
};

subtest 'provider types without these APIs: 501, not counted' => sub {
    $mock->reset;
    my $r = Gw::http(POST => $ng->url('/v1/images/generations'), headers => GwConf::bearer($KEY),
                     body => { model => 'gem/imagen-4', prompt => 'x' });
    is($r->{status}, 501, 'gemini-type provider: 501');
    is($r->{json}{error}{message}, 'provider "gem" (type gemini) does not serve /v1/images/generations', 'message');
    $r = Gw::http(POST => $ng->url('/v1/audio/speech'), headers => GwConf::bearer($KEY),
                  body => { model => 'opus', input => 'x', voice => 'alloy' });
    is($r->{status}, 501, 'anthropic-type provider: 501');
    my ($body, $ct) = multipart(parts => [[ model => 'opus' ], [ file => 'x', 'a.wav' ]]);
    is(post_form('/v1/audio/transcriptions', $body, $ct)->{status}, 501, 'transcription: 501');
    is(scalar(recorded()), 0, 'no upstream call');
    $r = Gw::http(POST => $ng->url('/v1/images/generations'), headers => GwConf::bearer($KEY),
                  body => { model => 'mixed', prompt => 'x' });
    is($r->{status}, 200, 'an alias whose first target cannot serve images: its next target does');
    is((recorded())[0]{json}{model}, 'gpt-image-1', 'the openai-type target was called');
};

subtest 'failed upstream calls count no model request' => sub {
    $mock->reset;
    my $before = counter('model', 'oai/gpt-image-1', 'req');
    $mock->script({ match => { path => '/v1/images/generations' }, status => 500,
                    json => { error => { message => 'boom', type => 'server_error' } } });
    $mock->script({ match => { path => '/v1/audio/speech' }, status => 400,
                    json => { error => { message => 'bad voice', type => 'invalid_request_error' } } });
    my $r = Gw::http(POST => $ng->url('/v1/images/generations'), headers => GwConf::bearer($KEY),
                     body => { model => 'painter', prompt => 'x' });
    is($r->{status}, 500, 'upstream 500 relayed');
    is($r->{json}{error}{message}, 'boom', 'its message');
    $r = Gw::http(POST => $ng->url('/v1/audio/speech'), headers => GwConf::bearer($KEY),
                  body => { model => 'voice', input => 'x', voice => 'nope' });
    is($r->{status}, 400, 'upstream 400 relayed');
    is(counter('model', 'oai/gpt-image-1', 'req'), $before, 'no model request after the 500');
    is(counter('model', 'oai/gpt-4o-mini-tts', 'req'), 1, 'nor after the 400 (still the one of before)');
};

subtest '429 from request limits on the media routes, no upstream call' => sub {
    $mock->reset;
    GwMeter::wait_second_below(50);
    my ($body, $ct) = multipart(parts => [[ model => 'stt' ], [ file => 'RIFF', 'a.wav' ]]);
    my @st;
    push @st, Gw::http(POST => $ng->url('/v1/images/generations'), headers => GwConf::bearer($BOB),
                       body => { model => 'painter', prompt => 'x' })->{status};
    push @st, post_form('/v1/audio/transcriptions', $body, $ct, key => $BOB)->{status};
    my $r = Gw::http(POST => $ng->url('/v1/audio/speech'), headers => GwConf::bearer($BOB),
                     body => { model => 'voice', input => 'x', voice => 'alloy' });
    push @st, $r->{status};
    is_deeply(\@st, [200, 200, 429], 'the third request in the minute is refused');
    is($r->{json}{error}{code}, 'rate_limit_exceeded', 'rate limit envelope');
    ok($r->{headers}{'retry-after'} >= 1, 'Retry-After');
    is(scalar(recorded()), 2, 'the refused one never reached the provider');
    is(counter('user', 'bob', 'req'), 2, 'bob: two requests counted');
};

subtest 'worker private memory during a 25 MB upload' => sub {
    $mock->reset;
    my $file = audio_file('long.wav', 25 * 1024 * 1024);
    my ($worker) = $ng->worker_pids;
    my $anon = sub {
        open my $fh, '<', "/proc/$worker/status" or return undef;
        while (<$fh>) { return $1 if /^RssAnon:\s+(\d+) kB/ }
        return undef;
    };
    # Warm the worker (its first transcription), then measure a second one.
    my ($b, $ct) = multipart(parts => [[ model => 'stt' ], [ file => 'RIFF', 'a.wav' ]]);
    post_form('/v1/audio/transcriptions', $b, $ct);
    my $base = $anon->();
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        my $r = Gw::run_node('media.mjs', timeout => 90,
                             env => { GW_URL => $ng->url(''), GW_KEY => $KEY,
                                      STEPS => Gw::json_encode([{ name => 'big', op => 'transcription',
                                                                   model => 'stt', file => $file }]) });
        my $ok = (($r->{json} || {})->{steps}{big} || {})->{text} // '';
        POSIX::_exit($ok eq 'transcribed 26214400 bytes with whisper-1' ? 0 : 1);
    }
    my $peak = $base;
    my $done = Gw::wait_until(sub {
        my $a = $anon->();
        $peak = $a if defined $a && $a > $peak;
        waitpid($pid, POSIX::WNOHANG()) == $pid;
    }, timeout => 90, interval => 0.01);
    ok($done, 'upload finished');
    is($? >> 8, 0, 'the provider transcribed all 26214400 bytes with whisper-1');
    my $growth = $peak - $base;
    diag("worker RssAnon: base $base kB, peak $peak kB during a 25 MB upload (+$growth kB)");
    cmp_ok($growth, '<', 8 * 1024, 'the upload cost the worker less than 8 MB of private memory');
    my @r = recorded();
    my ($f) = grep { ($_->{name} // '') eq 'file' } @{ $r[-1]{parts} || [] };
    is($f->{size}, 25 * 1024 * 1024, 'the file arrived whole');
};

$ng->stop;
done_testing();

