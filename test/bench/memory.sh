#!/usr/bin/env bash
# Backend memory of one statement that touches 1,000,000 distinct counter keys, for several values of
# counters.statement_memory (the deltas a statement holds before applying a sorted batch). Reports the backend's peak
# resident memory (VmHWM; it includes shared buffers the backend touched, so the no-counter run is the baseline)
# and the statement's time, with and without a counter. Not part of the tests.
#
#   bash test/bench/memory.sh            # KEYS=1000000 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
PGVER=${PGVER:-15}
if [ -z "${PGHOST:-}" ]; then
	bash test/setup.sh
	export PATH=/usr/lib/postgresql/$PGVER/bin:$PATH
	make -s && make -s install >/dev/null
	exec pg_virtualenv -t -v "$PGVER" -o shared_buffers=128MB -o max_wal_size=8GB bash "$0"
fi
KEYS=${KEYS:-1000000}
db=counters_memory
dropdb --if-exists "$db" >/dev/null 2>&1
createdb "$db"
psql -X -q -d "$db" -c "CREATE EXTENSION counters" -c "CREATE TABLE events (id bigint, k bigint, v int)"
run() { # label statement_memory with_counter
	psql -X -q -d "$db" -c "TRUNCATE events" >/dev/null
	if [ "$3" = yes ]; then
		psql -X -q -d "$db" -c "SELECT counters.create_counter('per_key', 'SELECT k, count(*) AS n, sum(v) AS v FROM events GROUP BY k')" >/dev/null
	fi
	# one session: note its pid, run the statement, read its peak memory before it exits
	out=$(psql -X -q -At -d "$db" <<SQL
SET counters.statement_memory = '$2';
SELECT pg_backend_pid() \gset
\timing on
INSERT INTO events SELECT g, g, 1 FROM generate_series(1, $KEYS) g;
\timing off
\setenv BACKEND_PID :pg_backend_pid
\! awk '/VmHWM/ {print "peak_kb", \$2}' /proc/\$BACKEND_PID/status
SQL
)
	ms=$(awk '/^Time:/ {print $2}' <<<"$out")
	peak=$(awk '/^peak_kb/ {print $2}' <<<"$out")
	drift=0
	if [ "$3" = yes ]; then
		drift=$(psql -X -q -At -d "$db" -c "SELECT count(*) FROM counters.verify('per_key')")
		psql -X -q -d "$db" -c "SELECT counters.drop_counter('per_key')" >/dev/null
	fi
	printf '| %s | %s | %s | %d | %s |\n' "$1" "$2" "$ms" "$((peak / 1024))" "$drift"
}
echo "| run | counters.statement_memory | INSERT of $KEYS rows, $KEYS keys (ms) | backend peak RSS (MB) | drift |"
echo "|---|---|---|---|---|"
run "no counter" 64MB no
for m in 8MB 64MB 256MB 1GB; do
	run "counter" "$m" yes
done
