package GwLoad;

# A bounded background load for the fault tests (t/90, t/91, t/soak): $conc
# client processes send requests of the given kinds round-robin for $secs
# seconds, each through $one->($kind), which returns an outcome ('ok', a
# status, 'error: ...'); the counts of the outcomes come back per kind.
#
#   my $load = GwLoad::start(8, 6, \&one, qw(chat stream reject));
#   ... faults ...
#   my $sum = GwLoad::finish($load);   # {kind => {outcome => count}, client => {...}}
#   GwLoad::count($sum, 'chat', 'ok'), GwLoad::total($sum->{chat})

use strict;
use warnings;

use File::Temp ();
use POSIX ();
use Time::HiRes ();
use Gw;

sub start {
    my ($conc, $secs, $one, @kinds) = @_;
    my $file = File::Temp->new(TEMPLATE => 'llmgw-load-XXXXXX', TMPDIR => 1, UNLINK => 1);
    my $pid = fork // die "GwLoad::start: fork: $!";
    if (!$pid) {
        my @res = Gw::parallel($conc, sub {
            my ($i) = @_;
            my (%st, $n);
            my $end = Time::HiRes::time() + $secs;
            while (Time::HiRes::time() < $end) {
                my $kind = $kinds[($i + $n++) % @kinds];
                $st{$kind}{ $one->($kind) }++;
            }
            return \%st;
        }, timeout => $secs + 60);
        my %sum;
        for my $r (@res) {
            if (ref $r ne 'HASH' || $r->{error}) { $sum{client}{ (ref $r eq 'HASH' && $r->{error}) || 'bad' }++; next }
            for my $k (keys %$r) { $sum{$k}{$_} += $r->{$k}{$_} for keys %{ $r->{$k} } }
        }
        if (open my $fh, '>', "$file") {
            print {$fh} Gw::json_encode(\%sum);
            close $fh;
        }
        POSIX::_exit(0);
    }
    return { pid => $pid, file => $file };
}

sub finish {
    my ($load) = @_;
    waitpid($load->{pid}, 0);
    return Gw::json_decode(Gw::_slurp("$load->{file}")) || {};
}

sub total { my ($h) = @_; my $t = 0; $t += $_ for values %{ $h || {} }; return $t }
sub count { my ($sum, $kind, $what) = @_; return ($sum->{$kind} || {})->{$what} // 0 }

# Requests of the given kinds answered 'ok', and those of them that were not.
sub ok_of { my ($sum, @kinds) = @_; my $n = 0; $n += count($sum, $_, 'ok') for @kinds; return $n }
sub failed_of {
    my ($sum, @kinds) = @_;
    my $n = 0;
    $n += total($sum->{$_}) - count($sum, $_, 'ok') for @kinds;
    return $n;
}

1;
