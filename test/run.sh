#!/usr/bin/env bash
# Run every test suite of counters: build (warnings are errors), install, start a throwaway PostgreSQL cluster
# (pg_virtualenv), then pg_regress, the isolation tests, the TAP tests in test/t (which start clusters of their own),
# the scripted tests in test/scripts and the pgTAP suites. Installs its Debian packages first. Safe to re-run; works
# as root.
#
#   bash test/run.sh                 # everything, on Debian's PostgreSQL 15
#   bash test/run.sh --all-versions  # then PostgreSQL 17 and 18 too (what CI runs): see below
#   REGRESS=dml bash test/run.sh    # one pg_regress file (isolation, TAP and pgTAP still run)
#
# --all-versions: once 15 has run, PostgreSQL 17 and 18 are built from Debian's source packages (test/pgbuild.sh;
# cached in /var/cache/counters-pg, rebuilt when Debian's version changes), every suite runs against each
# (test/matrix.sh), and the major upgrades are tested (test/upgrade.sh: pg_upgrade from 15 to 17 and to 18, and a
# blue/green move by logical replication from 15 to 18). It prints one table: a row per version, a column per suite.
set -euo pipefail
# One suite at a time on a machine: they install the extension system-wide. The lock is this script's alone: every
# command it starts runs with descriptor 9 closed (9>&-), so that a server a suite starts does not hold it when the
# run is interrupted (a CI timeout, Ctrl-C) and leaves every later run waiting; the servers stop when their runner
# exits (pg_virtualenv and test/matrix.sh on every exit path, the TAP harness at its end).
exec 9>/tmp/counters-suite.lock
flock 9
cd "$(dirname "$0")/.."
all_versions=0
[ "${1:-}" != --all-versions ] || all_versions=1
PGVER=${PGVER:-15}
bash test/setup.sh 9>&-
export PATH=/usr/lib/postgresql/$PGVER/bin:$PATH
make -s WERROR=1 9>&-
make -s install >/dev/null 9>&-
# pg_regress writes results/ into the tree; the cluster itself runs as postgres.
suites() { pg_virtualenv -t -v "$PGVER" -o max_connections=200 -o max_prepared_transactions=10 bash test/suites.sh 9>&-; }
if [ $all_versions -eq 0 ]; then
	suites
	exit
fi

# --all-versions: 15's results go where test/matrix.sh finds them (a directory per version), and it runs the others.
work=$(mktemp -d /tmp/counters-versions.XXXXXX)
chmod 755 "$work"
minor=$(pg_config --version | awk '{print $2}')
mkdir -p "$work/$minor"
: >"$work/$minor/results"
printf 'build\tpass\t\n' >>"$work/$minor/results"
start=$SECONDS
status=0
(export SUITES_RESULTS=$work/$minor/results && suites) || status=1
echo "$((SECONDS - start))" >"$work/$minor/seconds"
configs=$(bash test/pgbuild.sh 17 18 9>&-) || status=1
# (15 has run: the matrix reads its results; the lock stays held, so Debian's 15 is not installed into meanwhile)
# shellcheck disable=SC2086
MATRIX_DIR=$work bash test/matrix.sh "$(command -v pg_config)" $configs 9>&- || status=1
# shellcheck disable=SC2086
bash test/upgrade.sh "$(command -v pg_config)" $configs 9>&- || status=1
[ $status -ne 0 ] || rm -rf "$work"
exit $status
