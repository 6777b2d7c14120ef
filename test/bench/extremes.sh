#!/usr/bin/env bash
# min and max (issue "Every aggregate"): what the two ways of keeping an extreme cost, measured side by side in one run
# (the machine is shared: compare ratios, not tps). Not part of the tests.
#
# 1. Writes, 8 clients, single rows into one of 1,000 threads: an INSERT; and "remove the extreme" (delete a
#    thread's highest-rated reply, insert another). Variants: none (the source's index on (thread_id, stars) alone),
#    count (an exact count per thread: what a sum or count column costs), pairs_few (a counter of (thread, stars)
#    pairs, 5 values: docs/aggregates.md's min/max recipe, the multiplicity a native kind could keep) and pairs_many
#    (a counter of (thread, created) pairs: nearly unique values, one pair per row).
# 2. The probe a native max would run after removing a key's extreme, against the key's row count: 1 client deletes
#    the newest reply of a thread of 100, 10,000 or 100,000 rows, inserts a newer one and reads max(created) of the
#    thread through the index on (thread_id, created). Flat means one descent, whatever the key's size.
# After each write run, the pair counters must equal a GROUP BY of the source (DRIFT on stderr if not).
#
#   bash test/bench/extremes.sh            # SECONDS_PER_RUN=10 RUNS=3 CLIENTS=8
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/bench/lib.sh
fresh_db counters_extremes_bench

printf '\\set t random(1, 1000)\n\\set s random(1, 5)\nINSERT INTO replies (thread_id, stars) VALUES (:t, :s);\n' \
	>"$work/insert.pgbench"
cat >"$work/remove_extreme.pgbench" <<'EOF'
\set t random(1, 1000)
\set s random(1, 5)
BEGIN;
DELETE FROM replies WHERE id = (SELECT id FROM replies WHERE thread_id = :t ORDER BY stars DESC, id DESC LIMIT 1);
INSERT INTO replies (thread_id, stars) VALUES (:t, :s);
COMMIT;
EOF
for k in 1001 1002 1003; do
	cat >"$work/probe_$k.pgbench" <<EOF
BEGIN;
DELETE FROM replies WHERE id = (SELECT id FROM replies WHERE thread_id = $k ORDER BY created DESC, id DESC LIMIT 1);
INSERT INTO replies (thread_id, stars) VALUES ($k, 3);
SELECT max(created) FROM replies WHERE thread_id = $k;
COMMIT;
EOF
done

# setup variant: 1,000 threads of 20 replies each, and threads 1001, 1002 and 1003 of 100, 10,000 and 100,000
setup() {
	reset_db replies
	psql -X -q -d "$db" >/dev/null <<SQL
CREATE TABLE replies (id bigserial PRIMARY KEY, thread_id int NOT NULL, stars int NOT NULL,
                      created timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO replies (thread_id, stars, created)
SELECT 1 + g % 1000, 1 + g % 5, now() - g * interval '1 ms' FROM generate_series(1, 20000) g;
INSERT INTO replies (thread_id, stars, created)
SELECT t, 1 + g % 5, now() - g * interval '1 ms'
  FROM (VALUES (1001, 100), (1002, 10000), (1003, 100000)) s (t, n), generate_series(1, n) g;
CREATE INDEX ON replies (thread_id, stars);
CREATE INDEX ON replies (thread_id, created);
$(case "$1" in
	count) echo "SELECT counters.create_counter('thread_replies', 'SELECT thread_id, count(*) AS replies FROM replies GROUP BY thread_id');" ;;
	pairs_few) echo "SELECT counters.create_counter('thread_stars', 'SELECT thread_id, stars, count(*) AS replies FROM replies GROUP BY thread_id, stars');" ;;
	pairs_many) echo "SELECT counters.create_counter('thread_times', 'SELECT thread_id, created, count(*) AS replies FROM replies GROUP BY thread_id, created');" ;;
esac)
VACUUM ANALYZE replies;
CHECKPOINT;
SQL
}
check_pairs() { # variant label
	local q
	case "$1" in
	pairs_few) q="SELECT thread_id, stars, replies FROM thread_stars EXCEPT SELECT thread_id, stars, count(*) FROM replies GROUP BY 1, 2" ;;
	pairs_many) q="SELECT thread_id, created, replies FROM thread_times EXCEPT SELECT thread_id, created, count(*) FROM replies GROUP BY 1, 2" ;;
	*) return 0 ;;
	esac
	[ "$(psql -X -q -At -d "$db" -c "SELECT count(*) FROM ($q) d")" = 0 ] || echo "DRIFT: $2 $1" >&2
}
write_tps() { # variant (the workload: $w)
	setup "$1"
	value=$(load "$work/$w.pgbench" | report_tps)
	check_pairs "$1" "$w"
}
probe_tps() { # key (variant none)
	setup none
	value=$(CLIENTS=1 load "$work/probe_$1.pgbench" | report_tps)
}

variants="none count pairs_few pairs_many"
header workload $variants
for w in insert remove_extreme; do
	row write_tps "$CLIENTS clients, $w" tps $variants
done
echo
echo "Ratios in parentheses: to the source with its indexes alone (none); above 1 is faster."
echo
printf '| the extreme removed and read again, through the index | 100 rows | 10,000 rows | 100,000 rows |\n|---|---|---|---|\n'
row probe_tps "1 client, one key" tps 1001 1002 1003
echo
echo "Ratios in parentheses: to the key of 100 rows; 1.00 is flat."
