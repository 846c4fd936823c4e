package GwHarness;

# The integration suite's harness (make integration):
#
#   PERL5LIB=t/lib prove --harness=GwHarness -j2 -r t/
#
# TAP::Harness as prove uses it, plus, after prove's own summary:
#
#  * how many tests ran in each file, how many were skipped (with the
#    reasons), how long each file took, and the totals;
#  * under CI (the environment variable CI set to anything but "", "0" or
#    "false") a file skipped as a whole or a single skipped test fails the
#    run: the summary says "Result: FAIL" and prove exits non-zero. The test
#    files turn what they cannot run into failures themselves under CI
#    (Gw::skip_all, Gw::skip); this catches whatever skips anyway (a
#    plan skip_all written directly, a skip inside a helper).
#
# With LLMGW_COUNTS_FILE set, the totals are also written to that file as one
# line ("integration: N tests ran in F files, S skipped tests, K skipped
# files"), for make test's last lines.

use strict;
use warnings;

use parent 'TAP::Harness';

sub in_ci {
    my $v = $ENV{CI} // '';
    return $v ne '' && $v ne '0' && lc($v) ne 'false';
}

sub new {
    my ($class, $args) = @_;
    $args = { %{ $args || {} } };
    $args->{aggregator_class} //= 'GwHarness::Aggregator';
    my $self = $class->SUPER::new($args);
    $self->{gw_skips} = {};    # test file -> ["N description: reason", ...]
    # Each parser reports its skipped tests (number, description, reason) as
    # it reads them.
    $self->callback(made_parser => sub {
        my ($parser, $job) = @_;
        my $file = ref $job eq 'ARRAY' ? ($job->[1] // $job->[0]) : "$job";
        my $list = $self->{gw_skips}{$file} = [];
        $parser->callback(test => sub {
            my ($r) = @_;
            return unless $r->has_skip;
            my $d = $r->description // '';
            $d =~ s/^\s*-\s*//;
            push @$list, sprintf('test %d%s: %s', $r->number, length $d ? " ($d)" : '', $r->explanation // '');
        });
    });
    return $self;
}

sub summary {
    my ($self, $agg, $interrupted) = @_;
    my @files = $agg->descriptions;
    my (@rows, @skipped);
    my ($tests, $skipped_tests, $skipped_files) = (0, 0, 0);
    my $width = 0;
    for my $f (@files) { $width = length $f if length $f > $width }
    for my $f (sort @files) {
        my ($p) = $agg->parsers($f);
        next unless $p;
        my $secs = defined $p->start_time && defined $p->end_time ? $p->end_time - $p->start_time : 0;
        my $ran = $p->tests_run // 0;
        my @sk = @{ $self->{gw_skips}{$f} || [] };
        $tests += $ran;
        $skipped_tests += @sk;
        my $what;
        if (defined $p->skip_all) {
            $what = 'SKIPPED as a whole: ' . $p->skip_all;
            push @skipped, "$f: skipped as a whole: " . $p->skip_all;
            $skipped_files++;
        } else {
            $what = sprintf '%d test%s', $ran, $ran == 1 ? '' : 's';
            $what .= sprintf ', %d skipped', scalar @sk if @sk;
            $what .= sprintf ', %d FAILED', scalar $p->failed if $p->failed;
            push @skipped, map { "$f: $_" } @sk;
        }
        push @rows, sprintf "%-*s %7.1f s  %s", $width, $f, $secs, $what;
    }
    my $wall = $agg->elapsed ? $agg->elapsed->real : 0;
    my $total = sprintf 'integration: %d files, %d tests ran, %d skipped tests, %d skipped files, %.0f s wall clock',
        scalar @rows, $tests, $skipped_tests, $skipped_files, $wall;

    my $out = $self->formatter->stdout;
    print {$out} "\n== tests per file (seconds, tests)\n", map({ "$_\n" } @rows), "== $total\n";
    if (@skipped) {
        print {$out} (in_ci() ? "== CI is set: these skips FAIL the run (a suite must not pass by skipping):\n"
                              : "== skipped here (under CI=true each would fail the run):\n"),
                     map({ "   $_\n" } @skipped);
    }
    $agg->{gw_skip_failure} = @skipped && in_ci() ? 1 : 0;
    if (my $file = $ENV{LLMGW_COUNTS_FILE}) {
        if (open my $fh, '>', $file) {
            printf {$fh} "integration: %d tests ran in %d files, %d skipped tests, %d skipped files\n",
                $tests, scalar @rows, $skipped_tests, $skipped_files;
            close $fh;
        }
    }
    # prove's own summary last, so that its "Result:" line ends the output.
    return $self->SUPER::summary($agg, $interrupted);
}

package GwHarness::Aggregator;

use strict;
use warnings;

use parent 'TAP::Parser::Aggregator';

# A skip under CI is an error: "Result: FAIL" and prove's exit status.
sub has_errors {
    my ($self) = @_;
    return $self->SUPER::has_errors || ($self->{gw_skip_failure} ? 1 : 0);
}

1;
