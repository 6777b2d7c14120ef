#!/usr/bin/env bash
# avg() and bool_or() written as such (issue "Every aggregate"): what a derived column costs against the sum column it
# is made of, measured side by side in one run (the machine is shared: compare ratios, not tps). Not part of the tests.
#
# 1. 8 clients, single rows: an INSERT of a review of one of 1,000 products, and an UPDATE of a review's stars (its
#    product's average moves, its key does not); one statement inserting BULK rows. Variants: none (no counter), sum
#    (count(*) and sum(stars)), avg (count(*) and avg(stars): its sum and count accumulators and a generated column)
#    and avg_bool (avg(stars) and bool_or(paid) too: four accumulators, two generated columns).
# 2. The bulk statement against the hand-written floor of the same average: a statement trigger over the inserted rows
#    (a transition table) that adds each product's count, sum and count of stars with one INSERT ... ON CONFLICT into a
#    table whose average is a generated column (floor_avg), and the avg variant.
# After each run the counter's columns must equal a recount by the aggregates themselves (DRIFT on stderr if not).
#
#   bash test/bench/derived.sh            # SECONDS_PER_RUN=10 RUNS=3 CLIENTS=8 BULK=200000 (0: no bulk statement)
#                                         # VARIANTS="none sum avg avg_bool" WORKLOADS="insert update" (empty: none)
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/bench/lib.sh
BULK=${BULK:-200000}
fresh_db counters_derived_bench

printf '\\set p random(1, 1000)\n\\set s random(1, 5)\nINSERT INTO reviews (product_id, stars, paid) VALUES (:p, :s, :s > 1);\n' \
	>"$work/insert.pgbench"
printf '\\set r random(1, 100000)\n\\set s random(1, 5)\nUPDATE reviews SET stars = :s WHERE id = :r;\n' >"$work/update.pgbench"

# setup variant: 100,000 reviews of 1,000 products, and the variant's counter (or trigger)
setup() {
	reset_db reviews product_floor
	psql -X -q -d "$db" >/dev/null <<SQL
CREATE TABLE reviews (id bigserial PRIMARY KEY, product_id int NOT NULL, stars int, paid boolean);
INSERT INTO reviews (product_id, stars, paid) SELECT 1 + g % 1000, 1 + g % 5, g % 7 <> 0 FROM generate_series(1, 100000) g;
$(case "$1" in
	sum) echo "SELECT counters.create_counter('product_stats', 'SELECT product_id, count(*) AS n, sum(stars) AS stars FROM reviews GROUP BY product_id');" ;;
	avg) echo "SELECT counters.create_counter('product_stats', 'SELECT product_id, count(*) AS n, avg(stars) AS stars FROM reviews GROUP BY product_id');" ;;
	avg_bool) echo "SELECT counters.create_counter('product_stats', 'SELECT product_id, count(*) AS n, avg(stars) AS stars, bool_or(paid) AS any_paid FROM reviews GROUP BY product_id');" ;;
	floor_avg) cat <<'FLOOR'
CREATE TABLE product_floor (product_id int PRIMARY KEY, n bigint NOT NULL, stars_sum bigint NOT NULL,
                            stars_count bigint NOT NULL,
                            stars numeric GENERATED ALWAYS AS (stars_sum::numeric / NULLIF(stars_count, 0)) STORED);
INSERT INTO product_floor (product_id, n, stars_sum, stars_count)
SELECT product_id, count(*), coalesce(sum(stars), 0), count(stars) FROM reviews GROUP BY product_id;
CREATE OR REPLACE FUNCTION product_floor_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO product_floor AS f (product_id, n, stars_sum, stars_count)
	SELECT product_id, count(*), coalesce(sum(stars), 0), count(stars) FROM new_rows GROUP BY product_id
	ORDER BY product_id
	ON CONFLICT (product_id) DO UPDATE SET n = f.n + excluded.n, stars_sum = f.stars_sum + excluded.stars_sum,
	                                       stars_count = f.stars_count + excluded.stars_count;
	RETURN NULL;
END $$;
CREATE TRIGGER product_floor AFTER INSERT ON reviews REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION product_floor_insert();
FLOOR
		;;
esac)
VACUUM ANALYZE reviews;
CHECKPOINT;
SQL
}
check() { # variant label
	local q
	case "$1" in
	sum) q="SELECT product_id, n, stars FROM product_stats EXCEPT SELECT product_id, count(*), sum(stars) FROM reviews GROUP BY 1" ;;
	avg) q="SELECT product_id, n, stars FROM product_stats EXCEPT SELECT product_id, count(*), avg(stars) FROM reviews GROUP BY 1" ;;
	avg_bool) q="SELECT product_id, n, stars, any_paid FROM product_stats EXCEPT SELECT product_id, count(*), avg(stars), bool_or(paid) FROM reviews GROUP BY 1" ;;
	floor_avg) q="SELECT product_id, n, stars FROM product_floor EXCEPT SELECT product_id, count(*), avg(stars) FROM reviews GROUP BY 1" ;;
	*) return 0 ;;
	esac
	[ "$(psql -X -q -At -d "$db" -c "SELECT count(*) FROM ($q) d")" = 0 ] || echo "DRIFT: $2 $1" >&2
}
write_tps() { # variant (the workload: $w)
	setup "$1"
	value=$(load "$work/$w.pgbench" | report_tps)
	check "$1" "$w"
}
bulk_ms() { # variant
	setup "$1"
	value=$(psql -X -q -d "$db" -c '\timing on' \
		-c "INSERT INTO reviews (product_id, stars, paid) SELECT 1 + g % 1000, g % 6, g % 3 = 0 FROM generate_series(1, $BULK) g" |
		awk '/^Time:/ {printf "%d", $2}')
	check "$1" bulk
}

variants=${VARIANTS:-none sum avg avg_bool}
header workload $variants
for w in ${WORKLOADS-insert update}; do
	row write_tps "$CLIENTS clients, single-row $w" tps $variants
done
[ "${BULK:-}" = 0 ] || row bulk_ms "INSERT ... SELECT $BULK rows (ms)" ms $variants
echo
echo "Ratios in parentheses: to no counter (none); above 1 is faster for tps, slower for ms. avg against sum: what the"
echo "derived column costs over the sum it is made of."
echo
[ "${BULK:-}" != 0 ] || exit 0
header "the bulk statement against the hand-written floor" floor_avg avg
row bulk_ms "INSERT ... SELECT $BULK rows (ms)" ms floor_avg avg
echo
echo "Ratios in parentheses: to the hand-written statement trigger (floor_avg); above 1 is slower."
