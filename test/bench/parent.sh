#!/usr/bin/env bash
# Counters through a parent row: comments of published posts per blog. Three figures, each against the same work without
# the counter (and a counter of the comments table alone), in the same run: flipping a post that has 10,000 comments
# (its children move in one statement), in a new session and in one that has written before, and 8 clients inserting
# single comments. counters.verify() must be empty
# after each run. Not part of the tests.
#
#   bash test/bench/parent.sh                 # SECONDS_PER_RUN=10 RUNS=3 CLIENTS=8
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/bench/lib.sh
fresh_db counters_parent_bench
printf '\\set p random(2, 10000)\nINSERT INTO comments (post_id, score) VALUES (:p, 1);\n' >"$work/comment.pgbench"
setup() {
	reset_db comments posts
	psql -X -q -d "$db" >/dev/null 2>&1 <<SQL
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, published boolean NOT NULL DEFAULT true);
CREATE TABLE comments (id bigserial PRIMARY KEY, post_id int NOT NULL REFERENCES posts, score int NOT NULL);
CREATE INDEX ON comments (post_id);
INSERT INTO posts SELECT g, g % 100, true FROM generate_series(1, 10000) g;
INSERT INTO comments (post_id, score) SELECT 1, g % 5 FROM generate_series(1, 10000) g;
INSERT INTO comments (post_id, score) SELECT 2 + g % 9999, g % 5 FROM generate_series(1, 200000) g;
$(case "$1" in
	none) ;;
	single) echo "SELECT counters.create_counter('post_comments', 'SELECT post_id, count(*) AS n FROM comments GROUP BY post_id');" ;;
	join) echo "SELECT counters.create_counter('blog_comments', 'SELECT p.blog_id, count(*) AS n, sum(c.score) AS score FROM comments c JOIN posts p ON c.post_id = p.id WHERE p.published GROUP BY p.blog_id');" ;;
esac)
VACUUM ANALYZE;
CHECKPOINT;
SQL
}
check() { [ "$1" = none ] || check_verify "$1"; }
declare -A flip warm tps
for v in none single join; do
	setup "$v"
	flips=()
	for ((r = 0; r < 5; r++)); do
		flips+=("$(psql -X -q -d "$db" -c '\timing on' -c 'UPDATE posts SET published = NOT published WHERE id = 1' |
			awk '/^Time:/ {printf "%.1f", $2}')")
	done
	check "$v"
	flip[$v]=$(printf '%s\n' "${flips[@]}" | median)
	# the same in one session that has written before (a pooled connection): the first flip is not timed
	warm[$v]=$(for ((r = 0; r < 12; r++)); do echo 'UPDATE posts SET published = NOT published WHERE id = 1;'; done |
		psql -X -q -d "$db" -c '\timing on' -f - | awk '/^Time:/ {if (n++) printf "%.2f\n", $2}' | median)
	check "$v"
	results=()
	for ((r = 0; r < RUNS; r++)); do
		out=$(load "$work/comment.pgbench")
		results+=("$(report_tps <<<"$out")")
	done
	check "$v"
	tps[$v]=$(printf '%s\n' "${results[@]}" | median)
done
echo "| workload | no counter | counter of comments alone | comments of published posts per blog (join) |"
echo "|---|---|---|---|"
echo "| flip a post with 10,000 comments (ms, median of 5) | ${flip[none]} | ${flip[single]} | ${flip[join]} |"
echo "| the same, in a session that has written before (ms, median of 11) | ${warm[none]} | ${warm[single]} | ${warm[join]} |"
echo "| $CLIENTS clients inserting single comments (tps) | ${tps[none]} (1.00) | ${tps[single]} ($(ratio "${tps[single]}" "${tps[none]}")) | ${tps[join]} ($(ratio "${tps[join]}" "${tps[none]}")) |"
