#!/usr/bin/env bash
# Citus: counters over hash-distributed and reference tables count in the shards, exact inside the distributed
# transaction, and everything that cannot be exact is refused loudly (docs/citus.md). Needs Citus built for the
# PostgreSQL under test ($(pg_config --pkglibdir)/citus.so; docs/citus.md says how to build 13.2.2 for Debian's 15);
# without it the script says so and exits at once. It starts a coordinator and three workers of its own (throwaway
# clusters on free ports, as postgres when run as root, removed at the end; the third worker joins in step 9), and
# checks every counter against a GROUP BY of its source written by hand after every step, each expected error by its
# SQLSTATE and message, as the role app (not a superuser) unless a step needs the superuser:
#   1. local tables with counters keep counting on a Citus coordinator;
#   2. refused with 0A000, leaving nothing behind: a key without the distribution column, a target that is not
#      co-located by it, a distributed source into a local or reference table, a reference source into a distributed
#      table, a local source into a Citus table, a Citus local table, log mode over a reference table, thresholds,
#      create_counter_concurrently(), a parent join, a worker;
#   3. create_counter over a distributed table: a co-located counter table, the catalog on every node, writers
#      connected to a worker held while it is declared;
#   4. the write matrix: INSERT, multi-row, COPY, co-located INSERT ... SELECT, UPDATE moving keys, DELETE,
#      ON CONFLICT, MERGE, ROLLBACK, ROLLBACK TO SAVEPOINT, reading its own writes, writes from a client on a worker;
#   5. counters.distribute() of a counted local table with rows: no double count; a counter cache co-located;
#   6. a reference table counted into a reference table: every copy equals the recount; TRUNCATE; a partitioned
#      distributed table;
#   7. a table distributed behind the counters' back fails every write (0A000), never counts nothing;
#   8. DDL: ADD/DROP COLUMN, RENAME (the catalog on the workers follows), CREATE INDEX, alter_distributed_table and
#      undistribute_table refused, and the conversions into a Citus local table (a foreign key to a reference table,
#      citus_add_local_table_to_metadata, also of a counter table or a counter-cache table alone) and
#      create_distributed_table_concurrently (named as such); DROP TABLE ... CASCADE drops the
#      counter and no other table's shard;
#   9. hot keys: a log and a sharded counter (log, slots, totals co-located with the source), the write matrix,
#      compact() on a worker (its placements only) and on the coordinator (every node's), top(), mode switches and
#      rebuild(), 8 pgbench writers of one key with compactions meanwhile; a key without the distribution column in
#      log mode (per-shard partial rows under each shard's anchor, summed on read; sharded mode refused): writes,
#      COPY, compactions, top(), verify(), rebuild(), 8 writers over many users; and a forged catalog row naming
#      another role's log, refused on the workers;
#  10. rebalancing: a blocking move and split; then under pgbench (8 clients inserting and moving keys) with compactions
#      meanwhile, a blocking split and a third worker added and rebalanced (logical replication): no failed
#      transaction, exact after each (a non-blocking split of a counter's shards does not complete:
#      docs/citus.md, "Not done");
#  11. drop_counter: no capture trigger left but inert TRUNCATE ones, no log or slots table; writes and TRUNCATE go on.
#   CITUS_KEEP=1 bash test/scripts/citus.sh    # keep the clusters' directories (and print where), logs included
#   CITUS_CONF="log_statement = 'all'" ...     # more settings for every node
set -euo pipefail
cd "$(dirname "$0")/../.."
libdir=$(pg_config --pkglibdir)
if [ ! -e "$libdir/citus.so" ]; then
	echo "citus: citus.so not installed, skipped"
	echo "citus: skip: citus.so not installed in $libdir"
	exit 0
fi
CITUS_NODES=4
source test/citus_cluster.sh
# expect_error WHAT SQLSTATE PATTERN PORT [USER]: stdin must fail with that SQLSTATE and a message matching PATTERN
# (within the statement_timeout: nothing may hang); prints the error
expect_error() {
	local what=$1 state=$2 pattern=$3 out
	if out=$( (echo "SET statement_timeout = '60s'; \\set VERBOSITY verbose" && cat) | sql "$4" "${5:-postgres}" 2>&1); then
		fail "$what: succeeded, expected $state"
	fi
	grep -qE "ERROR:  $state:" <<<"$out" || fail "$what: expected SQLSTATE $state, got: $out"
	grep -qE "$pattern" <<<"$out" || fail "$what: message does not match /$pattern/: $out"
	echo "ok - $what: $(grep -m1 'ERROR:' <<<"$out")"
}
# same COUNTER RECOUNT: the counter's rows (nonzero) equal a GROUP BY written by hand, on the coordinator
same() {
	local n
	n=$(sql "$coord" <<SQL
SELECT count(*) FROM (
  (SELECT * FROM $1 WHERE n <> 0 EXCEPT $2) UNION ALL ($2 EXCEPT SELECT * FROM $1 WHERE n <> 0)) d;
SQL
	)
	[ "$n" = 0 ] || fail "counter $1 differs from its recount in $n rows"
	echo "ok - $1 equals its recount"
}

for port in "${ports[@]}"; do sql "$port" <<<'CREATE EXTENSION citus'; done
sql "$coord" <<SQL >/dev/null
SELECT citus_set_coordinator_host('127.0.0.1', $coord);
SELECT citus_add_node('127.0.0.1', $w1);
SELECT citus_add_node('127.0.0.1', $w2);
SQL
sql "$coord" <<'SQL'
CREATE EXTENSION counters;
CREATE ROLE app LOGIN;
GRANT CREATE ON SCHEMA public TO app;
SQL
echo "ok - cluster: coordinator $coord, workers $w1 $w2 ($(sql "$coord" <<<"SELECT extversion FROM pg_extension WHERE extname = 'citus'"))"
[ "$(sql "$w1" <<<"SELECT count(*) FROM pg_extension WHERE extname = 'counters'")" = 1 ] ||
	fail "Citus did not propagate the extension to the workers"

# --- 1. local tables keep counting on the coordinator
recount_posts='SELECT user_id, blog_id, count(*)::numeric AS n, sum(rating)::numeric FROM posts GROUP BY 1, 2'
recount_blogs='SELECT blog_id, count(*)::numeric AS n FROM posts GROUP BY 1'
sql "$coord" <<'SQL' >/dev/null
CREATE TABLE posts (user_id int NOT NULL, blog_id int NOT NULL, id bigint NOT NULL, rating int NOT NULL DEFAULT 0,
                    PRIMARY KEY (user_id, id));
INSERT INTO posts SELECT 1 + g % 20, 1 + g % 5, g, g % 3 FROM generate_series(1, 1000) g;
SELECT counters.create_counter('ubp', $$SELECT user_id, blog_id, count(*) AS n, sum(rating) AS rating
                                          FROM posts GROUP BY user_id, blog_id$$);
SELECT counters.create_counter('bp', $$SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id$$);
INSERT INTO posts SELECT 1 + g % 7, 1 + g % 3, g, 1 FROM generate_series(1001, 1500) g;
UPDATE posts SET blog_id = blog_id % 5 + 1 WHERE id % 4 = 0;
DELETE FROM posts WHERE id % 9 = 0;
SQL
same ubp "$recount_posts"
same bp "$recount_blogs"

# --- 2. what cannot be exact is refused, and leaves nothing behind
sql "$coord" app <<'SQL' >/dev/null
CREATE TABLE dposts (user_id int NOT NULL, blog_id int NOT NULL, id bigint NOT NULL, rating int NOT NULL DEFAULT 0,
                     PRIMARY KEY (user_id, id));
SELECT create_distributed_table('dposts', 'user_id');
INSERT INTO dposts SELECT 1 + g % 20, 1 + g % 5, g, g % 3 FROM generate_series(1, 2000) g;
CREATE TABLE tags (id int PRIMARY KEY, category text NOT NULL);
SELECT create_reference_table('tags');
INSERT INTO tags SELECT g, 'c' || g % 3 FROM generate_series(1, 30) g;
CREATE TABLE apart (user_id int NOT NULL, n bigint NOT NULL DEFAULT 0, PRIMARY KEY (user_id));
SELECT create_distributed_table('apart', 'user_id', colocate_with => 'none');
CREATE TABLE local_t (user_id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
CREATE TABLE ref_t (category text PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
SELECT create_reference_table('ref_t');
CREATE TABLE dist_cat (category text PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
SELECT create_distributed_table('dist_cat', 'category');
CREATE TABLE blogs (id int PRIMARY KEY, published boolean NOT NULL DEFAULT true);
SELECT create_distributed_table('blogs', 'id', colocate_with => 'dposts');
SQL
sql "$coord" <<'SQL' >/dev/null
CREATE TABLE notes (id int PRIMARY KEY, kind int NOT NULL);
SELECT citus_add_local_table_to_metadata('notes');
ALTER TABLE notes OWNER TO app;
SQL
refuse() { expect_error "$1" 0A000 "$2" "$coord" app; }
refuse "a key without the distribution column" 'counter "r1": the key must include distribution column "user_id" of public.dposts' <<'SQL'
SELECT counters.create_counter('r1', $$SELECT blog_id, count(*) AS n FROM dposts GROUP BY blog_id$$);
SQL
refuse "an expression of the distribution column" 'the key must include distribution column "user_id"' <<'SQL'
SELECT counters.create_counter('r2', $$SELECT user_id + 0 AS user_id, count(*) AS n FROM dposts GROUP BY 1$$);
SQL
refuse "a target distributed by the column but not co-located" 'counter "r3": target table public.apart must be distributed by column "user_id", co-located with public.dposts' <<'SQL'
SELECT counters.create_counter('r3', $$SELECT user_id, count(*) AS n FROM dposts GROUP BY user_id$$, target => 'apart');
SQL
refuse "a distributed table into a local table" 'counter "r4": a hash-distributed table cannot be counted into a local table' <<'SQL'
SELECT counters.create_counter('r4', $$SELECT user_id, count(*) AS n FROM dposts GROUP BY user_id$$, target => 'local_t');
SQL
refuse "a distributed table into a reference table" 'counter "r5": target table public.ref_t must be distributed' <<'SQL'
SELECT counters.create_counter('r5', $$SELECT user_id AS category, count(*) AS n FROM dposts GROUP BY user_id$$, target => 'ref_t');
SQL
refuse "a reference table into a distributed table" 'counter "r6": a reference table can only be counted into a reference table' <<'SQL'
SELECT counters.create_counter('r6', $$SELECT category, count(*) AS n FROM tags GROUP BY category$$, target => 'dist_cat');
SQL
refuse "a local table into a Citus table" 'counter "r7": a local table cannot be counted into a Citus table' <<'SQL'
CREATE TABLE lsrc (category text NOT NULL);
SELECT counters.create_counter('r7', $$SELECT category, count(*) AS n FROM lsrc GROUP BY category$$, target => 'ref_t');
SQL
refuse "a Citus local table" 'counter "r8": counters does not count public.notes' <<'SQL'
SELECT counters.create_counter('r8', $$SELECT kind, count(*) AS n FROM notes GROUP BY kind$$);
SQL
refuse "log mode over a reference table" 'counter "r9": counters does not support log and sharded mode on Citus tables yet' <<'SQL'
SELECT counters.create_counter('r9', $$SELECT category, count(*) AS n FROM tags GROUP BY category$$, mode => 'log');
SQL
refuse "a join through a parent row" 'counter "r10": counters through a parent row do not count Citus tables' <<'SQL'
SELECT counters.create_counter('r10', $$SELECT p.user_id, count(*) AS n FROM dposts p JOIN blogs b ON p.blog_id = b.id
                                         GROUP BY p.user_id$$);
SQL
shard=$(sql "$w1" <<<"SET citus.override_table_visibility = off;
SELECT relname FROM pg_class WHERE relname ~ '^dposts_[0-9]+$' LIMIT 1")
expect_error "declaring on a worker" 0A000 'counter "r11": declare counters on the Citus coordinator' "$w1" <<SQL
SELECT counters.create_counter('r11', \$\$SELECT user_id, count(*) AS n FROM $shard GROUP BY user_id\$\$);
SQL
[ "$(sql "$coord" <<<"SELECT count(*) FROM counters.counter")" = 2 ] || fail "refused declarations left catalog rows"
[ "$(sql "$coord" <<<"SELECT count(*) FROM pg_class WHERE relname ~ '^r[0-9]+(_definition)?$'")" = 0 ] ||
	fail "refused declarations left relations"
[ "$(sql "$coord" <<<"SELECT count(*) FROM pg_trigger WHERE tgfoid = 'counters.capture()'::regprocedure
                      AND tgrelid <> 'posts'::regclass AND tgname <> 'counters_guard'")" = 0 ] ||
	fail "refused declarations left capture triggers"

# --- 3. create_counter over a distributed table
recount_d='SELECT user_id, blog_id, count(*)::numeric AS n, sum(rating)::numeric FROM dposts GROUP BY 1, 2'
expect_error "a role declaring before counters.enable_citus()" 55000 \
	'counters is not set up for Citus tables in this database yet' "$coord" app <<'SQL'
SELECT counters.create_counter('dub', $$SELECT user_id, count(*) AS n FROM dposts GROUP BY user_id$$);
SQL
sql "$coord" <<<"SELECT counters.enable_citus()" >/dev/null
sql "$coord" app <<'SQL' >/dev/null
SELECT counters.create_counter('dub', $$SELECT user_id, blog_id, count(*) AS n, sum(rating) AS rating
                                          FROM dposts GROUP BY user_id, blog_id$$);
SQL
refuse "thresholds in exact mode" 'counter "dub" of Citus table (public\.)?dposts: only log and sharded mode announce thresholds there' <<'SQL'
SELECT counters.set_thresholds('dub', 'n', '{10}');
SQL
refuse "rebuild_concurrently()" 'counter "dub": counters does not support rebuild_concurrently\(\)' <<'SQL'
CALL counters.rebuild_concurrently('dub');
SQL
refuse "create_counter_concurrently()" 'counter "dc": counters does not support create_counter_concurrently\(\)' <<'SQL'
CALL counters.create_counter_concurrently('dc', $$SELECT user_id, count(*) AS n FROM dposts GROUP BY user_id$$);
SQL
[ "$(sql "$coord" <<<"SELECT p.colocationid = q.colocationid AND p.partmethod = 'h'
                      AND column_to_column_name(p.logicalrelid, p.partkey) = 'user_id'
                      FROM pg_dist_partition p, pg_dist_partition q
                      WHERE p.logicalrelid = 'dub'::regclass AND q.logicalrelid = 'dposts'::regclass")" = t ] ||
	fail "the counter table is not distributed by user_id, co-located with its source"
echo "ok - the counter table is distributed by user_id, co-located with its source"
for port in "$w1" "$w2"; do
	[ "$(sql "$port" <<<"SELECT source || ' ' || target FROM counters.counter_replica WHERE name = 'dub'")" = \
		"public.dposts public.dub" ] || fail "the catalog is not on worker $port"
done
echo "ok - the counter's catalog row is on every worker"
sql "$coord" <<<"CREATE ROLE intruder LOGIN; GRANT CREATE ON SCHEMA public TO intruder" >/dev/null
sql "$coord" intruder <<<"DELETE FROM counters.counter_replica WHERE name = 'dub'" >/dev/null
expect_error "another role forging a row of the catalog on the workers" 42501 \
	'new row violates row-level security policy' "$coord" intruder <<'SQL'
INSERT INTO counters.counter_replica VALUES ('forged', 'public.dposts', 'public.dub', 'public.dub_definition', true,
                                             'exact', '{}');
SQL
[ "$(sql "$w1" <<<"SELECT count(*) FROM counters.counter_replica WHERE name = 'dub'")" = 1 ] ||
	fail "another role deleted a row of the catalog on the workers"
echo "ok - another role can neither delete nor forge the workers' catalog rows"
same dub "$recount_d"
# a declaration holds writers connected to a worker too (LOCK TABLE, propagated), not only the coordinator's
PGAPPNAME=holder sql "$coord" app >/dev/null <<'SQL' &
BEGIN;
SELECT counters.create_counter('dheld', $$SELECT user_id, count(*) AS n FROM dposts GROUP BY user_id$$);
SELECT pg_sleep(6);
COMMIT;
SQL
held=$!
for _ in $(seq 1 300); do
	[ "$(sql "$coord" <<<"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'holder' AND wait_event = 'PgSleep'")" = 1 ] && break
	sql "$coord" <<<"SELECT pg_sleep(0.1)" >/dev/null
done
expect_error "a write through a worker while a counter is declared" 55P03 'canceling statement due to lock timeout' \
	"$w1" app <<<"SET lock_timeout = '1s'; INSERT INTO dposts VALUES (30, 7, 900000001, 1)"
wait "$held"
sql "$w1" app <<<"INSERT INTO dposts VALUES (30, 7, 900000001, 1)" >/dev/null
same dheld 'SELECT user_id, count(*)::numeric AS n FROM dposts GROUP BY 1'
sql "$coord" app <<<"SELECT counters.drop_counter('dheld')" >/dev/null

# --- 4. the write matrix, each step compared with the recount
step() {
	sql "$coord" app >/dev/null
	same dub "$recount_d"
}
step <<<"INSERT INTO dposts VALUES (1, 1, 100001, 5)"
step <<<"INSERT INTO dposts VALUES (1, 2, 100002, 1), (2, 2, 100003, 2), (21, 9, 100004, 3)"
step <<<"INSERT INTO dposts SELECT 1 + g % 30, 1 + g % 7, g, g % 4 FROM generate_series(200001, 205000) g"
seq 300001 300100 | awk '{ print ($1 % 25) + 1 "," ($1 % 6) + 1 "," $1 ",2" }' >"$base/rows.csv"
chmod 644 "$base/rows.csv"
step <<<"\\copy dposts FROM '$base/rows.csv' WITH (FORMAT csv)"
step <<<"INSERT INTO dposts SELECT user_id, blog_id, id + 1000000, rating FROM dposts WHERE id % 7 = 0"
step <<<"UPDATE dposts SET blog_id = blog_id % 7 + 1 WHERE id % 3 = 0"
step <<<"UPDATE dposts SET rating = rating + 1 WHERE user_id = 7"
step <<<"DELETE FROM dposts WHERE id % 10 = 2"
step <<<"INSERT INTO dposts VALUES (1, 1, 100001, 7) ON CONFLICT (user_id, id) DO UPDATE SET rating = excluded.rating, blog_id = 3"
step <<'SQL'
MERGE INTO dposts p USING (SELECT * FROM dposts WHERE id % 11 = 0) s ON p.user_id = s.user_id AND p.id = s.id
WHEN MATCHED THEN UPDATE SET rating = p.rating + 1, blog_id = 4;
SQL
step <<'SQL'
BEGIN;
INSERT INTO dposts SELECT 1 + g % 30, 1, g, 1 FROM generate_series(400001, 401000) g;
UPDATE dposts SET blog_id = 5 WHERE user_id IN (1, 2, 3);
ROLLBACK;
SQL
step <<'SQL'
BEGIN;
INSERT INTO dposts VALUES (3, 1, 500001, 1);
SAVEPOINT s;
DELETE FROM dposts WHERE user_id = 4;
INSERT INTO dposts SELECT 5, 5, g, 1 FROM generate_series(500002, 500100) g;
ROLLBACK TO SAVEPOINT s;
UPDATE dposts SET blog_id = 1 WHERE user_id = 6 AND id % 2 = 0;
COMMIT;
SQL
seen=$(sql "$coord" app <<'SQL'
BEGIN;
INSERT INTO dposts VALUES (29, 6, 600001, 4), (29, 6, 600002, 4);
SELECT n || ' ' || rating FROM dub WHERE user_id = 29 AND blog_id = 6;
COMMIT;
SQL
)
expected=$(sql "$coord" <<<"SELECT count(*) || ' ' || sum(rating) FROM dposts WHERE user_id = 29 AND blog_id = 6")
[ "$(tail -n1 <<<"$seen")" = "$expected" ] || fail "a transaction does not read its own writes: $seen, expected $expected"
echo "ok - a transaction reads its own writes ($expected)"
sql "$w2" app >/dev/null <<'SQL'
INSERT INTO dposts SELECT 1 + g % 30, 2, g, 1 FROM generate_series(700001, 700500) g;
UPDATE dposts SET blog_id = 6 WHERE id % 13 = 0;
SQL
same dub "$recount_d"
echo "ok - writes from a client connected to a worker are counted"
[ "$(sql "$coord" <<<"SELECT count(*) FROM counters.verify('dub')")" = 0 ] || fail "verify() reports differences"
sql "$coord" app <<<"UPDATE dub SET n = n + 1 WHERE user_id < 4; DELETE FROM dub WHERE user_id = 5" >/dev/null
[ "$(sql "$coord" <<<"SELECT count(DISTINCT key) FROM counters.verify('dub')")" -gt 0 ] || fail "verify() misses differences"
sql "$coord" app <<<"SELECT counters.rebuild('dub')" >/dev/null 2>&1
same dub "$recount_d"
echo "ok - verify() finds, and rebuild() repairs, a damaged distributed counter"
sql "$coord" app <<'SQL' >/dev/null
SELECT counters.alter_counter('dub', definition => $$SELECT user_id, blog_id, count(*) AS n, sum(rating) AS rating
                                                     FROM dposts WHERE rating >= 0 GROUP BY user_id, blog_id$$);
INSERT INTO dposts SELECT 1 + g % 30, 1 + g % 7, g, 2 FROM generate_series(6000001, 6001000) g;
SQL
same dub "$recount_d"
echo "ok - alter_counter(definition => ...) of a distributed counter"
# one session (its connections to the workers, whose backends compiled the source's counters): a new counter, new
# bounds must reach them
read -r max u b <<<"$(sql "$coord" <<<"SELECT n, user_id, blog_id FROM dub ORDER BY n DESC LIMIT 1" | tr '|' ' ')"
expect_error "a new counter and new bounds reach the workers' backends" 23514 \
	"counter \"dub\": n would be $((max + 2)) for key \(user_id, blog_id\)=\($u, $b\), above its maximum $((max + 1))" \
	"$coord" app <<SQL
INSERT INTO dposts SELECT 1 + g % 30, 1 + g % 7, g, 3 FROM generate_series(7000001, 7001000) g WHERE 1 + g % 30 <> $u;
SELECT counters.create_counter('dsum', \$\$SELECT user_id, sum(rating) AS n FROM dposts GROUP BY user_id\$\$);
INSERT INTO dposts SELECT 1 + g % 30, 1 + g % 7, g, 3 FROM generate_series(7001001, 7002000) g WHERE 1 + g % 30 <> $u;
SELECT counters.set_bounds('dub', 'n', 0, $((max + 1)));
INSERT INTO dposts VALUES ($u, $b, 8000001, 1);
INSERT INTO dposts VALUES ($u, $b, 8000002, 1);
SQL
same dsum 'SELECT user_id, sum(rating)::numeric AS n FROM dposts GROUP BY 1'
sql "$coord" app <<<"SELECT counters.set_bounds('dub', 'n'); SELECT counters.drop_counter('dsum')" >/dev/null

# --- 5. counters.distribute(): a counted local table with rows, without counting them again; a counter cache
recount_l='SELECT user_id, blog_id, count(*)::numeric AS n FROM lposts GROUP BY 1, 2'
recount_l2='SELECT blog_id, user_id, count(*)::numeric AS n FROM lposts GROUP BY 1, 2'
sql "$coord" app <<'SQL' >/dev/null 2>&1
CREATE TABLE lposts (user_id int NOT NULL, blog_id int NOT NULL, id bigint NOT NULL, PRIMARY KEY (user_id, id));
INSERT INTO lposts SELECT 1 + g % 20, 1 + g % 5, g FROM generate_series(1, 10000) g;
SELECT counters.create_counter('lub', $$SELECT user_id, blog_id, count(*) AS n FROM lposts GROUP BY user_id, blog_id$$);
SELECT counters.create_counter('lbu', $$SELECT blog_id, user_id, count(*) AS n FROM lposts GROUP BY blog_id, user_id$$);
SQL
expect_error "distribute() by a column a counter's key lacks" 0A000 \
	'counter "lbu": the key must include distribution column "id" of public.lposts' "$coord" app <<<"SELECT counters.distribute('lposts', 'id')"
sql "$coord" app <<<"SELECT counters.distribute('lposts', 'user_id')" >/dev/null 2>&1
[ "$(sql "$coord" <<<"SELECT count(DISTINCT colocationid) FROM pg_dist_partition
                      WHERE logicalrelid IN ('lposts'::regclass, 'lub'::regclass, 'lbu'::regclass)")" = 1 ] ||
	fail "distribute() did not co-locate the counter tables"
same lub "$recount_l"
same lbu "$recount_l2"
[ "$(sql "$coord" <<<"SELECT (SELECT sum(n) FROM lub) = (SELECT count(*) FROM lposts)")" = t ] ||
	fail "distribute() counted the rows again"
[ "$(sql "$coord" <<<"SELECT string_agg(DISTINCT result, ',') FROM run_command_on_placements('lposts',
      \$\$SELECT string_agg(DISTINCT tgenabled::text, '') FROM pg_trigger WHERE tgrelid = '%s'::regclass
          AND tgfoid = 'counters.capture()'::regprocedure\$\$)")" = O ] || fail "the shards' capture triggers are not enabled"
echo "ok - distribute(): no double count, the shards' triggers enabled"
sql "$coord" app <<'SQL' >/dev/null
INSERT INTO lposts SELECT 1 + g % 20, 1 + g % 5, g FROM generate_series(10001, 12000) g;
UPDATE lposts SET blog_id = blog_id % 5 + 1 WHERE id % 3 = 0;
DELETE FROM lposts WHERE id % 7 = 0;
SQL
same lub "$recount_l"
same lbu "$recount_l2"
sql "$coord" app <<'SQL' >/dev/null 2>&1
CREATE TABLE user_blogs (user_id int NOT NULL, id int NOT NULL, posts bigint NOT NULL DEFAULT 0, PRIMARY KEY (user_id, id));
SELECT create_distributed_table('user_blogs', 'user_id', colocate_with => 'dposts');
INSERT INTO user_blogs SELECT u, b FROM generate_series(1, 30) u, generate_series(1, 7) b;
SELECT counters.create_counter('ubcache', $$SELECT user_id, blog_id AS id, count(*) AS posts FROM dposts
                                            GROUP BY user_id, blog_id$$, target => 'user_blogs');
INSERT INTO dposts SELECT 1 + g % 30, 1 + g % 7, g, 1 FROM generate_series(800001, 803000) g;
UPDATE dposts SET blog_id = blog_id % 7 + 1 WHERE id % 5 = 0;
SQL
n=$(sql "$coord" <<'SQL'
-- (a counter cache keeps the rows of its table; keys without one are not counted)
SELECT count(*) FROM user_blogs b LEFT JOIN (SELECT user_id, blog_id AS id, count(*) AS c FROM dposts GROUP BY 1, 2) d
 USING (user_id, id) WHERE b.posts IS DISTINCT FROM COALESCE(d.c, 0);
SQL
)
[ "$n" = 0 ] || fail "the counter cache differs from its recount in $n rows"
echo "ok - a counter cache co-located by the distribution column equals its recount"

# --- 6. a reference table counted into a reference table, on every node; TRUNCATE
sql "$coord" app <<'SQL' >/dev/null
SELECT counters.create_counter('cats', $$SELECT category, count(*) AS n FROM tags GROUP BY category$$);
INSERT INTO tags VALUES (31, 'c1'), (32, 'c7');
UPDATE tags SET category = 'c0' WHERE id % 4 = 0;
DELETE FROM tags WHERE id % 5 = 0;
SQL
expected=$(sql "$coord" <<<"SELECT string_agg(category || '=' || n, ',' ORDER BY category)
                           FROM (SELECT category, count(*) AS n FROM tags GROUP BY 1) d")
copies=$(sql "$coord" <<<"SELECT count(*) || ' ' || string_agg(DISTINCT result, ' ') FROM run_command_on_placements('cats',
  \$\$SELECT string_agg(category || '=' || n, ',' ORDER BY category) FROM %s WHERE n <> 0\$\$)")
[ "$copies" = "3 $expected" ] || fail "the reference counter's copies differ: $copies, expected 3 copies of $expected"
echo "ok - every copy of the reference counter equals the recount ($expected)"
sql "$coord" app <<<"TRUNCATE tags; TRUNCATE lposts" >/dev/null
[ "$(sql "$coord" <<<"SELECT (SELECT count(*) FROM cats) + (SELECT count(*) FROM lub) + (SELECT count(*) FROM lbu)")" = 0 ] ||
	fail "TRUNCATE left counter rows"
sql "$coord" app <<<"INSERT INTO lposts SELECT 1 + g % 20, 1 + g % 5, g FROM generate_series(1, 500) g" >/dev/null
same lub "$recount_l"
echo "ok - TRUNCATE empties the counters of a distributed and a reference table"

# a partitioned distributed table: rows moving between partitions
sql "$coord" app <<'SQL' >/dev/null
CREATE TABLE pev (user_id int NOT NULL, day date NOT NULL, v int NOT NULL DEFAULT 1) PARTITION BY RANGE (day);
CREATE TABLE pev_a PARTITION OF pev FOR VALUES FROM ('2020-01-01') TO ('2025-01-01');
CREATE TABLE pev_b PARTITION OF pev FOR VALUES FROM ('2025-01-01') TO ('2030-01-01');
SELECT create_distributed_table('pev', 'user_id');
INSERT INTO pev SELECT g % 20, date '2024-06-01' + g % 400, 1 FROM generate_series(1, 2000) g;
SELECT counters.create_counter('pevc', $$SELECT user_id, count(*) AS n, sum(v) AS v FROM pev GROUP BY user_id$$);
INSERT INTO pev SELECT g % 20, date '2024-10-01' + g % 400, 2 FROM generate_series(1, 2000) g;
UPDATE pev SET day = day + 200 WHERE user_id < 5;
DELETE FROM pev WHERE user_id = 7;
SQL
same pevc 'SELECT user_id, count(*)::numeric AS n, sum(v)::numeric FROM pev GROUP BY 1'
echo "ok - a partitioned distributed table, rows moving between partitions"

# --- 7. a counted table distributed behind the counters' back fails every write
sql "$coord" app <<'SQL' >/dev/null 2>&1
CREATE TABLE sneaky (user_id int NOT NULL, id int NOT NULL);
SELECT counters.create_counter('sneaky_n', $$SELECT user_id, count(*) AS n FROM sneaky GROUP BY user_id$$);
SET citus.enable_unsafe_triggers = on;
SELECT create_distributed_table('sneaky', 'user_id');
SQL
expect_error "a write to a table distributed by create_distributed_table" 0A000 \
	'table public.sneaky is distributed by Citus, and has no counter declared for its shards' "$coord" app <<<"INSERT INTO sneaky VALUES (1, 1)"

# --- 8. DDL
ddl() {
	(echo "SET statement_timeout = '60s';" && cat) | sql "$coord" app >/dev/null
}
ddl <<<"ALTER TABLE dposts ADD COLUMN title text"
ddl <<<"ALTER TABLE dposts DROP COLUMN title"
ddl <<<"CREATE INDEX ON dposts (blog_id)"
ddl <<<"ALTER TABLE dposts RENAME TO articles"
[ "$(sql "$w1" <<<"SELECT source FROM counters.counter_replica WHERE name = 'dub'")" = public.articles ] ||
	fail "the workers' catalog does not follow a rename"
recount_d=${recount_d//dposts/articles}
step <<<"INSERT INTO articles SELECT 1 + g % 30, 1 + g % 7, g, 1 FROM generate_series(900001, 901000) g"
echo "ok - ALTER TABLE ADD/DROP COLUMN, CREATE INDEX, RENAME: no deadlock, still counting"
expect_error "alter_distributed_table of a counted table" 0A000 \
	'counter "lbu": alter_distributed_table\(\) would drop its source table|counter "lub": alter_distributed_table' "$coord" app <<<"SELECT alter_distributed_table('lposts', shard_count := 6, cascade_to_colocated := false)"
expect_error "undistribute_table of a counted table" 0A000 'counter "lbu": undistribute_table\(\) would drop its source table|counter "lub": undistribute_table' \
	"$coord" app <<<"SELECT undistribute_table('lposts')"
# Conversions into Citus local tables, and create_distributed_table_concurrently, would drop the counter's view (and
# table) behind its back: refused, naming the counter, which keeps counting; a counter cache of the table too.
sql "$coord" <<'SQL' >/dev/null 2>&1
CREATE TABLE conv_plans (id int PRIMARY KEY);
SELECT create_reference_table('conv_plans');
INSERT INTO conv_plans VALUES (0), (1);
GRANT ALL ON conv_plans TO app;
SQL
sql "$coord" app <<'SQL' >/dev/null 2>&1
CREATE TABLE conv_orgs (id bigint PRIMARY KEY, ticket_count bigint NOT NULL DEFAULT 0);
CREATE TABLE conv_tickets (org_id bigint NOT NULL REFERENCES conv_orgs (id), id bigint PRIMARY KEY, plan_id int NOT NULL);
INSERT INTO conv_orgs SELECT g FROM generate_series(1, 5) g;
INSERT INTO conv_tickets SELECT 1 + g % 5, g, g % 2 FROM generate_series(1, 50) g;
SELECT counters.create_counter('conv_cache', $$SELECT org_id AS id, count(*) AS ticket_count FROM conv_tickets GROUP BY org_id$$,
                               target => 'conv_orgs');
SELECT counters.create_counter('conv_n', $$SELECT plan_id, count(*) AS n FROM conv_tickets GROUP BY plan_id$$);
CREATE TABLE conv_teams (id int PRIMARY KEY, ticket_count bigint NOT NULL DEFAULT 0);
INSERT INTO conv_teams VALUES (0), (1);
SELECT counters.create_counter('conv_team_cache', $$SELECT plan_id AS id, count(*) AS ticket_count FROM conv_tickets GROUP BY plan_id$$,
                               target => 'conv_teams');
CREATE TABLE conv_logs (id int PRIMARY KEY, k int NOT NULL);
INSERT INTO conv_logs SELECT g, g % 3 FROM generate_series(1, 30) g;
SELECT counters.create_counter('conv_logs_n', $$SELECT k, count(*) AS n FROM conv_logs GROUP BY k$$);
SQL
expect_error "a foreign key from a counted table to a reference table (Citus converts it)" 0A000 \
	'counter "conv_(cache|n)": a foreign key to a reference table would convert its table with Citus' "$coord" app <<<"ALTER TABLE conv_tickets ADD FOREIGN KEY (plan_id) REFERENCES conv_plans (id)"
expect_error "citus_add_local_table_to_metadata of a counted table" 0A000 \
	'counter "conv_(cache|n)": citus_add_local_table_to_metadata\(\) would convert its table' "$coord" app <<<"SELECT citus_add_local_table_to_metadata('conv_tickets', cascade_via_foreign_keys => true)"
expect_error "create_distributed_table_concurrently of a counted table" 0A000 \
	'counter "conv_logs_n": create_distributed_table_concurrently\(\) \(through citus_add_local_table_to_metadata\(\)\) would convert its table with Citus' "$coord" app <<<"SET citus.enable_unsafe_triggers = on; SELECT create_distributed_table_concurrently('conv_logs', 'k')"
# a counter's own table, or the table of its counter-cache columns, converted alone (Citus renames it into a shard)
expect_error "citus_add_local_table_to_metadata of a counter-cache table alone" 0A000 \
	'counter "conv_team_cache": citus_add_local_table_to_metadata\(\) would convert its table with Citus' "$coord" app <<<"SELECT citus_add_local_table_to_metadata('conv_teams')"
expect_error "citus_add_local_table_to_metadata of a counter table alone" 0A000 \
	'counter "conv_n": citus_add_local_table_to_metadata\(\) would convert its table with Citus' "$coord" app <<<"SELECT citus_add_local_table_to_metadata('conv_n')"
sql "$coord" app <<<"INSERT INTO conv_tickets SELECT 1 + g % 5, g, g % 2 FROM generate_series(51, 80) g" >/dev/null
same conv_n 'SELECT plan_id, count(*) FROM conv_tickets GROUP BY 1'
sql "$coord" app <<<"INSERT INTO conv_logs SELECT g, g % 4 FROM generate_series(31, 40) g" >/dev/null
same conv_logs_n 'SELECT k, count(*) FROM conv_logs GROUP BY 1'
[ "$(sql "$coord" <<<"SELECT count(*) FROM conv_orgs o WHERE ticket_count <> (SELECT count(*) FROM conv_tickets t WHERE t.org_id = o.id)")" = 0 ] ||
	fail "the counter cache conv_cache differs from its recount"
[ "$(sql "$coord" <<<"SELECT count(*) FROM conv_teams o WHERE ticket_count <> (SELECT count(*) FROM conv_tickets t WHERE t.plan_id = o.id)")" = 0 ] ||
	fail "the counter cache conv_team_cache differs from its recount"
echo "ok - refused conversions leave the counters counting"
ddl <<<"DROP TABLE lposts CASCADE" 2>/dev/null
[ "$(sql "$coord" <<<"SELECT count(*) FROM counters.counter WHERE name IN ('lub', 'lbu')")" = 0 ] &&
	[ "$(sql "$w1" <<<"SELECT count(*) FROM counters.counter_replica WHERE name IN ('lub', 'lbu')")" = 0 ] ||
	fail "DROP TABLE ... CASCADE left the counters"
for t in articles dub user_blogs tags cats; do
	sql "$coord" <<<"SELECT count(*) FROM $t" >/dev/null || fail "table $t lost its shards"
done
echo "ok - DROP TABLE ... CASCADE drops the counters, no other table's shard"

# --- 9. hot keys: log and sharded mode on a distributed table (the log, slots and totals co-located with the
# source; each node compacts its own placements, the coordinator's compact() asks every worker)
recount_l='SELECT user_id, count(*)::numeric AS n, sum(rating)::numeric FROM articles GROUP BY 1'
recount_s='SELECT user_id, blog_id, count(*)::numeric AS n FROM articles GROUP BY 1, 2'
sql "$coord" app <<'SQL' >/dev/null
SELECT counters.create_counter('art_log', $$SELECT user_id, count(*) AS n, sum(rating) AS rating FROM articles
                                            GROUP BY user_id$$, mode => 'log');
SELECT counters.create_counter('art_slots', $$SELECT user_id, blog_id, count(*) AS n FROM articles
                                              GROUP BY user_id, blog_id$$, mode => 'sharded');
SQL
[ "$(sql "$coord" <<<"SELECT count(*) FROM pg_dist_partition p, pg_dist_partition q
                      WHERE q.logicalrelid = 'articles'::regclass AND p.colocationid = q.colocationid
                      AND p.logicalrelid::text IN ('art_log_log', 'art_log_totals', 'art_slots_slots', 'art_slots_totals')
                      AND column_to_column_name(p.logicalrelid, p.partkey) = 'user_id'")" = 4 ] ||
	fail "the log, slots and totals are not distributed by user_id, co-located with the source"
echo "ok - log and sharded mode: log, slots and totals distributed by user_id, co-located with the source"
step() {
	sql "$coord" app >/dev/null
	same dub "$recount_d"
	same art_log "$recount_l"
	same art_slots "$recount_s"
}
step <<<"INSERT INTO articles SELECT 1 + g % 30, 1 + g % 7, g, g % 5 FROM generate_series(940001, 943000) g"
step <<<"UPDATE articles SET blog_id = blog_id % 7 + 1, rating = rating + 1 WHERE id % 5 = 0"
step <<<"DELETE FROM articles WHERE id % 11 = 0"
step <<<"BEGIN; INSERT INTO articles VALUES (1, 1, 944001, 3); SAVEPOINT s; INSERT INTO articles VALUES (1, 1, 944002, 3);
ROLLBACK TO SAVEPOINT s; COMMIT"
[ "$(sql "$coord" <<<"SELECT count(*) FROM art_log_log")" -gt 0 ] || fail "log mode wrote no log rows"
# compaction on one worker folds only the placements there; the coordinator's folds the rest
folded=$(sql "$w1" app <<<"SELECT counters.compact('art_log')")
left_w1=$(sql "$coord" <<<"SELECT sum(result::int) FROM run_command_on_placements('art_log_log', 'SELECT count(*) FROM %s')
  WHERE nodeport = $w1")
left_all=$(sql "$coord" <<<"SELECT count(*) FROM art_log_log")
[ "$left_w1" = 0 ] && [ "$left_all" -gt 0 ] || fail "compact() on a worker: $left_w1 rows left there, $left_all in all"
same art_log "$recount_l"
echo "ok - compact() on a worker folds its own placements ($folded rows), exact"
sql "$coord" app <<<"SELECT counters.compact('art_log'); SELECT counters.compact('art_slots')" >/dev/null
[ "$(sql "$coord" <<<"SELECT (SELECT count(*) FROM art_log_log) + (SELECT count(*) FROM art_slots_slots)")" = 0 ] ||
	fail "compact() on the coordinator left pending rows"
step <<<"INSERT INTO articles VALUES (2, 2, 944003, 1)"
[ "$(sql "$coord" app <<<"SELECT string_agg(key::text || value, ' ') FROM counters.top('art_log', 'n', 3)")" = \
  "$(sql "$coord" <<<"SELECT string_agg(jsonb_build_object('user_id', user_id)::text || n, ' ')
     FROM (SELECT user_id, count(*) AS n FROM articles GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3) t")" ] ||
	fail "top() of a log counter differs from the recount's top 3"
echo "ok - compact() on the coordinator folds every node's placements; top() equals the recount's"
sql "$coord" app <<<"SELECT counters.alter_counter('art_slots', 'exact'); SELECT counters.alter_counter('art_slots', 'log');
SELECT counters.alter_counter('art_slots', 'exact'); SELECT counters.alter_counter('art_slots', 'sharded')" >/dev/null
step <<<"INSERT INTO articles VALUES (2, 3, 944004, 1)"
sql "$coord" app <<<"SELECT counters.rebuild('art_log')" >/dev/null 2>&1
step <<<"UPDATE articles SET blog_id = 1 WHERE id = 944004"
echo "ok - alter_counter() between exact, log and sharded, and rebuild(), keep them exact"
# thresholds of a log counter: each node's compaction finds the crossings of its placements, the coordinator's
# announces them (NOTIFY there, the callback there as the owner), each crossing once, also under concurrent writers
sql "$coord" app <<'SQL' >/dev/null
SELECT counters.compact('art_log');
CREATE TABLE seen (counter text, key jsonb, col text, old numeric, new numeric, threshold numeric, direction text,
                   every numeric, crossed numeric);
CREATE FUNCTION seen_crossing(counter text, key jsonb, col text, old numeric, new numeric, threshold numeric,
                              direction text, every numeric, crossed numeric) RETURNS void
	LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.seen VALUES (counter, key, col, old, new, threshold, direction, every, crossed); END $$;
SQL
n0=$(sql "$coord" app <<<"SELECT n FROM art_log WHERE user_id = 5")
sql "$coord" app <<<"SELECT counters.set_thresholds('art_log', 'n', ARRAY[$n0 + 3], 'seen_crossing(text, jsonb, text, numeric, numeric, numeric, text, numeric, numeric)', every => 100)" >/dev/null
sql "$coord" app <<<"INSERT INTO articles SELECT 5, 1, g, 1 FROM generate_series(944101, 944105) g" >/dev/null
[ "$(sql "$coord" app <<<"SELECT count(*) FROM seen")" = 0 ] || fail "a crossing was announced before compaction"
expect_error "compact() on a worker of a counter with thresholds" 0A000 'counter "art_log" has thresholds, which the coordinator announces' "$w1" app <<'SQL'
SELECT counters.compact('art_log');
SQL
refuse "exact mode for a Citus counter with thresholds" 'counter "art_log" of Citus table (public\.)?articles: only log and sharded mode announce thresholds there' <<'SQL'
SELECT counters.alter_counter('art_log', 'exact');
SQL
listened=$(sql "$coord" app <<<"LISTEN \"counters.art_log\"; SELECT counters.compact('art_log')" 2>&1)
grep -qF 'notification "counters.art_log" with payload "{"counter": "art_log", "column": "n"}"' <<<"$listened" ||
	fail "the coordinator's compaction did not notify its listeners: $listened"
[ "$(sql "$coord" app <<<"SELECT key::text || ' ' || old || ' ' || new || ' ' || threshold || ' ' || direction FROM seen WHERE every IS NULL")" = \
  "{\"user_id\": 5} $n0 $((n0 + 5)) $((n0 + 3)) up" ] || fail "the listed crossing: $(sql "$coord" app <<<"TABLE seen")"
echo "ok - thresholds of a log counter: found by the workers' compaction, announced once by the coordinator's (NOTIFY, callback as the owner); compact() on a worker and exact mode refused"
# compact_placements() is the worker's half of the coordinator's compact(): a role that may not maintain the counter
# is refused on the worker, before anything is folded; on the coordinator it is no entry at all
sql "$coord" app <<<"INSERT INTO articles SELECT g % 30, 1, g, 1 FROM generate_series(944106, 944135) g" >/dev/null
before=$(sql "$coord" <<<"SELECT count(*) FROM art_log_log")
expect_error "compact_placements() by a role that may not maintain the counter" 42501 'counter "art_log": must be owner of' "$w1" intruder <<'SQL'
SELECT counters.compact_placements('art_log');
SQL
expect_error "compact_placements() by the same role on the coordinator" 0A000 'compact_placements\(\) runs on a Citus worker' "$coord" intruder <<'SQL'
SELECT counters.compact_placements('art_log');
SQL
[ "$(sql "$coord" <<<"SELECT count(*) FROM art_log_log")" = "$before" ] || fail "a refused compact_placements() folded rows"
# 8 writers of one hot user, compaction running meanwhile: no failed transaction, exact
sql "$coord" <<<"CREATE SEQUENCE hot_ids START 90000000; GRANT USAGE ON SEQUENCE hot_ids TO app" >/dev/null
cat >"$base/hot.sql" <<'SQL'
\set b random(1, 3)
INSERT INTO articles VALUES (5, :b, nextval('hot_ids'), 1);
SQL
chmod 644 "$base/hot.sql"
"$bindir/pgbench" -n -h 127.0.0.1 -p "$coord" -U app -c 8 -j 2 -T 8 -f "$base/hot.sql" postgres >"$base/hot.log" 2>&1 &
bench=$!
compactions=0
while kill -0 "$bench" 2>/dev/null; do
	sql "$coord" app <<<"SELECT counters.compact('art_log'); SELECT counters.compact('art_slots')" >/dev/null
	compactions=$((compactions + 1))
done
wait "$bench" || { cat "$base/hot.log"; fail "pgbench on a hot key failed"; }
grep -q 'number of failed transactions: 0 ' "$base/hot.log" || { cat "$base/hot.log"; fail "failed transactions"; }
sql "$coord" app <<<"SELECT counters.compact('art_log')" >/dev/null
step </dev/null
# every multiple of 100 that user 5's count passed, announced once: the crossed counts add up to those between n0 and now
n1=$(sql "$coord" app <<<"SELECT n FROM art_log WHERE user_id = 5")
crossed=$(sql "$coord" app <<<"SELECT COALESCE(sum(crossed), 0) FROM seen WHERE every = 100 AND key = '{\"user_id\": 5}' AND direction = 'up'")
[ "$crossed" = $((n1 / 100 - n0 / 100)) ] ||
	fail "from $n0 to $n1, $((n1 / 100 - n0 / 100)) multiples of 100 were passed; the crossings announced say $crossed"
sql "$coord" app <<<"SELECT counters.set_thresholds('art_log', 'n', '{}')" >/dev/null
echo "ok - 8 writers of one key, $compactions compactions meanwhile: $(grep -m1 -o 'number of transactions actually processed: [0-9]*' "$base/hot.log"), 0 failed, exact; $crossed multiples of 100 crossed from $n0 to $n1, each announced once"
# a key without the distribution column (posts per blog across users): per-shard partial rows, in log mode
recount_b='SELECT blog_id, count(*)::numeric AS n, sum(rating)::numeric FROM articles GROUP BY 1'
refuse "sharded mode for a key without the distribution column" 'counter "art_blogs" keeps per-shard partial rows: it stays in log mode' <<'SQL'
SELECT counters.create_counter('art_blogs', $$SELECT blog_id, count(*) AS n FROM articles GROUP BY blog_id$$, mode => 'sharded');
SQL
sql "$coord" app <<'SQL' >/dev/null
SELECT counters.create_counter('art_blogs', $$SELECT blog_id, count(*) AS n, sum(rating) AS rating FROM articles
                                              GROUP BY blog_id$$, mode => 'log');
SQL
refuse "thresholds of a key kept as per-shard partial rows" 'counter "art_blogs" keeps per-shard partial rows: it cannot have thresholds' <<'SQL'
SELECT counters.set_thresholds('art_blogs', 'n', '{10}');
SQL
[ "$(sql "$coord" <<<"SELECT count(*) FROM pg_dist_partition p, pg_dist_partition q
                      WHERE q.logicalrelid = 'articles'::regclass AND p.colocationid = q.colocationid
                      AND p.logicalrelid::text IN ('art_blogs_log', 'art_blogs_totals')
                      AND column_to_column_name(p.logicalrelid, p.partkey) = 'counters_anchor'")" = 2 ] ||
	fail "the cross-shard counter's log and totals are not distributed by counters_anchor, co-located"
# (after the shard moves below, Citus has canceled a statement of the next seconds as a distributed deadlock of its own
# transaction -- an INSERT ... SELECT once, a TRUNCATE once, not understood yet (docs/citus.md, "Not done"): such a
# statement is run again, once, and said so; the recounts after it show that the canceled one changed nothing)
sql_again() {
	local input out
	input=$(cat)
	if out=$(sql "$@" <<<"$input" 2>&1); then return 0; fi
	grep -q "distributed deadlock" <<<"$out" || { echo "$out"; return 1; }
	echo "note - canceled by Citus as a distributed deadlock, run again: $(head -c 100 <<<"$input")"
	sql "$@" <<<"$input" >/dev/null
}
step() {
	sql_again "$coord" app
	same dub "$recount_d"
	same art_log "$recount_l"
	same art_slots "$recount_s"
	same art_blogs "$recount_b"
}
step <<<"INSERT INTO articles SELECT 1 + g % 30, 1 + g % 7, g, g % 5 FROM generate_series(945001, 947000) g"
step <<<"UPDATE articles SET blog_id = blog_id % 7 + 1 WHERE id % 4 = 0"
step <<<"DELETE FROM articles WHERE id % 13 = 0"
seq 948001 948100 | awk '{ print ($1 % 25) + 1 "," ($1 % 6) + 1 "," $1 ",2" }' >"$base/rows2.csv"
chmod 644 "$base/rows2.csv"
step <<<"\\copy articles FROM '$base/rows2.csv' WITH (FORMAT csv)"
[ "$(sql "$coord" <<<"SELECT count(DISTINCT counters_anchor) FROM art_blogs_log")" -gt 1 ] ||
	fail "the shards' partial rows are not under anchors of their own"
sql "$w2" app <<<"SELECT counters.compact('art_blogs')" >/dev/null
step </dev/null
sql "$coord" app <<<"SELECT counters.compact('art_blogs')" >/dev/null
[ "$(sql "$coord" <<<"SELECT count(*) FROM art_blogs_log")" = 0 ] || fail "compact() left rows of a cross-shard counter"
step </dev/null
[ "$(sql "$coord" app <<<"SELECT string_agg(key::text || value, ' ') FROM counters.top('art_blogs', 'n', 3)")" = \
  "$(sql "$coord" <<<"SELECT string_agg(jsonb_build_object('blog_id', blog_id)::text || n, ' ')
     FROM (SELECT blog_id, count(*) AS n FROM articles GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3) t")" ] ||
	fail "top() of a cross-shard counter differs from the recount's top 3"
[ "$(sql "$coord" app <<<"SELECT count(*) FROM counters.verify('art_blogs')")" = 0 ] || fail "verify() of a cross-shard counter found differences"
# (a planted difference in one shard's partial row: verify() finds it, rebuild() mends it)
sql "$coord" <<<"UPDATE art_blogs_totals SET n = n + 5 WHERE blog_id = 1" >/dev/null
[ "$(sql "$coord" app <<<"SELECT count(*) FROM counters.verify('art_blogs')")" -gt 0 ] ||
	fail "verify() of a cross-shard counter missed a planted difference"
sql "$coord" app <<<"SELECT counters.rebuild('art_blogs')" >/dev/null 2>&1
step <<<"INSERT INTO articles VALUES (3, 2, 948201, 4)"
echo "ok - a key without the distribution column: per-shard partial rows under each shard's anchor, exact through writes, COPY, compactions, top(), verify(), rebuild()"
cat >"$base/blogs.sql" <<'SQL'
\set u random(1, 30)
\set b random(1, 7)
INSERT INTO articles VALUES (:u, :b, nextval('hot_ids'), 1);
SQL
chmod 644 "$base/blogs.sql"
"$bindir/pgbench" -n -h 127.0.0.1 -p "$coord" -U app -c 8 -j 2 -T 6 -f "$base/blogs.sql" postgres >"$base/blogs.log" 2>&1 &
bench=$!
while kill -0 "$bench" 2>/dev/null; do sql "$coord" app <<<"SELECT counters.compact('art_blogs')" >/dev/null; done
wait "$bench" || { cat "$base/blogs.log"; fail "pgbench over many users failed"; }
grep -q 'number of failed transactions: 0 ' "$base/blogs.log" || { cat "$base/blogs.log"; fail "failed transactions"; }
# (liveness, not speed: the writers must not have waited for one another or for the compactions)
[ "$(grep -o 'number of transactions actually processed: [0-9]*' "$base/blogs.log" | grep -o '[0-9]*$')" -gt 80 ] ||
	{ cat "$base/blogs.log"; fail "the writers of a cross-shard key barely progressed"; }
step </dev/null
echo "ok - 8 writers over 30 users, a cross-shard key, compactions meanwhile: $(grep -m1 -o 'number of transactions actually processed: [0-9]*' "$base/blogs.log"), 0 failed, exact"
# (a text distribution column: anchors are strings)
sql "$coord" app <<'SQL' >/dev/null
CREATE TABLE tagged (owner text NOT NULL, id int NOT NULL, tag text NOT NULL, PRIMARY KEY (owner, id));
SELECT create_distributed_table('tagged', 'owner');
INSERT INTO tagged SELECT 'o' || g % 40, g, 't' || g % 6 FROM generate_series(1, 500) g;
SELECT counters.create_counter('tag_uses', $$SELECT tag, count(*) AS n FROM tagged GROUP BY tag$$, mode => 'log');
INSERT INTO tagged SELECT 'o' || g % 40, g, 't' || g % 9 FROM generate_series(501, 900) g;
INSERT INTO tagged VALUES ('someone', 1, 't1');
UPDATE tagged SET tag = 't0' WHERE id % 10 = 0;
DELETE FROM tagged WHERE id % 17 = 0;
SQL
same tag_uses 'SELECT tag, count(*) FROM tagged GROUP BY 1'
[ "$(sql "$coord" <<<"SELECT count(DISTINCT counters_anchor) FROM tag_uses_log")" -gt 1 ] ||
	fail "a text distribution column's shards wrote under one anchor"
sql "$coord" app <<<"SELECT counters.compact('tag_uses')" >/dev/null
same tag_uses 'SELECT tag, count(*) FROM tagged GROUP BY 1'
echo "ok - a key without a text distribution column: partial rows under string anchors, exact"
# a forged catalog row: another role's counter naming app's log as its own is refused on the workers, not written
sql "$coord" intruder <<'SQL' >/dev/null
CREATE TABLE itab (user_id int NOT NULL, id int NOT NULL);
SELECT create_distributed_table('itab', 'user_id', colocate_with => 'articles');
SELECT counters.create_counter('ilog', $$SELECT user_id, count(*) AS n, sum(id) AS rating FROM itab GROUP BY user_id$$,
                               mode => 'log');
SQL
sql "$coord" intruder <<'SQL' >/dev/null
SELECT format('INSERT INTO counters.counter_replica VALUES (%L, %L, %L, %L, %L, %L, %L)', name, source, target, query,
              owns_target, mode, jsonb_set(options, '{relations,log}', '"public.art_log_log"')) AS forged
  FROM counters.counter_replica WHERE name = 'ilog' \gset
BEGIN;
SET LOCAL citus.multi_shard_modify_mode = 'sequential';
DELETE FROM counters.counter_replica WHERE name = 'ilog';
:forged;
COMMIT;
SQL
before=$(sql "$coord" <<<"SELECT count(*) FROM art_log_log")
out=$(sql "$coord" intruder <<<"INSERT INTO itab VALUES (1, 1)" 2>&1) && fail "a write through a forged catalog row succeeded"
grep -q 'counter "ilog": its definition view is missing on this node' <<<"$out" || fail "unexpected error: $out"
[ "$(sql "$coord" <<<"SELECT count(*) FROM art_log_log")" = "$before" ] || fail "the forged row wrote app's log"
sql "$coord" <<<"DROP TABLE itab CASCADE" >/dev/null
echo "ok - a forged catalog row naming another role's log is refused on the workers: $(grep -m1 ERROR <<<"$out")"

# --- 10. rebalancing: a blocking move and split; a split and a new worker's rebalance under 8 writers
sql "$coord" <<'SQL' >/dev/null
SELECT citus_move_shard_placement(s.shardid, '127.0.0.1', s.nodeport, '127.0.0.1', o.nodeport, shard_transfer_mode => 'block_writes')
  FROM (SELECT shardid, nodeport FROM citus_shards WHERE table_name = 'articles'::regclass ORDER BY shardid LIMIT 1) s,
       LATERAL (SELECT nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0 AND nodeport <> s.nodeport LIMIT 1) o;
SQL
step <<<"INSERT INTO articles SELECT 1 + g % 30, 1 + g % 7, g, 1 FROM generate_series(910001, 912000) g"
sql "$coord" <<'SQL' >/dev/null
SELECT citus_split_shard_by_split_points(s.shardid, ARRAY[((s.shardminvalue::bigint + s.shardmaxvalue::bigint) / 2)::text],
                                         ARRAY[n.nodeid, n.nodeid], 'block_writes')
  FROM (SELECT * FROM pg_dist_shard WHERE logicalrelid = 'articles'::regclass ORDER BY shardid LIMIT 1) s,
       (SELECT p.nodeid FROM pg_dist_placement l JOIN pg_dist_node p USING (groupid)
         WHERE l.shardid = (SELECT min(shardid) FROM pg_dist_shard WHERE logicalrelid = 'articles'::regclass)) n;
SQL
step <<<"INSERT INTO articles SELECT 1 + g % 30, 1 + g % 7, g, 1 FROM generate_series(920001, 922000) g"
echo "ok - a blocking shard move and a split keep the counter exact"
sql "$coord" <<<"CREATE SEQUENCE article_ids START 5000000; GRANT USAGE ON SEQUENCE article_ids TO app" >/dev/null
cat >"$base/insert.sql" <<'SQL'
\set u random(1, 30)
\set b random(1, 7)
INSERT INTO articles VALUES (:u, :b, nextval('article_ids'), 1);
SQL
cat >"$base/move.sql" <<'SQL'
\set u random(1, 30)
UPDATE articles SET blog_id = blog_id % 7 + 1 WHERE user_id = :u AND id % 17 = 1;
SQL
chmod 644 "$base"/*.sql
# under_writers WHAT SQL: SQL run (as the superuser) while 8 pgbench clients insert and move keys and the log, slots and
# partial rows are compacted on every node: no failed transaction, no failed compaction, every counter exact after
under_writers() {
	"$bindir/pgbench" -n -h 127.0.0.1 -p "$coord" -U app -c 8 -j 2 -T 20 -f "$base/insert.sql" -f "$base/move.sql" \
		postgres >"$base/pgbench.log" 2>&1 &
	local bench=$! compactor
	# (SQL starts once the 8 writers are connected)
	for _ in $(seq 1 300); do
		[ "$(sql "$coord" <<<"SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND application_name = 'pgbench'")" -ge 8 ] && break
		sql "$coord" <<<"SELECT pg_sleep(0.1)" >/dev/null
	done
	(while kill -0 "$bench" 2>/dev/null; do
		sql "$coord" app <<<"SELECT counters.compact('art_log'); SELECT counters.compact('art_slots');
SELECT counters.compact('art_blogs')" >/dev/null || exit 1
	done) &
	compactor=$!
	# (the old placements are dropped at once, not by the maintenance daemon during a later step: its deferred drop
	# and drop_counter's DROP TRIGGER on every placement could cancel each other as a distributed deadlock)
	sql "$coord" <<<"$2; CALL citus_cleanup_orphaned_resources()" >/dev/null
	wait "$bench" || { cat "$base/pgbench.log"; fail "pgbench failed"; }
	wait "$compactor" || fail "a compaction during $1 failed"
	grep -q 'number of failed transactions: 0 ' "$base/pgbench.log" || { cat "$base/pgbench.log"; fail "failed transactions"; }
	step </dev/null
	echo "ok - $1 under 8 writers, compactions meanwhile: $(grep -m1 -o 'number of transactions actually processed: [0-9]*' "$base/pgbench.log"), 0 failed, exact"
}
under_writers "a blocking split" "SELECT citus_split_shard_by_split_points(s.shardid,
    ARRAY[((s.shardminvalue::bigint + s.shardmaxvalue::bigint) / 2)::text], ARRAY[n.nodeid, n.nodeid], 'block_writes')
  FROM (SELECT * FROM pg_dist_shard WHERE logicalrelid = 'articles'::regclass ORDER BY shardid DESC LIMIT 1) s,
       (SELECT p.nodeid FROM pg_dist_placement l JOIN pg_dist_node p USING (groupid)
         WHERE l.shardid = (SELECT max(shardid) FROM pg_dist_shard WHERE logicalrelid = 'articles'::regclass)) n"
sql "$coord" <<<"SELECT citus_add_node('127.0.0.1', $w3)" >/dev/null
under_writers "a new worker rebalanced by logical replication" \
	"SELECT citus_rebalance_start(shard_transfer_mode => 'force_logical'); SELECT citus_rebalance_wait()"
[ "$(sql "$coord" <<<"SELECT count(*) FROM citus_shards WHERE table_name = 'articles'::regclass AND nodeport = $w3")" -gt 0 ] ||
	fail "the rebalancer moved no shard to the new worker"
[ "$(sql "$w3" <<<"SELECT count(*) FROM counters.counter_replica WHERE name = 'dub'")" = 1 ] ||
	fail "the new worker has no catalog"
step <<<"INSERT INTO articles SELECT 1 + g % 30, 1 + g % 7, g, 1 FROM generate_series(930001, 932000) g"

# --- 11. drop_counter
sql "$coord" app <<<"SELECT counters.drop_counter('dub'); SELECT counters.drop_counter('ubcache');
SELECT counters.drop_counter('art_log'); SELECT counters.drop_counter('art_slots');
SELECT counters.drop_counter('art_blogs'); SELECT counters.drop_counter('tag_uses')" >/dev/null
[ "$(sql "$coord" <<<"SELECT count(*) FROM pg_class WHERE relname ~ '^art_(log|slots|blogs)'")" = 0 ] ||
	fail "drop_counter left a log, slots or totals table"
left=$(sql "$coord" <<<"SELECT count(*) FROM run_command_on_placements('articles', \$\$SELECT count(*) FROM pg_trigger
  WHERE tgrelid = '%s'::regclass AND tgfoid = 'counters.capture()'::regprocedure AND tgtype & 32 = 0\$\$) WHERE result <> '0'")
[ "$left" = 0 ] || fail "drop_counter left capture triggers on $left placements"
sql "$coord" app <<<"INSERT INTO articles VALUES (1, 1, 1, 1)" >/dev/null
sql_again "$coord" app <<<"TRUNCATE articles"
[ "$(sql "$w1" <<<"SELECT count(*) FROM counters.counter_replica WHERE name = 'dub'")" = 0 ] || fail "the workers keep the dropped counter"
echo "ok - drop_counter: no capture trigger left on any placement but inert TRUNCATE ones; writes and TRUNCATE go on"
echo "citus: all checks passed"
