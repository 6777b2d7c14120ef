#!/usr/bin/env bash
# Dump and restore with the real pg_dump / pg_restore. A database with counters in every mode (exact with its own
# table, a counter-cache target `blogs`, sharded, log with an expression key date_trunc('day', created_at)), bounds,
# thresholds and retention, and pending log and slot rows, is dumped and restored into fresh databases (created from
# template0: the extension is available but not created) along every path a backup takes:
#   plain format through psql, plain format through psql --single-transaction, custom format through pg_restore,
#   pg_restore -j 2, pg_restore --section=pre-data / data / post-data, and pg_restore --schema-only followed by
#   pg_restore --data-only --disable-triggers.
# In each restored database: the same counters are declared (counters.counters equals the original), the counter
# tables (and their log and slot rows) hold the original data, counters.verify() is empty and a hand-written recount
# of each counter agrees, the capture triggers on the source exist exactly once each, and INSERT, UPDATE moving rows
# between keys and DELETE after the restore are counted (verify and recount again); bounds still refuse.
# Every path is checked and reported; the script fails at the end if any path failed. Runs in the suite's cluster.
# Known failures (extension bug, 2026-11-22): on the parallel and split paths the capture triggers on posts are
# gone after the restore and later writes are not counted. counters._on_ddl_end, run after every ALTER TABLE, drops
# capture triggers from every table that has no row in counters.counter; the catalog is an extension configuration
# table whose rows are restored with the data, so an ALTER TABLE (a primary key, a foreign key, --disable-triggers)
# that runs after CREATE TRIGGER and before the catalog's data removes them.
set -euo pipefail
src=counters_dump_src
paths=(plain plain_1 custom parallel sections split)
dir=$(mktemp -d)
dbs=("$src")
for p in "${paths[@]}"; do dbs+=("counters_dump_$p"); done
cleanup() { rm -rf "$dir"; for d in "${dbs[@]}"; do dropdb --if-exists "$d" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap 'rm -rf "$dir"' EXIT
for d in "${dbs[@]}"; do dropdb --if-exists "$d" >/dev/null 2>&1; done
q() { local db=$1; shift; psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
die() { echo "dump_restore: FAILED: $*"; exit 1; }
failed=()

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
SELECT counters.set_retention('daily_log', 'day', '30 days');  -- the data is at most 22 days old: nothing expires
-- writes after declaring, some left pending in the log and the slots
INSERT INTO posts (user_id, blog_id, rating) VALUES (1, 2, 50), (NULL, 3, 7);
UPDATE posts SET blog_id = 4 WHERE id % 10 = 0;
DELETE FROM posts WHERE id % 17 = 0;
-- Tables without counters, sized like a real database's: one large table keeps one pg_restore -j 2 worker busy
-- while the other loads posts, creates its triggers, then loads a small table and adds its primary key, all
-- before loading the (one-page) counters catalog. pg_restore orders data by size (relpages, set by VACUUM).
CREATE TABLE page_views (id int PRIMARY KEY, path text NOT NULL);
INSERT INTO page_views SELECT g, '/posts/' || g || repeat('/x', 20) FROM generate_series(1, 100000) g;
CREATE TABLE tags (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO tags SELECT g, 'tag ' || g FROM generate_series(1, 300) g;
SQL
q "$src" -c "VACUUM ANALYZE"

catalog="SELECT name, mode, definition, options - 'last_rebuild', created_target FROM counters.counters ORDER BY name"
# Everything the counters store, raw tables included (pending log rows, slot rows), in a comparable order.
stored=(-c "SELECT * FROM user_blog ORDER BY user_id, blog_id" -c "SELECT * FROM blogs ORDER BY id"
	-c "SELECT * FROM blog_sharded_totals ORDER BY blog_id" -c "SELECT * FROM blog_sharded_slots ORDER BY 1, 2, 3"
	-c "SELECT * FROM daily_log_totals ORDER BY day" -c "SELECT * FROM daily_log_log ORDER BY 1, 2, 3")
# A recount of every counter by hand from posts, compared both ways with what the counter shows; rows = differences.
pair() { # label, recount query, stored query
	printf "SELECT '%s: recount has ' || d::text FROM ((%s) EXCEPT ALL (%s)) d
	        UNION ALL SELECT '%s: counter has ' || d::text FROM ((%s) EXCEPT ALL (%s)) d" "$1" "$2" "$3" "$1" "$3" "$2"
}
recount="$(pair user_blog "SELECT user_id, blog_id, count(*), sum(rating) FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1, 2" \
	"SELECT user_id, blog_id, posts, rating FROM user_blog")
	UNION ALL $(pair blog_cache "SELECT b.id, count(p.id) FROM blogs b LEFT JOIN posts p ON p.blog_id = b.id GROUP BY b.id" \
	"SELECT id, post_count FROM blogs")
	UNION ALL $(pair blog_sharded "SELECT blog_id, count(*) FROM posts GROUP BY 1" "SELECT blog_id, n FROM blog_sharded WHERE n <> 0")
	UNION ALL $(pair daily_log "SELECT date_trunc('day', created_at), count(*), sum(rating) FROM posts GROUP BY 1" \
	"SELECT day, n, r FROM daily_log WHERE n <> 0 OR r <> 0")"
triggers="SELECT string_agg(tgname || '=' || tgfoid::regproc || ':' || tgenabled::text, ',' ORDER BY tgname) FROM pg_trigger
          WHERE tgrelid = 'posts'::regclass AND NOT tgisinternal"
capture_elsewhere="SELECT string_agg(tgrelid::regclass::text, ',') FROM pg_trigger
                   WHERE tgfoid = 'counters.capture()'::regprocedure AND tgrelid <> 'posts'::regclass"
expected_triggers=counters_begin=counters.capture:O,counters_delete=counters.capture:O,counters_insert=counters.capture:O
expected_triggers+=,counters_truncate=counters.capture:O,counters_update=counters.capture:O

[ "$(q "$src" -c "SELECT count(*) FROM counters.verify()")" = 0 ] || die "the source database drifted before dumping"
[ -z "$(q "$src" -c "$recount")" ] || { q "$src" -c "$recount"; die "the recount differs in the source database"; }
out=$(q "$src" -c "$triggers")
[ "$out" = "$expected_triggers" ] || die "the source database has triggers on posts '$out', expected '$expected_triggers'"
[ "$(q "$src" -c "SELECT count(*) FROM daily_log_log")" -gt 0 ] && [ "$(q "$src" -c "SELECT count(*) FROM blog_sharded_slots")" -gt 0 ] ||
	die "the source database has no pending log or slot rows to carry over"
expected_catalog=$(q "$src" -c "$catalog")
expected_stored=$(q "$src" "${stored[@]}")

pg_dump -Fp -f "$dir/plain.sql" "$src"
pg_dump -Fc -f "$dir/custom.dump" "$src"

restore() { # path, database
	case $1 in
	plain) psql -X -q -v ON_ERROR_STOP=1 -d "$2" -f "$dir/plain.sql" ;;
	plain_1) psql -X -q -v ON_ERROR_STOP=1 --single-transaction -d "$2" -f "$dir/plain.sql" ;;
	custom) pg_restore --exit-on-error -d "$2" "$dir/custom.dump" ;;
	parallel) pg_restore --exit-on-error -j 2 -d "$2" "$dir/custom.dump" ;;
	sections) for s in pre-data data post-data; do pg_restore --exit-on-error --section=$s -d "$2" "$dir/custom.dump" || return 1; done ;;
	split) pg_restore --exit-on-error --schema-only -d "$2" "$dir/custom.dump" &&
		pg_restore --exit-on-error --data-only --disable-triggers -d "$2" "$dir/custom.dump" ;;
	esac
}

check() { # path, database; returns non-zero at the first failed check, with the reason in $why
	local db=$2 out
	restore "$1" "$db" >"$dir/$1.out" 2>"$dir/$1.err" || { why="restoring failed: $(tail -5 "$dir/$1.err")"; return 1; }
	why="counters.counters differs from the original"
	[ "$(q "$db" -c "$catalog")" = "$expected_catalog" ] || return 1
	why="the counter tables (totals, log and slot rows, blogs) differ from the original"
	[ "$(q "$db" "${stored[@]}")" = "$expected_stored" ] || return 1
	why="counters.verify() lists drift right after the restore"
	[ "$(q "$db" -c "SELECT count(*) FROM counters.verify()")" = 0 ] || return 1
	out=$(q "$db" -c "$recount")
	why="the recount differs right after the restore: $(head -3 <<<"$out")"
	[ -z "$out" ] || return 1
	out=$(q "$db" -c "$triggers")
	why="capture triggers on posts are '$out', expected each exactly once: '$expected_triggers'"
	[ "$out" = "$expected_triggers" ] || return 1
	out=$(q "$db" -c "$capture_elsewhere")
	why="capture triggers on other tables: $out"
	[ -z "$out" ] || return 1
	# writes after the restore: inserts, rows moving between keys of every counter, soft and hard deletes
	q "$db" >/dev/null 2>"$dir/w.err" <<-'SQL' || { why="writes after the restore failed: $(cat "$dir/w.err")"; return 1; }
	INSERT INTO posts (user_id, blog_id, rating) SELECT g % 4, 1 + g % 5, 40 FROM generate_series(1, 60) g;
	UPDATE posts SET is_deleted = true WHERE id % 9 = 0;
	UPDATE posts SET blog_id = 1 + blog_id % 5, user_id = coalesce(user_id, 0) + 1 WHERE id % 13 = 0;
	UPDATE posts SET created_at = created_at - interval '1 day', rating = rating + 1 WHERE id % 7 = 0;
	DELETE FROM posts WHERE id % 19 = 0;
	SQL
	why="counters.verify() lists drift after writes following the restore (the writes were not counted)"
	[ "$(q "$db" -c "SELECT count(*) FROM counters.verify()")" = 0 ] || return 1
	out=$(q "$db" -c "$recount")
	why="the recount differs after writes following the restore: $(head -3 <<<"$out")"
	[ -z "$out" ] || return 1
	q "$db" -c "SELECT counters.compact()" >/dev/null 2>"$dir/c.err" || { why="compaction failed: $(cat "$dir/c.err")"; return 1; }
	out=$(q "$db" -c "$recount")
	why="the recount differs after compaction: $(head -3 <<<"$out")"
	[ -z "$out" ] || return 1
	why="bounds that current values break were accepted after the restore"
	! q "$db" -c "SELECT counters.set_bounds('user_blog', 'posts', max => 1)" >/dev/null 2>&1 || return 1
	why="setting a bound that holds failed"
	q "$db" -c "SELECT counters.set_bounds('user_blog', 'posts', max => 30)" >/dev/null || return 1
	why="bounds did not refuse a write after the restore"
	! q "$db" -c "INSERT INTO posts (user_id, blog_id) SELECT 1, 1 FROM generate_series(1, 40)" >/dev/null 2>"$dir/b.err" || return 1
	why="unexpected error instead of the bound: $(cat "$dir/b.err")"
	grep -q 'above its maximum 30' "$dir/b.err" || return 1
}

for p in "${paths[@]}"; do
	db=counters_dump_$p
	createdb -T template0 "$db"
	[ "$(q "$db" -c "SELECT count(*) FROM pg_extension WHERE extname = 'counters'")" = 0 ] &&
		[ "$(q "$db" -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'counters'")" = 1 ] ||
		die "$db: should have the extension available and not created"
	if check "$p" "$db"; then
		echo "dump_restore: $p: ok"
	else
		echo "dump_restore: $p: FAILED: $why"
		failed+=("$p")
	fi
done
[ ${#failed[@]} -eq 0 ] || die "restore paths that failed: ${failed[*]}"
echo "dump_restore: ok"
