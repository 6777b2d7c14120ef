# Deferred counters under ORM-style load (issue "Deferred counters"): 6 pgbench clients run transactions of several
# statements each -- single-row inserts into random blogs in random order, a move of a row just inserted, a delete, an
# update of an old row, a savepoint rolled back -- over deferred counters of every kind the transaction touches: an
# exact counter (count, sum), a counter-cache column, a log-mode counter and a counter through a parent row. With
# immediate counters the same transactions deadlock on the counter rows (the first round shows it); deferred, the rows
# are locked only at commit in sorted order: no deadlock, and after every round every counter equals a recount, at
# READ COMMITTED and at REPEATABLE READ (whose serialization failures, raised at commit, are retried).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

my $node = start_node('deferred_load', 'max_connections = 50');

my $db = create_database($node, 'counters_deferred_load');
$node->safe_psql(
	$db, q{
CREATE TABLE blogs (id int PRIMARY KEY, posts bigint NOT NULL DEFAULT 0, rating bigint NOT NULL DEFAULT 0);
CREATE TABLE posts (id bigserial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL);
CREATE TABLE comments (id bigserial PRIMARY KEY, post_id bigint NOT NULL);
CREATE INDEX ON comments (post_id);
INSERT INTO blogs SELECT g FROM generate_series(1, 20) g;
INSERT INTO posts (blog_id, rating) SELECT 1 + g % 20, g % 5 FROM generate_series(1, 2000) g;
INSERT INTO comments (post_id) SELECT 1 + g % 2000 FROM generate_series(1, 2000) g;
SELECT counters.create_counter('per_blog', 'SELECT blog_id, count(*) AS n, sum(rating) AS rating FROM posts GROUP BY blog_id');
SELECT counters.create_counter('blog_cache', 'SELECT blog_id AS id, count(*) AS posts, sum(rating) AS rating
                                                FROM posts GROUP BY blog_id', 'blogs');
SELECT counters.create_counter('per_rating', 'SELECT rating, count(*) AS n FROM posts GROUP BY rating', mode => 'log');
SELECT counters.create_counter('blog_comments', 'SELECT p.blog_id, count(*) AS n
                                                   FROM comments c JOIN posts p ON c.post_id = p.id GROUP BY p.blog_id');
CREATE FUNCTION differences() RETURNS bigint LANGUAGE sql AS $$
SELECT (SELECT count(*) FROM ((SELECT blog_id, n, rating FROM per_blog
                               EXCEPT SELECT blog_id, count(*), sum(rating) FROM posts GROUP BY blog_id)
                              UNION ALL
                              (SELECT blog_id, count(*), sum(rating) FROM posts GROUP BY blog_id
                               EXCEPT SELECT blog_id, n, rating FROM per_blog)) a)
     + (SELECT count(*) FROM blogs b
         WHERE b.posts <> (SELECT count(*) FROM posts p WHERE p.blog_id = b.id)
            OR b.rating <> (SELECT coalesce(sum(rating), 0) FROM posts p WHERE p.blog_id = b.id))
     + (SELECT count(*) FROM ((SELECT rating, n FROM per_rating
                               EXCEPT SELECT rating, count(*) FROM posts GROUP BY rating)
                              UNION ALL
                              (SELECT rating, count(*) FROM posts GROUP BY rating
                               EXCEPT SELECT rating, n FROM per_rating)) c)
     + (SELECT count(*) FROM ((SELECT blog_id, n FROM blog_comments
                               EXCEPT SELECT p.blog_id, count(*) FROM comments c JOIN posts p ON c.post_id = p.id
                                       GROUP BY p.blog_id)
                              UNION ALL
                              (SELECT p.blog_id, count(*) FROM comments c JOIN posts p ON c.post_id = p.id
                                GROUP BY p.blog_id
                               EXCEPT SELECT blog_id, n FROM blog_comments)) d)
$$;
});

# One transaction as an ORM writes it: a statement per saved object, keys in whatever order the objects come. Rows
# other transactions may hold are touched one at a time (a single-row update, a single-row delete), so that the
# workload alone cannot deadlock: any deadlock is the counters'.
my $transaction = q{\set a random(1, 20)
\set b random(1, 20)
\set c random(1, 20)
\set r random(0, 4)
\set old random(1, 2000)
BEGIN;
INSERT INTO posts (blog_id, rating) VALUES (:a, :r);
INSERT INTO posts (blog_id, rating) VALUES (:b, :r + 1);
INSERT INTO comments (post_id) VALUES (currval('posts_id_seq'));
INSERT INTO posts (blog_id, rating) VALUES (:c, 2);
UPDATE posts SET blog_id = :a WHERE id = currval('posts_id_seq');
SAVEPOINT s;
INSERT INTO posts (blog_id, rating) VALUES (:b, 3);
ROLLBACK TO s;
UPDATE posts SET rating = :r, blog_id = :c WHERE id = :old;
INSERT INTO comments (post_id) VALUES (:old);
DELETE FROM posts WHERE id = currval('posts_id_seq') - 1;
COMMIT;
};

# Immediate counters: the transactions deadlock on the counter rows (pgbench counts them as failed, not retried).
$node->pgbench(
	'-n -c 6 -j 2 -T 3 --max-tries=1',
	0,
	[ qr{^number of failed transactions: [1-9]}m ],
	[],
	'immediate counters: ORM-style transactions deadlock on the counter rows',
	{ 'immediate.pgbench' => $transaction }, $db);
is($node->safe_psql($db, 'SELECT differences()'), '0', 'immediate: the counters equal their recounts');
my $deadlocks = () = slurp_file($node->logfile) =~ /ERROR:  deadlock detected/g;
ok($deadlocks > 0, "immediate: $deadlocks deadlocks");

$node->safe_psql($db, "SELECT counters.set_deferred(name) FROM counters.counter");
my $before = $deadlocks;
for my $round (1 .. 4)
{
	my $isolation = $round % 2 ? 'read committed' : 'repeatable read';
	$node->safe_psql($db, "ALTER DATABASE $db SET default_transaction_isolation = '$isolation'");
	$node->pgbench(
		'-n -c 6 -j 2 -T 3 --max-tries=' . ($round % 2 ? 1 : 50),
		0,
		[ qr{^number of failed transactions: 0 }m ],
		[],
		"deferred, round $round ($isolation): no transaction failed",
		{ "deferred_$round.pgbench" => $transaction }, $db);
	is($node->safe_psql($db, 'SELECT differences()'), '0', "deferred, round $round: every counter equals its recount");
	is($node->safe_psql($db, 'SELECT count(*) FROM counters.verify()'), '0', "deferred, round $round: verify() is empty");
}
my $after = () = slurp_file($node->logfile) =~ /ERROR:  deadlock detected/g;
is($after - $before, 0, 'deferred: no deadlock');

$node->stop;
done_testing();
