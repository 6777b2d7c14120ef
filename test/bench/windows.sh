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
	psql -X -q -d "$db" >/dev/null 2>&1 <<SQL
DROP TABLE IF EXISTS uses CASCADE;
SELECT counters.drop_counter(name) FROM counters.counters;
CREATE TABLE uses (id bigserial PRIMARY KEY, region int NOT NULL, tag int NOT NULL, used_at timestamp NOT NULL);
$(case "$1" in
	none) ;;
	counter | window) echo "SELECT counters.create_counter('tag_hourly', \$\$SELECT region, tag, date_trunc('hour', used_at) AS hour, count(*) AS uses FROM uses GROUP BY region, tag, date_trunc('hour', used_at)\$\$);" ;;
esac)
$([ "$1" = window ] && echo "SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{100, 1000}', 'hour', '24 hours');")
CHECKPOINT;
SQL
}
variants="none counter window"
declare -A tps
printf '| workload | no counter | counter | counter + window thresholds |\n|---|---|---|---|\n'
line="| $CLIENTS clients, single-row INSERT |"
for v in $variants; do
	results=()
	for ((r = 0; r < RUNS; r++)); do
		setup "$v"
		out=$(load "$work/use.pgbench")
		results+=("$(report_tps <<<"$out")")
		[ "$v" = none ] || check_verify "$v" tag_hourly
	done
	tps[$v]=$(printf '%s\n' "${results[@]}" | median)
	line+=" ${tps[$v]} tps ($(ratio "${tps[$v]}" "${tps[none]}")) |"
done
echo "$line"
echo
echo "Ratios in parentheses: to no counter. With the window, each statement also reads the window and records crossings."
