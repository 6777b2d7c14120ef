# Changes of a counter do not make writers queue behind them while an older transaction holds the source. A
# transaction left open on the source (a writer idle in transaction, as an application or pg_dump leaves one) makes
# a change wait for its lock; PostgreSQL would queue every later writer behind that waiting lock, turning a 0.1 s
# change into a write outage. Each change here waits for its locks at most 50 ms at a time and steps aside between
# attempts, so every other writer (each with lock_timeout = 2s) commits while it waits; once the old transaction
# ends, the change completes and the counter equals a GROUP BY of the source.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;
use IPC::Run;

my $node = start_node('lock_queue', "log_statement = none\n");
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION counters;
CREATE TABLE posts (id bigserial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL);
INSERT INTO posts (blog_id, rating) SELECT g % 10, g % 7 FROM generate_series(1, 1000) g;
SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id');
});

# Runs `change` in the background while a session holds `holder_sql` open; checks that it waits and that writers
# (of keys the open transaction does not hold) commit meanwhile.
sub change_behind
{
	my ($label, $holder_sql, $change) = @_;
	my $held = hold_open($node, 'postgres', $holder_sql);
	my $out = '';
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port, '-d', 'postgres',
		  '-c', "SET application_name = 'the_change'", '-c', $change ],
		'>', \$out, '2>', \$out,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'the_change' AND wait_event IS NOT NULL"),
		"$label: the change waits for the open transaction");
	my $committed = 0;
	for my $i (1 .. 20)
	{
		my ($ret, $stdout, $stderr) = $node->psql('postgres',
			"SET lock_timeout = '2s'; INSERT INTO posts (blog_id, rating) VALUES (10 + $i % 5, $i % 7)");
		$committed++ if $ret == 0;
		diag($stderr) if $ret != 0;
	}
	is($committed, 20, "$label: every writer commits while the change waits");
	is( $node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'the_change'"),
		'1', "$label: the change is still waiting");
	release($held);
	ok($h->finish, "$label: the change completes once the open transaction ends") or diag($out);
	return;
}

change_behind('switching to log mode, behind an idle writer', 'INSERT INTO posts (blog_id, rating) VALUES (1, 1)',
	q{SELECT counters.alter_counter('blog_posts', 'log')});
change_behind('switching to exact mode, behind an idle reader of the counter',
	'SELECT count(*) FROM blog_posts_totals', q{SELECT counters.alter_counter('blog_posts', 'exact')});
change_behind('rebuilding concurrently, behind an idle writer', 'INSERT INTO posts (blog_id, rating) VALUES (2, 2)',
	q{CALL counters.rebuild_concurrently('blog_posts')});
change_behind('declaring concurrently, behind an idle writer', 'UPDATE posts SET rating = rating + 1 WHERE id = 5',
	q{CALL counters.create_counter_concurrently('blog_ratings', 'SELECT blog_id, sum(rating) AS rating FROM posts GROUP BY blog_id')});

is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM (
	(SELECT blog_id, count(*), sum(rating) FROM posts GROUP BY 1 EXCEPT SELECT blog_id, posts, rating FROM blog_posts)
	UNION ALL (SELECT blog_id, posts, rating FROM blog_posts EXCEPT SELECT blog_id, count(*), sum(rating) FROM posts GROUP BY 1)
	UNION ALL (SELECT blog_id, 0, sum(rating) FROM posts GROUP BY 1 EXCEPT SELECT blog_id, 0, rating FROM blog_ratings)
	UNION ALL (SELECT blog_id, 0, rating FROM blog_ratings EXCEPT SELECT blog_id, 0, sum(rating) FROM posts GROUP BY 1)) d}),
	'0',
	'every counter equals a GROUP BY of posts');
is($node->safe_psql('postgres', 'SELECT count(*) FROM counters.verify()'), '0', 'counters.verify() is empty');

# The caller's own lock_timeout bounds the whole wait: the change fails (55P03), naming the counter, and changes nothing.
my $held = hold_open($node, 'postgres', 'INSERT INTO posts (blog_id, rating) VALUES (3, 3)');
my ($ret, $stdout, $stderr) =
  $node->psql('postgres', "SET lock_timeout = '300ms'; SELECT counters.alter_counter('blog_posts', 'sharded')");
isnt($ret, 0, 'with lock_timeout set, the change gives up');
like($stderr, qr/counter "blog_posts": could not lock public.posts within lock_timeout/, 'the error names the counter');
release($held);
is($node->safe_psql('postgres', "SELECT mode FROM counters.counter WHERE name = 'blog_posts'"),
	'exact', 'the counter is left as it was');

done_testing();
