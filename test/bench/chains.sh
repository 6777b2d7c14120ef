#!/usr/bin/env bash
# Counters through a chain of parent rows: reactions -> replies -> threads -> forums. Two figures, in one run, each
# against the same work without the counter: one client, then CLIENTS clients, inserting single reactions with a
# counter through one
# parent row (reactions per thread: depth 1) and through three (reactions per forum: depth 3, one exact counter per
# level); and moving a thread to another forum (a middle row) with N = 100, 10,000 and 100,000 reactions below it, in a
# session that has written before (median of 11 moves): without the counter, with the depth-1 counter moving a reply
# with the same reactions (its children re-read), and with the chain (its subtotal moved). counters.verify() must be
# empty after each run. Not part of the tests.
#
#   bash test/bench/chains.sh                 # SECONDS_PER_RUN=10 RUNS=3 CLIENTS=8
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/bench/lib.sh
fresh_db counters_chains_bench
# (single reactions on 20,000 replies of 2,000 threads of 20 forums, away from the three big threads)
printf '\\set p random(31, 20000)\nINSERT INTO reactions (reply_id) VALUES (:p);\n' >"$work/react.pgbench"
setup() {
	reset_db reactions replies threads forums
	psql -X -q -d "$db" >/dev/null 2>&1 <<SQL
CREATE TABLE forums (id int PRIMARY KEY);
CREATE TABLE threads (id int PRIMARY KEY, forum_id int NOT NULL);
CREATE TABLE replies (id int PRIMARY KEY, thread_id int NOT NULL);
CREATE TABLE reactions (id bigserial PRIMARY KEY, reply_id int NOT NULL);
CREATE INDEX ON reactions (reply_id);
INSERT INTO forums SELECT g FROM generate_series(1, 20) g;
INSERT INTO threads SELECT g, 1 + g % 20 FROM generate_series(1, 2000) g;
-- threads 1, 2, 3: 10 replies each, with 100, 10,000 and 100,000 reactions in all
INSERT INTO replies SELECT g, 1 + (g - 1) / 10 FROM generate_series(1, 30) g;
INSERT INTO replies SELECT g, 4 + g % 1997 FROM generate_series(31, 20000) g;
INSERT INTO reactions (reply_id) SELECT 1 + g % 10 FROM generate_series(1, 100) g;
INSERT INTO reactions (reply_id) SELECT 11 + g % 10 FROM generate_series(1, 10000) g;
INSERT INTO reactions (reply_id) SELECT 21 + g % 10 FROM generate_series(1, 100000) g;
INSERT INTO reactions (reply_id) SELECT 31 + g % 19970 FROM generate_series(1, 100000) g;
$(case "$1" in
	none) ;;
	depth1) echo "SELECT counters.create_counter('thread_reactions', 'SELECT p.thread_id, count(*) AS n FROM reactions r JOIN replies p ON r.reply_id = p.id GROUP BY p.thread_id');" ;;
	depth3) echo "SELECT counters.create_counter('forum_reactions', 'SELECT f.id AS forum_id, count(*) AS n FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id JOIN forums f ON t.forum_id = f.id GROUP BY f.id');" ;;
esac)
VACUUM ANALYZE;
CHECKPOINT;
SQL
}
check() { [ "$1" = none ] || check_verify "$1"; }
# move variant N: ms of a move of the middle row with N reactions below, median of 11 in one session
move() {
	local sql
	case "$1:$2" in
	depth1:100) sql="UPDATE replies SET thread_id = CASE WHEN thread_id = 1 THEN 500 ELSE 1 END WHERE id <= 10" ;;
	depth1:10000) sql="UPDATE replies SET thread_id = CASE WHEN thread_id = 2 THEN 500 ELSE 2 END WHERE id BETWEEN 11 AND 20" ;;
	depth1:100000) sql="UPDATE replies SET thread_id = CASE WHEN thread_id = 3 THEN 500 ELSE 3 END WHERE id BETWEEN 21 AND 30" ;;
	*:100) sql="UPDATE threads SET forum_id = CASE WHEN forum_id = 1 THEN 5 ELSE 1 END WHERE id = 1" ;;
	*:10000) sql="UPDATE threads SET forum_id = CASE WHEN forum_id = 2 THEN 5 ELSE 2 END WHERE id = 2" ;;
	*:100000) sql="UPDATE threads SET forum_id = CASE WHEN forum_id = 3 THEN 5 ELSE 3 END WHERE id = 3" ;;
	esac
	for ((r = 0; r < 12; r++)); do echo "$sql;"; done |
		psql -X -q -d "$db" -c '\timing on' -f - | awk '/^Time:/ {if (n++) printf "%.3f\n", $2}' | median
}
declare -A tps one moves
for v in none depth1 depth3; do
	setup "$v"
	for n in 100 10000 100000; do
		moves[$v:$n]=$(move "$v" "$n")
		check "$v"
	done
	if [ "$v" = none ]; then
		for n in 100 10000 100000; do moves[reply:$n]=$(move depth1 "$n"); done
	fi
	results=()
	for ((r = 0; r < RUNS; r++)); do
		out=$(pgbench -n -c 1 -j 1 -T "$SECONDS_PER_RUN" -f "$work/react.pgbench" "$db" 2>/dev/null)
		results+=("$(report_tps <<<"$out")")
	done
	one[$v]=$(printf '%s\n' "${results[@]}" | median)
	results=()
	for ((r = 0; r < RUNS; r++)); do
		out=$(load "$work/react.pgbench")
		results+=("$(report_tps <<<"$out")")
	done
	check "$v"
	tps[$v]=$(printf '%s\n' "${results[@]}" | median)
done
echo "| workload | no counter | per thread, through one parent (depth 1) | per forum, through three (depth 3) |"
echo "|---|---|---|---|"
echo "| 1 client inserting single reactions (tps) | ${one[none]} (1.00) | ${one[depth1]} ($(ratio "${one[depth1]}" "${one[none]}")) | ${one[depth3]} ($(ratio "${one[depth3]}" "${one[none]}"); $(ratio "${one[depth1]}" "${one[depth3]}")x depth 1's time) |"
echo "| $CLIENTS clients inserting single reactions (tps) | ${tps[none]} (1.00) | ${tps[depth1]} ($(ratio "${tps[depth1]}" "${tps[none]}")) | ${tps[depth3]} ($(ratio "${tps[depth3]}" "${tps[none]}"); $(ratio "${tps[depth1]}" "${tps[depth3]}")x depth 1's time) |"
for n in 100 10000 100000; do
	echo "| move a middle row with $n reactions below (ms, median of 11) | reply ${moves[reply:$n]}, thread ${moves[none:$n]} | reply ${moves[depth1:$n]} ($(ratio "${moves[depth1:$n]}" "${moves[reply:$n]}")x) | thread ${moves[depth3:$n]} ($(ratio "${moves[depth3:$n]}" "${moves[none:$n]}")x) |"
done
