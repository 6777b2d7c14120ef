#!/usr/bin/env bash
# Runs inside pg_virtualenv; see test/bench/run.sh.
set -euo pipefail
cd "$(dirname "$0")"
ROWS=${ROWS:-1000000}
USERS=${USERS:-10000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
RUNS=${RUNS:-3}
VARIANTS=${VARIANTS:-none plpgsql_row plpgsql_stmt exact log sharded}
BULK_TIMEOUT=${BULK_TIMEOUT:-120}
SYNC=${SYNC:-off on}
DB=counters_bench
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -d "$DB")
raw=results.tsv
: > "$raw"

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

seed() { # variant
	dropdb --if-exists "$DB" >/dev/null
	createdb "$DB"
	"${PSQL[@]}" -c "CREATE EXTENSION counters"
	"${PSQL[@]}" -v rows="$ROWS" -v users="$USERS" -f schema.sql
	"${PSQL[@]}" -f "variant_$1.sql" >/dev/null
	case $1 in
	exact | log | sharded) "${PSQL[@]}" -c "CREATE VIEW ubp_counter AS SELECT * FROM ubp; CREATE VIEW bp_counter AS SELECT * FROM bp" ;;
	plpgsql_*) "${PSQL[@]}" -c "CREATE VIEW ubp_counter AS SELECT * FROM ubp_plpgsql;
	                            CREATE VIEW bp_counter AS SELECT * FROM bp_plpgsql" ;;
	esac
	"${PSQL[@]}" -c "VACUUM ANALYZE" -c "CHECKPOINT"
}

drift() { # variant workload
	[ "$1" = none ] && return 0
	local d
	d=$("${PSQL[@]}" -At -f drift.sql)
	if [ "$d" != 0 ]; then
		echo "DRIFT: $1 after $2: $d counter values differ from a recomputation" >&2
		echo "drift	$1	$2	$d" >> "$raw"
		return 1
	fi
}

# Median of numbers on stdin; a "timeout" among them makes the result ">BULK_TIMEOUT*1000" (a lower bound).
median() {
	local values
	values=$(cat)
	if grep -q timeout <<<"$values"; then
		echo ">$((BULK_TIMEOUT * 1000))"
		return
	fi
	grep -v '^$' <<<"$values" | sort -g |
		awk '{a[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2];
		                       else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

pgbench_run() { # clients scripts... -> "tps failed_percent"
	local clients=$1
	shift
	local args=()
	for s in "$@"; do args+=(-f "$s"); done
	pgbench -n -c "$clients" -j "$clients" -T "$SECONDS_PER_RUN" -D rows="$ROWS" -D users="$USERS" "${args[@]}" "$DB" 2>/dev/null |
		awk '/^tps/ {tps = $3} /number of failed transactions/ {gsub(/[(%)]/, "", $6); failed = $6}
		     END {print tps, (failed == "" ? 0 : failed)}'
}

timed() { # sql -> milliseconds, or "timeout" after BULK_TIMEOUT seconds (the statement is cancelled)
	local out
	if out=$("${PSQL[@]}" -c "SET statement_timeout = '${BULK_TIMEOUT}s'" -c '\timing on' -c "$1" 2>&1); then
		echo "$out" | awk '/^Time:/ {print $2}'
	else
		echo timeout
	fi
}

record() { # sync variant workload unit value
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" >> "$raw"
	log "$*"
}

declare -A oltp=(
	[W1 insert, 1 client]="1 w1_insert.pgbench"
	[W1 insert, 8 clients]="8 w1_insert.pgbench"
	[W2 hot key insert, 8 clients]="8 w2_hot.pgbench"
	[W3 update flip/move, 8 clients]="8 w3_flip.pgbench w3_move.pgbench"
	[W2 hot key insert, 8 clients, REPEATABLE READ]="8 w2_hot.pgbench"
)
bulk_names=("W4 UPDATE all rows" "W4 UPDATE moving 10% between blogs" "W5 INSERT ... SELECT half the rows"
            "W5 COPY half the rows" "W6 DELETE 10% of rows")
bulk_sql=("UPDATE posts SET rating = rating + 1"
          "UPDATE posts SET blog_id = 1 + blog_id % 100 WHERE id % 10 = 0"
          "INSERT INTO posts (user_id, blog_id, is_published, rating) SELECT * FROM staging"
          "COPY posts (user_id, blog_id, is_published, rating) FROM '/tmp/counters_bench_staging.csv' (FORMAT csv)"
          "DELETE FROM posts WHERE id % 10 = 5")

failed=0
for variant in $VARIANTS; do
	for run in $(seq "$RUNS"); do
		log "variant=$variant run=$run: seeding $ROWS rows"
		seed "$variant"
		for sync in $SYNC; do
			"${PSQL[@]}" -c "ALTER DATABASE $DB SET synchronous_commit = $sync"
			for w in "${!oltp[@]}"; do
				iso=""
				case $w in *"REPEATABLE READ"*) iso="-c default_transaction_isolation=repeatable\\ read" ;; esac
				# shellcheck disable=SC2086
				read -r tps fails < <(PGOPTIONS="$iso" pgbench_run ${oltp[$w]})
				record "$sync" "$variant" "$w" tps "$tps"
				record "$sync" "$variant" "$w" "failed %" "$fails"
				drift "$variant" "$w" || failed=1
			done
		done
		# Bulk statements are not commit-bound: measured once per run, with the first SYNC setting; the per-row
		# PL/pgSQL trigger (minutes per statement) only in the first run.
		[ "$variant" = plpgsql_row ] && [ "$run" -gt 1 ] && continue
		sync=${SYNC%% *}
		"${PSQL[@]}" -c "ALTER DATABASE $DB SET synchronous_commit = $sync"
		"${PSQL[@]}" -c "VACUUM ANALYZE posts"
		"${PSQL[@]}" -c "COPY staging TO '/tmp/counters_bench_staging.csv' (FORMAT csv)"
		for i in "${!bulk_sql[@]}"; do
			"${PSQL[@]}" -c "CHECKPOINT"
			ms=$(timed "${bulk_sql[$i]}")
			record "$sync" "$variant" "${bulk_names[$i]}" ms "$ms"
			[ "$ms" = timeout ] || drift "$variant" "${bulk_names[$i]}" || failed=1
		done
	done
done

# Median per (sync, workload, variant), then ratios against "none" and the PL/pgSQL triggers.
{
	echo "| sync commit | workload | unit | $(echo $VARIANTS | sed 's/ / | /g') | exact / none | exact / plpgsql_row | exact / plpgsql_stmt | log / none | log / plpgsql_row | sharded / none | sharded / plpgsql_row |"
	echo "|---|---|---|$(for v in $VARIANTS; do printf -- '---|'; done)---|---|---|---|---|---|---|"
	for sync in $SYNC; do
		awk -F'\t' -v s="$sync" '$1 == s {print $3 "\t" $4}' "$raw" | sort -u | while IFS=$'\t' read -r w unit; do
			row="| $sync | $w | $unit |"
			declare -A med=()
			for v in $VARIANTS; do
				med[$v]=$(awk -F'\t' -v s="$sync" -v v="$v" -v w="$w" -v u="$unit" \
					'$1==s && $2==v && $3==w && $4==u {print $5}' "$raw" | median)
				row+=" ${med[$v]} |"
			done
			for pair in exact:none exact:plpgsql_row exact:plpgsql_stmt log:none log:plpgsql_row sharded:none sharded:plpgsql_row; do
				mode=${pair%%:*}
				base=${pair#*:}
				if [ -n "${med[$mode]:-}" ] && [ -n "${med[$base]:-}" ] && [ "$unit" != "failed %" ]; then
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
	echo "ROWS=$ROWS SECONDS_PER_RUN=$SECONDS_PER_RUN RUNS=$RUNS (median); $(nproc) cores; PostgreSQL $(psql -XAtc 'SHOW server_version' -d "$DB")."
} > results.md
cat results.md
if [ "$failed" -ne 0 ]; then
	echo "drift detected: see above" >&2
	exit 1
fi
