# Sourced by test/scripts/citus.sh and test/bench/citus.sh: start CITUS_NODES (default 3) throwaway PostgreSQL
# clusters with Citus preloaded (free ports, as postgres when run as root, removed on exit unless CITUS_KEEP is set),
# the first one the coordinator: sets bindir, base, ports, coord, w1, w2, w3, and defines fail, as_pg and sql.
# The caller has checked that citus.so is installed.
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
	local dir
	for dir in "$base"/n*; do
		[ ! -f "$dir/postmaster.pid" ] || as_pg "$bindir/pg_ctl" -D "$dir" -m immediate stop >/dev/null 2>&1 || true
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
for n in $(seq 1 "${CITUS_NODES:-3}"); do
	dir=$base/n$n
	as_pg "$bindir/initdb" -D "$dir" -A trust -U postgres >"$base/initdb-$n.log" 2>&1 ||
		{ cat "$base/initdb-$n.log"; fail "initdb"; }
	cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$base'
shared_preload_libraries = 'citus'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
max_worker_processes = 16
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
citus.shard_count = 4
citus.shard_replication_factor = 1
lc_messages = 'C'
citus.log_distributed_deadlock_detection = on
log_lock_waits = on
${CITUS_CONF:-}
CONF
	# (releases that limit logical decoding's output plugins -- 15.20 does -- must allow Citus's: its non-blocking
	# shard splits decode through it)
	if "$bindir/postgres" --describe-config 2>/dev/null | grep '^output_plugin_libraries' >/dev/null; then
		echo "output_plugin_libraries = 'pgoutput, test_decoding, citus'" >>"$dir/postgresql.conf"
	fi
	# (another test may take a free port first: then another one)
	for attempt in 1 2 3; do
		port=$(free_port)
		echo "port = $port" >>"$dir/postgresql.conf"
		if as_pg "$bindir/pg_ctl" -D "$dir" -l "$base/n$n.log" -w start >/dev/null; then
			ports+=("$port")
			break
		fi
		grep -q 'Address already in use' "$base/n$n.log" && [ "$attempt" -lt 3 ] || { cat "$base/n$n.log"; fail "pg_ctl start"; }
	done
done
coord=${ports[0]}
w1=${ports[1]}
w2=${ports[2]}
w3=${ports[3]:-}

# sql PORT [USER]: run stdin on a node, stop at the first error
sql() { psql -X -q -At -h 127.0.0.1 -p "$1" -U "${2:-postgres}" -d postgres -v ON_ERROR_STOP=1; }
