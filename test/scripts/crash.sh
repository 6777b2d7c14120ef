#!/usr/bin/env bash
# Counters are exact after a crash. On a cluster of its own, 6 pgbench clients insert, move, flip and delete posts
# through counters in every mode (exact, sharded, log, a counter-cache column) while (1) one backend is killed with
# SIGKILL, which makes the postmaster reset every session and replay WAL, and (2) the server is stopped with
# pg_ctl stop -m immediate. After each restart counters.verify() is empty, and writes after recovery are counted.
set -euo pipefail
BIN=$(pg_config --bindir)
dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" -eq 0 ] && chown postgres "$dir"
cleanup() { as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "crash: FAILED: $*"; tail -20 "$dir/log" 2>/dev/null; exit 1; }
as_pg "$BIN/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
cat >> "$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
fsync = on
synchronous_commit = on
CONF
start() { as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null || fail "server did not start"; }
start
q() { "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres "$@"; }
q >/dev/null <<'SQL'
CREATE EXTENSION counters;
CREATE TABLE blogs (id int PRIMARY KEY, posts bigint NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g FROM generate_series(1, 20) g;
CREATE TABLE posts (id bigserial PRIMARY KEY, user_id int NOT NULL, blog_id int NOT NULL,
                    is_published boolean NOT NULL DEFAULT true, rating int NOT NULL DEFAULT 0);
INSERT INTO posts (user_id, blog_id, rating) SELECT g % 50, 1 + g % 20, g % 7 FROM generate_series(1, 5000) g;
SELECT counters.create_counter('ub', 'SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating FROM posts WHERE is_published GROUP BY user_id, blog_id');
SELECT counters.create_counter('bs', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', mode => 'sharded');
SELECT counters.create_counter('bl', 'SELECT blog_id, sum(rating) AS rating FROM posts GROUP BY blog_id', mode => 'log');
SELECT counters.create_counter('bc', 'SELECT blog_id AS id, count(*) AS posts FROM posts GROUP BY blog_id', target => 'blogs');
SQL
cat > "$dir/w.pgbench" <<'PGB'
\set u random(0, 49)
\set b random(1, 20)
\set r random(0, 9)
BEGIN;
INSERT INTO posts (user_id, blog_id, rating) VALUES (:u, :b, :r);
UPDATE posts SET blog_id = :b, is_published = NOT is_published WHERE id = (SELECT max(id) - :r FROM posts);
DELETE FROM posts WHERE id = (SELECT min(id) + :u FROM posts);
COMMIT;
PGB
load() { # runs pgbench in the background for $1 seconds; its pid in $pid
	"$BIN/pgbench" -n -c 6 -j 2 -T "$1" -h "$dir" -p "$port" -U postgres -f "$dir/w.pgbench" postgres >"$dir/pgbench.out" 2>&1 &
	pid=$!
}
written() { q -c "SELECT last_value FROM posts_id_seq"; }
check() { # label
	local n
	n=$(q -c "SELECT count(*) FROM counters.verify()")
	[ "$n" = 0 ] || { q -c "SELECT * FROM counters.verify() LIMIT 10"; fail "$1: verify lists $n drifted values"; }
	q -c "INSERT INTO posts (user_id, blog_id, rating) SELECT g % 50, 1 + g % 20, 3 FROM generate_series(1, 200) g" >/dev/null
	q -c "UPDATE posts SET blog_id = 1 + blog_id % 20 WHERE id % 11 = 0" >/dev/null
	n=$(q -c "SELECT count(*) FROM counters.verify()")
	[ "$n" = 0 ] || fail "$1: writes after recovery were not counted ($n drifted values)"
	echo "crash: $1: counters exact after recovery, later writes counted"
}
# 1. SIGKILL of one backend in the middle of the load: the postmaster resets all sessions and replays WAL
before=$(written)
load 20
for _ in $(seq 50); do
	victim=$(q -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND state = 'active' LIMIT 1" 2>/dev/null || true)
	[ -n "$victim" ] && break
done
[ -n "$victim" ] || fail "no pgbench backend to kill"
sleep 2  # let the load run before the crash (this orders nothing the checks depend on)
kill -9 "$victim"
wait "$pid" || true
for _ in $(seq 60); do q -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.5; done
grep -q "terminated by signal 9" "$dir/log" || fail "the backend kill did not crash the session"
[ "$(written)" -gt "$before" ] || fail "the load wrote nothing before the crash"
check "after SIGKILL of a backend"
# 2. immediate shutdown of the whole server in the middle of the load
before=$(written)
load 20
sleep 3
as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null
wait "$pid" || true
start
grep -q "database system was interrupted" "$dir/log" || fail "no crash recovery after the immediate stop"
[ "$(written)" -gt "$before" ] || fail "the load wrote nothing before the immediate stop"
check "after pg_ctl stop -m immediate"
q -c "SELECT counters.compact()" >/dev/null
check "after compaction"
echo "crash: ok"
