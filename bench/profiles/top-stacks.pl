#!/usr/bin/perl
# top-stacks.pl FOLDED [N]: a text report of collapsed stacks (one
# "frame;frame;... count" line per stack, as `flame.pl --folded` writes
# them): the share of the samples spent in user space and in the kernel,
# the top user-space leaf functions, the module's functions by inclusive
# share, and the heaviest user-space stacks. Frames are cut at the first
# kernel entry; C++ argument lists are dropped. See README.md.
use strict;
use warnings;

my ($file, $n) = @ARGV;
die "usage: $0 FOLDED [N]\n" unless defined $file;
$n //= 20;
open my $fh, '<', $file or die "$file: $!\n";
my (%self, %incl, %stack, $total, $user);
while (my $line = <$fh>) {
    chomp $line;
    my ($frames, $count) = $line =~ /^(.*) (\d+)$/ or next;
    my @u;
    for my $f (split /;/, $frames) {
        last if $f =~ /^(entry_SYSCALL|asm_|__sysvec|ret_from_fork)/;
        $f =~ s/\(anonymous namespace\)::/~/g;
        1 while $f =~ s/<[^<>]*>//g;          # template arguments
        $f =~ s/\(.*\)//;                     # argument lists
        $f =~ s/ \[clone [^]]*\]//g;
        push @u, $f;
    }
    $total += $count;
    my %seen;
    $incl{$_} += $count for grep { !$seen{$_}++ } @u;
    next unless @u == scalar(split /;/, $frames);   # a user-space leaf
    $user += $count;
    $self{$u[-1]} += $count;
    $stack{join ';', @u[($#u > 7 ? $#u - 7 : 0) .. $#u]} += $count;
}
die "$file: no samples\n" unless $total;
my $pct = sub { sprintf '%6.2f%%', 100 * $_[0] / $total };
my @top = sub { my ($h, $k) = @_; (sort { $h->{$b} <=> $h->{$a} } keys %$h)[0 .. $k - 1] };
printf "samples (weight) %d; user-space leaves %s, kernel %s\n\n", $total, $pct->($user), $pct->($total - $user);
print "Top user-space leaf functions (self):\n";
for my $k (grep { defined } (sort { $self{$b} <=> $self{$a} } keys %self)[0 .. $n - 1]) { print $pct->($self{$k}), "  $k\n" }
print "\nThe module's functions (inclusive, kernel time below them included):\n";
my @mod = grep { /llmgw::|^~|rapidjson::/ } keys %incl;
for my $k (grep { defined } (sort { $incl{$b} <=> $incl{$a} } @mod)[0 .. 2 * $n - 1]) { print $pct->($incl{$k}), "  $k\n" }
print "\nHeaviest user-space stacks (last 8 frames):\n";
for my $k (grep { defined } (sort { $stack{$b} <=> $stack{$a} } keys %stack)[0 .. $n - 1]) { print $pct->($stack{$k}), "  $k\n" }
