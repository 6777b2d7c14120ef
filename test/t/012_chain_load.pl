# Counters through a chain of parent rows (reactions -> replies -> threads -> forums) under real parallel load, without
# foreign keys: reactions written, moved and deleted while other clients insert, move, re-key and delete replies and
# threads, move threads between forums, unpublish them and re-key forums, and another switches the counter between
# exact, log and sharded mode and compacts it (its levels stay exact). Ten rounds; after each, the counter equals its
# definition's query over the tables (both directions), counters.verify() of it (every level) is empty, and no
# transaction failed (serialization failures retried; anything else, a deadlock included, fails the run).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

my $node = start_node('chain_load', 'max_connections = 50');

my $db = create_database($node, 'counters_chain_load');
$node->safe_psql(
	$db, q{
CREATE TABLE forums (id int PRIMARY KEY, region text NOT NULL);
CREATE TABLE threads (id int PRIMARY KEY, forum_id int NOT NULL, published boolean NOT NULL);
CREATE TABLE replies (id int PRIMARY KEY, thread_id int NOT NULL);
CREATE TABLE reactions (id bigserial PRIMARY KEY, reply_id int, score int NOT NULL);
INSERT INTO forums SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END FROM generate_series(1, 6) g;
INSERT INTO threads SELECT g, 1 + g % 6, g % 3 > 0 FROM generate_series(1, 30) g;
INSERT INTO replies SELECT g, 1 + g % 30 FROM generate_series(1, 80) g;
INSERT INTO reactions (reply_id, score) SELECT 1 + g % 90, g % 7 FROM generate_series(1, 800) g;
SELECT counters.create_counter('forum_reactions', $$
	SELECT f.id AS forum_id, count(*) AS reactions, sum(r.score) AS score,
	       count(*) FILTER (WHERE f.region = 'eu') AS eu
	  FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
	  JOIN forums f ON t.forum_id = f.id
	 WHERE t.published GROUP BY f.id $$);
-- A row takes a free id (another client may take it first: nothing happens then).
CREATE FUNCTION rekey(tbl regclass, old_id int, new_id int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('UPDATE %s SET id = $2 WHERE id = $1', tbl) USING old_id, new_id;
EXCEPTION WHEN unique_violation THEN
	NULL;
END $$;
-- (a function, not a view: a view over the counter's relation would stop its mode switches)
CREATE FUNCTION differences() RETURNS bigint LANGUAGE sql AS $$
SELECT count(*) FROM (
	(SELECT forum_id, reactions, score, eu FROM forum_reactions
	 EXCEPT SELECT f.id, count(*), sum(r.score), count(*) FILTER (WHERE f.region = 'eu')
	          FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
	          JOIN forums f ON t.forum_id = f.id WHERE t.published GROUP BY f.id)
	UNION ALL
	(SELECT f.id, count(*), sum(r.score), count(*) FILTER (WHERE f.region = 'eu')
	   FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
	   JOIN forums f ON t.forum_id = f.id WHERE t.published GROUP BY f.id
	 EXCEPT SELECT forum_id, reactions, score, eu FROM forum_reactions)) d
$$;
});

my %scripts = (
	'reaction@4' => q{\set p random(1, 90)
\set q random(1, 90)
INSERT INTO reactions (reply_id, score) VALUES (:p, :p % 7), (:q, :q % 5);
UPDATE reactions SET reply_id = :q WHERE id = (SELECT max(id) FROM reactions WHERE reply_id = :p);
DELETE FROM reactions WHERE id = (SELECT min(id) FROM reactions WHERE reply_id = :q);
},
	'reply@2' => q{\set p random(1, 90)
\set q random(1, 90)
\set t random(1, 35)
INSERT INTO replies VALUES (:p, :t) ON CONFLICT DO NOTHING;
UPDATE replies SET thread_id = :t WHERE id = :q;
SELECT rekey('replies', :p, :q);
DELETE FROM replies WHERE id = :q AND :t = 1;
},
	'thread@2' => q{\set t random(1, 35)
\set u random(1, 35)
\set f random(1, 7)
INSERT INTO threads VALUES (:t, :f, true) ON CONFLICT DO NOTHING;
UPDATE threads SET forum_id = :f WHERE id = :u;
UPDATE threads SET published = NOT published WHERE id = :t;
SELECT rekey('threads', :t, :u);
DELETE FROM threads WHERE id = :u AND :f = 1;
},
	'forum@1' => q{\set f random(1, 7)
\set g random(1, 7)
\set m random(1, 3)
INSERT INTO forums VALUES (:f, 'eu') ON CONFLICT (id) DO UPDATE SET region = CASE forums.region WHEN 'eu' THEN 'us' ELSE 'eu' END;
SELECT rekey('forums', :f, :g);
SELECT counters.alter_counter('forum_reactions', CASE :m WHEN 1 THEN 'exact' WHEN 2 THEN 'log' ELSE 'sharded' END);
SELECT counters.compact();
});

for my $round (1 .. 10)
{
	$node->pgbench(
		'-n -c 9 -j 2 -T 3 --max-tries=20',
		0,
		[ qr{^number of failed transactions: 0 }m ],
		[],
		"round $round: no transaction failed, no client aborted",
		{ map { (my $name = $_) =~ s/@/_$round.pgbench@/; ($name => $scripts{$_}) } keys %scripts }, $db);
	is($node->safe_psql($db, 'SELECT differences()'), '0', "round $round: the counter equals its definition");
	is($node->safe_psql($db, "SELECT count(*) FROM counters.verify('forum_reactions')"),
		'0', "round $round: verify() finds nothing, at any level");
}
# Deadlocks the workload writes itself (two clients swapping two rows' ids: each waits for the other's unique index
# entry, with or without a counter) are left out; any other is the counter's.
my $log = slurp_file($node->logfile);
my @counters_deadlocks;
while ($log =~ /ERROR:  deadlock detected\n(.*?)\n(?=\S)/gs)
{
	my @statements = $1 =~ /^\s*Process \d+: (.*)$/mg;
	push @counters_deadlocks, join(' / ', @statements) if grep { !/^SELECT rekey\(/ } @statements;
}
is(scalar @counters_deadlocks, 0, 'no statement deadlocked but on two ids swapped by the workload')
  or diag(join("\n", @counters_deadlocks));
ok($node->safe_psql($db, 'SELECT count(*) FROM forum_reactions') > 0, 'the counter is not empty');

$node->stop;
done_testing();
