# Per-counter statistics of the write path (counters.stats: calls, counted_rows, written_keys, total_time,
# calls_since), kept in shared memory when counters is in shared_preload_libraries.
#
# An application role (not a superuser) declares two counters on one source and one on another, in two databases,
# and pgbench writes with 4 clients: each counter's calls and rows must equal the statements and row versions the
# load made to its source (counted here from what pgbench ran, not from the extension), written_keys the keys, and
# the counters equal a recount. Then: the other database's load does not leak in; a drop and a new declaration start
# from zero; counters.reset_stats() is refused to the application role and empties only
# its database's numbers. oldest_pending (log and sharded mode) follows the writers' commits and the compactions
# that fold them, including a writer that commits after a compaction's snapshot and compactions rolled back.
# Without the preload every column reads NULL.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

my $node = start_node('stats', q{
shared_preload_libraries = 'counters'
});
my @dbs = (create_database($node, 'stats_a'), create_database($node, 'stats_b'));
$node->safe_psql('postgres', 'CREATE ROLE s_app LOGIN');
for my $db (@dbs)
{
	$node->safe_psql($db, 'GRANT CREATE ON SCHEMA public TO s_app');
	$node->safe_psql(
		$db, q{
SET ROLE s_app;
CREATE TABLE posts (id bigserial PRIMARY KEY, blog int NOT NULL, rating int NOT NULL);
CREATE TABLE likes (id bigserial PRIMARY KEY, post_id bigint NOT NULL);
SELECT counters.create_counter('per_blog', 'SELECT blog, count(*), sum(rating) FROM posts GROUP BY blog');
SELECT counters.create_counter('per_rating', 'SELECT rating, count(*) FROM posts GROUP BY rating', mode => 'log');
SELECT counters.create_counter('per_post', 'SELECT post_id, count(*) FROM likes GROUP BY post_id');
});
}

sub stats
{
	my ($db, $counter) = @_;
	return $node->safe_psql($db,
		"SELECT calls, counted_rows, written_keys, total_time > 0 FROM counters.stats WHERE counter = '$counter'",
		extra_params => [ '-U', 's_app' ]);
}

# The keys of per_blog (in stats_a) that differ from a recount of posts.
sub per_blog_drift
{
	return $node->safe_psql(
		'stats_a', q{
SELECT count(*) FROM (SELECT blog, count(*), sum(rating) FROM posts GROUP BY blog) r
  FULL JOIN per_blog c USING (blog) WHERE c.count IS DISTINCT FROM r.count OR c.sum IS DISTINCT FROM r.sum});
}

is(stats('stats_a', 'per_blog'), '0|0|0|f', 'a new counter starts at zero');

# 4 clients x 50 transactions: an INSERT of one post (blog and rating from 1 to 5), then an UPDATE of that post's
# rating; every 5th transaction (by client) also likes it. Two statements per transaction on posts: 400 calls, 200
# inserted rows and 200 updates (an old and a new version each): 600 row versions.
$node->pgbench(
	'-n -c 4 -j 2 -t 50 -U s_app',
	0,
	[ qr{^number of transactions actually processed: 200/200$}m, qr{^number of failed transactions: 0 }m ],
	[],
	'pgbench: every transaction committed',
	{
		'stats_write.pgbench' => q{\set b random(1, 5)
INSERT INTO posts (blog, rating) VALUES (:b, :b) RETURNING id \gset
UPDATE posts SET rating = rating + 1 WHERE id = :id;
}
	},
	'stats_a');
$node->safe_psql('stats_a', 'INSERT INTO likes (post_id) SELECT id FROM posts WHERE id % 5 = 0',
	extra_params => [ '-U', 's_app' ]);

is(stats('stats_a', 'per_blog'), '400|600|400|t',
	'per_blog: a call per statement, every row version counted, a key written per statement, time spent');
is(stats('stats_a', 'per_rating'), '400|600|600|t',
	'per_rating (log mode): the same calls and rows; an update moves a post between two keys');
is(stats('stats_a', 'per_post'), '1|40|40|t', 'per_post: one statement of 40 rows and 40 keys');
is(per_blog_drift(), '0', 'per_blog equals a recount of posts');
is(stats('stats_b', 'per_blog'), '0|0|0|f', 'the other database\'s counter of the same name saw none of it');

# A drop and a new declaration start from zero (the numbers belong to the definition view).
$node->safe_psql('stats_a', q{
SET ROLE s_app;
SELECT counters.drop_counter('per_post');
SELECT counters.create_counter('per_post', 'SELECT post_id, count(*) FROM likes GROUP BY post_id');
});
is(stats('stats_a', 'per_post'), '0|0|0|f', 'a counter dropped and declared again starts from zero');

# counters.reset_stats(): refused to the application role; the superuser's empties this database's numbers only.
my ($ret, $out, $err) = $node->psql('stats_a', 'SELECT counters.reset_stats()', extra_params => [ '-U', 's_app' ]);
like($err, qr/permission denied for function reset_stats/, 'reset_stats is refused to a role not granted it');
$node->safe_psql('stats_b', 'INSERT INTO posts (blog, rating) VALUES (1, 1)', extra_params => [ '-U', 's_app' ]);
my $before = $node->safe_psql('stats_a', "SELECT calls_since FROM counters.stats WHERE counter = 'per_blog'");
is($node->safe_psql('stats_a', 'SELECT counters.reset_stats()'), 't', 'the superuser resets');
is(stats('stats_a', 'per_blog'), '0|0|0|f', 'after reset_stats, per_blog reads zero');
is( $node->safe_psql(
		'stats_a', "SELECT calls_since > '$before' FROM counters.stats WHERE counter = 'per_blog'"),
	't',
	'calls_since moved to the reset');
is(stats('stats_b', 'per_blog'), '1|1|1|t', 'the other database keeps its numbers');

# oldest_pending: the commit time of the oldest delta not folded yet (log and sharded mode only).
sub pending
{
	my ($counter) = @_;
	return $node->safe_psql('stats_a',
		"SELECT coalesce(oldest_pending::text, 'none') FROM counters.stats WHERE counter = '$counter'",
		extra_params => [ '-U', 's_app' ]);
}
sub as_app { return $node->safe_psql('stats_a', $_[0], extra_params => [ '-U', 's_app' ]); }
is(pending('per_blog'), 'none', 'oldest_pending: an exact counter has nothing pending');
my $loaded = pending('per_rating');
isnt($loaded, 'none', 'oldest_pending: the log counter\'s load is pending');
is(as_app("SELECT '$loaded' < now()"), 't', 'oldest_pending is a commit time of the past');
as_app("SELECT counters.compact('per_rating')");
is(pending('per_rating'), 'none', 'oldest_pending: nothing after a compaction');

# A writer that appended before a compaction's snapshot and commits after it, before the compaction commits: its
# delta stays pending.
my $writer = hold_open($node, 'stats_a', 'INSERT INTO posts (blog, rating) VALUES (9, 9)', '-U', 's_app');
my $compaction = hold_open($node, 'stats_a', "SELECT counters.compact('per_rating')", '-U', 's_app');
is(pending('per_rating'), 'none', 'an uncommitted append is not pending yet');
my $before_commit = as_app('SELECT now()');
release($writer);
release($compaction);
my $late = pending('per_rating');
isnt($late, 'none', 'a writer committed after the compaction\'s snapshot is still pending');
is(as_app("SELECT '$late'::timestamptz >= '$before_commit'"), 't', '... from its commit');
as_app("BEGIN; SELECT counters.compact('per_rating'); ROLLBACK");
is(pending('per_rating'), $late, 'a compaction rolled back folds nothing');
as_app("BEGIN; SAVEPOINT s; SELECT counters.compact('per_rating'); ROLLBACK TO s; COMMIT");
is(pending('per_rating'), $late, 'a compaction rolled back to a savepoint folds nothing');
as_app("BEGIN; SAVEPOINT s; SELECT counters.compact('per_rating'); RELEASE s; COMMIT");
is(pending('per_rating'), 'none', 'a compaction in a released savepoint folds the pending rows');
as_app("SELECT counters.compact()");
is( as_app(q{
SELECT count(*) FROM (SELECT rating, count(*) FROM posts GROUP BY rating) r
  FULL JOIN per_rating c USING (rating) WHERE c.count IS DISTINCT FROM r.count}),
	'0',
	'per_rating equals a recount of posts');

# Pending rows that a rebuild or a mode switch folded are no longer pending.
as_app("INSERT INTO posts (blog, rating) VALUES (3, 3)");
isnt(pending('per_rating'), 'none', 'a new append is pending');
as_app("CALL counters.rebuild_concurrently('per_rating')");
is(pending('per_rating'), 'none', 'oldest_pending: nothing after rebuild_concurrently');
as_app("INSERT INTO posts (blog, rating) VALUES (4, 4)");
as_app("SELECT counters.alter_counter('per_rating', 'exact')");
as_app("SELECT counters.alter_counter('per_rating', 'log')");
is(pending('per_rating'), 'none', 'oldest_pending: nothing after a switch to exact mode and back');

# A sink stores no row: its source_writes are the rows its counters counted.
as_app(q{
CREATE TABLE clicks (post_id bigint NOT NULL);
SELECT counters.create_counter('per_click', 'SELECT post_id, count(*) FROM clicks GROUP BY post_id');
SELECT counters.set_sink('clicks');
INSERT INTO clicks SELECT g % 3 FROM generate_series(1, 7) g;
INSERT INTO clicks VALUES (1), (2);
});
is(as_app("SELECT source_writes, counted_rows, calls FROM counters.stats WHERE counter = 'per_click'"), '9|9|2',
	'source_writes of a sink: the rows it took and counted');

# Without the preload nothing is kept: the columns read NULL, and counting goes on.
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->restart;
$node->safe_psql('stats_a', 'INSERT INTO posts (blog, rating) VALUES (1, 1)', extra_params => [ '-U', 's_app' ]);
is( $node->safe_psql(
		'stats_a',
		"SELECT calls IS NULL AND counted_rows IS NULL AND total_time IS NULL AND calls_since IS NULL FROM counters.stats WHERE counter = 'per_blog'"
	),
	't',
	'without shared_preload_libraries the columns are NULL');
is($node->safe_psql('stats_a', 'SELECT counters.reset_stats()'), 'f', 'and reset_stats says nothing is kept');
is(per_blog_drift(), '0', 'per_blog still equals a recount');

$node->stop;
done_testing();
