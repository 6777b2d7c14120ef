#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST, PGPORT, PGUSER, PGPASSWORD point at a throwaway cluster); see test/run.sh, and
# test/matrix.sh, which runs it in a cluster of each PostgreSQL version it tests. For the matrix:
#   SUITES_ONLY      the suites to run (default: "regress isolation tap scripts pgtap");
#   SUITES_SKIP      names of test/scripts/*.sh (without .sh) not to run here, reported as skipped;
#   SUITES_SKIP_WHY  why (one phrase);
#   SUITES_RESULTS   a file each suite and each script appends "name<TAB>pass|fail|skip<TAB>note" to.
# A script that exits with status 77 was skipped; one that passes and prints lines "skip - <why>" (or
# "<name>: skip: <why>") skipped a part. The note says what and why.
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0
failed=0
record() { [ -z "${SUITES_RESULTS:-}" ] || printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >>"$SUITES_RESULTS"; }

# The application role the suites run as: not a superuser; it may log in (with the cluster's password) and create
# databases (as Django's and Rails' test runners do), and installs the extension itself (it is trusted). pg_regress
# and the isolation tester connect as the superuser, and their first test (setup) makes every later one run as
# counters_app; pgTAP, Django and Rails connect as counters_app. Tests that need the superuser say so.
psql -X -q -v ON_ERROR_STOP=1 -d postgres -v password="$PGPASSWORD" <<'SQL'
SELECT format('CREATE ROLE counters_app') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'counters_app') \gexec
ALTER ROLE counters_app LOGIN CREATEDB PASSWORD :'password';
SQL
as_app() { PGUSER=counters_app "$@"; }
suite() { # name function: runs the function, which may say what failed, or what it skipped, in $note
	local name=$1
	shift
	echo "=== $name"
	note=
	if "$@"; then
		passed=$((passed + 1))
		record "$name" pass "$note"
	else
		failed=$((failed + 1))
		echo "=== $name FAILED"
		record "$name" fail "$note"
	fi
}
# the tests a regression.diffs names
failed_tests() { sed -n 's|^diff .* [^ ]*/results/\([^/ ]*\)\.out$|\1|p' "$1" 2>/dev/null | paste -sd ' ' -; }

regress() {
	make -s installcheck ${REGRESS:+REGRESS="setup $REGRESS"} ISOLATION= TAP_TESTS= ||
		{ cat regression.diffs 2>/dev/null; note=$(failed_tests regression.diffs); return 1; }
}
isolation() {
	make -s installcheck REGRESS= TAP_TESTS= ||
		{ cat output_iso/regression.diffs 2>/dev/null; note=$(failed_tests output_iso/regression.diffs); return 1; }
}
# The TAP tests (test/t, PostgreSQL::Test::Cluster) start clusters of their own: they need PATH and pg_config, not
# this suite's cluster. initdb refuses to run as root, so as root they run as postgres, from a copy of what
# `make installcheck` reads (the Makefile, the control file and test/t) in a directory postgres owns; their logs are
# copied back to tmp_check/log when one fails.
tap() {
	local args=(installcheck REGRESS= ISOLATION= PG_CONFIG="$(command -v pg_config)")
	local dir rc=0
	if [ "$(id -u)" -ne 0 ]; then
		make -s "${args[@]}" && { tap_skipped tmp_check; return; }
		tap_failures
		return 1
	fi
	dir=$(mktemp -d)
	mkdir "$dir/test" && cp -r Makefile counters.control "$dir" && cp -r test/t "$dir/test" && chown -R postgres "$dir" &&
		runuser -u postgres -- env PATH="$PATH" make -s -C "$dir" "${args[@]}" || rc=$?
	if [ $rc -ne 0 ] && [ -d "$dir/tmp_check/log" ]; then
		rm -rf tmp_check/log && mkdir -p tmp_check && cp -r "$dir/tmp_check/log" tmp_check/
	fi
	[ $rc -ne 0 ] || tap_skipped "$dir/tmp_check"
	rm -rf "$dir"
	[ $rc -eq 0 ] || tap_failures
	return $rc
}
# What the TAP tests skipped (their "ok N # skip why" lines), in $note.
tap_skipped() {
	local why
	why=$(sed -n 's/^\(\[[^]]*\]([^)]*) \)\{0,1\}ok [0-9]* # skip //p' "$1"/log/regress_log_* 2>/dev/null | sort -u |
		paste -sd ';' -)
	note=${why:+skipped: $why}
}
# The end of the log of each failed TAP test (the server logs are beside it); the failed tests in $note.
tap_failures() {
	local log
	for log in $(grep -lE 'not ok|Looks like your test' tmp_check/log/regress_log_* 2>/dev/null); do
		echo "--- $log (last lines)"
		# (each failed check with what it printed, then the end)
		grep -E -A 40 '^(\[[^]]*\]\([^)]*\) )?not ok' "$log" | head -n 160
		echo "..."
		tail -n 20 "$log"
	done
	echo "TAP logs: $PWD/tmp_check/log"
	note=$(grep -lE 'not ok|Looks like your test' tmp_check/log/regress_log_* 2>/dev/null |
		sed 's|.*/regress_log_||' | paste -sd ' ' -)
}
pgtap() {
	local out rc
	out=$(mktemp)
	dropdb --if-exists counters_tap && createdb -O counters_app counters_tap &&
		psql -X -q -d counters_tap -c 'CREATE EXTENSION pgtap' || { rm -f "$out"; return 1; }
	as_app pg_prove -d counters_tap test/pgtap/*.sql 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	# (the files pg_prove's summary lists)
	note=$(sed -n '/^Test Summary Report/,$s|^test/pgtap/\([^ ]*\)\.sql .*|\1|p' "$out" | paste -sd ' ' -)
	rm -f "$out"
	return "$rc"
}
scripts() {
	local ok=0 name rc out skipped
	out=$(mktemp)
	for s in test/scripts/*.sh; do
		[ -e "$s" ] || continue
		name=$(basename "$s" .sh)
		if [[ " ${SUITES_SKIP:-} " == *" $name "* ]]; then
			echo "--- $s skipped: ${SUITES_SKIP_WHY:-not run here}"
			record "$name" skip "${SUITES_SKIP_WHY:-not run here}"
			continue
		fi
		echo "--- $s"
		case $s in
		# ORMs, as an application connects
		*/django.sh | */rails.sh) as_app bash "$s" 2>&1 | tee "$out" ;;
		*) bash "$s" 2>&1 | tee "$out" ;;
		esac
		rc=${PIPESTATUS[0]}
		# (what the script skipped, if anything: its lines "skip - why" or "name: skip: why")
		skipped=$(sed -n 's/^\([a-z_]*: \)\{0,1\}skip\(:\| -\) *//p' "$out" | paste -sd ';' -)
		if [ "$rc" = 77 ]; then
			record "$name" skip "$skipped"
		elif [ "$rc" = 0 ]; then
			record "$name" pass "${skipped:+skipped: $skipped}"
		else
			echo "--- $s FAILED"
			record "$name" fail
			ok=1
		fi
	done
	rm -f "$out"
	return $ok
}

only() { [[ " ${SUITES_ONLY:-regress isolation tap scripts pgtap} " == *" $1 "* ]]; }
only regress && suite "pg_regress" regress
only isolation && suite "isolation" isolation
only tap && suite "TAP" tap
only scripts && suite "scripts" scripts
# pgTAP last: its summary is the closing line a CI reader looks for, preceded by ours.
only pgtap && suite "pgTAP" pgtap
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
