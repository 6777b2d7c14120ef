#!/usr/bin/env bash
# The whole test suite against several PostgreSQL installations, one after the other, and a table of the results:
# one row per installation (its exact version, e.g. 16.2) and one column per suite, then one row per scripted test.
#
#   bash test/matrix.sh                                  # pg_config on PATH, then /work/pg/*/bin/pg_config
#   bash test/matrix.sh /work/pg/17/bin/pg_config ...    # these installations only
#   MATRIX_SUITES="regress isolation" bash test/matrix.sh ...   # some suites (regress isolation tap scripts pgtap)
#   REGRESS=dml bash test/matrix.sh ...                  # one pg_regress file (as test/run.sh)
#
# For each installation (several pg_config naming one installation count once), in a copy of the working tree (the
# tracked files and the untracked ones .gitignore does not exclude, and .git), under a work directory of its own:
#   1. build with that pg_config and `make WERROR=1` (warnings are errors), and `make install` into the installation
#      (so the installation's directories must be writable: run as root, or own them);
#   2. initdb a throwaway cluster (as the postgres user when run as root: initdb refuses root) with password
#      authentication, started on a free port on 127.0.0.1 with max_connections=200 and max_prepared_transactions=10
#      (what test/run.sh gives pg_virtualenv);
#   3. run test/suites.sh against it with the installation's bin directory first in PATH and PG* set: pg_regress,
#      isolation, the TAP tests (test/t: clusters of their own, with the installation's initdb), test/scripts/*.sh,
#      pgTAP (pg_prove). package.sh and pgxn_dist.sh run only against Debian's own PostgreSQL (pg_config --bindir
#      /usr/lib/postgresql/NN/bin), which the Debian package is built for: they are skipped for source builds and
#      reported so. Tests skip what the installation lacks (pg_cron: test/t/002_scheduled_compaction.pl).
#   4. stop the cluster and remove it.
# An installation whose directory in MATRIX_DIR already holds results and seconds (test/run.sh --all-versions puts
# Debian's 15 there, having run it) is not run again: its row comes from those.
# Needs what test/run.sh installs (test/setup.sh) and, for each installation, pgTAP, the isolation tester and the TAP
# modules (a source build configured with --enable-tap-tests: the README says how to build one). Installing
# into Debian's own PostgreSQL takes the lock test/run.sh takes. Logs, regression.diffs and the results stay in the
# work directory (printed; removed when everything passed, unless MATRIX_KEEP=1). Exits non-zero if anything failed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
suites=${MATRIX_SUITES:-regress isolation tap scripts pgtap}

configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then
	if command -v pg_config >/dev/null; then configs+=("$(command -v pg_config)"); fi
	for c in /work/pg/*/bin/pg_config; do [ -x "$c" ] && configs+=("$c"); done
fi
[ ${#configs[@]} -gt 0 ] || { echo "matrix: no pg_config given or found" >&2; exit 2; }

# One line per installation: version number (for sorting), minor version, bindir; duplicates (same bindir) dropped.
installs=()
while IFS=$'\t' read -r _ minor bindir; do
	installs+=("$minor"$'\t'"$bindir")
done < <(for c in "${configs[@]}"; do
	bindir=$("$c" --bindir 2>/dev/null) || { echo "matrix: $c is not a working pg_config" >&2; continue; }
	minor=$("$bindir/pg_config" --version | awk '{print $2}')
	num=$(awk -F. '{printf "%d%04d", $1, $2}' <<<"$minor")
	printf '%s\t%s\t%s\n' "$num" "$minor" "$bindir"
done | sort -t $'\t' -u -k3,3 | sort -t $'\t' -n -k1,1)
[ ${#installs[@]} -gt 0 ] || { echo "matrix: no working pg_config" >&2; exit 2; }

work=${MATRIX_DIR:-$(mktemp -d /tmp/counters-matrix.XXXXXX)}
mkdir -p "$work"
chmod 755 "$work"
echo "matrix: ${#installs[@]} installation(s), suites: $suites; work directory $work"
# (free_port)
source "$repo/test/lib.sh"
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# The cluster run_one started, stopped (fast, else immediately); an interrupted run stops it too.
running= running_ctl=
stop_running() {
	[ -n "$running" ] || return 0
	as_pg "$running_ctl" -D "$running" -m fast -w stop >/dev/null 2>&1 ||
		as_pg "$running_ctl" -D "$running" -m immediate stop >/dev/null 2>&1 || true
	running=
}

# run_one minor bindir dir: build, install, cluster, suites; results in dir/results (name<TAB>status<TAB>note).
run_one() {
	local minor=$1 bindir=$2 dir=$3 pgc=$2/pg_config
	local results=$dir/results tree=$dir/tree data=$dir/data port pw skip="" why=""
	mkdir -p "$tree"
	: >"$results"
	(cd "$repo" && git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
		if [ -e "$f" ]; then printf '%s\0' "$f"; fi
	done | tar --null -T - -cf - && tar -cf - .git) | tar -x -C "$tree"
	if ! (cd "$tree" && nice -n 10 make -s -j2 WERROR=1 PG_CONFIG="$pgc" && make -s install PG_CONFIG="$pgc") \
		>"$dir/build.log" 2>&1; then
		tail -20 "$dir/build.log"
		printf 'build\tfail\t\n' >>"$results"
		return
	fi
	printf 'build\tpass\t\n' >>"$results"
	port=$(free_port 42000 8000) || return
	pw=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
	mkdir -p "$dir/socket"
	printf '%s\n' "$pw" >"$dir/pwfile"
	[ "$(id -u)" -ne 0 ] || chown postgres "$dir" "$dir/socket" "$dir/pwfile"
	as_pg "$bindir/initdb" -D "$data" -U postgres -A scram-sha-256 --pwfile="$dir/pwfile" >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log"; printf 'cluster\tfail\tinitdb failed\n' >>"$results"; return; }
	rm -f "$dir/pwfile"
	cat >>"$data/postgresql.conf" <<-CONF
	port = $port
	listen_addresses = '127.0.0.1'
	unix_socket_directories = '$dir/socket'
	max_connections = 200
	max_prepared_transactions = 10
	CONF
	as_pg "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 120 start >/dev/null ||
		{ tail -20 "$dir/server.log"; printf 'cluster\tfail\tthe server did not start\n' >>"$results"; return; }
	# (stopped on every way out, an interrupted run's too)
	running=$data running_ctl=$bindir/pg_ctl
	trap 'stop_running' EXIT
	trap 'stop_running; exit 130' INT TERM
	case $bindir in
	/usr/lib/postgresql/*/bin) ;;
	*) skip="package pgxn_dist" why="Debian's own PostgreSQL only" ;;
	esac
	(
		export PATH="$bindir:$PATH" PGHOST=127.0.0.1 PGPORT="$port" PGUSER=postgres PGPASSWORD="$pw" PGDATABASE=postgres
		export SUITES_RESULTS="$results" SUITES_SKIP="$skip" SUITES_SKIP_WHY="$why" SUITES_ONLY="$suites"
		cd "$tree" && nice -n 10 bash test/suites.sh
	) >"$dir/suites.log" 2>&1
	echo "matrix: $minor: $(tail -1 "$dir/suites.log")"
	# What failed, where CI shows it: each failed TAP test's last lines, each failed script's last lines, and the
	# start of each regression diff.
	if grep -q "$(printf '\tfail\t')" "$results"; then
		sed -n '/^--- .*regress_log_.* (last lines)$/,/^TAP logs:/p' "$dir/suites.log"
		local script
		for script in $(sed -n 's|^--- \(test/scripts/[a-z_]*\.sh\) FAILED$|\1|p' "$dir/suites.log"); do
			echo "--- $script (last lines of its output)"
			sed -n "\\|^--- $script\$|,\\|^--- $script FAILED\$|p" "$dir/suites.log" | tail -n 60
		done
		local diffs
		for diffs in "$tree/regression.diffs" "$tree/output_iso/regression.diffs"; do
			[ ! -s "$diffs" ] || { echo "--- $diffs (first lines)"; head -n 80 "$diffs"; }
		done
	fi
	stop_running
	trap - EXIT INT TERM
	rm -rf "$data"
}

started=$SECONDS
for i in "${installs[@]}"; do
	IFS=$'\t' read -r minor bindir <<<"$i"
	dir=$work/$minor
	# (run already: test/run.sh --all-versions runs Debian's 15 itself and leaves its results here)
	if [ -s "$dir/seconds" ] && [ -s "$dir/results" ]; then
		echo "matrix: PostgreSQL $minor: results of an earlier run in $dir"
		continue
	fi
	echo "matrix: PostgreSQL $minor ($bindir) ..."
	t0=$SECONDS
	case $("$bindir/pg_config" --pkglibdir) in
	/usr/lib/postgresql/*)
		# Debian's own installation: test/run.sh and test/bench install there too; one at a time.
		exec 9>/tmp/counters-suite.lock
		flock 9
		run_one "$minor" "$bindir" "$dir"
		exec 9>&-
		;;
	*) run_one "$minor" "$bindir" "$dir" ;;
	esac
	echo "$((SECONDS - t0))" >"$dir/seconds"
done

# --- the tables
status() { # dir name: pass, fail, skip (with the note) or "-" (not run)
	awk -F'\t' -v n="$2" '$1 == n {s = $2; note = $3} END {
		if (s == "") print "-"; else if (note != "") print s " (" note ")"; else print s }' "$1/results"
}
column() { # suite name -> name in test/suites.sh's results
	case $1 in regress) echo pg_regress ;; isolation) echo isolation ;; tap) echo TAP ;; scripts) echo scripts ;; pgtap) echo pgTAP ;; esac
}
failed=0
echo
echo "| PostgreSQL | build (WERROR=1) | pg_regress | isolation | TAP (test/t) | pgTAP | test/scripts | minutes |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for i in "${installs[@]}"; do
	IFS=$'\t' read -r minor bindir <<<"$i"
	dir=$work/$minor
	row="| $minor | $(status "$dir" build)"
	for s in regress isolation tap pgtap; do row+=" | $(status "$dir" "$(column "$s")")"; done
	scripts=$(awk -F'\t' '
		$1 !~ /^(build|cluster|pg_regress|isolation|TAP|scripts|pgTAP)$/ {n[$2]++}
		END {printf "%d pass, %d fail, %d skipped", n["pass"], n["fail"], n["skip"]}' "$dir/results")
	[ "$(status "$dir" scripts)" = "-" ] && scripts="-"
	row+=" | $scripts | $(awk '{printf "%.1f", $1 / 60}' "$dir/seconds") |"
	echo "$row"
	grep -q $'\tfail\t' "$dir/results" && failed=1
	grep -q $'^cluster\t' "$dir/results" && { echo "  $minor: $(status "$dir" cluster)"; failed=1; }
done
if [[ " $suites " == *" scripts "* ]]; then
	echo
	header="| test/scripts |"
	rule="| --- |"
	for i in "${installs[@]}"; do
		IFS=$'\t' read -r minor _ <<<"$i"
		header+=" $minor |"
		rule+=" --- |"
	done
	echo "$header"
	echo "$rule"
	for s in "$repo"/test/scripts/*.sh; do
		name=$(basename "$s" .sh)
		row="| $name |"
		for i in "${installs[@]}"; do
			IFS=$'\t' read -r minor _ <<<"$i"
			row+=" $(status "$work/$minor" "$name") |"
		done
		echo "$row"
	done
fi
echo
for i in "${installs[@]}"; do
	IFS=$'\t' read -r minor bindir <<<"$i"
	echo "$minor: $bindir/pg_config ($("$bindir/pg_config" --version))"
done
echo "matrix: $((SECONDS - started)) s; logs in $work/<version>/ (build.log, suites.log, tree/regression.diffs, ...)"
if [ "$failed" -eq 0 ] && [ -z "${MATRIX_KEEP:-}" ] && [ -z "${MATRIX_DIR:-}" ]; then
	rm -rf "$work"
	echo "matrix: everything passed; work directory removed"
fi
exit "$failed"
