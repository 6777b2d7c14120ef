#!/usr/bin/env bash
# The benchmark suite (not part of the test run): each workload's throughput or wall time with counters, as a ratio
# to the same workload with no counters and with hand-written PL/pgSQL triggers, measured side by side in one run on
# a throwaway cluster, plus a zero-drift check after every workload.
#
#   bash test/bench/run.sh
#   ROWS=200000 SECONDS_PER_RUN=5 RUNS=1 bash test/bench/run.sh      # a quick look
#
# Settings (environment): ROWS (seeded posts, default 1000000), SECONDS_PER_RUN (pgbench duration, 10), RUNS
# (repetitions, median reported, 3), VARIANTS (default "none plpgsql_row plpgsql_stmt exact log sharded"), SYNC ("off on").
# Results: test/bench/results.md (a Markdown table), raw numbers in test/bench/results.tsv.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/lib.sh
suite_lock
build_install
# fsync on: pg_virtualenv turns it off by default, which would make "sync on" CPU-bound as well.
exec pg_virtualenv -t -v "$PGVER" -o fsync=on -o shared_buffers=1GB -o max_wal_size=8GB -o checkpoint_timeout=1h \
	-o max_connections=50 -o work_mem=64MB -o maintenance_work_mem=512MB bash test/bench/inner.sh
