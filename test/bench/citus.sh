#!/usr/bin/env bash
# Citus: what counters cost on a distributed table, against the same distributed table without counters, measured
# side by side in one run on local clusters (a coordinator and two workers; the machine is shared: compare ratios).
# A bulk INSERT ... SELECT of 100,000 rows, an UPDATE moving every row's key, a DELETE of every row (medians of RUNS
# rounds), and single-row INSERTs by 8 clients (pgbench, SECONDS_PER_RUN each, alternating); then the hot tenant: 8
# clients inserting rows of one tenant, without a counter and with a per-tenant counter in exact, sharded and log mode
# (compacted between rounds); then a counter across tenants (events per day, a key without the distribution column:
# per-shard partial rows in log mode), 8 clients inserting rows of 1,000 tenants. After every step each counter must
# equal a GROUP BY of its source. Needs Citus (docs/citus.md); not part of the tests.
#
#   bash test/bench/citus.sh              # ROWS=100000 RUNS=5 CLIENTS=8 SECONDS_PER_RUN=10
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -e "$(pg_config --pkglibdir)/citus.so" ] || { echo "citus bench: citus.so not installed, skipped"; exit 0; }
ROWS=${ROWS:-100000}
RUNS=${RUNS:-5}
CLIENTS=${CLIENTS:-8}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CITUS_NODES=3 CITUS_CONF="shared_buffers = 256MB
max_wal_size = 4GB
checkpoint_timeout = 1h" source test/citus_cluster.sh
for port in "${ports[@]}"; do sql "$port" <<<'CREATE EXTENSION citus'; done
sql "$coord" >/dev/null <<SQL
SELECT citus_set_coordinator_host('127.0.0.1', $coord);
SELECT citus_add_node('127.0.0.1', $w1);
SELECT citus_add_node('127.0.0.1', $w2);
CREATE EXTENSION counters;
SELECT counters.enable_citus();
SQL
for t in posts_none posts; do
	sql "$coord" >/dev/null <<SQL
CREATE TABLE $t (user_id int NOT NULL, blog_id int NOT NULL, id bigserial, rating int NOT NULL DEFAULT 0,
                 PRIMARY KEY (user_id, id));
SELECT create_distributed_table('$t', 'user_id');
SQL
done
sql "$coord" >/dev/null <<'SQL'
SELECT counters.create_counter('ub', $$SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating
                                        FROM posts GROUP BY user_id, blog_id$$);
SQL
check() {
	local n
	n=$(sql "$coord" <<'SQL'
SELECT count(*) FROM ub s FULL JOIN (SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating FROM posts
                                      GROUP BY 1, 2) d USING (user_id, blog_id)
 WHERE s.posts IS DISTINCT FROM d.posts OR s.rating IS DISTINCT FROM d.rating;
SQL
	)
	[ "$n" = 0 ] || fail "counter ub differs from its recount in $n keys ($1)"
}
# ms TABLE STATEMENT: the statement's time on the table, in milliseconds
ms() {
	local s e
	s=$(date +%s%N)
	sql "$coord" <<<"${2//TABLE/$1}" >/dev/null
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# line LABEL UNIT BASELINE COUNTER: medians of the two space-separated series, and their ratio
line() {
	local a b
	a=$(tr ' ' '\n' <<<"$3" | grep . | median)
	b=$(tr ' ' '\n' <<<"$4" | grep . | median)
	[ "$2" = ms ] || { a=${a%.*}; b=${b%.*}; }
	printf '%-30s %10s %-3s %10s %-3s %8s\n' "$1" "$a" "$2" "$b" "$2" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / a }')"
}
insert="INSERT INTO TABLE (user_id, blog_id, rating) SELECT 1 + g % 1000, 1 + g % 7, g % 5 FROM generate_series(1, $ROWS) g"
update="UPDATE TABLE SET blog_id = blog_id % 7 + 1"
delete="DELETE FROM TABLE"
declare -A took
for round in $(seq 1 "$RUNS"); do
	for step in insert update delete; do
		for t in posts_none posts; do
			took[$step-$t]+="$(ms "$t" "${!step}") "
		done
		check "round $round, $step"
	done
done
echo "citus bench: $ROWS rows, medians of $RUNS rounds; counter ub (user_id, blog_id: count, sum) exact after each step"
printf '%-30s %14s %14s %8s\n' statement "no counter" "counter" ratio
for step in insert update delete; do
	line "$step $ROWS rows" ms "${took[$step-posts_none]}" "${took[$step-posts]}"
done
printf '\\set u random(1, 1000)\n\\set b random(1, 7)\nINSERT INTO TABLE (user_id, blog_id, rating) VALUES (:u, :b, 1);\n' >"$base/one.tmpl"
for t in posts_none posts; do sed "s/TABLE/$t/" "$base/one.tmpl" >"$base/$t.pgbench"; done
chmod 644 "$base"/*.pgbench
declare -A tps
# pgbench_tps TABLE: CLIENTS clients run $base/TABLE.pgbench for SECONDS_PER_RUN seconds; the tps noted for TABLE
pgbench_tps() {
	local out
	out=$("$bindir/pgbench" -n -h 127.0.0.1 -p "$coord" -U postgres -c "$CLIENTS" -j 2 -T "$SECONDS_PER_RUN" \
		-f "$base/$1.pgbench" postgres 2>&1)
	grep -q 'number of failed transactions: 0 ' <<<"$out" || { echo "$out"; fail "pgbench failed"; }
	tps[$1]+="$(grep -o 'tps = [0-9.]*' <<<"$out" | tail -1 | cut -d' ' -f3) "
}
for round in $(seq 1 3); do
	for t in posts_none posts; do
		pgbench_tps "$t"
	done
	check "single-row round $round"
done
line "$CLIENTS clients, single rows" tps "${tps[posts_none]}" "${tps[posts]}"

# --- the hot tenant: every client writes rows of tenant 1 (one key of the per-tenant counter)
for t in hot_none hot_exact hot_sharded hot_log; do
	sql "$coord" >/dev/null <<SQL
CREATE TABLE $t (tenant_id int NOT NULL, id bigserial, kind int NOT NULL, amount int NOT NULL DEFAULT 1,
                 PRIMARY KEY (tenant_id, id));
SELECT create_distributed_table('$t', 'tenant_id');
SQL
done
for m in exact sharded log; do
	sql "$coord" >/dev/null <<SQL
SELECT counters.create_counter('c_hot_$m', \$\$SELECT tenant_id, count(*) AS n, sum(amount) AS amount
                                            FROM hot_$m GROUP BY tenant_id\$\$, mode => '$m');
SQL
done
check_hot() {
	local m n
	for m in exact sharded log; do
		n=$(sql "$coord" <<SQL
SELECT count(*) FROM c_hot_$m s FULL JOIN (SELECT tenant_id, count(*) AS n, sum(amount) AS amount FROM hot_$m
                                          GROUP BY 1) d USING (tenant_id)
 WHERE s.n IS DISTINCT FROM d.n OR s.amount IS DISTINCT FROM d.amount;
SQL
		)
		[ "$n" = 0 ] || fail "counter c_hot_$m differs from its recount in $n keys ($1)"
	done
}
printf '\\set k random(1, 5)\nINSERT INTO TABLE (tenant_id, kind) VALUES (1, :k);\n' >"$base/hot.tmpl"
for t in hot_none hot_exact hot_sharded hot_log; do sed "s/TABLE/$t/" "$base/hot.tmpl" >"$base/$t.pgbench"; done
chmod 644 "$base"/*.pgbench
for round in $(seq 1 3); do
	for t in hot_none hot_exact hot_sharded hot_log; do
		pgbench_tps "$t"
	done
	check_hot "hot tenant round $round"
	sql "$coord" <<<"SELECT counters.compact()" >/dev/null
	check_hot "hot tenant round $round, compacted"
done
for m in exact sharded log; do
	line "$CLIENTS clients, one tenant, $m" tps "${tps[hot_none]}" "${tps[hot_$m]}"
done

# --- across tenants: events per day, the key without the distribution column (per-shard partial rows, log mode)
for t in days_none days_log; do
	sql "$coord" >/dev/null <<SQL
CREATE TABLE $t (tenant_id int NOT NULL, id bigserial, day date NOT NULL, PRIMARY KEY (tenant_id, id));
SELECT create_distributed_table('$t', 'tenant_id');
SQL
done
sql "$coord" >/dev/null <<'SQL'
SELECT counters.create_counter('c_days', $$SELECT day, count(*) AS n FROM days_log GROUP BY day$$, mode => 'log');
SQL
check_days() {
	local n
	n=$(sql "$coord" <<'SQL'
SELECT count(*) FROM c_days s FULL JOIN (SELECT day, count(*) AS n FROM days_log GROUP BY 1) d USING (day)
 WHERE s.n IS DISTINCT FROM d.n;
SQL
	)
	[ "$n" = 0 ] || fail "counter c_days differs from its recount in $n keys ($1)"
}
printf '\\set u random(1, 1000)\n\\set d random(0, 29)\nINSERT INTO TABLE (tenant_id, day) VALUES (:u, date '"'"'2026-01-01'"'"' + :d);\n' >"$base/days.tmpl"
for t in days_none days_log; do sed "s/TABLE/$t/" "$base/days.tmpl" >"$base/$t.pgbench"; done
chmod 644 "$base"/*.pgbench
for round in $(seq 1 3); do
	for t in days_none days_log; do
		pgbench_tps "$t"
	done
	check_days "per-day round $round"
	sql "$coord" <<<"SELECT counters.compact('c_days')" >/dev/null
	check_days "per-day round $round, compacted"
done
line "$CLIENTS clients, per day (log)" tps "${tps[days_none]}" "${tps[days_log]}"
ins="INSERT INTO TABLE (tenant_id, day) SELECT 1 + g % 1000, date '2026-01-01' + g % 30 FROM generate_series(1, $ROWS) g"
declare -A bulk
for round in $(seq 1 "$RUNS"); do
	for t in days_none days_log; do bulk[$t]+="$(ms "$t" "$ins") "; done
	check_days "per-day bulk round $round"
done
line "per day: insert $ROWS rows" ms "${bulk[days_none]}" "${bulk[days_log]}"
