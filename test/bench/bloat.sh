#!/usr/bin/env bash
# Bloat: what a counter's tables grow to under load, with the storage parameters counters sets (docs/operations.md,
# "Vacuum and bloat") and without them (every parameter reset: the tables as counters 0.5 created them), with the
# same load in the same run. Not part of the tests; the figures in docs/operations.md come from it.
#
# - hot row: CLIENTS clients insert single rows into one post for SECONDS_PER_RUN, in exact, log and sharded mode,
#   with the background worker compacting every 10 s; then the sizes once compaction and autovacuum have caught up
#   (the log and slots empty, autovacuum run on them since the load: polled, at most SETTLE seconds).
# - bulk: a counter of 200,000 keys; three statements each changing every key (UPDATE of every source row), each
#   followed by VACUUM: the counter table's and its key index's size, and the time of each statement.
# After each run every counter must equal its recount (counters.verify(), and the hot post against count(*)).
#
#   bash test/bench/bloat.sh                    # SECONDS_PER_RUN=30 CLIENTS=8 SETTLE=180
#   NAPTIME=1min MODES=log BULK=0 bash test/bench/bloat.sh    # the log at autovacuum's default naptime only
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SECONDS_PER_RUN:=30}" "${NAPTIME:=10s}" "${MODES:=exact log sharded}" "${BULK:=1}"
export SECONDS_PER_RUN NAPTIME MODES BULK
BENCH_OPTS="-o shared_preload_libraries=counters -o counters.compact_databases=counters_bloat_bench
 -o autovacuum_naptime=$NAPTIME -o log_autovacuum_min_duration=0"
export BENCH_OPTS
source test/bench/lib.sh
SETTLE=${SETTLE:-180}
fresh_db counters_bloat_bench
echo 'INSERT INTO likes (post_id) VALUES (1);' >"$work/hot.pgbench"
q() { psql -X -q -At -d "$db" -c "$1"; }
pretty() { q "SELECT pg_size_pretty($1::bigint)"; }

# setup mode storage: the likes table and its counter; storage "reset" resets every parameter of its tables
setup() {
	reset_db likes posts
	psql -X -q -d "$db" >/dev/null <<SQL
CREATE TABLE likes (id bigserial PRIMARY KEY, post_id int NOT NULL);
INSERT INTO likes (post_id) SELECT g FROM generate_series(1, 1000) g;
SELECT counters.create_counter('post_likes', 'SELECT post_id, count(*) AS likes FROM likes GROUP BY post_id',
                               mode => '$1');
SQL
	[ "$2" = set ] || reset_storage
	q "VACUUM ANALYZE" >/dev/null
}
# the counter's own tables
tables() { q "SELECT c.oid::regclass FROM pg_class c WHERE c.relkind = 'r' AND c.relname ~ '^post_likes'"; }
reset_storage() { # (and rewritten: the fill already laid the rows out half-full)
	local t
	for t in $(tables); do
		q "ALTER TABLE $t RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
		   autovacuum_vacuum_cost_delay)"
		q "VACUUM FULL $t"
	done
}
sizes() { # "table heap/index" for each of the counter's tables
	local t
	for t in $(tables); do
		printf '%s %s / %s; ' "$t" "$(pretty "pg_relation_size('$t')")" "$(pretty "pg_indexes_size('$t')")"
	done
}

hot() { # mode storage
	setup "$1" "$2"
	local start out tps pending waited=0
	start=$(q "SELECT now()")
	out=$(load "$work/hot.pgbench")
	tps=$(report_tps <<<"$out")
	local peak
	peak=$(sizes)
	# settled: nothing pending, and autovacuum has run since the load began on the table taking the writes
	while [ $waited -lt "$SETTLE" ]; do
		pending=$(q "SELECT (SELECT count(*) FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
		               WHERE c.relname ~ '^post_likes_(log|slots)$' AND n_live_tup > 0)
		             + (SELECT count(*) FROM pg_stat_user_tables
		               WHERE relname ~ '^post_likes(_log|_slots)?$' AND coalesce(last_autovacuum, '-infinity') < '$start')")
		[ "$pending" = 0 ] && break
		sleep 5
		waited=$((waited + 5))
	done
	local got want
	got=$(q "SELECT likes FROM post_likes WHERE post_id = 1")
	want=$(q "SELECT count(*) FROM likes WHERE post_id = 1")
	[ "$got" = "$want" ] || echo "DRIFT: hot $1 $2: $got, recount $want" >&2
	check_verify "hot $1 $2"
	echo "| $1 | $2 | $tps | $peak | $(sizes) | ${waited} s |"
}

bulk() { # storage
	reset_db likes posts
	psql -X -q -d "$db" >/dev/null <<SQL
CREATE TABLE posts (id int PRIMARY KEY, author int NOT NULL, rating int NOT NULL DEFAULT 0);
INSERT INTO posts SELECT g, g % 200000, 1 FROM generate_series(1, 1000000) g;
SELECT counters.create_counter('post_likes', 'SELECT author, count(*) AS posts, sum(rating) AS rating
                                               FROM posts GROUP BY author');
SQL
	[ "$1" = set ] || reset_storage
	q "VACUUM ANALYZE" >/dev/null
	local line="| $1 | $(pretty "pg_relation_size('post_likes')") / $(pretty "pg_indexes_size('post_likes')") |" i ms
	for i in 1 2 3; do
		ms=$(psql -X -q -d "$db" -c '\timing on' -c "UPDATE posts SET rating = rating + 1" | awk '/^Time:/ {printf "%d", $2}')
		q "VACUUM post_likes" >/dev/null
		line+=" $ms ms: $(pretty "pg_relation_size('post_likes')") / $(pretty "pg_indexes_size('post_likes')") |"
	done
	check_verify "bulk $1"
	echo "$line"
}

echo "Hot row: $CLIENTS clients, ${SECONDS_PER_RUN} s, worker every 10 s, autovacuum_naptime $NAPTIME (heap / indexes)"
echo
echo "| mode | storage | tps | at the end of the load | settled | settling |"
echo "| --- | --- | --- | --- | --- | --- |"
for mode in $MODES; do
	for storage in reset set; do hot "$mode" "$storage"; done
done
[ "$BULK" = 1 ] || exit 0
echo
echo "Bulk: 200,000 keys, UPDATE of all 1,000,000 source rows three times, VACUUM after each (heap / indexes)"
echo
echo "| storage | filled | 1st | 2nd | 3rd |"
echo "| --- | --- | --- | --- | --- |"
for storage in reset set; do bulk "$storage"; done
