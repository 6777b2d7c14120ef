#!/usr/bin/env bash
# Render the benchmark's results (test/bench/results.tsv, written by test/bench/run.sh) as test/bench/results.svg:
# for each workload, each variant's throughput (or inverse wall time) as a ratio to the same workload without
# counters, medians over the runs, one chart per synchronous_commit setting measured. Needs gnuplot (installed here
# with apt-get when missing). run.sh calls it at the end; it can be re-run on its own.
set -euo pipefail
cd "$(dirname "$0")"
results=${RESULTS:-${BENCH_OUT:-$PWD/out}/results.tsv}
svg=${SVG:-${BENCH_OUT:-$PWD/out}/results.svg}
command -v gnuplot >/dev/null || bash ../setup.sh gnuplot-nox
[ -s "$results" ] || { echo "chart: no results.tsv (run test/bench/run.sh first)" >&2; exit 1; }
variants=${VARIANTS:-plpgsql_row plpgsql_stmt exact sharded log}
data=$(mktemp)
trap 'rm -f "$data"' EXIT
# median per (sync, variant, workload, unit); then ratio to none (tps: v/none; ms: none/v); "failed %" rows skipped
awk -F'\t' -v variants="$variants" '
	$4 == "tps" || $4 == "ms" { key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4; n[key]++; val[key, n[key]] = $5;
	                           if (!(($1 SUBSEP $3 SUBSEP $4) in seen)) { seen[$1 SUBSEP $3 SUBSEP $4] = 1; order[++w] = $1 SUBSEP $3 SUBSEP $4 } }
	function median(key,   i, j, t, m, a) {
		m = n[key]; if (m == 0) return ""
		for (i = 1; i <= m; i++) a[i] = val[key, i]
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	END {
		nv = split(variants, v, " ")
		for (i = 1; i <= w; i++) {
			split(order[i], p, SUBSEP); sync = p[1]; wl = p[2]; unit = p[3]
			base = median(sync SUBSEP "none" SUBSEP wl SUBSEP unit)
			if (base == "" || base == 0) continue
			line = sync "\t\"" wl (unit == "ms" ? " (time)" : "") "\""
			for (k = 1; k <= nv; k++) {
				m = median(sync SUBSEP v[k] SUBSEP wl SUBSEP unit)
				r = (m == "" || m == 0) ? "NaN" : (unit == "tps" ? m / base : base / m)
				line = line "\t" r
			}
			print line
		}
	}' "$results" | sort -s -t$'\t' -k1,1 -k2,2 > "$data"
syncs=$(cut -f1 "$data" | sort -u)
nsync=$(echo "$syncs" | wc -l)
{
	echo "set terminal svg size 1100,$((420 * nsync)) dynamic font 'sans,11' background '#ffffff'"
	echo "set output '$svg'"; echo 'set termoption noenhanced'
	echo "set multiplot layout $nsync,1"
	echo "set style data histograms; set style histogram clustered gap 1; set style fill solid 0.9 border -1"
	echo "set boxwidth 0.9; set grid ytics; set yrange [0:1.15]; set ylabel 'ratio to no counters (higher is better)'"
	echo "set xtics rotate by -25 scale 0 font ',9'; set key top right; set datafile separator '\t'"
	echo "set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2 lc rgb '#555555'"
	for s in $syncs; do
		echo "set title 'counters benchmark, synchronous_commit = $s (ratio to the same workload without counters)'"
		plot="plot"
		col=3
		for v in $variants; do
			plot+=" '< grep \"^$s	\" $data' using $col:xtic(2) title '$v',"
			col=$((col + 1))
		done
		echo "${plot%,}"
	done
	echo "unset multiplot"
} | gnuplot
echo "chart: wrote $svg"
