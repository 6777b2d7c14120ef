#!/usr/bin/env bash
# doctest.sh: the SQL examples of README.md and docs/*.md run as written (issue 37).
#
# Every ```sql block of a file runs, in order, in one psql session per file (psql -X -v ON_ERROR_STOP=1, so that SET,
# LISTEN and temporary objects carry over from block to block), as the application role counters_app, in a fresh
# database of the file's own that counters_app owns:
#   - README.md runs from the top: its quick start creates the extension and `posts`;
#   - each docs/*.md file runs after README.md's "Quick start" section (run first, in a session of its own): a docs
#     file starts where a reader coming from the README stands -- the extension, `posts` and `user_blog_posts` -- and
#     creates everything else it uses itself;
#   - a file whose blocks (and quick start) do not create the extension gets it created first, by counters_app (it
#     is trusted).
# A marker on the line right before a block's fence says what else to expect:
#   <!-- doctest: skip (why) -->   the block is not run: it needs what one plain database has not (Citus, pg_cron, a
#                                  second cluster, a superuser), or it is a fragment or an output listing. Say why.
#   <!-- doctest: error XXXXX -->  the block must fail with SQLSTATE XXXXX: every error in it has that SQLSTATE, and
#                                  there is one at least. Its statements run with ON_ERROR_STOP off; then the next
#                                  blocks as usual.
# Other fences (```sh, ```text, ```) are not run. A block must end with its last statement complete (a ";" or a psql
# command): a block that would run on into the next one fails.
#
# A file's blocks are written to a script as long as the file, each block on its own lines and everything else blank,
# so that the line psql names in an error ("psql:<script>:<line>:") is the line in the Markdown file. A failure names
# the file, the line and the block (its number among the file's ```sql blocks, from 1), with psql's error (in
# VERBOSITY verbose: with the SQLSTATE).
#
# Runs in the suite's cluster (PG* variables as the superuser, whose password counters_app shares; test/suites.sh
# creates counters_app), on databases doctest_<file> that it drops at the end. It proves itself first: a seeded
# block that fails, an error marker whose block succeeds and a block that ends inside a statement must be reported.
#
# Usage: test/scripts/doctest.sh [files...]   (default: README.md docs/*.md; exit status 1 when a block fails)
#        DOCTEST_KEEP=1 keeps each file's script, psql's output and its errors (in a directory it names at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."

# blocks FILE SECTION SCRIPT: writes FILE's runnable blocks (only those under the heading SECTION, if not empty) to
# SCRIPT, line for line, and prints one line per ```sql block: number, first and last line (its fences), run, skip
# or error, and the reason or SQLSTATE. Exit status 1, saying why, for a marker it cannot read or a block that ends
# inside a statement.
blocks() {
	perl -e '
use strict;
use warnings;
my ($file, $section, $script) = @ARGV;
open my $in, "<", $file or die "$file: $!\n";
my @lines = <$in>;
close $in;
chomp @lines;
my @out = ("") x @lines;
my ($n, $bad, $open, $sql, $indent, $kind, $arg, $start, @body) = (0, 0, 0);
# (inside SECTION: the heading level of SECTION while in it, 0 outside; SECTION empty: the whole file)
my $level = $section eq "" ? -1 : 0;
for my $i (0 .. $#lines) {
	my $line = $lines[$i];
	if (!$open) {
		if ($line =~ /^(#+)\s+(.*?)\s*$/ && $section ne "") {
			if ($2 eq $section) { $level = length $1; }
			elsif ($level > 0 && length $1 <= $level) { $level = 0; }
		}
		if ($line =~ /^\s*<!--\s*doctest:/ && ($lines[$i + 1] // "") !~ /^\s*```sql\s*$/) {
			printf STDERR "%s:%d: a doctest marker must be on the line right before a ```sql fence\n", $file, $i + 1;
			$bad = 1;
		}
		next unless $line =~ /^(\s*)```(\S*)\s*$/;
		($open, $indent, $sql, $start) = (1, length $1, $2 eq "sql", $i + 1);
		next unless $sql;
		$n++;
		@body = ();
		($kind, $arg) = ("run", "");
		if ($i > 0 && $lines[$i - 1] =~ /^\s*<!--\s*doctest:\s*(.*?)\s*-->\s*$/) {
			my $marker = $1;
			if ($marker =~ /^skip \((.+)\)$/) { ($kind, $arg) = ("skip", $1); }
			elsif ($marker =~ /^error ([0-9A-Z]{5})$/) { ($kind, $arg) = ("error", $1); $out[$i] = "\\set ON_ERROR_STOP 0"; }
			else {
				printf STDERR "%s:%d: block %d: doctest marker \"%s\": expected \"skip (why)\" or \"error SQLSTATE\"\n",
				    $file, $i, $n, $marker;
				$bad = 1;
			}
		}
		next;
	}
	if ($line !~ /^\s*```\s*$/) {
		next unless $sql && $level != 0 && $kind ne "skip";
		(my $text = $line) =~ s/^\s{0,$indent}//;
		$out[$i] = $text;
		push @body, $text;
		next;
	}
	$open = 0;
	next unless $sql && $level != 0;
	$out[$i] = "\\set ON_ERROR_STOP 1" if $kind eq "error";
	if ($kind ne "skip" && !complete(@body)) {
		printf STDERR "%s:%d: block %d ends inside a statement (no \";\" after its last one): it would run on into the" .
		    " next block\n", $file, $i + 1, $n;
		$bad = 1;
	}
	print join("\t", $n, $start, $i + 1, $kind, $arg), "\n";
}
open my $o, ">", $script or die "$script: $!\n";
print $o map { "$_\n" } @out;
close $o;
exit $bad;

# Whether the lines end with a complete statement: outside quotes, dollar quotes and comments, the last thing is a
# ";" or a psql command (a line starting with a backslash).
sub complete {
	my ($state, $tag, $depth, $last) = ("", "", 0, ";");
	for my $line (@_) {
		if ($state eq "" && $line =~ /^\s*\\/) { $last = ";"; next; }
		my $s = "$line\n";
		my $j = 0;
		while ($j < length $s) {
			my $c = substr($s, $j, 1);
			my $two = substr($s, $j, 2);
			if ($state eq "") {
				last if $two eq "--";
				if ($two eq "/*") { ($state, $depth) = ("c", 1); $j += 2; next; }
				if ($c eq "\x27" || $c eq "\"") { ($state, $last) = ($c, "x"); $j++; next; }
				if ($c eq "\$" && ($j == 0 || substr($s, $j - 1, 1) !~ /\w/) &&
				    substr($s, $j) =~ /^(\$(?:[A-Za-z_]\w*)?\$)/) {
					($state, $tag, $last) = ("\$", $1, "x");
					$j += length $tag;
					next;
				}
				$last = $c if $c =~ /\S/;
				$j++;
			} elsif ($state eq "\x27" || $state eq "\"") {
				# (a doubled quote stays inside)
				if ($c eq $state && substr($s, $j + 1, 1) eq $state) { $j += 2; next; }
				$state = "" if $c eq $state;
				$j++;
			} elsif ($state eq "\$") {
				if (substr($s, $j, length $tag) eq $tag) { $state = ""; $j += length $tag; next; }
				$j++;
			} else {
				if ($two eq "/*") { $depth++; $j += 2; next; }
				if ($two eq "*/") { $state = "" if --$depth == 0; $j += 2; next; }
				$j++;
			}
		}
	}
	return $state eq "" && $last eq ";";
}
' "$@"
}

# report FILE BLOCKS STDERR STATUS: what psql printed to STDERR (exit status STATUS) running FILE's blocks (BLOCKS:
# what blocks printed), as failures naming the file, line and block; or, when every block ran as expected, one line
# saying so. Exit status 1 when a block failed.
report() {
	perl -e '
use strict;
use warnings;
my ($file, $table, $errors, $status) = @ARGV;
my @blocks;
open my $t, "<", $table or die "$table: $!\n";
while (<$t>) { chomp; my @b = split /\t/, $_, 5; push @blocks, { n => $b[0], start => $b[1], end => $b[2],
    kind => $b[3], arg => $b[4] // "", seen => 0 }; }
close $t;
open my $e, "<", $errors or die "$errors: $!\n";
my @err = <$e>;
close $e;
my ($bad, $stopped) = (0, 0);
sub block_at { my $l = shift; for (@blocks) { return $_ if $_->{start} < $l && $l < $_->{end}; } return undef; }
for (my $i = 0; $i < @err; $i++) {
	my $line = $err[$i];
	if ($line =~ /^psql:[^\n]*?:(\d+): (ERROR|FATAL|PANIC):\s+([0-9A-Z]{5}): (.*)$/) {
		my ($at, $level, $state, $msg) = ($1, $2, $3, $4);
		my $b = block_at($at);
		# (what psql printed with it: DETAIL, HINT, CONTEXT, the statement line; not where in the server)
		my @more;
		while ($i + 1 < @err && $err[$i + 1] !~ /^psql:/) {
			my $m = $err[++$i];
			chomp $m;
			push @more, "    $m" unless $m =~ /^LOCATION:/;
		}
		$b->{seen}++ if $b;
		next if $b && $b->{kind} eq "error" && $state eq $b->{arg} && $level eq "ERROR";
		my $where = $b ? "block $b->{n}" : "outside any block";
		my $why = $b && $b->{kind} eq "error" ? "expected $b->{arg}, got " : "";
		printf "doctest: %s:%d: %s: %s%s:  %s: %s\n", $file, $at, $where, $why, $level, $state, $msg;
		print "$_\n" for @more[0 .. ($#more < 5 ? $#more : 5)];
		$bad = 1;
		$stopped = $at if $b && $b->{kind} ne "error" || !$b;
	} elsif ($line =~ /^psql:[^\n]*?:(\d+): (NOTICE|WARNING|INFO|DEBUG\d?|LOG):/) {
		next;
	} elsif ($line =~ /^psql: |^psql:[^\n]*: error: /) {
		chomp $line;
		print "doctest: $file: $line\n";
		($bad, $stopped) = (1, 1);
	}
}
if ($status != 0 && !$bad) {
	print "doctest: $file: psql exited with status $status\n";
	$bad = 1;
}
my (%count, @skips);
for my $b (@blocks) {
	$count{$b->{kind}}++;
	push @skips, "block $b->{n} ($b->{arg})" if $b->{kind} eq "skip";
	next unless $b->{kind} eq "error" && !$b->{seen};
	if ($stopped && $stopped < $b->{start}) { $count{"not reached"}++; next; }
	printf "doctest: %s:%d: block %d: marked error %s, but it ran without an error\n", $file, $b->{start} + 1, $b->{n},
	    $b->{arg};
	$bad = 1;
}
if (!$bad && !@blocks) {
	print "doctest: $file: no SQL examples\n";
} elsif (!$bad) {
	printf "doctest: %s: %d blocks: %d run%s%s\n", $file, scalar @blocks, ($count{run} // 0) + ($count{error} // 0),
	    $count{error} ? " ($count{error} failing as marked)" : "",
	    @skips ? ", " . @skips . " not run: " . join("; ", @skips) : "";
}
exit $bad;
' "$@"
}

work=$(mktemp -d)
# (the databases made, one a line: also by checks run in a subshell)
: >"$work/databases"
cleanup() {
	local db
	while read -r db; do dropdb --if-exists "$db" >/dev/null 2>&1 || true; done <"$work/databases"
	if [ -n "${DOCTEST_KEEP:-}" ]; then echo "doctest.sh: the scripts and psql's output: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
as_app() { PGUSER=counters_app "$@"; }

# check FILE: runs FILE's blocks (after README.md's quick start for a file in docs/) in a new database, reporting
# failures; exit status 1 when one failed.
check() {
	local file=$1 name db prelude=() f rc
	name=$(basename "$file" .md | tr '[:upper:]' '[:lower:]' | tr -c 'a-z0-9\n' _)
	db=doctest_$name
	if [[ $file == docs/* ]]; then prelude=(README.md "Quick start"); fi
	mkdir -p "$work/$name"
	if [ ${#prelude[@]} -gt 0 ]; then
		blocks "${prelude[0]}" "${prelude[1]}" "$work/$name/prelude.sql" >"$work/$name/prelude.blocks" || return 1
	fi
	blocks "$file" "" "$work/$name/file.sql" >"$work/$name/file.blocks" || return 1
	if ! grep -qE $'\t(run|error)\t' "$work/$name/file.blocks"; then
		report "$file" "$work/$name/file.blocks" /dev/null 0
		return
	fi
	echo "$db" >>"$work/databases"
	PGOPTIONS="-c client_min_messages=warning" dropdb --if-exists "$db" && createdb -O counters_app "$db" || return 1
	if ! grep -qiE '^[[:space:]]*CREATE EXTENSION (IF NOT EXISTS )?counters\b' "$work/$name"/*.sql; then
		as_app psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c 'CREATE EXTENSION counters' || return 1
	fi
	for f in prelude file; do
		[ -e "$work/$name/$f.sql" ] || continue
		rc=0
		as_app psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -d "$db" -f "$work/$name/$f.sql" \
			>"$work/$name/$f.out" 2>"$work/$name/$f.err" || rc=$?
		if [ $f = prelude ]; then
			if ! report "${prelude[0]}" "$work/$name/$f.blocks" "$work/$name/$f.err" $rc >"$work/$name/$f.report"; then
				echo "doctest: $file: ${prelude[0]}'s ${prelude[1]}, run first, failed:"
				cat "$work/$name/$f.report"
				return 1
			fi
		else
			report "$file" "$work/$name/$f.blocks" "$work/$name/$f.err" $rc || return 1
		fi
	done
}

# The check must be able to fail: a block that fails, an error marker on a block that succeeds, and a block that ends
# inside a statement are each reported, naming the block; a file with a skipped block and a block failing as marked
# passes (and so shows that SET carries over from block to block).
fixture=$work/fixture
mkdir "$fixture"
cat >"$fixture/passes.md" <<'EOF'
# Passes

```sql
CREATE TABLE t (id int PRIMARY KEY);
SET application_name = 'doctest';
```

<!-- doctest: error 23505 -->
```sql
INSERT INTO t VALUES (1), (1);
```

<!-- doctest: skip (a fragment) -->
```sql
SELECT ... FROM
```

```sh
not SQL
```

```sql
SELECT 1 / (current_setting('application_name') = 'doctest')::int, count(*) FROM counters.counter;
```
EOF
cat >"$fixture/fails.md" <<'EOF'
# Fails

```sql
CREATE TABLE t (id int);
```

```sql
INSERT INTO t VALUES (1);
SELECT * FROM no_such_table;
```
EOF
cat >"$fixture/succeeds.md" <<'EOF'
# Succeeds

<!-- doctest: error 23514 -->
```sql
SELECT $$ a dollar-quoted ; $$;
```
EOF
cat >"$fixture/unterminated.md" <<'EOF'
# Unterminated

```sql
SELECT 1;
SELECT 'a ; in a string'
```

<!-- doctest: skipped -->
```sql
SELECT 2;
```
EOF
expect() { # fixture patterns...: checking the fixture fails, with a line that matches each pattern
	local out fixture_file=$1 pattern
	shift
	if out=$(check "$fixture/$fixture_file" 2>&1); then
		echo "doctest.sh: the check did not report $fixture_file" >&2
		exit 1
	fi
	for pattern in "$@"; do
		if ! grep -qE "$pattern" <<<"$out"; then
			echo "doctest.sh: the check reported $fixture_file wrongly (nothing matches \"$pattern\"):" >&2
			printf '%s\n' "$out" >&2
			exit 1
		fi
	done
}
if ! out=$(check "$fixture/passes.md" 2>&1); then
	echo "doctest.sh: the check failed a fixture that passes:" >&2
	printf '%s\n' "$out" >&2
	exit 1
fi
expect fails.md 'fails\.md:9: block 2: ERROR:  42P01: relation "no_such_table" does not exist'
expect succeeds.md 'succeeds\.md:5: block 1: marked error 23514, but it ran without an error'
expect unterminated.md 'unterminated\.md:6: block 1 ends inside a statement' \
	'unterminated\.md:8: block 2: doctest marker "skipped": expected'

if [ $# -eq 0 ]; then
	set -- README.md docs/*.md
fi
failed=0
for file in "$@"; do
	check "$file" || failed=1
done
if [ $failed -ne 0 ]; then
	echo "doctest.sh: an example of the documentation does not run as written (see the header for the markers)" >&2
	exit 1
fi
echo "doctest.sh: every SQL example runs as written ($# files)"
