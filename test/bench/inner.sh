#!/usr/bin/env bash
# Runs inside pg_virtualenv; see test/bench/run.sh.
set -euo pipefail
cd "$(dirname "$0")"
ROWS=${ROWS:-1000000}
USERS=${USERS:-10000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
RUNS=${RUNS:-3}
VARIANTS=${VARIANTS:-none floor floor_log plpgsql_row plpgsql_stmt exact distinct log sharded plpgsql_row1 exact1 exact10 pg_ivm}
# pg_ivm runs only where it is installed (it is not in Debian's archive): see docs/benchmarks.md.
if ! psql -X -At -d postgres -c "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_ivm'" | grep -q 1; then
	VARIANTS=$(echo "$VARIANTS" | sed 's/\bpg_ivm\b//g')
	echo "pg_ivm is not installed: its variant is skipped" >&2
fi
# Variants that measure the single-row cost of one or ten counters: OLTP workloads only.
single_row_only=" plpgsql_row1 exact1 exact10 "
BULK_TIMEOUT=${BULK_TIMEOUT:-120}
SYNC=${SYNC:-off on}
DB=counters_bench
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -d "$DB")
# A run's figures go to $BENCH_OUT (default test/bench/out, not tracked): results.tsv (raw) and results.md (the
# table). test/bench/results.md is the recorded run that docs/benchmarks.md quotes, copied from there by hand.
export BENCH_OUT=${BENCH_OUT:-$PWD/out}
mkdir -p "$BENCH_OUT"
raw=$BENCH_OUT/results.tsv
: > "$raw"

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

seed() { # variant
	dropdb --if-exists "$DB" >/dev/null
	createdb "$DB"
	"${PSQL[@]}" -c "CREATE EXTENSION counters"
	"${PSQL[@]}" -v rows="$ROWS" -v users="$USERS" -f schema.sql
	"${PSQL[@]}" -f "variant_$1.sql" >/dev/null
	# ubp_counter and bp_counter: what drift.sql compares with a recount (a variant with one counter gets a recount
	# view for the other, which cannot drift).
	local recount_bp="SELECT blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1"
	case $1 in
	exact | distinct | log | sharded | exact10) "${PSQL[@]}" -c "CREATE VIEW ubp_counter AS SELECT * FROM ubp; CREATE VIEW bp_counter AS SELECT * FROM bp" ;;
	exact1) "${PSQL[@]}" -c "CREATE VIEW ubp_counter AS SELECT * FROM ubp; CREATE VIEW bp_counter AS $recount_bp" ;;
	plpgsql_row1) "${PSQL[@]}" -c "CREATE VIEW ubp_counter AS SELECT * FROM ubp_plpgsql; CREATE VIEW bp_counter AS $recount_bp" ;;
	plpgsql_*) "${PSQL[@]}" -c "CREATE VIEW ubp_counter AS SELECT * FROM ubp_plpgsql;
	                            CREATE VIEW bp_counter AS SELECT * FROM bp_plpgsql" ;;
	pg_ivm) "${PSQL[@]}" -c "CREATE VIEW ubp_counter AS SELECT user_id, blog_id, posts, rating_sum FROM ubp_ivm;
	                         CREATE VIEW bp_counter AS SELECT blog_id, posts FROM bp_ivm" ;;
	esac
	# blog_authors_counter: distinct authors per published post's blog, kept by the distinct variant only
	if [ "$1" = distinct ]; then
		"${PSQL[@]}" -c "CREATE VIEW blog_authors_counter AS SELECT blog_id, authors FROM blog_authors"
	else
		"${PSQL[@]}" -c "CREATE VIEW blog_authors_counter AS SELECT blog_id, count(DISTINCT user_id) AS authors
		                 FROM posts WHERE is_published AND NOT is_deleted GROUP BY blog_id"
	fi
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

pgbench_run() { # clients scripts... -> "tps failed_percent"
	local clients=$1
	shift
	local args=()
	for s in "$@"; do args+=(-f "$s"); done
	pgbench -n -c "$clients" -j "$clients" -T "$SECONDS_PER_RUN" -D rows="$ROWS" -D users="$USERS" "${args[@]}" "$DB" 2>/dev/null |
		awk '/^tps/ {tps = $3} /number of failed transactions/ {gsub(/[(%)]/, "", $6); failed = $6}
		     END {print tps, (failed == "" ? 0 : failed)}'
}

timed() { # sql -> milliseconds, or "timeout" after BULK_TIMEOUT seconds (the statement is cancelled); another error
	# is printed, recorded as "error" and fails the run
	local out
	if out=$("${PSQL[@]}" -c "SET statement_timeout = '${BULK_TIMEOUT}s'" -c '\timing on' -c "$1" 2>&1); then
		echo "$out" | awk '/^Time:/ {t += $2} END {print t}'
	elif grep -q 'canceling statement due to statement timeout' <<<"$out"; then
		echo timeout
	else
		echo "ERROR in a timed statement: $out" >&2
		echo error
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
# The floor variant's forms of the same statements (variant_floor.sql): each with one set-based write of the counter
# rows it changes, in the same statement (the COPY: in the same transaction, from the rows it copies).
live="is_published AND NOT is_deleted AS live"
ubp_upsert="ON CONFLICT (user_id, blog_id) DO UPDATE SET posts = c.posts + EXCLUDED.posts, rating_sum = c.rating_sum + EXCLUDED.rating_sum"
bp_upsert="ON CONFLICT (blog_id) DO UPDATE SET posts = c.posts + EXCLUDED.posts"
floor_sql=("WITH u AS (UPDATE posts SET rating = rating + 1 RETURNING user_id, blog_id, $live),
                 d AS (SELECT user_id, blog_id, count(*) AS r FROM u WHERE live GROUP BY 1, 2)
            UPDATE ubp_floor c SET rating_sum = c.rating_sum + d.r FROM d WHERE c.user_id = d.user_id AND c.blog_id = d.blog_id"
           "WITH u AS (UPDATE posts SET blog_id = 1 + blog_id % 100 WHERE id % 10 = 0 RETURNING user_id, blog_id, rating, $live),
                 e AS (SELECT user_id, blog_id, 1 AS n, rating AS r FROM u WHERE live
                       UNION ALL SELECT user_id, CASE WHEN blog_id = 1 THEN 100 ELSE blog_id - 1 END, -1, -rating FROM u WHERE live),
                 a AS (INSERT INTO ubp_floor AS c SELECT user_id, blog_id, sum(n), sum(r) FROM e GROUP BY 1, 2
                        HAVING sum(n) <> 0 OR sum(r) <> 0 ORDER BY 1, 2 $ubp_upsert)
            INSERT INTO bp_floor AS c SELECT blog_id, sum(n) FROM e GROUP BY 1 HAVING sum(n) <> 0 ORDER BY 1 $bp_upsert"
           "WITH i AS (INSERT INTO posts (user_id, blog_id, is_published, rating) SELECT * FROM staging
                       RETURNING user_id, blog_id, rating, $live),
                 a AS (INSERT INTO ubp_floor AS c SELECT user_id, blog_id, count(*), sum(rating) FROM i WHERE live
                        GROUP BY 1, 2 ORDER BY 1, 2 $ubp_upsert)
            INSERT INTO bp_floor AS c SELECT blog_id, count(*) FROM i WHERE live GROUP BY 1 ORDER BY 1 $bp_upsert"
           "BEGIN; ${bulk_sql[3]};
            INSERT INTO ubp_floor AS c SELECT user_id, blog_id, count(*), sum(rating) FROM staging WHERE is_published
             GROUP BY 1, 2 ORDER BY 1, 2 $ubp_upsert;
            INSERT INTO bp_floor AS c SELECT blog_id, count(*) FROM staging WHERE is_published GROUP BY 1 ORDER BY 1 $bp_upsert;
            COMMIT"
           "WITH x AS (DELETE FROM posts WHERE id % 10 = 5 RETURNING user_id, blog_id, rating, $live),
                 a AS (UPDATE ubp_floor c SET posts = c.posts - d.n, rating_sum = c.rating_sum - d.r
                         FROM (SELECT user_id, blog_id, count(*) AS n, sum(rating) AS r FROM x WHERE live GROUP BY 1, 2) d
                        WHERE c.user_id = d.user_id AND c.blog_id = d.blog_id)
            UPDATE bp_floor c SET posts = c.posts - d.n FROM (SELECT blog_id, count(*) AS n FROM x WHERE live GROUP BY 1) d
             WHERE c.blog_id = d.blog_id")
# The log floor's forms (variant_floor_log.sql): each statement appends its summed deltas, a row per changed key.
floor_log_sql=("WITH u AS (UPDATE posts SET rating = rating + 1 RETURNING user_id, blog_id, $live)
                INSERT INTO ubp_floor_log SELECT user_id, blog_id, 0, count(*) FROM u WHERE live GROUP BY 1, 2"
               "WITH u AS (UPDATE posts SET blog_id = 1 + blog_id % 100 WHERE id % 10 = 0 RETURNING user_id, blog_id, rating, $live),
                     e AS (SELECT user_id, blog_id, 1 AS n, rating AS r FROM u WHERE live
                           UNION ALL SELECT user_id, CASE WHEN blog_id = 1 THEN 100 ELSE blog_id - 1 END, -1, -rating FROM u WHERE live),
                     a AS (INSERT INTO ubp_floor_log SELECT user_id, blog_id, sum(n), sum(r) FROM e GROUP BY 1, 2
                            HAVING sum(n) <> 0 OR sum(r) <> 0)
                INSERT INTO bp_floor_log SELECT blog_id, sum(n) FROM e GROUP BY 1 HAVING sum(n) <> 0"
               "WITH i AS (INSERT INTO posts (user_id, blog_id, is_published, rating) SELECT * FROM staging
                           RETURNING user_id, blog_id, rating, $live),
                     a AS (INSERT INTO ubp_floor_log SELECT user_id, blog_id, count(*), sum(rating) FROM i WHERE live GROUP BY 1, 2)
                INSERT INTO bp_floor_log SELECT blog_id, count(*) FROM i WHERE live GROUP BY 1"
               "BEGIN; ${bulk_sql[3]};
                INSERT INTO ubp_floor_log SELECT user_id, blog_id, count(*), sum(rating) FROM staging WHERE is_published GROUP BY 1, 2;
                INSERT INTO bp_floor_log SELECT blog_id, count(*) FROM staging WHERE is_published GROUP BY 1;
                COMMIT"
               "WITH x AS (DELETE FROM posts WHERE id % 10 = 5 RETURNING user_id, blog_id, rating, $live),
                     a AS (INSERT INTO ubp_floor_log SELECT user_id, blog_id, -count(*), -sum(rating) FROM x WHERE live GROUP BY 1, 2)
                INSERT INTO bp_floor_log SELECT blog_id, -count(*) FROM x WHERE live GROUP BY 1")

# Log and sharded mode defer work to compaction: what folding the pending rows costs (ms), recorded as a workload.
compaction() { # variant when
	case $1 in log | sharded) ;; *) return 0 ;; esac
	local ms
	ms=$(timed "SELECT counters.compact()")
	record "${SYNC%% *}" "$1" "compact() $2" ms "$ms"
	drift "$1" "compact() $2" || failed=1
}

failed=0
# Runs outside, variants inside: each run goes through every variant, so that a slow spell of a shared machine
# spreads over the variants instead of falling on all the runs of one.
for run in $(seq "$RUNS"); do
	for variant in $VARIANTS; do
		log "variant=$variant run=$run: seeding $ROWS rows"
		seed "$variant"
		for sync in $SYNC; do
			[ "${OLTP:-1}" = 1 ] || break
			"${PSQL[@]}" -c "ALTER DATABASE $DB SET synchronous_commit = $sync"
			for w in "${!oltp[@]}"; do
				iso=""
				case $w in *"REPEATABLE READ"*) iso="-c default_transaction_isolation=repeatable\\ read" ;; esac
				scripts=${oltp[$w]}
				case $variant in floor | floor_log) scripts=${scripts//.pgbench/_$variant.pgbench} ;; esac
				# shellcheck disable=SC2086
				read -r tps fails < <(PGOPTIONS="$iso" pgbench_run $scripts)
				record "$sync" "$variant" "$w" tps "$tps"
				record "$sync" "$variant" "$w" "failed %" "$fails"
				drift "$variant" "$w" || failed=1
			done
		done
		# Bulk statements are not commit-bound: measured once per run, with the first SYNC setting; the per-row
		# PL/pgSQL trigger (minutes per statement) only in the first run.
		[ "$variant" = plpgsql_row ] && [ "$run" -gt 1 ] && continue
		[[ $single_row_only == *" $variant "* ]] && continue
		compaction "$variant" "after OLTP"
		sync=${SYNC%% *}
		"${PSQL[@]}" -c "ALTER DATABASE $DB SET synchronous_commit = $sync"
		"${PSQL[@]}" -c "VACUUM ANALYZE posts"
		"${PSQL[@]}" -c "COPY staging TO '/tmp/counters_bench_staging.csv' (FORMAT csv)"
		for i in "${!bulk_sql[@]}"; do
			"${PSQL[@]}" -c "CHECKPOINT"
			sql=${bulk_sql[$i]}
			[ "$variant" = floor ] && sql=${floor_sql[$i]}
			[ "$variant" = floor_log ] && sql=${floor_log_sql[$i]}
			ms=$(timed "$sql")
			record "$sync" "$variant" "${bulk_names[$i]}" ms "$ms"
			[ "$ms" = error ] && failed=1
			[ "$ms" = timeout ] || [ "$ms" = error ] || drift "$variant" "${bulk_names[$i]}" || failed=1
		done
		compaction "$variant" "after the bulk statements"
	done
done

BENCH_NOTE="ROWS=$ROWS USERS=$USERS SECONDS_PER_RUN=$SECONDS_PER_RUN RUNS=$RUNS (median); $(nproc) cores; PostgreSQL $(psql -XAtc 'SHOW server_version' -d "$DB")." \
	VARIANTS="$VARIANTS" SYNC="$SYNC" BULK_TIMEOUT="$BULK_TIMEOUT" bash table.sh
cat "$BENCH_OUT/results.md"
if [ "$failed" -ne 0 ]; then
	echo "drift detected: see above" >&2
	exit 1
fi
