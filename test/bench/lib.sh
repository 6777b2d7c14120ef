# What the benchmarks parent.sh, sink.sh and windows.sh share; each sources it first, from the top of the tree.
# Outside a cluster (no PGHOST), it waits for the other suites, builds and installs the extension (test/lib.sh) and
# runs the calling script again inside a throwaway cluster tuned for load (pg_virtualenv, removed on exit). Inside
# one, it reads the settings every benchmark takes (SECONDS_PER_RUN, RUNS, CLIENTS), makes a scratch directory
# ($work, removed on exit) and defines the helpers below. BENCH_OPTS: more pg_virtualenv options (-o name=value ...).
source test/lib.sh
if [ -z "${PGHOST:-}" ]; then
	suite_lock
	build_install
	exec pg_virtualenv -t -v "$PGVER" -o shared_buffers=1GB -o max_wal_size=8GB -o checkpoint_timeout=1h \
		-o max_connections=50 ${BENCH_OPTS:-} bash "$0"
fi
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
RUNS=${RUNS:-3}
CLIENTS=${CLIENTS:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# fresh_db name: the benchmark's database ($db), dropped if it exists and created again with the extension.
fresh_db() {
	db=$1
	dropdb --if-exists "$db" >/dev/null 2>&1
	createdb "$db"
	psql -X -q -d "$db" -c "CREATE EXTENSION counters"
}
# reset_db table...: drops the tables (CASCADE) and every counter left in $db, before a variant's set-up.
reset_db() {
	psql -X -q -d "$db" >/dev/null 2>&1 <<SQL
DROP TABLE IF EXISTS $(IFS=,; echo "$*") CASCADE;
SELECT counters.drop_counter(name) FROM counters.counter WHERE NOT options ? 'part_of';
SQL
}
# load script: CLIENTS pgbench clients (one thread each) run the script on $db for SECONDS_PER_RUN; pgbench's report.
load() { pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" -f "$1" "$db" 2>/dev/null; }
# report_tps: the transactions per second (a whole number) in the pgbench report on stdin.
report_tps() { awk '/^tps = / {printf "%d", $3}'; }
# check_verify label [counter]: counters.verify() of the counter, or of them all, must be empty; DRIFT on stderr if not.
check_verify() {
	local drift
	drift=$(psql -X -q -At -d "$db" -c "SELECT count(*) FROM counters.verify(${2:+'$2'})")
	[ "$drift" = 0 ] || echo "DRIFT: $1: counters.verify() returned $drift rows" >&2
}
# median: the median of the numbers on stdin, one a line (the lower middle one of an even count).
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
# ratio a b: a / b, with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# header first variant...: the header of a Markdown table whose first column is `first` and the others the variants.
header() {
	local first=$1
	shift
	printf '| %s | %s |\n|---|%s\n' "$first" "$(sed 's/ / | /g' <<<"$*")" "$(for v in "$@"; do printf -- '---|'; done)"
}
# row measure label unit variant...: a row of a Markdown table: the label, then for each variant the median of RUNS
# calls of `measure variant` (a function of the calling script that leaves its figure in $value), in the unit, with
# its ratio to the first variant's in parentheses.
row() {
	local measure=$1 label=$2 unit=$3 v r m first="" line results
	shift 3
	line="| $label |"
	for v in "$@"; do
		results=()
		for ((r = 0; r < RUNS; r++)); do
			"$measure" "$v"
			results+=("$value")
		done
		m=$(printf '%s\n' "${results[@]}" | median)
		first=${first:-$m}
		line+=" $m $unit ($(ratio "$m" "$first")) |"
	done
	echo "$line"
}
