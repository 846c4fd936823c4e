package GwConf;

# Shared nginx.conf templates and small assertion helpers for the gateway's
# integration tests (t/1*.t).
#
#   use lib 't/lib'; use Gw; use GwConf;
#   my $conf = GwConf::gateway(
#       providers => [ { name => 'mock', upstream => 'MOCK', key => 'sk-prov',
#                        models => 'gpt-4o-mini,gpt-4o', default => 1 } ],
#       http  => "llm_gateway_user alice key=sk-alice;\n",
#   );
#   my $ng = Gw::Nginx->start(conf => $conf, workers => 2, vars => { MOCK => $mock->port });
#
# The generated http-block text holds, for every provider, an upstream
# "<name>_up" (server 127.0.0.1:%%<upstream>%%, keepalive) and an internal
# location /_llm/<name>/ that proxy_passes to it, as the operator would
# write it; the provider directive points at that location.

use strict;
use warnings;
use Test::More ();

# One provider's upstream block (http level).
sub provider_upstream {
    my (%p) = @_;
    my $var = $p{upstream} // 'MOCK';
    my $server = $p{server} // "127.0.0.1:%%$var%%";
    return "upstream $p{name}_up {\n    server $server;\n    keepalive 16;\n}\n";
}

# One provider's internal location (inside server {}). loc_extra: more
# directives (e.g. "proxy_read_timeout 1s;").
sub provider_location {
    my (%p) = @_;
    my $extra = $p{loc_extra} // '';
    # The provider's base URL as its own SDK knows it: OpenAI's ends in /v1,
    # Anthropic's and Gemini's are the host's root.
    my $base = ($p{type} // 'openai') eq 'openai' ? '/v1/' : '/';
    return "    location /_llm/$p{name}/ {\n"
         . "        internal;\n"
         . "        proxy_pass http://$p{name}_up$base;\n"
         . "        proxy_http_version 1.1;\n"
         . "        proxy_set_header Connection \"\";\n"
         . "        proxy_buffering off;\n"
         . (length $extra ? "        $extra\n" : '')
         . "    }\n";
}

# The llm_gateway_provider directive for a provider hash.
sub provider_directive {
    my (%p) = @_;
    my $d = "llm_gateway_provider $p{name} type=" . ($p{type} // 'openai') . " location=/_llm/$p{name}";
    $d .= " key=$p{key}" if defined $p{key};
    $d .= " models=$p{models}" if defined $p{models};
    $d .= " default" if $p{default};
    $d .= " discover=$p{discover}" if defined $p{discover};
    $d .= " groups=$p{groups}" if defined $p{groups};
    $d .= " $p{params}" if defined $p{params};   # more parameters as written (retries=2 breaker=off ...)
    return "$d;\n";
}

# A whole http-block text:
#   providers => [ {name, upstream (placeholder name, default MOCK), server,
#                   key, models, default, type, discover, groups, loc_extra}, ... ]
#                (default: one provider "mock", key sk-provider-secret,
#                 models gpt-4o-mini,text-embedding-3-small, default)
#   http      => more http-level directives (users, aliases, limits, ...)
#   server    => more server-level directives
#   api_loc   => the gateway location's path (default /v1/)
#   api_extra => more directives inside the gateway location
#   retries   => llm_gateway_retries (default 0 here, so error relays are
#                tested one call at a time; undef: the module's default)
#   breaker   => llm_gateway_breaker arguments (default "off" here; undef:
#                the module's default)
sub gateway {
    my (%o) = @_;
    my @providers = @{ $o{providers} || [ { name => 'mock', key => 'sk-provider-secret',
                                            models => 'gpt-4o-mini,text-embedding-3-small',
                                            default => 1 } ] };
    my $api_loc = $o{api_loc} // '/v1/';
    my $text = '';
    $text .= provider_upstream(%$_) for @providers;
    $text .= provider_directive(%$_) for @providers;
    $text .= routing_directives(%o);
    $text .= $o{http} // '';
    $text .= "\n" unless $text =~ /\n\z/;
    $text .= "server {\n    listen 127.0.0.1:%%PORT%%;\n";
    $text .= "    $o{server}\n" if defined $o{server};
    $text .= "    location $api_loc {\n        llm_gateway;\n";
    $text .= "        $o{api_extra}\n" if defined $o{api_extra};
    $text .= "    }\n";
    $text .= provider_location(%$_) for @providers;
    $text .= "}\n";
    return $text;
}

# llm_gateway_retries / llm_gateway_breaker lines for a test config: the
# tests not about failover see one call per request and no breaker.
sub routing_directives {
    my (%o) = @_;
    my $retries = exists $o{retries} ? $o{retries} : 0;
    my $breaker = exists $o{breaker} ? $o{breaker} : 'off';
    my $t = '';
    $t .= "llm_gateway_retries $retries;\n" if defined $retries;
    $t .= "llm_gateway_breaker $breaker;\n" if defined $breaker;
    return $t;
}

# A chat body (a hashref, sent as JSON by Gw::http).
sub chat_body {
    my ($model, %extra) = @_;
    return { model => $model, messages => [{ role => 'user', content => 'hi' }], %extra };
}

# {Authorization => "Bearer KEY"}
sub bearer { return { Authorization => "Bearer $_[0]" } }

# Mismatches of an error envelope {"error":{"message","type","code","param":null}}
# against the wanted type and code (empty list when it matches).
sub envelope_problems {
    my ($json, $type, $code) = @_;
    return ('body is not JSON') unless ref $json eq 'HASH';
    my $e = $json->{error};
    return ('no error object') unless ref $e eq 'HASH';
    my @p;
    push @p, 'extra top-level keys: ' . join(',', grep { $_ ne 'error' } sort keys %$json)
        if keys %$json != 1;
    push @p, 'type is ' . ($e->{type} // 'undef') . ", want $type" if ($e->{type} // '') ne $type;
    push @p, 'code is ' . ($e->{code} // 'undef') . ", want $code" if ($e->{code} // '') ne $code;
    push @p, 'param is not null' if !exists $e->{param} || defined $e->{param};
    push @p, 'message missing or empty' unless defined $e->{message} && length $e->{message};
    return @p;
}

# One test: exact status, Content-Type application/json, and the envelope
# with the given type and code.
sub is_envelope {
    my ($r, $status, $type, $code, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my @p = envelope_problems($r->{json}, $type, $code);
    unshift @p, "status is $r->{status}, want $status" if $r->{status} != $status;
    my $ct = $r->{headers}{'content-type'} // '';
    push @p, "content-type is '$ct', want application/json" unless $ct =~ m{^application/json\b};
    Test::More::ok(!@p, $name // "$status $type/$code envelope")
        or Test::More::diag(join "\n", @p, "body: $r->{body}");
    return !@p;
}

# Lines of $text matching $re.
sub lines_matching {
    my ($text, $re) = @_;
    return grep { $_ =~ $re } split /\n/, $text // '';
}

1;
