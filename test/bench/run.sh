#!/usr/bin/env bash
# The benchmark suite (not part of the test run): each workload's throughput or wall time with counters, as a ratio
# to the same workload with no counters and with hand-written PL/pgSQL triggers, measured side by side in one run on
# a throwaway cluster, plus a zero-drift check after every workload.
#
#   bash test/bench/run.sh
#   ROWS=200000 SECONDS_PER_RUN=5 RUNS=1 bash test/bench/run.sh      # a quick look
#
# Settings (environment): ROWS (seeded posts, default 1000000), SECONDS_PER_RUN (pgbench duration, 10), RUNS
# (repetitions, median reported, 3), VARIANTS (inner.sh), SYNC ("off on"), BULK_TIMEOUT, OLTP (0: the bulk statements
# only), FEATURES (1: then the
# feature benchmarks, each against its own baseline: parent.sh, sink.sh, windows.sh, transactions.sh, memory.sh, extremes.sh, derived.sh, citus.sh where Citus
# is installed; 0: the main suite only; only: the feature benchmarks only). Results: $BENCH_OUT (default test/bench/out, not tracked): results.md and
# results.tsv of the main suite, <name>.md of each feature benchmark; the run stops with an error at the first drift
# or failed statement.
set -euo pipefail
cd "$(dirname "$0")/../.."
# (every cluster here is a throwaway one of the run's own; a connection of the caller's shell would be taken for one)
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGPASSWORD PGSERVICE
source test/lib.sh
suite_lock
build_install
export BENCH_OUT=${BENCH_OUT:-$PWD/test/bench/out}
mkdir -p "$BENCH_OUT"
# fsync on: pg_virtualenv turns it off by default, which would make "sync on" CPU-bound as well.
[ "${FEATURES:-1}" = only ] || pg_virtualenv -t -v "$PGVER" -o fsync=on -o shared_buffers=1GB -o max_wal_size=8GB -o checkpoint_timeout=1h \
	-o max_connections=50 -o work_mem=64MB -o maintenance_work_mem=512MB bash test/bench/inner.sh
[ "${FEATURES:-1}" != 0 ] || exit 0
# (each starts a cluster of its own; the lock taken above is theirs too)
export COUNTERS_SUITE_LOCKED=$$
for bench in parent sink windows transactions memory extremes derived citus; do
	echo "== test/bench/$bench.sh"
	bash "test/bench/$bench.sh" 2> >(tee "$BENCH_OUT/$bench.err" >&2) |
		grep -v -e '^Creating new PostgreSQL cluster' -e '^Dropping cluster' | tee "$BENCH_OUT/$bench.md"
	if grep -q DRIFT "$BENCH_OUT/$bench.err"; then
		echo "bench: $bench drifted (see $BENCH_OUT/$bench.err)" >&2
		exit 1
	fi
done
