#!/usr/bin/env bash
# Major upgrades with counters in use: the TAP tests in test/upgrade/t (pg_upgrade, and the blue/green move by
# logical replication of docs/replication.md) from the PostgreSQL of OLD_PG_CONFIG to that of each NEW_PG_CONFIG,
# on the new version's TAP harness (its PostgreSQL::Test::Cluster starts the old version's clusters too). counters
# must be installed in every installation given (test/run.sh --all-versions installs it before: test/matrix.sh).
#
#   bash test/upgrade.sh /usr/lib/postgresql/15/bin/pg_config /var/cache/counters-pg/18/bin/pg_config ...
#
# Prints a table, one row per upgrade; logs stay in a temporary directory (printed) when one fails. Exits non-zero if
# any test failed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 OLD_PG_CONFIG NEW_PG_CONFIG..." >&2; exit 2; }
old=$1
shift
old_install=$(dirname "$("$old" --bindir)")
old_minor=$("$old" --version | awk '{print $2}')
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
rows=()
failed=0
for new in "$@"; do
	new_minor=$("$new" --version | awk '{print $2}')
	work=$(mktemp -d /tmp/counters-upgrade.XXXXXX)
	cp -r "$repo/test/upgrade" "$work/"
	[ "$(id -u)" -ne 0 ] || chown -R postgres "$work"
	start=$SECONDS
	echo "upgrade: $old_minor to $new_minor ..."
	if (cd "$work/upgrade" && as_pg env PATH="$("$new" --bindir):$PATH" COUNTERS_OLD_INSTALL="$old_install" \
		TESTDATADIR="$work/data" TESTLOGDIR="$work/log" PG_REGRESS="$("$new" --pkglibdir)/pgxs/src/test/regress/pg_regress" \
		prove -I "$("$new" --pkglibdir)/pgxs/src/test/perl" t/*.pl) >"$work/prove.log" 2>&1; then
		status="pass ($(sed -n 's/^Files=.*Tests=\([0-9]*\).*/\1/p' "$work/prove.log") tests)"
		rm -rf "$work"
	else
		status="fail (logs: $work)"
		failed=1
		tail -40 "$work/prove.log"
	fi
	rows+=("| $old_minor → $new_minor | $status | $(awk -v s=$((SECONDS - start)) 'BEGIN {printf "%.1f", s / 60}') |")
done
echo
echo "| upgrade (test/upgrade/t: pg_upgrade, blue/green) | result | minutes |"
echo "| --- | --- | --- |"
printf '%s\n' "${rows[@]}"
exit $failed
