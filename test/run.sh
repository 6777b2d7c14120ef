#!/usr/bin/env bash
# Run every test suite of counters: build (warnings are errors), install, start a throwaway PostgreSQL cluster
# (pg_virtualenv), then pg_regress, the isolation tests, the TAP tests in test/t (which start clusters of their own),
# the scripted tests in test/scripts and the pgTAP suites. Installs its Debian packages first. Safe to re-run; works
# as root.
#
#   bash test/run.sh                 # everything
#   REGRESS=dml bash test/run.sh    # one pg_regress file (isolation, TAP and pgTAP still run)
set -euo pipefail
# One suite at a time on a machine: they install the extension system-wide.
exec 9>/tmp/counters-suite.lock
flock 9
cd "$(dirname "$0")/.."
PGVER=${PGVER:-15}
bash test/setup.sh
export PATH=/usr/lib/postgresql/$PGVER/bin:$PATH
make -s WERROR=1
make -s install >/dev/null
# pg_regress writes results/ into the tree; the cluster itself runs as postgres.
exec pg_virtualenv -t -v "$PGVER" -o max_connections=200 -o max_prepared_transactions=10 bash test/suites.sh
