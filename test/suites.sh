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
	make -s installcheck ${REGRESS:+REGRESS="setup $REGRESS"} ISOLATION= TAP_TESTS= ||
		{ cat regression.diffs 2>/dev/null; return 1; }
}
isolation() {
	make -s installcheck REGRESS= TAP_TESTS= || { cat output_iso/regression.diffs 2>/dev/null; return 1; }
}
# The TAP tests (test/t, PostgreSQL::Test::Cluster) start clusters of their own: they need PATH and pg_config, not
# this suite's cluster. initdb refuses to run as root, so as root they run as postgres, from a copy of what
# `make installcheck` reads (the Makefile, the control file and test/t) in a directory postgres owns; their logs are
# copied back to tmp_check/log when one fails.
tap() {
	local args=(installcheck REGRESS= ISOLATION= PG_CONFIG="$(command -v pg_config)")
	local dir rc=0
	if [ "$(id -u)" -ne 0 ]; then
		make -s "${args[@]}" && return
		tap_failures
		return 1
	fi
	dir=$(mktemp -d)
	mkdir "$dir/test" && cp -r Makefile counters.control "$dir" && cp -r test/t "$dir/test" && chown -R postgres "$dir" &&
		runuser -u postgres -- env PATH="$PATH" make -s -C "$dir" "${args[@]}" || rc=$?
	if [ $rc -ne 0 ] && [ -d "$dir/tmp_check/log" ]; then
		rm -rf tmp_check/log && mkdir -p tmp_check && cp -r "$dir/tmp_check/log" tmp_check/
	fi
	rm -rf "$dir"
	[ $rc -eq 0 ] || tap_failures
	return $rc
}
# The end of the log of each failed TAP test (the server logs are beside it).
tap_failures() {
	local log
	for log in $(grep -lE 'not ok|Looks like your test' tmp_check/log/regress_log_* 2>/dev/null); do
		echo "--- $log (last lines)"
		tail -n 40 "$log"
	done
	echo "TAP logs: $PWD/tmp_check/log"
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
suite "TAP" tap
suite "scripts" scripts
# pgTAP last: its summary is the closing line a CI reader looks for, preceded by ours.
suite "pgTAP" pgtap
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
