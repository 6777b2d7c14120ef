#!/usr/bin/env bash
# Multi-statement transactions (an ORM saving rows one statement at a time): what an exact counter costs per row when
# a transaction inserts K rows, each its own INSERT, for K = 1, 10, 100 and 1,000, against the same inserts without
# counters, measured side by side in one run. Each statement applies its own deltas (a counter row version per
# statement and key), so within a transaction the counter rows' versions pile up until it commits; this measures
# whether that cost grows with the transaction. One client, 100 blogs (a counter row per blog, count and rating
# sum). The same counter deferred (counters.set_deferred: its deltas summed until the commit, applied once per key)
# is measured in the same run. After each run counters.verify() must be empty. Not part of the tests.
#
#   bash test/bench/transactions.sh          # SECONDS_PER_RUN=10 RUNS=3 SIZES="1 10 100 1000"
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/bench/lib.sh
SIZES=${SIZES:-1 10 100 1000}
fresh_db counters_transactions_bench
setup() {
	reset_db rows
	psql -X -q -d "$db" >/dev/null <<SQL
CREATE TABLE rows (id bigserial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL);
$([ "$1" != none ] && echo "SELECT counters.create_counter('rows_per_blog', 'SELECT blog_id, count(*) AS n, sum(rating) AS rating_sum FROM rows GROUP BY blog_id');")
$([ "$1" = deferred ] && echo "SELECT counters.set_deferred('rows_per_blog');")
CHECKPOINT;
SQL
}
# script K: one transaction of K single-row inserts
script() {
	local f="$work/tx$1.pgbench" i
	{
		echo 'BEGIN;'
		for ((i = 0; i < $1; i++)); do
			printf '\\set b random(1, 100)\n\\set r random(0, 10)\nINSERT INTO rows (blog_id, rating) VALUES (:b, :r);\n'
		done
		echo 'COMMIT;'
	} >"$f"
	echo "$f"
}
rows_per_second() { # variant (the transaction size: $k)
	setup "$1"
	out=$(pgbench -n -c 1 -j 1 -T "$SECONDS_PER_RUN" -f "$(script "$k")" "$db" 2>/dev/null)
	value=$(awk -v k="$k" '/^tps = / {printf "%d", $3 * k}' <<<"$out")
	[ "$1" = none ] || check_verify "$1" rows_per_blog
}
printf '| rows per transaction | no counter | exact counter | deferred exact counter |\n|---|---|---|---|\n'
for k in $SIZES; do
	row rows_per_second "$k" "rows/s" none exact deferred
done
echo
echo "1 client, each row its own INSERT; ratios in parentheses: to no counter."
