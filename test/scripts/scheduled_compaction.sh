#!/usr/bin/env bash
# Scheduled compaction of log-mode counters, on a cluster of its own (both paths need shared_preload_libraries):
#  1. the built-in background worker compacts the databases in counters.compact_databases;
#  2. pg_cron running SELECT counters.compact() compacts another database;
#  3. in a database neither touches, the log keeps growing and the counters stay exact;
#  4. the worker connects as the bootstrap superuser: a trigger that a role that is not a superuser put on its own
#     counter table, and that tries to make it a superuser, runs as that role (restricted) when the worker compacts.
# Polls with a deadline (the worker runs every second, pg_cron every minute); exits non-zero on any failure.
set -euo pipefail
BIN=$(pg_config --bindir)
dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" -eq 0 ] && chown postgres "$dir"
cleanup() { as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
as_pg "$BIN/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
cat >> "$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'counters, pg_cron'
counters.compact_databases = 'counters_worker'
counters.compact_interval = 1
cron.database_name = 'counters_cron'
cron.use_background_workers = on
max_worker_processes = 16
CONF
as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null || { cat "$dir/log"; exit 1; }
q() { local db=$1; shift; "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d "$db" "$@"; }

setup_db() { # db
	q postgres -c "CREATE DATABASE $1"
	q "$1" -c "CREATE EXTENSION counters" \
		-c "CREATE TABLE likes (id bigserial PRIMARY KEY, post_id int NOT NULL)" \
		-c "SELECT counters.create_counter('post_likes', 'SELECT post_id, count(*) AS likes FROM likes GROUP BY post_id', mode => 'log')" >/dev/null
	q "$1" -c "INSERT INTO likes (post_id) SELECT 1 + g % 5 FROM generate_series(1, 1000) g"
	q "$1" -c "INSERT INTO likes (post_id) VALUES (1)"
	q "$1" -c "DELETE FROM likes WHERE id % 10 = 0"
}
check_exact() { # db
	local wrong
	wrong=$(q "$1" -c "SELECT count(*) FROM counters.verify()")
	[ "$wrong" = 0 ] || { echo "$1: counters.verify() reports $wrong wrong values"; return 1; }
	wrong=$(q "$1" -c "SELECT count(*) FROM ((SELECT post_id, count(*) FROM likes GROUP BY 1 EXCEPT SELECT * FROM post_likes)
	                    UNION ALL (SELECT * FROM post_likes EXCEPT SELECT post_id, count(*) FROM likes GROUP BY 1)) d")
	[ "$wrong" = 0 ] || { echo "$1: $wrong counter rows differ from a recount"; return 1; }
}
wait_empty_log() { # db seconds [log table]
	local deadline=$((SECONDS + $2)) n
	while n=$(q "$1" -c "SELECT count(*) FROM ${3:-post_likes_log}") && [ "$n" != 0 ]; do
		[ $SECONDS -lt $deadline ] || { echo "$1: log not compacted within $2 s"; return 1; }
		q "$1" -c "SELECT pg_sleep(0.5)" >/dev/null
	done
	[ "$n" = 0 ]
}

failed=0
setup_db counters_worker
q counters_worker >/dev/null <<'SQL'
CREATE ROLE counters_mallory;
GRANT CREATE ON SCHEMA public TO counters_mallory;
SET ROLE counters_mallory;
CREATE TABLE m_likes (id int PRIMARY KEY, post_id int NOT NULL);
CREATE TABLE m_audit (who name, superuser boolean);
CREATE FUNCTION m_attack() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.m_audit SELECT current_user, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
	BEGIN
		EXECUTE 'ALTER ROLE counters_mallory SUPERUSER';
	EXCEPTION WHEN OTHERS THEN
		NULL;
	END;
	RETURN NULL;
END $$;
SELECT counters.create_counter('m_likes_n', 'SELECT post_id, count(*) AS n FROM m_likes GROUP BY post_id', mode => 'log');
CREATE TRIGGER attack AFTER INSERT OR UPDATE ON m_likes_n_totals FOR EACH ROW EXECUTE FUNCTION m_attack();
INSERT INTO m_likes SELECT g, g % 3 FROM generate_series(1, 30) g;
SQL
setup_db counters_cron
q counters_cron -c "CREATE EXTENSION pg_cron" -c "SELECT cron.schedule('counters-compact', '* * * * *', 'SELECT counters.compact()')" >/dev/null
setup_db counters_idle

if wait_empty_log counters_worker 30 && check_exact counters_worker &&
	[ "$(q counters_worker -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'counters compaction worker'")" = 1 ]; then
	echo "ok - background worker compacted counters_worker and the counters are exact"
else
	echo "not ok - background worker"; failed=1
fi
if wait_empty_log counters_worker 30 m_likes_n_log &&
	[ "$(q counters_worker -c "SELECT string_agg(DISTINCT who || ':' || superuser, ',') FROM m_audit")" = counters_mallory:false ] &&
	[ "$(q counters_worker -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'counters_mallory'")" = f ]; then
	echo "ok - the worker ran a counter table's trigger as its owner, who did not become a superuser"
else
	echo "not ok - the worker ran a counter table's trigger with other rights:" \
		"$(q counters_worker -c "SELECT string_agg(DISTINCT who || ':' || superuser, ',') FROM m_audit")"; failed=1
fi
if wait_empty_log counters_cron 90 && check_exact counters_cron &&
	[ "$(q counters_cron -c "SELECT count(*) FROM cron.job_run_details WHERE status = 'succeeded'")" -ge 1 ]; then
	echo "ok - pg_cron compacted counters_cron and the counters are exact"
else
	echo "not ok - pg_cron"; failed=1
fi
if [ "$(q counters_idle -c "SELECT count(*) FROM post_likes_log")" -gt 0 ] && check_exact counters_idle; then
	echo "ok - without compaction the log grows and the counters stay exact"
else
	echo "not ok - uncompacted database"; failed=1
fi
[ $failed -eq 0 ] || { tail -30 "$dir/log"; exit 1; }
