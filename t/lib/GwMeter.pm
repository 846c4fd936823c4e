package GwMeter;

# Shared helpers for the metering tests (t/2*.t): a gateway config with a
# mock provider and an admin user, usage reads, request shortcuts.
#
#   my $conf = GwMeter::conf(users => ['llm_gateway_user alice key=sk-alice;'], ...);
#   my $u = GwMeter::usage($ng);                 # GET /admin/api/usage as root
#   my $row = GwMeter::row($u, user => 'alice');  # or group => 'eng', total => 'all'

use strict;
use warnings;

use POSIX ();
use Time::HiRes ();
use Test::More ();
use Gw;
use GwConf ();

our $ADMIN_KEY = 'sk-root-admin-0001';

# The inside of http { } for a gateway with one OpenAI-type provider "mock"
# (the default provider) behind the mock, an admin user "root", the gateway
# at /v1/ and the admin location at /admin.
#   conf(users => [lines], groups => [lines], http => $extra_http_lines,
#        admin_location => 1, server => $extra_server_lines)
sub conf {
    my (%o) = @_;
    my $admin_loc = ($o{admin_location} // 1) ? "    location /admin { llm_gateway_admin; }\n" : '';
    my $lines = join '', map { "$_\n" } @{ $o{groups} || [] }, @{ $o{users} || [] };
    my $http = $o{http} // '';
    $http .= "\n" if length $http && $http !~ /\n\z/;
    my $server = $o{server} // '';
    my $root = ($o{root} // 1) ? "llm_gateway_user root key=$ADMIN_KEY admin;\n" : '';
    $root .= GwConf::routing_directives(%o);
    return <<"CONF";
upstream mock_up {
    server 127.0.0.1:%%MOCK%%;
    keepalive 16;
}
llm_gateway_provider mock type=openai location=/_llm/mock/ models=gpt-4o-mini,text-embedding-3-small default;
$root$lines$http
server {
    listen 127.0.0.1:%%PORT%%;
    location /v1/ {
        llm_gateway;
    }
$admin_loc$server
    location /_llm/mock/ {
        internal;
        proxy_pass http://mock_up/v1/;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_buffering off;
    }
}
CONF
}

sub auth { my ($key) = @_; return defined $key ? { Authorization => "Bearer $key" } : {} }

# A non-stream chat request.
sub chat {
    my ($ng, $key, %o) = @_;
    my $body = { model => $o{model} // 'gpt-4o-mini',
                 messages => [{ role => 'user', content => $o{content} // 'hi' }],
                 %{ $o{extra} || {} } };
    return Gw::http(POST => $ng->url('/v1/chat/completions'), headers => auth($key),
                    body => $body, timeout => $o{timeout} // 10);
}

sub embed {
    my ($ng, $key, %o) = @_;
    return Gw::http(POST => $ng->url('/v1/embeddings'), headers => auth($key),
                    body => { model => $o{model} // 'text-embedding-3-small', input => $o{input} // 'hello' });
}

# GET /admin/api/usage (as root unless key => ...). Returns the decoded JSON
# (undef unless 200; then the response is in $GwMeter::LAST).
our $LAST;
sub usage {
    my ($ng, %o) = @_;
    my $r = Gw::http(GET => $ng->url($o{path} // '/admin/api/usage'), headers => auth($o{key} // $ADMIN_KEY));
    $LAST = $r;
    return $r->{status} == 200 ? $r->{json} : undef;
}

# One row of a usage answer: row($u, user => NAME), row($u, group => NAME),
# row($u, total => 'all').
sub row {
    my ($u, $kind, $name) = @_;
    return undef unless $u;
    return $u->{total} if $kind eq 'total';
    my $list = $kind eq 'user' ? $u->{users} : $u->{groups};
    my ($r) = grep { $_->{name} eq $name } @{ $list || [] };
    return $r;
}

# The named fields of a row as a hash (for is_deeply).
sub fields {
    my ($row, @names) = @_;
    return undef unless $row;
    return { map { $_ => $row->{$_} } @names };
}

# Waits until the current UTC second is below $limit (so a test does not
# straddle a minute boundary). Bounded by 60 s.
sub wait_second_below {
    my ($limit) = @_;
    Gw::wait_until(sub { (gmtime(time))[0] < $limit }, timeout => 61, interval => 0.2);
}

# Seconds until the next UTC midnight / minute.
sub secs_to_midnight { my $t = time; return 86400 - ($t % 86400) }
sub secs_to_minute   { my $t = time; return 60 - ($t % 60) }

# Lines of the error log matching $re (from byte offset $from).
sub log_lines {
    my ($ng, $re, $from) = @_;
    my $text = $ng->error_log;
    $text = substr($text, $from) if $from && $from <= length $text;
    return grep { $_ =~ $re } split /\n/, $text;
}

# Distinct pids (list; their count in scalar context) of the nginx log lines given ("... [level] PID#TID: ...").
sub log_pids {
    my (@lines) = @_;
    my %p;
    for (@lines) { $p{$1} = 1 if /\[\w+\] (\d+)#\d+:/ }
    my @pids = sort { $a <=> $b } keys %p;
    return wantarray ? @pids : scalar @pids;
}

# A mock script entry: a whole chat completion ("ok") that bills $in prompt
# and $out completion tokens; %o (times, delay_ms, ...) goes with it.
sub chat_answer {
    my ($in, $out, %o) = @_;
    return { %o, json => { id => 'chatcmpl-m', object => 'chat.completion', created => 1, model => 'gpt-4o-mini',
                           choices => [{ index => 0, message => { role => 'assistant', content => 'ok' },
                                         finish_reason => 'stop' }],
                           usage => { prompt_tokens => $in, completion_tokens => $out,
                                      total_tokens => $in + $out } } };
}

1;
