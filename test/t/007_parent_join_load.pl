# Counters through a parent row under real parallel load, without a foreign key: comments written for posts that
# other clients are inserting, flipping, deleting or giving a new id at the same time, while another client switches
# the counter between exact, log and sharded mode and compacts it. Ten rounds; after each, the counter equals the join
# recounted (both directions) and counters.verify() is empty, and no transaction failed (deadlocks and serialization
# failures retried, anything else fails the run: an error such as "could not open relation" would).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

my $node = start_node('parent_load', 'max_connections = 50');

my $db = create_database($node, 'counters_parent_load');
$node->safe_psql(
	$db, q{
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, published boolean NOT NULL);
CREATE TABLE comments (id bigserial PRIMARY KEY, post_id int, score int NOT NULL);
CREATE INDEX ON comments (post_id);
INSERT INTO posts SELECT g, g % 5, g % 2 = 0 FROM generate_series(1, 40) g;
INSERT INTO comments (post_id, score) SELECT 1 + g % 60, g % 7 FROM generate_series(1, 400) g;
SELECT counters.create_counter('blog_comments', $$
	SELECT p.blog_id, count(*) AS comments, sum(c.score) AS score FROM comments c JOIN posts p ON c.post_id = p.id
	 WHERE p.published GROUP BY p.blog_id $$);
-- A post takes a free id (another client may take it first: nothing happens then).
CREATE FUNCTION rekey(old_id int, new_id int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	UPDATE posts SET id = new_id WHERE id = old_id;
EXCEPTION WHEN unique_violation THEN
	NULL;
END $$;
-- (a function, not a view: a view over the counter's relation would stop its mode switches)
CREATE FUNCTION differences() RETURNS bigint LANGUAGE sql AS $$
SELECT count(*) FROM (
	(SELECT blog_id, comments, score FROM blog_comments
	 EXCEPT SELECT p.blog_id, count(*), sum(c.score) FROM comments c JOIN posts p ON c.post_id = p.id
	         WHERE p.published GROUP BY p.blog_id)
	UNION ALL
	(SELECT p.blog_id, count(*), sum(c.score) FROM comments c JOIN posts p ON c.post_id = p.id
	  WHERE p.published GROUP BY p.blog_id
	 EXCEPT SELECT blog_id, comments, score FROM blog_comments)) d
$$;
});

my %scripts = (
	'comment@4' => q{\set p random(1, 60)
\set q random(1, 60)
INSERT INTO comments (post_id, score) VALUES (:p, :p % 7);
UPDATE comments SET post_id = :q WHERE id = (SELECT max(id) FROM comments WHERE post_id = :p);
DELETE FROM comments WHERE id = (SELECT min(id) FROM comments WHERE post_id = :q);
},
	'post@3' => q{\set p random(1, 60)
\set q random(1, 60)
\set b random(1, 5)
INSERT INTO posts VALUES (:p, :b, :p % 2 = 0) ON CONFLICT DO NOTHING;
UPDATE posts SET published = NOT published WHERE id = :q;
SELECT rekey(:p, :q);
DELETE FROM posts WHERE id = :q AND :b = 1;
},
	'switch@1' => q{\set m random(1, 3)
SELECT counters.alter_counter('blog_comments', CASE :m WHEN 1 THEN 'exact' WHEN 2 THEN 'log' ELSE 'sharded' END);
SELECT counters.compact();
});

for my $round (1 .. 10)
{
	$node->pgbench(
		'-n -c 6 -j 2 -T 3 --max-tries=20',
		0,
		[ qr{^number of failed transactions: 0 }m ],
		[],
		"round $round: no transaction failed, no client aborted",
		{ map { (my $name = $_) =~ s/@/_$round.pgbench@/; ($name => $scripts{$_}) } keys %scripts }, $db);
	is($node->safe_psql($db, 'SELECT differences()'), '0', "round $round: the counter equals the join recounted");
	is($node->safe_psql($db, "SELECT count(*) FROM counters.verify('blog_comments')"),
		'0', "round $round: verify() finds nothing");
}
note('modes: ' . $node->safe_psql($db, "SELECT mode FROM counters.counter"));

$node->stop;
done_testing();
