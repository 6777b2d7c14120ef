#!/usr/bin/env bash
# The benchmark's Markdown table ($BENCH_OUT/results.md) from its raw numbers ($BENCH_OUT/results.tsv): run by inner.sh at the end of a run,
# or alone to redo the table. Environment: VARIANTS, SYNC, BULK_TIMEOUT and BENCH_NOTE (the line under the table).
set -euo pipefail
cd "$(dirname "$0")"
out=${BENCH_OUT:-$PWD/out}
raw=$out/results.tsv
VARIANTS=$(echo ${VARIANTS:-$(cut -f2 "$raw" | grep -v '^drift$' | awk '!seen[$0]++' | tr '\n' ' ')})
SYNC=${SYNC:-$(cut -f1 "$raw" | grep -v '^drift$' | awk '!seen[$0]++' | tr '\n' ' ')}
BULK_TIMEOUT=${BULK_TIMEOUT:-120}
# The ratios printed, variant:baseline. The floor (variant_floor.sql) is what no exact counter can beat: a ratio to
# it of 0.83 means within 1.2x of the floor. floor_log (variant_floor_log.sql) is log mode's: appending the deltas.
PAIRS=${PAIRS:-exact:floor distinct:exact log:floor_log log:floor sharded:floor plpgsql_stmt:floor exact:none exact:plpgsql_row exact:plpgsql_stmt log:none
	log:plpgsql_row log:plpgsql_stmt sharded:none sharded:plpgsql_row sharded:plpgsql_stmt exact1:none
	exact1:plpgsql_row1 plpgsql_row1:none exact10:none pg_ivm:none floor:none}

# Median of numbers on stdin; a "timeout" among them makes the result ">BULK_TIMEOUT*1000" (a lower bound), an
# "error" (a statement that failed otherwise) the result "error".
median() {
	local values
	values=$(cat)
	if grep -q error <<<"$values"; then
		echo error
		return
	fi
	if grep -q timeout <<<"$values"; then
		echo ">$((BULK_TIMEOUT * 1000))"
		return
	fi
	{ grep -v '^$' <<<"$values" || true; } | sort -g |
		awk '{a[NR] = $1} END {if (NR == 0) print ""; else if (NR % 2) print a[(NR + 1) / 2];
		                       else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

# Median per (sync, workload, variant), then ratios against "none" and the PL/pgSQL triggers.
{
	header="| sync commit | workload | unit | $(echo $VARIANTS | sed 's/ / | /g') |"
	rule="|---|---|---|$(for v in $VARIANTS; do printf -- '---|'; done)"
	for pair in $PAIRS; do
		header+=" ${pair%%:*} / ${pair#*:} |"
		rule+="---|"
	done
	echo "$header"
	echo "$rule"
	for sync in $SYNC; do
		awk -F'\t' -v s="$sync" '$1 == s {print $3 "\t" $4}' "$raw" | sort -u | while IFS=$'\t' read -r w unit; do
			row="| $sync | $w | $unit |"
			declare -A med=()
			for v in $VARIANTS; do
				med[$v]=$(awk -F'\t' -v s="$sync" -v v="$v" -v w="$w" -v u="$unit" \
					'$1==s && $2==v && $3==w && $4==u {print $5}' "$raw" | median)
				row+=" ${med[$v]} |"
			done
			for pair in $PAIRS; do
				mode=${pair%%:*}
				base=${pair#*:}
				if [ -n "${med[$mode]:-}" ] && [ -n "${med[$base]:-}" ] && [ "$unit" != "failed %" ] &&
					[ "${med[$mode]}" != error ] && [ "${med[$base]}" != error ]; then
					# throughput: higher is better (mode/base); time: lower is better (base/mode), so >1 = faster
					r=$(awk -v a="${med[$mode]}" -v b="${med[$base]}" -v u="$unit" 'BEGIN {
						gt = sub(/^>/, "", b); if (u == "tps") printf "%.2f", a / b; else printf "%s%.2f", (gt ? ">" : ""), b / a}')
					row+=" $r |"
				else
					row+=" |"
				fi
			done
			echo "$row"
			unset med
		done
	done
	echo
	echo "Ratios above 1 mean counters are faster (tps ratio, or inverse wall-time ratio for bulk statements)."
	echo "${BENCH_NOTE:-}"
} > "$out/results.md"
