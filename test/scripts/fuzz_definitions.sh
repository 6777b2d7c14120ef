#!/usr/bin/env bash
# Definition fuzzing. test/scripts/fuzz_definitions.pl generates FUZZ_N (default 2000) definitions from a fixed seed
# (FUZZ_SEED, printed): valid ones over three sources with odd types (int2/int4/int8, numeric with and without typmod,
# text with collation "C" and a case-insensitive ICU collation, varchar, char, date, timestamp, timestamptz, bool,
# uuid, an enum, a domain, arrays, jsonb, ranges, interval, float8, bytea, inet, a composite), quoted and unicode
# identifiers, a partitioned source with a partition in another column order; near-valid mutations (no GROUP BY,
# extra columns, keys not selected, wrong aggregates, volatile functions, subqueries, HAVING/ORDER BY/LIMIT/DISTINCT,
# grouping sets, window functions, joins and other sources, system columns, whole rows, duplicate aliases, data
# errors, collation conflicts, type errors, other statements, syntax errors); huge and deep ones (nesting to
# thousands of levels, literals of up to a megabyte, 50,000-element IN lists, 40 keys, 1,800 values).
# Each is declared with counters.create_counter in a random mode (exact, log, sharded), by fuzz_one() in
# test/scripts/fuzz_definitions.sql, and judged:
#   - a rejection is an ERROR with a SQLSTATE outside class XX whose message or context names the counter
#     (counter "<name>"), with valid UTF-8 text, leaving no object behind; a definition that breaks a documented rule
#     (volatile function, subquery, wrong aggregate, system column, ...) must be rejected;
#   - an accepted counter counts: a round of random writes to its source (inserts, key and value updates, no-op
#     updates, deletes, rolled-back subtransactions, partition moves and statements naming partitions, upserts,
#     MERGE, TRUNCATE); in log and sharded mode verify() and compact(); in a quarter of the cases verify() and a
#     mode switch (alter_counter); a second round of writes; counters.verify(name) empty and the counter's rows equal
#     to its definition view's nonzero groups (compared here, by name, not by verify); then drop_counter leaves no
#     relation, trigger, type, constraint, rule, dependency, function or catalog row behind;
#   - the backend survives every case (a crash stops the run and names the case).
# Then: the rejected declarations, and 30 accepted ones (with writes, then dropped), are replayed three times in one
# backend, and its memory (in use in memory contexts, private resident) must not grow from the first to the last
# replay by more than PostgreSQL's own catalog caching; a counter declared on a temporary table must not leave a
# catalog row behind when its session ends.
#
#   FUZZ_SEED=0.77 FUZZ_N=500 bash test/scripts/fuzz_definitions.sh
#   FUZZ_ONLY=123 bash test/scripts/fuzz_definitions.sh        # run case 123 of the seed alone, print it in full
#   FUZZ_KEEP=1 ...                                             # keep the database counters_fuzz afterwards
#   FUZZ_KEYS_FIRST=1 ...                      # every select list names its keys first (by default 40% mix them)
#   FUZZ_TIMEOUT=600s ...                      # statement_timeout of each case (default 60s; raise under valgrind)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
db=counters_fuzz
N=${FUZZ_N:-2000}
SEED=${FUZZ_SEED:-0.31}
ONLY=${FUZZ_ONLY:-}
[[ $SEED =~ ^-?[0-9]+(\.[0-9]+)?$ ]] || { echo "fuzz_definitions: FUZZ_SEED must be a number"; exit 2; }
[ -n "$ONLY" ] && [ "$N" -lt "$ONLY" ] && N=$ONLY
echo "fuzz_definitions: seed $SEED (FUZZ_SEED), $N definitions (FUZZ_N)"
work=$(mktemp -d)
cleanup() {
	rm -rf "$work"
	[ -n "${FUZZ_KEEP:-}" ] || dropdb --if-exists "$db" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail=0
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }

dropdb --if-exists "$db" >/dev/null 2>&1 || true
createdb -E UTF8 -T template0 "$db"
icu=$(q -c "SELECT (count(*) > 0)::int FROM pg_collation WHERE collprovider = 'i'")
q -v seed="$SEED" -v icu="$icu" -f "$here/fuzz_definitions.sql" >/dev/null
perl "$here/fuzz_definitions.pl" "$SEED" "$N" "$icu" "${FUZZ_KEYS_FIRST:-0}" >"$work/cases.tsv"
q -c "\\copy fuzz_case FROM '$work/cases.tsv'"

# one statement per case: a crash ends psql there, and a case that hangs is cut off by the statement timeout
{
	echo "SET client_min_messages = error;"
	echo "SET search_path = \"Schéma ☃\", public;"
	echo "SET statement_timeout = '${FUZZ_TIMEOUT:-60s}';"
	if [ -n "$ONLY" ]; then
		echo "SELECT fuzz_one($ONLY, $SEED);"
	else
		for i in $(seq 1 "$N"); do echo "SELECT fuzz_one($i, $SEED);"; done
	fi
} >"$work/run.sql"
start=$(date +%s)
if ! q -f "$work/run.sql" >"$work/run.out" 2>&1; then
	for _ in $(seq 1 60); do pg_isready -q -d "$db" && break; sleep 1; done    # a crash: wait for the restart
	last=$(q -c "SELECT coalesce(max(n), 0) FROM fuzz_outcome" 2>/dev/null || echo '?')
	tail -5 "$work/run.out"
	echo "fuzz_definitions: FAILED: the session ended after case $last; the next case was:"
	q -c "SELECT format('case %s, mode %s, name %s: %s', n, mode, quote_literal(name), left(definition, 2000))
	        FROM fuzz_case WHERE n = $last + 1" 2>/dev/null || true
	q -c "SELECT 1" >/dev/null 2>&1 && echo "(the server is up again)" || echo "(the server does not answer)"
	exit 1
fi
echo "fuzz_definitions: $(($(date +%s) - start)) s for the cases"

if [ -n "$ONLY" ]; then
	q -c "SELECT format(E'case %s (%s, expect %s, mode %s, source %s)\nname: %s\ndefinition: %s\naccepted: %s\nerror: %s %s\ncontext: %s\nfailure: %s %s',
	        c.n, c.family, c.expect, c.mode, c.source, quote_literal(c.name), c.definition, o.accepted, o.sqlstate,
	        o.message, o.context, o.failure, o.detail)
	        FROM fuzz_case c JOIN fuzz_outcome o USING (n)"
	exit 0
fi

q -c "SELECT format('%s accepted, %s rejected (%s of them with the counter''s own message), slowest case %s ms',
        count(*) FILTER (WHERE accepted), count(*) FILTER (WHERE NOT accepted),
        count(*) FILTER (WHERE NOT accepted AND message LIKE 'counter %'), max(ms)) FROM fuzz_outcome"
echo "by family (accepted/total):"
q -c "SELECT string_agg(format('%s %s/%s', family, a, t), ', ' ORDER BY family)
        FROM (SELECT c.family, count(*) FILTER (WHERE o.accepted) a, count(*) t
                FROM fuzz_case c JOIN fuzz_outcome o USING (n) GROUP BY c.family) x" | fold -s -w 118 | sed 's/^/  /'

# every finding, grouped by what went wrong, with the shortest definition of each group
failures=$(q -c "SELECT count(*) FROM fuzz_outcome WHERE failure IS NOT NULL")
if [ "$failures" -gt 0 ]; then
	fail=1
	echo "fuzz_definitions: $failures cases FAILED; by kind, each with its shortest definition:"
	q -c "WITH f AS (
	        SELECT o.*, c.family, c.mode, c.name, c.definition,
	               coalesce(regexp_replace(regexp_replace(regexp_replace(o.message, '\"[^\"]*\"', '\"…\"', 'g'),
	                                                      '[0-9]+', 'N', 'g'), 'types .* cannot', 'types … cannot'),
	                        c.family) AS pattern
	          FROM fuzz_outcome o JOIN fuzz_case c USING (n) WHERE o.failure IS NOT NULL),
	      g AS (SELECT DISTINCT ON (failure, sqlstate, pattern) failure, sqlstate, pattern, n, family, mode, name,
	                   definition, message, detail, count(*) OVER (PARTITION BY failure, sqlstate, pattern) AS cases
	              FROM f ORDER BY failure, sqlstate, pattern, length(definition), n)
	      SELECT format(E'--- %s: %s cases, e.g. case %s (%s, mode %s, name %s)\n    %s\n    -> %s %s%s', failure, cases,
	                    n, family, mode, quote_literal(name), left(definition, 600), coalesce(sqlstate, 'accepted'),
	                    left(coalesce(message, ''), 300), coalesce(E'\n    ' || left(detail, 300), ''))
	        FROM g ORDER BY cases DESC LIMIT 40"
fi

# memory: replay declarations in one backend, one transaction per replay: once to warm its caches up, then twice
# more. Between the first and the last replay, the bytes in use in its memory contexts and its private resident
# memory must not grow by more than 1 kB and 4 kB per declaration (PostgreSQL itself keeps about 0.1 to 0.5 kB of
# catalog cache per relation created in an aborted subtransaction; a leaked definition or plan is more), nor by more
# than 256 kB and 4 MB in all (what is in use moves by some 100 kB from one replay to the next).
mem_check() { # label, SQL selecting the case numbers
	local out n used1 used2 rss1 rss2 per_used per_rss
	out=$(q <<SQL
SET client_min_messages = error;
SET search_path = "Schéma ☃", public;
CREATE TEMP TABLE replay AS SELECT array_agg(n ORDER BY n) AS cases FROM ($2) x(n);
SELECT fuzz_replay(cases) FROM replay \gset
SELECT * FROM fuzz_memory() \gset m1_
SELECT fuzz_replay(cases) FROM replay \gset
SELECT fuzz_replay(cases) FROM replay \gset
SELECT * FROM fuzz_memory() \gset m2_
SELECT format('%s %s %s %s %s', coalesce(cardinality(cases), 0), :'m1_used', :'m2_used',
              coalesce(nullif(:'m1_rss_kb', ''), '-'), coalesce(nullif(:'m2_rss_kb', ''), '-')) FROM replay;
SQL
	)
	read -r n used1 used2 rss1 rss2 <<<"$out"
	[ "$n" -gt 0 ] || return 0
	per_used=$(((used2 - used1) / (2 * n)))
	echo "memory over 2 x $n $1: contexts in use $((used1 / 1024)) -> $((used2 / 1024)) kB ($per_used bytes per declaration), private resident $rss1 -> $rss2 kB"
	if [ "$per_used" -gt 1024 ] && [ $((used2 - used1)) -gt 262144 ]; then
		echo "fuzz_definitions: FAILED: memory in use grew by $per_used bytes per $1"
		fail=1
	fi
	if [ "$rss1" != - ] && [ $(((rss2 - rss1) * 1024 / (2 * n))) -gt 4096 ] && [ $((rss2 - rss1)) -gt 4096 ]; then
		echo "fuzz_definitions: FAILED: private resident memory grew by $((rss2 - rss1)) kB over $((2 * n)) $1"
		fail=1
	fi
}
mem_check "rejected declarations" "SELECT n FROM fuzz_outcome WHERE NOT accepted"
mem_check "accepted declarations (with writes, dropped)" \
	"SELECT n FROM fuzz_outcome JOIN fuzz_case USING (n) WHERE accepted AND failure IS NULL AND family = 'valid' ORDER BY n LIMIT 30"

# a counter on a temporary table: when the session ends and PostgreSQL drops the table, no catalog row may be left
# (one that is would break verify() for every counter and could not be dropped)
q >/dev/null 2>&1 <<'SQL' || true
SET client_min_messages = error;
CREATE TEMP TABLE fuzz_tmp (a int, b int);
INSERT INTO fuzz_tmp SELECT g % 3, g FROM generate_series(1, 10) g;
SELECT counters.create_counter('fuzz_temp_source', 'SELECT a, count(*) AS n FROM fuzz_tmp GROUP BY a');
SQL
dangling=$(q -c "SELECT count(*) FROM counters.counter k WHERE NOT EXISTS (SELECT FROM pg_class WHERE oid = k.source::oid)")
if [ "$dangling" != 0 ]; then
	echo "fuzz_definitions: FAILED: a counter declared on a temporary table outlives the table (catalog row left);"
	echo "  then verify(): $(q -c 'SELECT count(*) FROM counters.verify()' 2>&1 | head -1)"
	echo "  and drop_counter(): $(q -c "SELECT counters.drop_counter('fuzz_temp_source')" 2>&1 | head -1)"
	fail=1
fi

[ "$fail" -eq 0 ] || { echo "fuzz_definitions: FAILED (reproduce one case with FUZZ_SEED=$SEED FUZZ_ONLY=<case>)"; exit 1; }
echo "fuzz_definitions: ok"
