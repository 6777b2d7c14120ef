#!/usr/bin/env bash
# Sinks (counters.set_sink): what counting an event costs when the event is not stored, against storing it in a
# plain table without counters, measured side by side in one run (the machine is shared: compare ratios, not tps).
# 8 clients insert single rows (one of 1,000 posts, or all into one hot post), and one statement inserts 1,000,000
# rows. After each pgbench run the counter's total must equal the transactions pgbench reports (the drift column).
# Not part of the tests.
#
#   bash test/bench/sink.sh                 # SECONDS_PER_RUN=10 RUNS=3 CLIENTS=8 BULK=1000000
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/bench/lib.sh
BULK=${BULK:-1000000}
fresh_db counters_sink_bench
echo 'INSERT INTO views (post_id) VALUES (1);' >"$work/hot.pgbench"
# (pgbench picks the post: PostgreSQL 15 has no random(min, max) in SQL)
printf '\\set p random(1, 1000)\nINSERT INTO views (post_id) VALUES (:p);\n' >"$work/spread.pgbench"

# setup variant: the table, its counter and whether it is a sink
setup() {
	reset_db views
	psql -X -q -d "$db" >/dev/null <<SQL
CREATE TABLE views (id bigserial PRIMARY KEY, post_id int NOT NULL, at timestamptz NOT NULL DEFAULT now());
$(case "$1" in
	none) ;;
	stored_exact) echo "SELECT counters.create_counter('post_views', 'SELECT post_id, count(*) AS n FROM views GROUP BY post_id');" ;;
	sink_exact) echo "SELECT counters.create_counter('post_views', 'SELECT post_id, count(*) AS n FROM views GROUP BY post_id');
SELECT counters.set_sink('views');" ;;
	sink_log) echo "SELECT counters.create_counter('post_views', 'SELECT post_id, count(*) AS n FROM views GROUP BY post_id', mode => 'log');
SELECT counters.set_sink('views');" ;;
	sink_sharded) echo "SELECT counters.create_counter('post_views', 'SELECT post_id, count(*) AS n FROM views GROUP BY post_id', mode => 'sharded');
SELECT counters.set_sink('views');" ;;
esac)
CHECKPOINT;
SQL
}
total() { # the events the variant counted (or stored, without a counter)
	if [ "$1" = none ]; then
		psql -X -q -At -d "$db" -c "SELECT count(*) FROM views"
	else
		psql -X -q -At -d "$db" -c "SELECT coalesce(sum(n), 0) FROM post_views"
	fi
}

insert_tps() { # variant (the workload: $w)
	setup "$1"
	out=$(load "$work/$w.pgbench")
	value=$(report_tps <<<"$out")
	done_=$(awk '/number of transactions actually processed/ {split($NF, a, "/"); print a[1]}' <<<"$out")
	got=$(total "$1")
	[ "$got" = "$done_" ] || echo "DRIFT: $w $1 counted $got of $done_ transactions" >&2
}
bulk_ms() { # variant
	setup "$1"
	value=$(psql -X -q -d "$db" -c '\timing on' -c "INSERT INTO views (post_id) SELECT 1 + g % 1000 FROM generate_series(1, $BULK) g" |
		awk '/^Time:/ {printf "%d", $2}')
	got=$(total "$1")
	[ "$got" = "$BULK" ] || echo "DRIFT: bulk $1 counted $got of $BULK rows" >&2
}

variants="none stored_exact sink_exact sink_log sink_sharded"
header workload $variants
for w in spread hot; do
	row insert_tps "$CLIENTS clients, single-row INSERT ($w)" tps $variants
done
row bulk_ms "INSERT ... SELECT $BULK rows (ms)" ms $variants
echo
echo "Ratios in parentheses: to storing the rows without counters (none); above 1 is faster for tps, slower for ms."
