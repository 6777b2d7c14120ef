#!/usr/bin/env bash
# Runs inside pg_virtualenv; see test/bench/run.sh.
set -euo pipefail
cd "$(dirname "$0")"
ROWS=${ROWS:-1000000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
RUNS=${RUNS:-3}
VARIANTS=${VARIANTS:-none plpgsql_row plpgsql_stmt exact}
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
	"${PSQL[@]}" -v rows="$ROWS" -f schema.sql
	"${PSQL[@]}" -f "variant_$1.sql" >/dev/null
	case $1 in
	exact) "${PSQL[@]}" -c "CREATE VIEW ubp_counter AS SELECT * FROM ubp; CREATE VIEW bp_counter AS SELECT * FROM bp" ;;
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

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

pgbench_tps() { # clients scripts...
	local clients=$1
	shift
	local args=()
	for s in "$@"; do args+=(-f "$s"); done
	pgbench -n -c "$clients" -j "$clients" -T "$SECONDS_PER_RUN" -D rows="$ROWS" "${args[@]}" "$DB" 2>/dev/null |
		awk '/^tps/ {print $3}'
}

timed() { # sql -> milliseconds
	"${PSQL[@]}" -c '\timing on' -c "$1" | awk '/^Time:/ {print $2}'
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
)
bulk_names=("W4 UPDATE all rows" "W4 UPDATE moving 10% between blogs" "W5 INSERT ... SELECT half the rows"
            "W5 COPY half the rows" "W6 DELETE 10% of rows")
bulk_sql=("UPDATE posts SET rating = rating + 1"
          "UPDATE posts SET blog_id = 1 + blog_id % 100 WHERE id % 10 = 0"
          "INSERT INTO posts (user_id, blog_id, is_published, rating) SELECT * FROM staging"
          "COPY posts (user_id, blog_id, is_published, rating) FROM '/tmp/counters_bench_staging.csv' (FORMAT csv)"
          "DELETE FROM posts WHERE id % 10 = 5")

failed=0
for sync in $SYNC; do
	for variant in $VARIANTS; do
		for run in $(seq "$RUNS"); do
			log "sync=$sync variant=$variant run=$run: seeding $ROWS rows"
			seed "$variant"
			"${PSQL[@]}" -c "ALTER DATABASE $DB SET synchronous_commit = $sync"
			for w in "${!oltp[@]}"; do
				# shellcheck disable=SC2086
				tps=$(pgbench_tps ${oltp[$w]})
				record "$sync" "$variant" "$w" tps "$tps"
				drift "$variant" "$w" || failed=1
			done
			"${PSQL[@]}" -c "COPY staging TO '/tmp/counters_bench_staging.csv' (FORMAT csv)"
			for i in "${!bulk_sql[@]}"; do
				"${PSQL[@]}" -c "CHECKPOINT"
				ms=$(timed "${bulk_sql[$i]}")
				record "$sync" "$variant" "${bulk_names[$i]}" ms "$ms"
				drift "$variant" "${bulk_names[$i]}" || failed=1
			done
		done
	done
done

# Median per (sync, workload, variant), then ratios against "none" and the PL/pgSQL triggers.
{
	echo "| sync commit | workload | unit | $(echo $VARIANTS | sed 's/ / | /g') | exact / none | exact / plpgsql_row | exact / plpgsql_stmt |"
	echo "|---|---|---|$(for v in $VARIANTS; do printf -- '---|'; done)---|---|---|"
	for sync in $SYNC; do
		awk -F'\t' -v s="$sync" '$1 == s {print $3 "\t" $4}' "$raw" | sort -u | while IFS=$'\t' read -r w unit; do
			row="| $sync | $w | $unit |"
			declare -A med=()
			for v in $VARIANTS; do
				med[$v]=$(awk -F'\t' -v s="$sync" -v v="$v" -v w="$w" '$1==s && $2==v && $3==w {print $5}' "$raw" | median)
				row+=" ${med[$v]} |"
			done
			for base in none plpgsql_row plpgsql_stmt; do
				if [ -n "${med[exact]:-}" ] && [ -n "${med[$base]:-}" ]; then
					# throughput: higher is better (exact/base); time: lower is better (base/exact), so >1 = faster
					if [ "$unit" = tps ]; then r=$(awk -v a="${med[exact]}" -v b="${med[$base]}" 'BEGIN {printf "%.2f", a / b}')
					else r=$(awk -v a="${med[exact]}" -v b="${med[$base]}" 'BEGIN {printf "%.2f", b / a}'); fi
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
