#!/usr/bin/env bash
# Citus: until distributed sources are supported, counters refuses every Citus table loudly, and never counts nothing
# or counts wrong (docs/citus.md). Needs Citus built for the PostgreSQL under test ($(pg_config --pkglibdir)/citus.so;
# docs/citus.md says how to build 13.2.2 for Debian's 15); without it the script says so and exits at once. It starts
# a coordinator and two workers of its own (throwaway clusters on free ports, as postgres when run as root, removed at
# the end), creates the citus and counters extensions there (counters must be installed first: make install), and
# checks, each expected error by its SQLSTATE and message:
#   1. local tables with counters keep counting on a Citus coordinator (compared with a recount after every step);
#   2. create_counter over a distributed, a reference or a Citus local table, as source or as target, and on a worker,
#      fails with 0A000 naming the counter, also for a role that is not a superuser;
#   3. distributing a counted table (create_distributed_table with and without citus.enable_unsafe_triggers, with
#      and without rows; create_reference_table; citus_add_local_table_to_metadata) fails with Citus's error or
#      0A000 and leaves the table local and counted;
#      a counted table distributed anyway (the event triggers disabled): every INSERT, UPDATE, DELETE, COPY and
#      TRUNCATE fails, naming the table, and the repair of docs/citus.md (drop_counter, then the triggers left on
#      the shards) makes it writable again;
#   4. a counter table distributed after its declaration: every later write of the source fails with 0A000;
#   5. ALTER TABLE of a counted local table, and of a distributed table, finish (statement_timeout) without touching
#      Citus's shards, or the capture triggers of a Citus shell and placement, and the counters still count.
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
bindir=$(pg_config --bindir)
fail() {
	echo "citus: FAILED: $*"
	exit 1
}
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

base=$(mktemp -d /tmp/counters-citus.XXXXXX)
chmod 755 "$base"
[ "$(id -u)" -ne 0 ] || chown postgres "$base"
ports=()
cleanup() {
	local rc=$?
	for port in "${ports[@]}"; do
		[ ! -d "$base/n$port" ] || as_pg "$bindir/pg_ctl" -D "$base/n$port" -m immediate stop >/dev/null 2>&1 || true
	done
	if [ -n "${CITUS_KEEP:-}" ]; then echo "citus: kept $base"; else rm -rf "$base"; fi
	exit $rc
}
trap cleanup EXIT
# a port nobody listens on, and not one of ours
free_port() {
	local p
	for p in $(shuf -i 20000-60000 -n 200); do
		[[ " ${ports[*]} " == *" $p "* ]] && continue
		(echo >/dev/tcp/127.0.0.1/"$p") 2>/dev/null && continue
		echo "$p"
		return
	done
	fail "no free port"
}
for n in 1 2 3; do
	port=$(free_port)
	ports+=("$port")
	as_pg "$bindir/initdb" -D "$base/n$port" -A trust -U postgres >"$base/initdb-$port.log" 2>&1 ||
		{ cat "$base/initdb-$port.log"; fail "initdb"; }
	cat >>"$base/n$port/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$base'
shared_preload_libraries = 'citus'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
max_worker_processes = 16
citus.shard_count = 4
citus.shard_replication_factor = 1
lc_messages = 'C'
${CITUS_CONF:-}
CONF
	as_pg "$bindir/pg_ctl" -D "$base/n$port" -l "$base/n$port.log" -w start >/dev/null ||
		{ cat "$base/n$port.log"; fail "pg_ctl start"; }
done
coord=${ports[0]}
w1=${ports[1]}
w2=${ports[2]}

# sql PORT [USER]: run stdin on a node, stop at the first error
sql() { psql -X -q -At -h 127.0.0.1 -p "$1" -U "${2:-postgres}" -d postgres -v ON_ERROR_STOP=1; }
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

# --- 2. declaring over Citus tables
sql "$coord" <<'SQL' >/dev/null
CREATE TABLE dposts (user_id int NOT NULL, blog_id int NOT NULL, id bigint NOT NULL, PRIMARY KEY (user_id, id));
SELECT create_distributed_table('dposts', 'user_id');
INSERT INTO dposts SELECT 1 + g % 20, 1 + g % 5, g FROM generate_series(1, 200) g;
CREATE TABLE tags (id int PRIMARY KEY, category text NOT NULL);
SELECT create_reference_table('tags');
INSERT INTO tags SELECT g, 'c' || g % 3 FROM generate_series(1, 30) g;
CREATE TABLE notes (id int PRIMARY KEY, kind int NOT NULL);
SELECT citus_add_local_table_to_metadata('notes');
CREATE TABLE dtarget (blog_id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
SELECT create_distributed_table('dtarget', 'blog_id');
CREATE TABLE app_posts (user_id int NOT NULL, blog_id int NOT NULL, id bigint NOT NULL, PRIMARY KEY (user_id, id));
ALTER TABLE app_posts OWNER TO app;
SELECT create_distributed_table('app_posts', 'user_id');
SQL
msg='counter "[a-z0-9_]+": counters does not support Citus tables yet'
expect_error "create_counter on a distributed table" 0A000 "$msg" "$coord" <<'SQL'
SELECT counters.create_counter('d1', $$SELECT user_id, count(*) AS n FROM dposts GROUP BY user_id$$);
SQL
expect_error "create_counter on a distributed table (citus.enable_unsafe_triggers on)" 0A000 "$msg" "$coord" <<'SQL'
SET citus.enable_unsafe_triggers = on;
SELECT counters.create_counter('d1', $$SELECT user_id, count(*) AS n FROM dposts GROUP BY user_id$$);
SQL
expect_error "create_counter on a reference table" 0A000 "$msg" "$coord" <<'SQL'
SELECT counters.create_counter('t1', $$SELECT category, count(*) AS n FROM tags GROUP BY category$$);
SQL
expect_error "create_counter on a Citus local table" 0A000 "$msg" "$coord" <<'SQL'
SELECT counters.create_counter('n1', $$SELECT kind, count(*) AS n FROM notes GROUP BY kind$$);
SQL
expect_error "create_counter into a distributed target" 0A000 "$msg" "$coord" <<'SQL'
SELECT counters.create_counter('b1', $$SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id$$, target => 'dtarget');
SQL
expect_error "create_counter by a role that is not a superuser" 0A000 "$msg" "$coord" app <<'SQL'
SELECT counters.create_counter('a1', $$SELECT user_id, count(*) AS n FROM app_posts GROUP BY user_id$$);
SQL
shard=$(sql "$w1" <<<"SET citus.override_table_visibility = off;
SELECT relname FROM pg_class WHERE relname ~ '^dposts_[0-9]+$' LIMIT 1")
expect_error "create_counter on a worker" 0A000 "$msg" "$w1" <<SQL
SELECT counters.create_counter('w1', \$\$SELECT user_id, count(*) AS n FROM $shard GROUP BY user_id\$\$);
SQL
left=$(sql "$coord" <<<"SELECT count(*) FROM counters.counter")
[ "$left" = 2 ] || fail "refused declarations left catalog rows ($left counters, expected 2)"
left=$(sql "$coord" <<<"SELECT count(*) FROM pg_trigger WHERE tgfoid = 'counters.capture()'::regprocedure
                        AND tgrelid NOT IN ('posts'::regclass)")
[ "$left" = 0 ] || fail "refused declarations left $left capture triggers"

# --- 3. distributing a counted table
expect_error "create_distributed_table of a counted table (Citus's own refusal)" '[0-9A-Z]{5}' \
	'because it has triggers|counters cannot count it' "$coord" <<<"SELECT create_distributed_table('posts', 'user_id')"
expect_error "create_distributed_table of a counted table with rows (citus.enable_unsafe_triggers on)" 0A000 \
	'table public.posts is distributed by Citus; counters cannot count it yet' "$coord" <<'SQL'
SET citus.enable_unsafe_triggers = on;
SELECT create_distributed_table('posts', 'user_id');
SQL
sql "$coord" <<'SQL' >/dev/null
CREATE TABLE eposts (user_id int NOT NULL, blog_id int NOT NULL, id bigint NOT NULL, PRIMARY KEY (user_id, id));
SELECT counters.create_counter('ebp', $$SELECT blog_id, count(*) AS n FROM eposts GROUP BY blog_id$$);
SQL
expect_error "create_distributed_table of an empty counted table (citus.enable_unsafe_triggers on)" 0A000 \
	'table public.eposts is distributed by Citus; counters cannot count it yet' "$coord" <<'SQL'
SET citus.enable_unsafe_triggers = on;
SELECT create_distributed_table('eposts', 'user_id');
SQL
expect_error "create_reference_table of a counted table" 0A000 \
	'table public.eposts is (distributed by Citus|a reference table of Citus); counters cannot count it yet' \
	"$coord" <<'SQL'
SET citus.enable_unsafe_triggers = on;
SELECT create_reference_table('eposts');
SQL
expect_error "citus_add_local_table_to_metadata of a counted table" 0A000 \
	'table public.eposts is (a Citus local table|managed by Citus); counters cannot count it yet' "$coord" <<'SQL'
SELECT citus_add_local_table_to_metadata('eposts');
SQL
[ "$(sql "$coord" <<<"SELECT count(*) FROM pg_dist_partition WHERE logicalrelid IN ('posts'::regclass, 'eposts'::regclass)")" = 0 ] ||
	fail "a counted table became a Citus table"
sql "$coord" <<'SQL' >/dev/null
INSERT INTO posts SELECT 1 + g % 11, 1 + g % 4, g, 2 FROM generate_series(2001, 2300) g;
DELETE FROM posts WHERE id % 13 = 0;
INSERT INTO eposts SELECT g % 5, g % 3, g FROM generate_series(1, 50) g;
SQL
same ubp "$recount_posts"
same bp "$recount_blogs"
same ebp 'SELECT blog_id, count(*)::numeric AS n FROM eposts GROUP BY 1'

# --- 3b. a counted table distributed anyway (the event triggers of counters disabled on every node, as an earlier
# version left them): every write fails on the shards, naming the table, and TRUNCATE on the coordinator's shell
for port in "${ports[@]}"; do sql "$port" <<<'ALTER EVENT TRIGGER counters_ddl_end DISABLE'; done
sql "$coord" <<'SQL' >/dev/null
CREATE TABLE fposts (user_id int NOT NULL, blog_id int NOT NULL, id bigint NOT NULL, PRIMARY KEY (user_id, id));
SELECT counters.create_counter('fbp', $$SELECT blog_id, count(*) AS n FROM fposts GROUP BY blog_id$$);
CREATE TABLE rposts (id int PRIMARY KEY, blog_id int NOT NULL);
SELECT counters.create_counter('rbp', $$SELECT blog_id, count(*) AS n FROM rposts GROUP BY blog_id$$);
SET citus.enable_unsafe_triggers = on;
SELECT create_distributed_table('fposts', 'user_id');
SELECT create_reference_table('rposts');
CREATE TABLE gposts (user_id int NOT NULL, id bigint NOT NULL, PRIMARY KEY (user_id, id));
SELECT counters.create_counter('gbp', $$SELECT user_id, count(*) AS n FROM gposts GROUP BY user_id$$);
SELECT create_distributed_table('gposts', 'user_id');
-- (its catalog row gone, as after a schema-only restore: a shell with capture triggers and no counter)
DELETE FROM counters.counter WHERE name = 'gbp';
SQL
for port in "${ports[@]}"; do sql "$port" <<<'ALTER EVENT TRIGGER counters_ddl_end ENABLE'; done
fmsg='table public.fposts is distributed by Citus; counters cannot count it yet'
expect_error "INSERT into a distributed counted table" 0A000 "$fmsg" "$coord" <<<'INSERT INTO fposts VALUES (1, 1, 1)'
# (Citus reports an error of a COPY into a shard, which INSERT ... SELECT and COPY use, as XX000, keeping the message)
expect_error "INSERT ... SELECT into a distributed counted table" '(0A000|XX000)' "$fmsg" "$coord" <<'SQL'
INSERT INTO fposts SELECT g % 10, g % 3, g FROM generate_series(1, 100) g;
SQL
expect_error "UPDATE of a distributed counted table" 0A000 "$fmsg" "$coord" <<<'UPDATE fposts SET blog_id = 2'
expect_error "DELETE from a distributed counted table" 0A000 "$fmsg" "$coord" <<<'DELETE FROM fposts'
expect_error "COPY into a distributed counted table" '(0A000|XX000)' "$fmsg" "$coord" <<'SQL'
COPY fposts FROM PROGRAM 'seq 1 50 | sed "s/.*/&,1,&/"' WITH (FORMAT csv);
SQL
expect_error "TRUNCATE of a distributed counted table" 0A000 "$fmsg" "$coord" <<<'TRUNCATE fposts'
expect_error "INSERT into a counted reference table" 0A000 \
	'table public.rposts is a reference table of Citus; counters cannot count it yet' "$coord" <<<'INSERT INTO rposts VALUES (1, 1)'
[ "$(sql "$coord" <<<'SELECT count(*) FROM fposts')" = 0 ] || fail "a write to fposts went through"
same fbp 'SELECT blog_id, count(*)::numeric AS n FROM fposts GROUP BY 1'
# the way out (docs/citus.md): drop the counter, then the TRUNCATE triggers Citus left on the shards
sql "$coord" <<'SQL' >/dev/null
BEGIN;
SET LOCAL citus.enable_unsafe_triggers = on;
SET LOCAL citus.multi_shard_modify_mode = 'sequential';
SELECT counters.drop_counter('fbp');
COMMIT;
INSERT INTO fposts VALUES (1, 1, 1);
SQL
expect_error "TRUNCATE after dropping the counter, the shards' TRUNCATE triggers left" '(0A000|XX000)' "$fmsg" "$coord" \
	<<<'TRUNCATE fposts'
sql "$coord" <<'SQL' >/dev/null
SELECT run_command_on_placements('fposts',
  $cmd$DO $do$ DECLARE r regclass := '%s'; t name; BEGIN
      FOR t IN SELECT tgname FROM pg_trigger WHERE tgrelid = r AND tgfoid = 'counters.capture()'::regprocedure
      LOOP EXECUTE format('DROP TRIGGER %%I ON %%s', t, r); END LOOP; END $do$$cmd$);
TRUNCATE fposts;
INSERT INTO fposts VALUES (2, 1, 2);
SQL
echo "ok - fposts usable after drop_counter and dropping the shards' leftover triggers"

# --- 4. a counter table distributed after its declaration
sql "$coord" <<'SQL' >/dev/null
CREATE TABLE cposts (user_id int NOT NULL, id bigint NOT NULL, PRIMARY KEY (user_id, id));
INSERT INTO cposts SELECT g % 10, g FROM generate_series(1, 100) g;
SELECT counters.create_counter('cup', $$SELECT user_id, count(*) AS n FROM cposts GROUP BY user_id$$);
INSERT INTO cposts VALUES (1, 1001);
SELECT create_distributed_table('cup', 'user_id');
SQL
expect_error "INSERT into a source whose counter table was distributed" 0A000 "$msg" "$coord" <<'SQL'
INSERT INTO cposts VALUES (1, 1002);
SQL
expect_error "DELETE from a source whose counter table was distributed (a new session)" 0A000 "$msg" "$coord" <<'SQL'
DELETE FROM cposts WHERE id = 1001;
SQL
same cup 'SELECT user_id, count(*)::numeric AS n FROM cposts GROUP BY 1'

# --- 5. ALTER TABLE finishes, and the counters still count
# (the coordinator's placement of rposts, and the shell of gposts, carry capture triggers and no counter: the clean-up
# of leftover triggers after ALTER TABLE of a counted table must leave Citus's shards and shells alone)
placement_triggers="SET citus.override_table_visibility = off;
SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relname ~ '^rposts_[0-9]+$' AND t.tgfoid = 'counters.capture()'::regprocedure"
before=$(sql "$coord" <<<"$placement_triggers")
[ "$before" -gt 0 ] || fail "the coordinator has no placement of rposts with capture triggers"
shell_triggers="SELECT count(*) FROM pg_trigger WHERE tgrelid = 'gposts'::regclass
                   AND tgfoid = 'counters.capture()'::regprocedure"
[ "$(sql "$coord" <<<"$shell_triggers")" = 5 ] || fail "gposts does not have the 5 capture triggers"
sql "$coord" <<'SQL' >/dev/null
SET statement_timeout = '60s';
ALTER TABLE posts ADD COLUMN title text;
ALTER TABLE dposts ADD COLUMN title text;
ALTER TABLE tags ADD COLUMN note text;
ALTER TABLE posts DROP COLUMN title;
INSERT INTO posts SELECT 1 + g % 3, 1 + g % 2, g, 5 FROM generate_series(3001, 3100) g;
UPDATE posts SET rating = rating + 1 WHERE id % 5 = 0;
INSERT INTO dposts VALUES (1, 1, 100001, 'x');
SQL
echo "ok - ALTER TABLE of counted local and distributed tables finished"
[ "$(sql "$coord" <<<"$placement_triggers")" = "$before" ] || fail "ALTER TABLE dropped triggers of a Citus placement"
[ "$(sql "$coord" <<<"$shell_triggers")" = 5 ] || fail "ALTER TABLE dropped triggers of a Citus shell table"
same ubp "$recount_posts"
same bp "$recount_blogs"
n=$(sql "$w1" <<<"SET citus.override_table_visibility = off; SELECT count(*) FROM pg_class WHERE relname ~ '^dposts_[0-9]+$'")
[ "$n" -gt 0 ] || fail "the shards of dposts are gone from worker $w1"
[ "$(sql "$coord" <<<'SELECT count(*) FROM dposts')" = 201 ] || fail "dposts lost rows"
echo "ok - Citus's shards untouched"
echo "citus: all checks passed"
