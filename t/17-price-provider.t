#!/usr/bin/perl
# llm_gateway_price must name a configured provider: a misspelt provider name
# (or a provider type instead of a name) would leave the model unpriced, so
# nginx -t refuses it with the price line's file:line. A price line may come
# before its provider's line.

use strict;
use warnings;
use lib 't/lib';
use Gw;
use GwConf;
use Test::More;

Gw::need_module();

my $PROVIDER = "llm_gateway_provider openai type=openai location=/_llm/openai/;\n";

# [name, http-level text, expected message or undef for success, 1-based line of the offending directive]
my @cases = (
    ['a price for a configured provider', $PROVIDER . "llm_gateway_price openai/gpt-4o input=2 output=8;\n", undef],
    ['a price line before its provider line', "llm_gateway_price openai/gpt-4o free;\n" . $PROVIDER, undef],
    ['a misspelt provider', $PROVIDER . "llm_gateway_price opneai/gpt-4o input=2 output=8;\n",
     'llm_gateway_price "opneai/gpt-4o" names unknown provider "opneai"', 2],
    ['a misspelt provider before the provider line', "\nllm_gateway_price opneai/gpt-4o free;\n" . $PROVIDER,
     'llm_gateway_price "opneai/gpt-4o" names unknown provider "opneai"', 2],
    ['a provider type instead of the provider name',
     "llm_gateway_provider azure-eu type=openai location=/_llm/openai/;\nllm_gateway_price openai/my-model free;\n",
     'llm_gateway_price "openai/my-model" names unknown provider "openai"; price lines name a provider, not a type: '
     . 'write "azure-eu/my-model"', 2],
);

for my $c (@cases) {
    my ($name, $http, $want, $line) = @$c;
    subtest $name => sub {
        my $conf = $http . "server {\n    listen 127.0.0.1:%%PORT%%;\n    location /v1/ { llm_gateway; }\n"
                 . "    location /_llm/openai/ { internal; proxy_pass http://127.0.0.1:9/; }\n}\n";
        my ($exit, $out, $file, $first) = Gw::nginx_t($conf);
        if (!defined $want) {
            is($exit, 0, 'nginx -t passes') or diag($out);
            return;
        }
        isnt($exit, 0, 'nginx -t fails');
        my $at = "$file:" . ($first + $line - 1);
        like($out, qr/\[emerg\] \d+#\d+: \Q$want\E in \Q$at\E$/m, "one sentence naming $at") or diag($out);
    };
}

done_testing;
