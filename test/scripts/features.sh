#!/usr/bin/env bash
# features.sh: the matrix "What each kind of counter may do" in docs/modes.md says what the one table of the code
# says (src/model/features.cpp, RULES: a row per feature, its docs name and what it needs of a counter).
#
# Each kind of counter has or lacks each need: an exact counter with a table of its own is local (not a Citus table),
# has its own table, is exact and counts a source that stores its rows; log and sharded ones are not exact; a counter
# cache keeps columns of an existing table (its own table: no) and is exact; a Citus counter is an exact one with its
# own table over a hash-distributed Citus table (LOCAL_OR_HASH: local, or hash-distributed; LOCAL_OR_PENDING: local, or
# hash-distributed in log or sharded mode, which the Citus column's exact counter is not); a sink's counter is an exact
# one whose source stores no rows. A
# feature is allowed ("yes") when the kind has every need of its row. The check proves itself first: a seeded rule
# that the docs contradict must be reported.
#
# Usage: test/scripts/features.sh [features.cpp docs.md]   (exit status 1 when they disagree)
set -euo pipefail
cd "$(dirname "$0")/../.."

check() {
	perl -e '
use strict;
use warnings;
my ($code, $docs) = @ARGV;
# the kinds, in the docs columns order, and the needs each has
my %local = (LOCAL => 1, LOCAL_OR_HASH => 1, LOCAL_OR_PENDING => 1);
my @kinds = (["exact", {%local, OWN_TABLE => 1, EXACT => 1, STORED => 1}],
             ["log", {%local, OWN_TABLE => 1, STORED => 1}],
             ["sharded", {%local, OWN_TABLE => 1, STORED => 1}],
             ["counter cache", {%local, CACHE => 1, EXACT => 1, STORED => 1}],
             ["Citus", {LOCAL_OR_HASH => 1, OWN_TABLE => 1, EXACT => 1, STORED => 1}],
             ["sink", {%local, OWN_TABLE => 1, EXACT => 1}]);
open my $c, "<", $code or die "$code: $!\n";
my %rules;
my $text = do { local $/; <$c> };
# (a row may span lines, as clang-format breaks it)
while ($text =~ /\{Feature::\w+,\s*"([^"]+)",\s*([A-Z_|\s]+),/g) {
	my ($name, $needs) = ($1, $2);
	$rules{$name} = [map { s/^NEED_//r } grep { /^NEED_/ } split /\s*\|\s*/, $needs =~ s/^\s+|\s+$//gr];
}
die "$code: no rule found\n" unless %rules;
open my $d, "<", $docs or die "$docs: $!\n";
my ($in, %seen, $bad) = (0);
while (<$d>) {
	$in = 1, next if /<!-- features: begin/;
	last if /<!-- features: end/;
	next unless $in && /^\|/ && !/^\| (feature|---)/;
	my @cells = map { s/^\s+|\s+$//gr } split /\|/;
	shift @cells;
	my $name = shift @cells;
	$name =~ s/`//g;
	$seen{$name} = 1;
	if (!exists $rules{$name}) { print "$docs: feature \"$name\" has no rule in $code\n"; $bad = 1; next; }
	for my $k (0 .. $#kinds) {
		my ($kind, $has) = @{ $kinds[$k] };
		my $allowed = (grep { !$has->{$_} } @{ $rules{$name} }) ? "no" : "yes";
		next if ($cells[$k] // "") eq $allowed;
		print "$docs: \"$name\" for $kind says \"" . ($cells[$k] // "") . "\", $code says \"$allowed\"\n";
		$bad = 1;
	}
}
for my $name (sort keys %rules) {
	next if $seen{$name};
	print "$docs: no row for feature \"$name\" of $code\n";
	$bad = 1;
}
exit($bad ? 1 : 0);
' "$@"
}

fixture=$(mktemp -d)
trap 'rm -rf "$fixture"' EXIT
printf '%s\n' '    {Feature::Bounds, "bounds", NEED_EXACT, nullptr, none, none},' >"$fixture/features.cpp"
printf '%s\n' '<!-- features: begin -->' '| feature | `exact` | `log` | `sharded` | counter cache | Citus | sink |' \
	'| bounds | yes | yes | no | yes | yes | yes |' '<!-- features: end -->' >"$fixture/docs.md"
if out=$(check "$fixture/features.cpp" "$fixture/docs.md") || ! grep -q '"bounds" for log says "yes"' <<<"$out"; then
	echo "features.sh: the check did not report a seeded disagreement" >&2
	exit 1
fi
if ! check "${1:-src/model/features.cpp}" "${2:-docs/modes.md}"; then
	echo "features.sh: docs/modes.md's matrix differs from src/model/features.cpp (see above)" >&2
	exit 1
fi
echo "features.sh: docs/modes.md's matrix is what src/model/features.cpp decides"
