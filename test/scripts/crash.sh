#!/usr/bin/env bash
# Counters are exact after a crash. On a cluster of its own (so that crashing it leaves the suite's cluster alone),
# 6 pgbench clients insert posts, move them between keys of every counter (blog, author, publish flag, soft delete,
# hour bucket) and delete them, through counters in every mode (exact, sharded, log with an expression key, a
# counter-cache column of `blogs`), with an occasional counters.compact() in the mix, while
#   1. one backend is killed with SIGKILL, which makes the postmaster end every session and replay WAL, and
#   2. the server is stopped with pg_ctl stop -m immediate and started again (crash recovery).
# After each recovery: counters.verify() is empty, a hand-written recount of every counter agrees, and inserts,
# updates moving rows between keys and deletes made after recovery are counted (verify and recount again).
set -euo pipefail
BIN=$(pg_config --bindir)
dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" -eq 0 ] && chown postgres "$dir"
cleanup() {
	[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null
	as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "crash: FAILED: $*"; echo "--- server log (last lines)"; tail -20 "$dir/log" 2>/dev/null; exit 1; }
as_pg "$BIN/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
cat >> "$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
fsync = on
synchronous_commit = on
restart_after_crash = on
deadlock_timeout = '20ms'  # transactions moving rows between keys deadlock now and then; pgbench retries them
CONF
start() { as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 120 start >/dev/null || fail "the server did not start"; }
start
q() { "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres "$@"; }
q >/dev/null <<'SQL'
CREATE EXTENSION counters;
CREATE TABLE blogs (id int PRIMARY KEY, posts bigint NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g FROM generate_series(1, 20) g;
CREATE TABLE posts (id bigserial PRIMARY KEY, user_id int NOT NULL, blog_id int NOT NULL REFERENCES blogs,
                    is_published boolean NOT NULL DEFAULT true, is_deleted boolean NOT NULL DEFAULT false,
                    rating int NOT NULL DEFAULT 0, created_at timestamp NOT NULL DEFAULT localtimestamp);
INSERT INTO posts (user_id, blog_id, rating, created_at)
SELECT g % 50, 1 + g % 20, g % 7, localtimestamp - g * interval '1 minute' FROM generate_series(1, 5000) g;
SELECT counters.create_counter('ub', $$SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating
	FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id$$);
SELECT counters.create_counter('bs', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', mode => 'sharded');
SELECT counters.create_counter('hl', $$SELECT date_trunc('hour', created_at) AS hour, count(*) AS n, sum(rating) AS rating
	FROM posts GROUP BY date_trunc('hour', created_at)$$, mode => 'log');
SELECT counters.create_counter('bc', 'SELECT blog_id AS id, count(*) AS posts FROM posts WHERE NOT is_deleted GROUP BY blog_id',
                               target => 'blogs');
SQL
cat > "$dir/write.pgbench" <<'PGB'
\set u random(0, 49)
\set b random(1, 20)
\set r random(0, 9)
BEGIN;
INSERT INTO posts (user_id, blog_id, rating, created_at) VALUES (:u, :b, :r, localtimestamp - :r * interval '1 hour');
UPDATE posts SET blog_id = :b, user_id = :u, is_published = NOT is_published WHERE id = (SELECT max(id) - :r FROM posts);
UPDATE posts SET is_deleted = NOT is_deleted, created_at = created_at - interval '1 hour', rating = rating + 1
 WHERE id = (SELECT max(id) - 3 * :r FROM posts);
DELETE FROM posts WHERE id = (SELECT min(id) + :u FROM posts);
COMMIT;
PGB
echo 'SELECT counters.compact();' > "$dir/compact.pgbench"

# A recount of every counter by hand from posts, compared both ways with what the counter shows; rows = differences.
pair() { # label, recount query, stored query
	printf "SELECT '%s: recount has ' || d::text FROM ((%s) EXCEPT ALL (%s)) d
	        UNION ALL SELECT '%s: counter has ' || d::text FROM ((%s) EXCEPT ALL (%s)) d" "$1" "$2" "$3" "$1" "$3" "$2"
}
recount="$(pair ub "SELECT user_id, blog_id, count(*), sum(rating) FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1, 2" \
	"SELECT user_id, blog_id, posts, rating FROM ub")
	UNION ALL $(pair bs "SELECT blog_id, count(*) FROM posts GROUP BY 1" "SELECT blog_id, posts FROM bs WHERE posts <> 0")
	UNION ALL $(pair hl "SELECT date_trunc('hour', created_at), count(*), sum(rating) FROM posts GROUP BY 1" \
	"SELECT hour, n, rating FROM hl WHERE n <> 0 OR rating <> 0")
	UNION ALL $(pair bc "SELECT b.id, count(p.id) FROM blogs b LEFT JOIN posts p ON p.blog_id = b.id AND NOT p.is_deleted GROUP BY b.id" \
	"SELECT id, posts FROM blogs")"
exact() { # label: verify empty and the recount agrees
	local n out
	n=$(q -c "SELECT count(*) FROM counters.verify()")
	[ "$n" = 0 ] || { q -c "SELECT * FROM counters.verify() LIMIT 10"; fail "$1: counters.verify() lists $n drifted values"; }
	out=$(q -c "$recount")
	[ -z "$out" ] || { head -10 <<<"$out"; fail "$1: the recount differs from the counters"; }
}
exact "before any crash"

load() { # runs pgbench in the background for up to $1 seconds; its pid in $pid
	"$BIN/pgbench" -n -c 6 -j 2 -T "$1" --max-tries=10 -h "$dir" -p "$port" -U postgres \
		-f "$dir/write.pgbench@20" -f "$dir/compact.pgbench@1" postgres >"$dir/pgbench.out" 2>&1 &
	pid=$!
}
newest() { q -c "SELECT coalesce(max(id), 0) FROM posts"; }
in_log() { # offset, text: the server log written since offset has the text (no pipe: grep -q closing it early
	# would fail the pipeline under pipefail)
	tail -c +$(($1 + 1)) "$dir/log" >"$dir/log.part"
	grep -q "$2" "$dir/log.part"
}
after_recovery() { # label, newest post before the load: recovered, the load had committed writes, exact, later writes counted
	local survived=$(($(newest) - $2))
	[ "$survived" -gt 0 ] || fail "$1: the load committed nothing before the crash, so the crash tested nothing"
	exact "$1"
	q >/dev/null <<-'SQL' || fail "$1: writes after recovery failed"
	INSERT INTO posts (user_id, blog_id, rating) SELECT g % 50, 1 + g % 20, 3 FROM generate_series(1, 200) g;
	UPDATE posts SET blog_id = 1 + blog_id % 20, user_id = (user_id + 1) % 50 WHERE id % 11 = 0;
	UPDATE posts SET is_deleted = NOT is_deleted, created_at = created_at - interval '2 hours' WHERE id % 13 = 0;
	DELETE FROM posts WHERE id % 17 = 0;
	SQL
	exact "$1, then writes after recovery"
	echo "crash: $1 (newest post id +$survived): counters exact after recovery, later writes counted"
}

# 1. SIGKILL of one backend in the middle of the load: the postmaster ends every session and replays WAL.
before=$(newest)
offset=$(stat -c %s "$dir/log")
load 30
victim=
for _ in $(seq 100); do  # wait for a pgbench session to be running a statement (polls; orders nothing)
	victim=$(q -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND state <> 'idle' LIMIT 1" 2>/dev/null || true)
	[ -n "$victim" ] && break
	sleep 0.1
done
[ -n "$victim" ] || fail "no pgbench backend to kill"
sleep 3  # only lets the load run before the crash; no check depends on it
victim=$(q -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND state <> 'idle' LIMIT 1")
[ -n "$victim" ] || fail "the load ended before the crash: $(cat "$dir/pgbench.out")"
kill -9 "$victim"
wait "$pid" || true
pid=
# The postmaster restarts by itself after replaying WAL; wait until it accepts connections again.
for _ in $(seq 600); do q -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.1; done
q -c "SELECT 1" >/dev/null 2>&1 || fail "the server did not come back after the backend was killed"
in_log "$offset" "was terminated by signal 9" || fail "the server log does not show the killed backend"
in_log "$offset" "all server processes terminated; reinitializing" || fail "the kill did not reset the cluster"
in_log "$offset" "redo starts at" || fail "no WAL replay after the backend was killed"
after_recovery "after SIGKILL of a backend" "$before"

# 2. Immediate shutdown of the whole server in the middle of the load, then a start that replays WAL.
before=$(newest)
offset=$(stat -c %s "$dir/log")
load 30
sleep 3  # only lets the load run before the crash; no check depends on it
[ -n "$(q -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' LIMIT 1")" ] ||
	fail "the load ended before the immediate stop: $(cat "$dir/pgbench.out")"
as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null
wait "$pid" || true
pid=
start
in_log "$offset" "database system was interrupted" || fail "no crash recovery after the immediate stop"
in_log "$offset" "redo starts at" || fail "no WAL replay after the immediate stop"
after_recovery "after pg_ctl stop -m immediate" "$before"

q -c "SELECT counters.compact()" >/dev/null
exact "after a final compaction"
echo "crash: ok"
