#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST, PGPORT, PGUSER, PGPASSWORD point at a throwaway cluster); see test/run.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0
failed=0

# The application role the suites run as: not a superuser; it may log in (with the cluster's password) and create
# databases (as Django's and Rails' test runners do), and installs the extension itself (it is trusted). pg_regress
# and the isolation tester connect as the superuser, and their first test (setup) makes every later one run as
# counters_app; pgTAP, Django and Rails connect as counters_app. Tests that need the superuser say so.
psql -X -q -v ON_ERROR_STOP=1 -d postgres -v password="$PGPASSWORD" <<'SQL'
SELECT format('CREATE ROLE counters_app') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'counters_app') \gexec
ALTER ROLE counters_app LOGIN CREATEDB PASSWORD :'password';
SQL
as_app() { PGUSER=counters_app "$@"; }
suite() {
	local name=$1
	shift
	echo "=== $name"
	if "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "=== $name FAILED"
	fi
}

regress() {
	make -s installcheck ${REGRESS:+REGRESS="setup $REGRESS"} ISOLATION= || { cat regression.diffs 2>/dev/null; return 1; }
}
isolation() {
	make -s installcheck REGRESS= || { cat output_iso/regression.diffs 2>/dev/null; return 1; }
}
pgtap() {
	dropdb --if-exists counters_tap && createdb -O counters_app counters_tap &&
		psql -X -q -d counters_tap -c 'CREATE EXTENSION pgtap' &&
		as_app pg_prove -d counters_tap test/pgtap/*.sql
}
scripts() {
	local ok=0
	for s in test/scripts/*.sh; do
		[ -e "$s" ] || continue
		echo "--- $s"
		case $s in
		# ORMs, as an application connects
		*/django.sh | */rails.sh) as_app bash "$s" || { echo "--- $s FAILED"; ok=1; } ;;
		*) bash "$s" || { echo "--- $s FAILED"; ok=1; } ;;
		esac
	done
	return $ok
}

suite "pg_regress" regress
suite "isolation" isolation
suite "scripts" scripts
# pgTAP last: its summary is the closing line a CI reader looks for, preceded by ours.
suite "pgTAP" pgtap
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
