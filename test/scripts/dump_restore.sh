#!/usr/bin/env bash
# Dump and restore with the real pg_dump / pg_restore: a database with counters in every mode (exact with its own
# table, a counter-cache target, sharded, log), bounds, thresholds and retention is dumped in plain and custom
# format and restored into fresh databases. In each restored database: the same counters are declared (catalog
# compared with the original), every counter equals its definition (counters.verify), the source's capture triggers
# exist exactly once, bounds still refuse, and writes after the restore are counted. Runs in the suite's cluster.
set -euo pipefail
src=counters_dump_src
dir=$(mktemp -d)
dbs=("$src" counters_dump_plain counters_dump_custom)
cleanup() { rm -rf "$dir"; for d in "${dbs[@]}"; do dropdb --if-exists "$d" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
for d in "${dbs[@]}"; do dropdb --if-exists "$d" >/dev/null 2>&1; done
q() { local db=$1; shift; psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
fail() { echo "dump_restore: FAILED: $*"; exit 1; }

createdb "$src"
q "$src" >/dev/null <<'SQL'
CREATE EXTENSION counters;
CREATE TABLE blogs (id int PRIMARY KEY, post_count bigint NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g FROM generate_series(1, 5) g;
CREATE TABLE posts (id serial PRIMARY KEY, user_id int, blog_id int NOT NULL REFERENCES blogs,
                    is_published boolean NOT NULL DEFAULT true, is_deleted boolean NOT NULL DEFAULT false,
                    rating int NOT NULL DEFAULT 0, created_at timestamp NOT NULL DEFAULT localtimestamp);
INSERT INTO posts (user_id, blog_id, is_published, rating, created_at)
SELECT nullif(g % 7, 0), 1 + g % 5, g % 3 <> 0, g % 11, localtimestamp - g * interval '1 hour' FROM generate_series(1, 500) g;
CREATE FUNCTION public.on_crossing(counter text, key jsonb, column_name text, old numeric, new numeric,
                                   threshold numeric, direction text) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT counters.create_counter('user_blog', $$SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating
	FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id$$);
SELECT counters.create_counter('blog_cache', $$SELECT blog_id AS id, count(*) AS post_count FROM posts GROUP BY blog_id$$,
                               target => 'blogs');
SELECT counters.create_counter('blog_sharded', $$SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id$$,
                               mode => 'sharded');
SELECT counters.create_counter('daily_log', $$SELECT date_trunc('day', created_at) AS day, count(*) AS n, sum(rating) AS r
	FROM posts GROUP BY date_trunc('day', created_at)$$, mode => 'log');
SELECT counters.set_bounds('user_blog', 'posts', max => 1000);
SELECT counters.set_thresholds('user_blog', 'rating', '{100}', 'public.on_crossing'::regproc);
SELECT counters.set_retention('daily_log', 'day', '30 days');
-- writes after declaring, some left pending in the log and the slots
INSERT INTO posts (user_id, blog_id, rating) VALUES (1, 2, 50), (NULL, 3, 7);
UPDATE posts SET blog_id = 4 WHERE id % 10 = 0;
DELETE FROM posts WHERE id % 17 = 0;
SQL
[ "$(q "$src" -c "SELECT count(*) FROM counters.verify()")" = 0 ] || fail "the source database drifted before dumping"
catalog="SELECT name, mode, definition, options - 'last_rebuild', created_target FROM counters.counters ORDER BY name"
values="SELECT 'ub', count(*), sum(posts), sum(rating) FROM user_blog UNION ALL SELECT 'bc', count(*), sum(post_count), 0 FROM blogs
        UNION ALL SELECT 'bs', count(*), sum(n), 0 FROM blog_sharded UNION ALL SELECT 'dl', count(*), sum(n), sum(r) FROM daily_log"
expected_catalog=$(q "$src" -c "$catalog")
expected_values=$(q "$src" -c "$values")

pg_dump -Fp -f "$dir/plain.sql" "$src"
pg_dump -Fc -f "$dir/custom.dump" "$src"
createdb counters_dump_plain
psql -X -q -v ON_ERROR_STOP=1 -d counters_dump_plain -f "$dir/plain.sql" >/dev/null 2>"$dir/plain.err" ||
	{ cat "$dir/plain.err"; fail "restoring the plain dump"; }
createdb counters_dump_custom
pg_restore --exit-on-error -d counters_dump_custom "$dir/custom.dump" 2>"$dir/custom.err" ||
	{ cat "$dir/custom.err"; fail "pg_restore of the custom dump"; }

for db in counters_dump_plain counters_dump_custom; do
	[ "$(q "$db" -c "$catalog")" = "$expected_catalog" ] || { q "$db" -c "$catalog"; fail "$db: catalog differs"; }
	[ "$(q "$db" -c "$values")" = "$expected_values" ] || fail "$db: counter values differ from the original"
	[ "$(q "$db" -c "SELECT count(*) FROM counters.verify()")" = 0 ] || fail "$db: verify lists drift after restore"
	triggers=$(q "$db" -c "SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger WHERE tgrelid = 'posts'::regclass AND NOT tgisinternal")
	[ "$triggers" = "counters_delete,counters_insert,counters_truncate,counters_update" ] ||
		fail "$db: capture triggers on posts are '$triggers'"
	# writes after the restore are counted, bounds and thresholds still apply
	q "$db" <<'SQL' >/dev/null
INSERT INTO posts (user_id, blog_id, rating) SELECT g % 4, 1 + g % 5, 40 FROM generate_series(1, 60) g;
UPDATE posts SET is_deleted = true WHERE id % 9 = 0;
UPDATE posts SET blog_id = 1 WHERE id % 13 = 0;
DELETE FROM posts WHERE id % 19 = 0;
SELECT counters.compact();
SQL
	[ "$(q "$db" -c "SELECT count(*) FROM counters.verify()")" = 0 ] || fail "$db: writes after the restore were not counted"
	q "$db" -c "SELECT counters.set_bounds('user_blog', 'posts', max => 1)" >/dev/null 2>&1 &&
		fail "$db: bounds that current values break were accepted"
	q "$db" -c "SELECT counters.set_bounds('user_blog', 'posts', max => 30)" >/dev/null
	if q "$db" -c "INSERT INTO posts (user_id, blog_id) SELECT 1, 1 FROM generate_series(1, 40)" >/dev/null 2>"$dir/b.err"; then
		fail "$db: bounds did not refuse after restore"
	fi
	grep -q 'above its maximum 30' "$dir/b.err" || { cat "$dir/b.err"; fail "$db: unexpected error"; }
	echo "dump_restore: $db ok"
done
echo "dump_restore: ok"
