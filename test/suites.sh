#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST, PGPORT, PGUSER, PGPASSWORD point at a throwaway cluster); see test/run.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0
failed=0
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
	make -s installcheck ${REGRESS:+REGRESS="$REGRESS"} ISOLATION= || { cat regression.diffs 2>/dev/null; return 1; }
}
isolation() {
	make -s installcheck REGRESS= || { cat output_iso/regression.diffs 2>/dev/null; return 1; }
}
pgtap() {
	dropdb --if-exists counters_tap && createdb counters_tap &&
		psql -X -q -d counters_tap -c 'CREATE EXTENSION pgtap' &&
		pg_prove -d counters_tap test/pgtap/*.sql
}
scripts() {
	local ok=0
	for s in test/scripts/*.sh; do
		[ -e "$s" ] || continue
		echo "--- $s"
		bash "$s" || { echo "--- $s FAILED"; ok=1; }
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
