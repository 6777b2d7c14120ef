#!/usr/bin/env bash
# Window thresholds (counters.set_window_thresholds): what checking the window after each write costs. 8 clients
# insert single hashtag uses (3 regions, 1,000 tags) into a table counted per (region, tag, hour), without counters,
# with the counter, and with the counter and a 24-hour window threshold, measured side by side in one run (ratios, not
# tps, compare). After each run counters.verify() must be empty. Not part of the tests.
#
#   bash test/bench/windows.sh                 # SECONDS_PER_RUN=10 RUNS=3 CLIENTS=8
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/bench/lib.sh
fresh_db counters_windows_bench
printf '\\set r random(1, 3)\n\\set t random(1, 1000)\nINSERT INTO uses (region, tag, used_at) VALUES (:r, :t, localtimestamp);\n' >"$work/use.pgbench"
setup() {
	reset_db uses
	psql -X -q -d "$db" >/dev/null 2>&1 <<SQL
CREATE TABLE uses (id bigserial PRIMARY KEY, region int NOT NULL, tag int NOT NULL, used_at timestamp NOT NULL);
$(case "$1" in
	none) ;;
	counter | window) echo "SELECT counters.create_counter('tag_hourly', \$\$SELECT region, tag, date_trunc('hour', used_at) AS hour, count(*) AS uses FROM uses GROUP BY region, tag, date_trunc('hour', used_at)\$\$);" ;;
esac)
$([ "$1" = window ] && echo "SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{100, 1000}', 'hour', '24 hours');")
CHECKPOINT;
SQL
}
insert_tps() { # variant
	setup "$1"
	out=$(load "$work/use.pgbench")
	value=$(report_tps <<<"$out")
	[ "$1" = none ] || check_verify "$1" tag_hourly
}
printf '| workload | no counter | counter | counter + window thresholds |\n|---|---|---|---|\n'
row insert_tps "$CLIENTS clients, single-row INSERT" tps none counter window
echo
echo "Ratios in parentheses: to no counter. With the window, each statement also reads the window and records crossings."
