#!/usr/bin/perl
# A flame graph of `perf script` output, as a static SVG (no script in it).
#
#   perf script -i perf.data | bench/profiles/flame.pl --title 'gateway-limits, 64 connections' > out.svg
#   perf script -i perf.data | bench/profiles/flame.pl --folded > out.folded   # the stacks, one line each
#
# Each sample's stack (root first) is one path; a frame's width is the share of samples whose stack passes
# through it, its colour a hash of its name (module frames blue, kernel frames orange, the rest red-yellow).
# Frames narrower than --min (default 0.1 %) are left out; hover a frame for its name and share (SVG <title>).
# Written for this project (bench/profiles/README.md); reads nothing but its input.
use strict;
use warnings;
use Getopt::Long;

my ($title, $folded_only, $min_pct, $width) = ('flame graph', 0, 0.1, 1200);
GetOptions('title=s' => \$title, 'folded' => \$folded_only, 'min=f' => \$min_pct, 'width=i' => \$width)
    or die "usage: $0 [--title T] [--folded] [--min PCT] [--width PX] < perf-script-output\n";

# ---- collapse: one "a;b;c count" per distinct stack, root first
my %stacks;
my @frames;
my $comm;
sub flush_sample {
    if (defined $comm) {
        my @path = ($comm, reverse @frames);
        $stacks{ join ';', @path }++;
    }
    @frames = ();
    undef $comm;
}
while (my $line = <STDIN>) {
    chomp $line;
    if ($line =~ /^\s*$/) { flush_sample(); next }
    if ($line =~ /^\S/) {            # a sample's header: "comm pid [cpu] time: period event:"
        flush_sample();
        ($comm) = $line =~ /^(\S+)/;
        next;
    }
    # a frame: "\t<addr> <symbol>+<off> (<dso>)"
    my ($sym, $dso) = $line =~ /^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)$/ or next;
    $sym =~ s/\+0x[0-9a-f]+$//;
    $sym = '[' . (split m{/}, $dso)[-1] . ']' if $sym eq '[unknown]';
    $sym =~ s/;/:/g;
    $sym .= '_[k]' if $dso =~ /kernel/;
    push @frames, $sym;
}
flush_sample();

if ($folded_only) {
    print "$_ $stacks{$_}\n" for sort keys %stacks;
    exit 0;
}

# ---- the tree
my $total = 0;
my %root = (n => 0, kids => {});
for my $s (keys %stacks) {
    my $c = $stacks{$s};
    $total += $c;
    my $node = \%root;
    $node->{n} += $c;
    for my $f (split /;/, $s) {
        $node = $node->{kids}{$f} //= { n => 0, kids => {} };
        $node->{n} += $c;
    }
}
die "$0: no samples in the input\n" unless $total;

# ---- layout: depth 0 (the process name) at the bottom
my ($frame_h, $pad_top, $pad_bottom, $xpad) = (16, 40, 20, 10);
my @rects;
my $maxdepth = 0;
sub place {
    my ($node, $name, $x, $depth) = @_;
    my $w = ($width - 2 * $xpad) * $node->{n} / $total;
    return if 100 * $node->{n} / $total < $min_pct;
    push @rects, [$name, $x, $w, $depth, $node->{n}];
    $maxdepth = $depth if $depth > $maxdepth;
    my $cx = $x;
    for my $k (sort keys %{ $node->{kids} }) {
        my $kid = $node->{kids}{$k};
        place($kid, $k, $cx, $depth + 1);
        $cx += ($width - 2 * $xpad) * $kid->{n} / $total;
    }
}
my $rx = $xpad;
for my $k (sort keys %{ $root{kids} }) {
    place($root{kids}{$k}, $k, $rx, 0);
    $rx += ($width - 2 * $xpad) * $root{kids}{$k}{n} / $total;
}
my $height = $pad_top + ($maxdepth + 1) * $frame_h + $pad_bottom;

sub esc { my ($t) = @_; $t =~ s/&/&amp;/g; $t =~ s/</&lt;/g; $t =~ s/>/&gt;/g; $t =~ s/"/&quot;/g; return $t }
sub colour {
    my ($name) = @_;
    my $h = 0;
    $h = ($h * 31 + ord $_) % 1000 for split //, $name;
    my $v = $h / 1000;
    return sprintf('rgb(%d,%d,%d)', 80 + 60 * $v, 140 + 60 * $v, 230) if $name =~ /llmgw|llm_gateway/;
    return sprintf('rgb(%d,%d,%d)', 230, 140 + 60 * $v, 50) if $name =~ /_\[k\]$/;
    return sprintf('rgb(%d,%d,%d)', 220 + 30 * $v, 90 + 120 * $v, 50 + 40 * $v);
}

print qq{<?xml version="1.0" standalone="no"?>\n};
printf qq{<svg version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg">\n},
    $width, $height, $width, $height;
print qq{<rect x="0" y="0" width="100%" height="100%" fill="rgb(250,250,245)"/>\n};
printf qq{<text x="%d" y="24" text-anchor="middle" font-family="sans-serif" font-size="16">%s</text>\n},
    $width / 2, esc($title);
printf qq{<text x="%d" y="%d" font-family="sans-serif" font-size="11" fill="rgb(90,90,90)">%d samples; frames under %.2f %% left out; hover a frame for its name and share</text>\n},
    $xpad, $height - 6, $total, $min_pct;
for my $r (@rects) {
    my ($name, $x, $w, $depth, $n) = @$r;
    my $y = $height - $pad_bottom - ($depth + 1) * $frame_h;
    my $pct = 100 * $n / $total;
    printf qq{<g><title>%s (%d samples, %.2f %%)</title><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" rx="1"/>},
        esc($name), $n, $pct, $x, $y, $w, $frame_h - 1, colour($name);
    my $chars = int(($w - 4) / 7);
    if ($chars >= 3) {
        my $label = length($name) > $chars ? substr($name, 0, $chars - 2) . '..' : $name;
        printf qq{<text x="%.1f" y="%d" font-family="monospace" font-size="11">%s</text>}, $x + 2, $y + 12, esc($label);
    }
    print "</g>\n";
}
print "</svg>\n";
