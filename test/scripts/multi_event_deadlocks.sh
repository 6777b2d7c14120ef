#!/usr/bin/env bash
# Statements that fire several trigger events, under parallel load. 4 pgbench clients, each writing only its own rows
# of one source table, run one multi-event statement per transaction on 3 shared keys: a MERGE with DELETE, UPDATE
# and INSERT actions, a writable CTE that moves rows from one key to another (a DELETE ... RETURNING feeding an
# INSERT), and INSERT ... ON CONFLICT DO UPDATE (which fires both the UPDATE and the INSERT statement triggers). Two
# counters follow the source: an exact-mode counter table per key k (src_by_k) and counter-cache columns per key g
# of an existing table (shelf, target => 'shelf'). k and g are set independently, so deadlocks can form on the
# rows of either.
#
# PostgreSQL fires such a statement's AFTER statement triggers one event after the other (MERGE: DELETE, UPDATE,
# INSERT; ON CONFLICT: UPDATE, INSERT; the CTE: DELETE, then INSERT). The counter rows of the whole statement must be
# locked in one sorted order, as for any other statement: if each event applied its own deltas, two statements that
# reach the same keys through different events would lock them in opposite orders and deadlock. The clients share
# no source row, only counter rows, so any deadlock here is a deadlock on counter rows.
#
# pgbench retries a deadlocked transaction (--max-tries) instead of aborting, and every deadlock is counted (from
# pgbench's error messages and from pg_stat_database.deadlocks). Fails if there was any deadlock or any other error,
# or if a counter differs from its recount (EXCEPT both ways). Runs inside the suite's cluster (PG* variables);
# about 10 s when statements deadlock (mostly spent waiting for deadlock detection), a few seconds when they don't.
set -euo pipefail
db=counters_multi_event_deadlocks
clients=4
per_client=${MULTI_EVENT_TRANSACTIONS:-300}
dir=$(mktemp -d)
trap 'rm -rf "$dir"; dropdb --if-exists "$db" >/dev/null 2>&1 || true' EXIT
dropdb --if-exists "$db" >/dev/null 2>&1
createdb "$db"
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
q >/dev/null <<'SQL'
CREATE EXTENSION counters;
-- A deadlock is detected (and its transaction retried) after deadlock_timeout: keep that short, and the run too.
ALTER DATABASE counters_multi_event_deadlocks SET deadlock_timeout = '50ms';
CREATE TABLE src (id int PRIMARY KEY, k int NOT NULL, g int NOT NULL, v bigint NOT NULL);
CREATE TABLE shelf (g int PRIMARY KEY, name text NOT NULL, items bigint NOT NULL DEFAULT 0, total bigint NOT NULL DEFAULT 0);
INSERT INTO shelf (g, name) SELECT g, 'shelf ' || g FROM generate_series(1, 3) g;
-- Rows nobody writes (ids from 1,000,000) keep every key's counter row in place; client c owns ids c*1000+1 .. +40.
INSERT INTO src SELECT 1000000 + i, 1 + i % 3, 1 + i / 10, i FROM generate_series(0, 29) i;
INSERT INTO src SELECT c * 1000 + r, 1 + (c + r) % 3, 1 + r % 3, r FROM generate_series(0, 3) c, generate_series(1, 40) r;
SELECT counters.create_counter('src_by_k', 'SELECT k, count(*) AS items, sum(v) AS total FROM src GROUP BY k');
SELECT counters.create_counter('shelf_counts', 'SELECT g, count(*) AS items, sum(v) AS total FROM src GROUP BY g',
	target => 'shelf');
SQL

# MERGE: one of the client's rows in 1..20 and one in 21..40 (never the same row twice). A row already in the given
# key k is deleted, a row in another key moves there (and to the given g), an absent row is inserted.
cat > "$dir/merge.pgbench" <<'EOF2'
\set a 1000 * :client_id + random(1, 20)
\set b 1000 * :client_id + random(21, 40)
\set ka random(1, 3)
\set kb random(1, 3)
\set ga random(1, 3)
\set gb random(1, 3)
\set va random(1, 100)
\set vb random(1, 100)
MERGE INTO src t USING (VALUES (:a, :ka, :ga, :va), (:b, :kb, :gb, :vb)) AS s (id, k, g, v) ON t.id = s.id
WHEN MATCHED AND t.k = s.k THEN DELETE
WHEN MATCHED THEN UPDATE SET k = s.k, g = s.g, v = s.v
WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.k, s.g, s.v);
EOF2
# Writable CTE: the client's rows of one key k among ten of its ids move to another k (and to g = their old k).
cat > "$dir/move.pgbench" <<'EOF2'
\set lo 1000 * :client_id + random(1, 31)
\set from random(1, 3)
\set to 1 + (:from + random(0, 1)) % 3
WITH moved AS (DELETE FROM src WHERE id BETWEEN :lo AND :lo + 9 AND k = :from RETURNING id, k, v)
INSERT INTO src SELECT id, :to, k, v + 1 FROM moved;
EOF2
# INSERT ... ON CONFLICT DO UPDATE: rows that exist are updated (and may change keys), absent ones are inserted.
cat > "$dir/upsert.pgbench" <<'EOF2'
\set a 1000 * :client_id + random(1, 20)
\set b 1000 * :client_id + random(21, 40)
\set ka random(1, 3)
\set kb random(1, 3)
\set ga random(1, 3)
\set gb random(1, 3)
\set va random(1, 100)
\set vb random(1, 100)
INSERT INTO src VALUES (:a, :ka, :ga, :va), (:b, :kb, :gb, :vb)
ON CONFLICT (id) DO UPDATE SET k = excluded.k, g = excluded.g, v = excluded.v;
EOF2

stat() { q -c "SELECT pg_stat_clear_snapshot(); SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()" | tail -1; }
stat_before=$(stat)
start=$SECONDS
rc=0
pgbench -n -c "$clients" -j "$clients" -t "$per_client" --max-tries=100 --failures-detailed --verbose-errors \
	-f "$dir/merge.pgbench" -f "$dir/move.pgbench" -f "$dir/upsert.pgbench" "$db" >"$dir/out" 2>"$dir/err" || rc=$?
elapsed=$((SECONDS - start))
grep -E '^(number of (transactions actually processed|failed transactions|deadlock failures|serialization failures|transactions retried)|total number of retries)' \
	"$dir/out" || true

# pgbench prints every error it retries or fails on. For a deadlock, the row the victim waited for is named by the
# CONTEXT (a transaction lock: "while updating tuple ... in relation") or by the first DETAIL line (a tuple lock).
errors=$(grep -c 'ERROR:' "$dir/err" || true)
deadlocks=$(grep -c 'ERROR:  deadlock detected' "$dir/err" || true)
waited_on=$(awk '
	function done_one() { if (inside) { where[rel == "" ? "unknown" : rel]++ }; inside = 0; rel = "" }
	/ERROR:  deadlock detected/ { done_one(); inside = 1; next }
	/^pgbench: / { done_one(); next }
	inside && /^DETAIL:/ && match($0, /tuple \([0-9,]+\) of relation [0-9]+/) { r = substr($0, RSTART, RLENGTH); sub(/.* /, "", r); rel = "oid " r }
	inside && /^CONTEXT:/ && match($0, /in relation "[^"]+"/) { r = substr($0, RSTART + 13, RLENGTH - 14); rel = r }
	END { done_one(); for (r in where) print r "\t" where[r] }' "$dir/err" | sort)
waited_on=$(while IFS=$'\t' read -r rel n; do
	[ -n "$rel" ] || continue
	[[ $rel == oid* ]] && rel=$(q -c "SELECT ${rel#oid }::regclass")
	echo "$rel $n"
done <<<"$waited_on" | awk '{n[$1] += $2} END {for (r in n) printf "%s%s: %d", (s++ ? ", " : ""), r, n[r]}')
by_statement=$(grep -o 'of script [0-9]*; ERROR:  deadlock detected' "$dir/err" | awk '{n[$3 + 0]++}
	END {split("MERGE,CTE,upsert", name, ","); for (i = 0; i < 3; i++) printf "%s%s: %d", (i ? ", " : ""), name[i + 1], n[i]}' || true)
aborted=$(cat "$dir/out" "$dir/err" | grep -c 'aborted' || true)
# Backends publish their statistics as they exit: wait for pgbench's to be gone.
for _ in $(seq 1 50); do
	[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")" = 0 ] &&
		break
	sleep 0.1
done
stat_deadlocks=$(($(stat) - stat_before))

# Independent recount of the source, compared both ways with each counter.
drift=$(q <<'SQL'
WITH by_k AS (SELECT k, items, total FROM src_by_k),
     by_k_recount AS (SELECT k, count(*) AS items, sum(v) AS total FROM src GROUP BY k),
     by_g AS (SELECT g, items, total FROM shelf),
     by_g_recount AS (SELECT s.g, count(r.id) AS items, coalesce(sum(r.v), 0) AS total
                        FROM shelf s LEFT JOIN src r ON r.g = s.g GROUP BY s.g)
SELECT concat_ws(' ', counter, only_in, key, items, total) FROM (
	SELECT 'src_by_k' AS counter, 'counter' AS only_in, * FROM (TABLE by_k EXCEPT TABLE by_k_recount) d
	UNION ALL SELECT 'src_by_k', 'recount', * FROM (TABLE by_k_recount EXCEPT TABLE by_k) d
	UNION ALL SELECT 'shelf_counts', 'counter', * FROM (TABLE by_g EXCEPT TABLE by_g_recount) d
	UNION ALL SELECT 'shelf_counts', 'recount', * FROM (TABLE by_g_recount EXCEPT TABLE by_g) d
) x (counter, only_in, key, items, total) ORDER BY 1;
SQL
)
drift_rows=$(grep -c . <<<"$drift" || true)
echo "multi_event_deadlocks: $((clients * per_client)) transactions in ${elapsed}s; deadlocks: $deadlocks in pgbench's errors" \
	"(by statement: $by_statement; waiting for ${waited_on:-nothing}), $stat_deadlocks in pg_stat_database; other errors: $((errors - deadlocks));" \
	"aborted: $aborted; counter rows differing from the recount: $drift_rows"
status=0
if [ "$rc" != 0 ] || [ "$aborted" != 0 ] || [ "$errors" != "$deadlocks" ]; then
	grep -v 'deadlock detected' "$dir/err" | head -20 || true
	echo "multi_event_deadlocks: FAILED: pgbench failed (exit $rc) or hit errors other than deadlocks"
	status=1
fi
if [ "$deadlocks" != 0 ] || [ "$stat_deadlocks" != 0 ]; then
	grep -m 2 -A 5 'deadlock detected' "$dir/err" || true
	echo "multi_event_deadlocks: FAILED: multi-event statements deadlocked on counter rows"
	status=1
fi
if [ "$drift_rows" != 0 ]; then
	echo "$drift"
	echo "multi_event_deadlocks: FAILED: a counter differs from its recount"
	status=1
fi
[ "$status" != 0 ] || echo "multi_event_deadlocks: ok"
exit $status
