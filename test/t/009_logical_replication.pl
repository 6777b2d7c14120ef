# Logical replication with a real publication and subscription (two clusters), in the two topologies of
# docs/replication.md, each counter compared with a recount of the subscriber's own rows:
#   (b) sources only: the subscriber counts the changes its apply worker applies (the initial copy, then INSERT,
#       UPDATE moving rows between keys, DELETE and TRUNCATE), through the replica triggers;
#   (a) sources and counter tables: the publisher's counts arrive with its tables, the subscriber counts nothing
#       (no double count), refuses local writes to the source and compaction while subscribed, and after the
#       subscription is dropped (the cut-over) counts its own writes and compacts.
# A counter-cache target (blogs.post_count) is published without its counter column in both (a column list): the
# subscriber keeps it itself. user_blog_posts keeps a max() too: the subscriber's applied deletes read the next
# extreme through its own index. After the initial copy the counters are deferred on both sides. The counters are declared and the rows written by an application role; the
# subscriptions are the superuser's.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

my $pub = start_node('publisher', "wal_level = logical\nmax_replication_slots = 10\nmax_wal_senders = 10");
my $sub = start_node('subscriber', "max_logical_replication_workers = 8\nmax_sync_workers_per_subscription = 4");

my $schema = q{
CREATE TABLE blogs (id int PRIMARY KEY, name text NOT NULL, post_count bigint NOT NULL DEFAULT 0);
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, user_id int NOT NULL, rating int NOT NULL DEFAULT 0,
                    published boolean NOT NULL DEFAULT true);
CREATE TABLE likes (id int PRIMARY KEY, post_id int NOT NULL);
CREATE TABLE views (id int PRIMARY KEY, post_id int NOT NULL);
SELECT counters.create_counter('blog_posts', 'SELECT blog_id AS id, count(*) AS post_count FROM posts GROUP BY blog_id',
                               target => 'blogs');
CREATE INDEX ON posts (user_id, blog_id, rating);
SELECT counters.create_counter('user_blog_posts', 'SELECT user_id, blog_id, count(*) FILTER (WHERE published) AS posts,
                                sum(rating) AS rating, max(rating) AS top FROM posts GROUP BY user_id, blog_id');
SELECT counters.create_counter('post_likes', 'SELECT post_id, count(*) AS likes FROM likes GROUP BY post_id', mode => 'sharded');
SELECT counters.create_counter('post_views', 'SELECT post_id, count(*) AS views FROM views GROUP BY post_id', mode => 'log');
};
# Each counter against a recount of the rows of the database it is read in: the rows that differ, both ways.
my $check = q{
SELECT 'blog_posts', count(*) FROM (
  (SELECT id, post_count FROM blogs WHERE post_count <> 0 EXCEPT SELECT blog_id, count(*) FROM posts GROUP BY 1)
  UNION ALL
  (SELECT blog_id, count(*) FROM posts GROUP BY 1 EXCEPT SELECT id, post_count FROM blogs)) d
UNION ALL SELECT 'user_blog_posts', count(*) FROM (
  (SELECT user_id, blog_id, posts, rating, top FROM user_blog_posts
   EXCEPT SELECT user_id, blog_id, count(*) FILTER (WHERE published), sum(rating), max(rating) FROM posts GROUP BY 1, 2)
  UNION ALL
  (SELECT user_id, blog_id, count(*) FILTER (WHERE published), sum(rating), max(rating) FROM posts GROUP BY 1, 2
   EXCEPT SELECT user_id, blog_id, posts, rating, top FROM user_blog_posts)) d
UNION ALL SELECT 'post_likes', count(*) FROM (
  (SELECT post_id, likes FROM post_likes EXCEPT SELECT post_id, count(*) FROM likes GROUP BY 1)
  UNION ALL (SELECT post_id, count(*) FROM likes GROUP BY 1 EXCEPT SELECT post_id, likes FROM post_likes)) d
UNION ALL SELECT 'post_views', count(*) FROM (
  (SELECT post_id, views FROM post_views EXCEPT SELECT post_id, count(*) FROM views GROUP BY 1)
  UNION ALL (SELECT post_id, count(*) FROM views GROUP BY 1 EXCEPT SELECT post_id, views FROM post_views)) d
ORDER BY 1;
};
my $exact = "blog_posts|0\npost_likes|0\npost_views|0\nuser_blog_posts|0";
# rows the publisher writes: round n adds posts, likes and views, moves posts between blogs and users, deletes some
sub writes
{
	my ($n) = @_;
	my $base = 1000 * $n;
	return qq{
INSERT INTO posts SELECT $base + g, 1 + g % 7, 1 + g % 5, g % 4, g % 3 <> 0 FROM generate_series(1, 200) g;
INSERT INTO likes SELECT $base + g, $base + 1 + g % 50 FROM generate_series(1, 300) g;
INSERT INTO views SELECT $base + g, $base + 1 + g % 40 FROM generate_series(1, 300) g;
UPDATE posts SET blog_id = 1 + (blog_id + 2) % 7, published = NOT published WHERE id % 10 = $n % 10;
UPDATE posts SET user_id = user_id + 1, rating = rating + 1 WHERE id % 13 = 0;
DELETE FROM posts WHERE id % 17 = $n;
DELETE FROM likes WHERE id % 11 = 0;
};
}

my $conn = $pub->connstr . ' dbname=pubdb';
for my $node ($pub, $sub)
{
	$node->safe_psql('postgres', 'CREATE ROLE app LOGIN');
}
$pub->safe_psql('postgres', 'CREATE DATABASE pubdb OWNER app');
$pub->safe_psql('pubdb', 'CREATE EXTENSION counters; GRANT CREATE ON SCHEMA public TO app');
$pub->safe_psql('pubdb', "SET ROLE app; $schema");
$pub->safe_psql('pubdb',
	"SET ROLE app; INSERT INTO blogs SELECT g, 'blog ' || g FROM generate_series(1, 7) g;" . writes(1));
my ($totals, $slots, $vtotals, $vlog) = split /\|/, $pub->safe_psql('pubdb',
	q{SELECT (SELECT totals::text FROM counters.counter WHERE name = 'post_likes'),
	         (SELECT log::text FROM counters.counter WHERE name = 'post_likes'),
	         (SELECT totals::text FROM counters.counter WHERE name = 'post_views'),
	         (SELECT log::text FROM counters.counter WHERE name = 'post_views')});
$pub->safe_psql('pubdb',
	"CREATE PUBLICATION pub_src FOR TABLE blogs (id, name), posts, likes, views;
	 CREATE PUBLICATION pub_both FOR TABLE blogs (id, name), posts, likes, views, user_blog_posts, $totals, $slots,
	   $vtotals, $vlog;");
is($pub->safe_psql('pubdb', $check), $exact, 'publisher: every counter equals its recount');

for my $db (qw(sub_b sub_a))
{
	$sub->safe_psql('postgres', "CREATE DATABASE $db OWNER app");
	$sub->safe_psql($db, 'CREATE EXTENSION counters; GRANT CREATE ON SCHEMA public TO app');
	$sub->safe_psql($db, "SET ROLE app; $schema");
}
$sub->safe_psql('sub_b', "CREATE SUBSCRIPTION sb CONNECTION '$conn' PUBLICATION pub_src");
$sub->safe_psql('sub_a', "CREATE SUBSCRIPTION sa CONNECTION '$conn' PUBLICATION pub_both");
# (in the subscription's own database: pg_subscription_rel is per database, and the default, postgres, has none)
$sub->wait_for_subscription_sync($pub, 'sb', 'sub_b');
$sub->wait_for_subscription_sync($pub, 'sa', 'sub_a');
is($sub->safe_psql('sub_b', $check), $exact, '(b) sources only: the initial copy is counted');
# (each table is copied by a worker of its own, at its own moment: the counters match the sources once the
# subscription has caught up with them all)
$pub->wait_for_catchup('sa');
(my $differs = $check) =~ s/;\s*$//;
ok($sub->poll_query_until('sub_a', "SELECT bool_and(n = 0) FROM ($differs) c(counter, n)"),
	'(a) with counter tables: the initial copy arrives, counted once');

# Deferred counters from here on, on both sides: the publisher's transactions and the subscriber's apply worker's
# (topology b) hold their deltas until they commit.
$pub->safe_psql('pubdb', 'SET ROLE app; SELECT counters.set_deferred(name) FROM counters.counter');
$sub->safe_psql('sub_b', 'SET ROLE app; SELECT counters.set_deferred(name) FROM counters.counter');
for my $n (2 .. 4)
{
	$pub->safe_psql('pubdb', 'SET ROLE app;' . writes($n));
	$pub->safe_psql('pubdb', 'SELECT counters.compact()') if $n == 3;
}
$pub->safe_psql('pubdb', 'TRUNCATE views');
$pub->safe_psql('pubdb', 'SET ROLE app;' . writes(5));
$pub->wait_for_catchup('sb');
$pub->wait_for_catchup('sa');
is($sub->safe_psql('sub_b', $check), $exact,
	'(b) applied INSERT, UPDATE, DELETE and TRUNCATE are counted by the subscriber');
is($sub->safe_psql('sub_a', $check), $exact, '(a) the publisher\'s counts arrive, and nothing is counted twice');
is($sub->safe_psql('sub_b', 'SELECT count(*) FROM counters.verify()'), '0', '(b) verify() is empty');
is( $sub->safe_psql('sub_a', 'SELECT sum(posts) FROM user_blog_posts'),
	$pub->safe_psql('pubdb', 'SELECT sum(posts) FROM user_blog_posts'),
	'(a) the subscriber\'s values are the publisher\'s');

# (a) while subscribed: a local write, compaction and rebuild are refused, naming the counter and the subscription
my ($ret, $out, $err) = $sub->psql('sub_a', 'SET ROLE app; INSERT INTO posts VALUES (999999, 1, 1)');
like($err, qr/counter "user_blog_posts" is replicated from a publisher: table public.user_blog_posts is subscribed \(subscription "sa"\)/,
	'(a) a local write to the source is refused');
($ret, $out, $err) = $sub->psql('sub_a', "SET ROLE app; SELECT counters.compact('post_views')");
like($err, qr/cannot compact counter "post_views": it is replicated from a publisher/, '(a) compact() is refused');
is($sub->safe_psql('sub_a', 'SET ROLE app; SELECT counters.compact()'), '0', '(a) a compaction round skips them');
($ret, $out, $err) = $sub->psql('sub_a', "SET ROLE app; SELECT counters.rebuild('post_likes')");
like($err, qr/cannot rebuild counter "post_likes"/, '(a) rebuild() is refused');
($ret, $out, $err) = $sub->psql('sub_a', "SET ROLE app; SELECT counters.alter_counter('post_likes', 'log')");
like($err, qr/cannot switch the mode of counter "post_likes"/, '(a) a mode switch is refused');

# the cut-over: writes stop on the publisher, the subscription goes, the subscriber takes the writes
$sub->safe_psql('sub_a', 'DROP SUBSCRIPTION sa');
$sub->safe_psql('sub_a', 'SET ROLE app;' . writes(6));
$sub->safe_psql('sub_a', 'SET ROLE app; SELECT counters.compact()');
is($sub->safe_psql('sub_a', $check), $exact, '(a) after the cut-over the subscriber counts and compacts its own writes');
is($sub->safe_psql('sub_a', 'SELECT count(*) FROM counters.verify()'), '0', '(a) verify() is empty after the cut-over');

# (b) a local write on the subscriber counts too (its counter tables are its own)
$sub->safe_psql('sub_b', 'SET ROLE app; INSERT INTO posts VALUES (999999, 2, 2)');
is($sub->safe_psql('sub_b', $check), $exact, '(b) a local write is counted');

done_testing();
