#!/usr/bin/env bash
# max() written as such (issue "Every aggregate"): what a max column costs against a sum column, and what removing a
# key's extreme costs against the key's size, measured side by side in one run (the machine is shared: compare
# ratios, not tps). Not part of the tests.
#
# 1. 8 clients, single rows into one of 1,000 threads: an INSERT of a new reply (beyond the thread's extreme: max()
#    moves as a sum does); an UPDATE of a reply's stars (its time does not change: the extreme is removed and added
#    back only when the reply is its thread's newest); "remove the extreme" (delete a thread's newest reply, insert an
#    older one: the next one is read through the index). One statement inserting BULK rows. Variants: none (the
#    source's indexes alone), sum (count(*) and sum(stars)), max (count(*) and max(created)), distinct (count(*) and
#    count(DISTINCT stars): each changed (thread, stars) pair read again through the index on (thread_id, stars)).
# 2. The bulk statement against the hand-written floor of the same max: a statement trigger over the inserted rows (a
#    transition table) that upserts each thread's count and GREATEST of its time (floor_max), and the max variant.
# 3. Removing the extreme against the key's row count: 1 client deletes the newest reply of a thread of 100, 10,000
#    or 100,000 rows and inserts an older one. Flat means one index descent, whatever the key's size.
# Where pg_ivm is installed (it is not in Debian's archive: build it from its source with PGXS), a pg_ivm variant keeps
# the same count and max in an incrementally maintained materialized view (pgivm.create_immv), loaded per session.
# After each run the counter's columns must equal a recount by the aggregates themselves (DRIFT on stderr if not).
#
#   bash test/bench/extremes.sh      # SECONDS_PER_RUN=10 RUNS=3 CLIENTS=8 BULK=200000 (0: no bulk statement)
#                                    # VARIANTS="none sum max" WORKLOADS="insert update remove_extreme" (empty: none)
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/bench/lib.sh
BULK=${BULK:-200000}
fresh_db counters_extremes_bench
ivm=$(psql -X -q -At -d "$db" -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_ivm'")
[ "$ivm" = 0 ] || psql -X -q -d "$db" -c "ALTER DATABASE $db SET session_preload_libraries = 'pg_ivm'"

printf '\\set t random(1, 1000)\n\\set s random(1, 5)\nINSERT INTO replies (thread_id, stars) VALUES (:t, :s);\n' \
	>"$work/insert.pgbench"
printf '\\set r random(1, 20000)\n\\set s random(1, 5)\nUPDATE replies SET stars = :s WHERE id = :r;\n' \
	>"$work/update.pgbench"
cat >"$work/remove_extreme.pgbench" <<'EOF'
\set t random(1, 1000)
BEGIN;
DELETE FROM replies WHERE id = (SELECT id FROM replies WHERE thread_id = :t ORDER BY created DESC, id DESC LIMIT 1);
INSERT INTO replies (thread_id, stars, created) VALUES (:t, 3, now() - interval '1 year' * random());
COMMIT;
EOF
for k in 1001 1002 1003; do
	sed "s/:t/$k/g; /^\\\\set/d" "$work/remove_extreme.pgbench" >"$work/probe_$k.pgbench"
done

# setup variant: 1,000 threads of 20 replies each, threads 1001, 1002 and 1003 of 100, 10,000 and 100,000, and the
# variant's counter (or trigger)
setup() {
	reset_db replies thread_floor thread_ivm
	psql -X -q -d "$db" >/dev/null <<SQL
CREATE TABLE replies (id bigserial PRIMARY KEY, thread_id int NOT NULL, stars int NOT NULL,
                      created timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO replies (thread_id, stars, created)
SELECT 1 + g % 1000, 1 + g % 5, now() - g * interval '1 ms' FROM generate_series(1, 20000) g;
INSERT INTO replies (thread_id, stars, created)
SELECT t, 1 + g % 5, now() - g * interval '1 ms'
  FROM (VALUES (1001, 100), (1002, 10000), (1003, 100000)) s (t, n), generate_series(1, n) g;
CREATE INDEX ON replies (thread_id, created);
CREATE INDEX ON replies (thread_id, stars);
$(case "$1" in
	sum) echo "SELECT counters.create_counter('thread_stats', 'SELECT thread_id, count(*) AS n, sum(stars) AS v FROM replies GROUP BY thread_id');" ;;
	max) echo "SELECT counters.create_counter('thread_stats', 'SELECT thread_id, count(*) AS n, max(created) AS v FROM replies GROUP BY thread_id');" ;;
	distinct) echo "SELECT counters.create_counter('thread_stats', 'SELECT thread_id, count(*) AS n, count(DISTINCT stars) AS v FROM replies GROUP BY thread_id');" ;;
	pg_ivm) echo "CREATE EXTENSION IF NOT EXISTS pg_ivm;
SELECT pgivm.create_immv('thread_ivm', 'SELECT thread_id, count(*) AS n, max(created) AS v FROM replies GROUP BY thread_id');" ;;
	floor_max) cat <<'FLOOR'
CREATE TABLE thread_floor (thread_id int PRIMARY KEY, n bigint NOT NULL, v timestamptz);
INSERT INTO thread_floor SELECT thread_id, count(*), max(created) FROM replies GROUP BY thread_id;
CREATE OR REPLACE FUNCTION thread_floor_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO thread_floor AS f (thread_id, n, v)
	SELECT thread_id, count(*), max(created) FROM new_rows GROUP BY thread_id ORDER BY thread_id
	ON CONFLICT (thread_id) DO UPDATE SET n = f.n + excluded.n, v = GREATEST(f.v, excluded.v);
	RETURN NULL;
END $$;
CREATE TRIGGER thread_floor AFTER INSERT ON replies REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION thread_floor_insert();
FLOOR
		;;
esac)
VACUUM ANALYZE replies;
CHECKPOINT;
SQL
}
check() { # variant label
	local q
	case "$1" in
	sum) q="SELECT thread_id, n, v FROM thread_stats EXCEPT SELECT thread_id, count(*), sum(stars) FROM replies GROUP BY 1" ;;
	max) q="SELECT thread_id, n, v FROM thread_stats EXCEPT SELECT thread_id, count(*), max(created) FROM replies GROUP BY 1" ;;
	distinct) q="SELECT thread_id, n, v FROM thread_stats EXCEPT SELECT thread_id, count(*), count(DISTINCT stars) FROM replies GROUP BY 1" ;;
	floor_max) q="SELECT thread_id, n, v FROM thread_floor EXCEPT SELECT thread_id, count(*), max(created) FROM replies GROUP BY 1" ;;
	pg_ivm) q="SELECT thread_id, n, v FROM thread_ivm EXCEPT SELECT thread_id, count(*), max(created) FROM replies GROUP BY 1" ;;
	*) return 0 ;;
	esac
	[ "$(psql -X -q -At -d "$db" -c "SELECT count(*) FROM ($q) d")" = 0 ] || echo "DRIFT: $2 $1" >&2
}
write_tps() { # variant (the workload: $w)
	setup "$1"
	value=$(load "$work/$w.pgbench" | report_tps)
	check "$1" "$w"
}
bulk_ms() { # variant
	setup "$1"
	value=$(psql -X -q -d "$db" -c '\timing on' \
		-c "INSERT INTO replies (thread_id, stars) SELECT 1 + g % 1000, 1 + g % 5 FROM generate_series(1, $BULK) g" |
		awk '/^Time:/ {printf "%d", $2}')
	check "$1" bulk
}
probe_tps() { # key (variant max, or $probe_variant)
	setup "${probe_variant:-max}"
	value=$(CLIENTS=1 load "$work/probe_$1.pgbench" | report_tps)
	check "${probe_variant:-max}" "probe $1"
}

variants=${VARIANTS:-none sum max distinct$([ "$ivm" = 0 ] || echo ' pg_ivm')}
header workload $variants
for w in ${WORKLOADS-insert update remove_extreme}; do
	row write_tps "$CLIENTS clients, $w" tps $variants
done
[ "${BULK:-}" = 0 ] || row bulk_ms "INSERT ... SELECT $BULK rows (ms)" ms $variants
echo
echo "Ratios in parentheses: to no counter (none); above 1 is faster for tps, slower for ms. max against sum: what the"
echo "extreme costs over a sum."
echo
if [ "${BULK:-}" != 0 ]; then
	header "the bulk statement against the hand-written floor" floor_max max
	row bulk_ms "INSERT ... SELECT $BULK rows (ms)" ms floor_max max
	echo
	echo "Ratios in parentheses: to the hand-written statement trigger (floor_max); above 1 is slower."
	echo
fi
printf '| max: the newest reply removed, the next one read through the index | 100 rows | 10,000 rows | 100,000 rows |\n|---|---|---|---|\n'
row probe_tps "1 client, one key" tps 1001 1002 1003
if [ "$ivm" != 0 ]; then
	probe_variant=pg_ivm row probe_tps "1 client, one key, pg_ivm" tps 1001 1002 1003
fi
echo
echo "Ratios in parentheses: to the key of 100 rows; 1.00 is flat."
