# create_counter_concurrently and rebuild_concurrently under real load. On a cluster of its own, 4 pgbench clients
# insert posts, move them between keys and delete them while a counter is declared concurrently over 1,000,000 posts
# (in exact mode, then another in sharded mode) and one is rebuilt concurrently. Checked: writers commit while each
# call runs (they are not locked out for its duration), NOTICEs name the steps, and after the load every counter
# equals a GROUP BY of posts and counters.verify() is empty.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;
use IPC::Run;

my $node = start_node('concurrent_build', "deadlock_timeout = '20ms'\nlog_statement = none\n");

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION counters;
CREATE TABLE posts (id bigserial PRIMARY KEY, user_id int NOT NULL, blog_id int NOT NULL, rating int NOT NULL);
INSERT INTO posts (user_id, blog_id, rating) SELECT g % 1000, g % 50, g % 7 FROM generate_series(1, 1000000) g;
});

my $script = $node->basedir . '/write.pgbench';
append_to_file($script, q{\set u random(0, 999)
\set b random(0, 49)
\set r random(0, 99)
BEGIN;
INSERT INTO posts (user_id, blog_id, rating) VALUES (:u, :b, :r % 7);
UPDATE posts SET blog_id = :b, user_id = :u WHERE id = (SELECT max(id) - :r FROM posts);
DELETE FROM posts WHERE id = (SELECT min(id) + :r FROM posts);
COMMIT;
});
my $output = '';
my $load = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '4', '-j', '2', '-T', '15', '--max-tries=10', '-h', $node->host,
		'-p', $node->port, '-f', $script, 'postgres'
	],
	'>', \$output, '2>', \$output,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
ok($node->poll_query_until('postgres', 'SELECT max(id) > 1000100 FROM posts'), 'the load commits posts')
  or diag($output);

# Runs `call` while the load goes on, and counts the posts committed meanwhile. (The isolation spec
# concurrent_build holds a step in place and reads it from pg_stat_activity.)
sub concurrently
{
	my ($label, $call) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT max(id) FROM posts');
	my ($ret, $stdout, $stderr) = $node->psql('postgres', $call);
	is($ret, 0, "$label: the call succeeds") or diag($stderr);
	like($stderr, qr/step 2 of 3: counting the source.*step 3 of 3/s, "$label: NOTICEs name the steps");
	my $after = $node->safe_psql('postgres', 'SELECT max(id) FROM posts');
	ok($after > $before, "$label: writers committed while it ran (" . ($after - $before) . ' posts)');
	return;
}

concurrently('exact', q{CALL counters.create_counter_concurrently('ub',
	'SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY user_id, blog_id')});
concurrently('sharded', q{CALL counters.create_counter_concurrently('bp',
	'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', 'sharded')});
# drift made by hand in the totals, repaired by the concurrent rebuild
$node->safe_psql('postgres', 'UPDATE ub SET posts = posts + 1000 WHERE user_id = 1');
concurrently('rebuild', q{CALL counters.rebuild_concurrently('ub')});

$load->finish;
like($output, qr/number of failed transactions: 0 /, 'the load ran without failed transactions') or diag($output);
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM (
	(SELECT user_id, blog_id, count(*), sum(rating) FROM posts GROUP BY 1, 2 EXCEPT SELECT user_id, blog_id, posts, rating FROM ub)
	UNION ALL (SELECT user_id, blog_id, posts, rating FROM ub EXCEPT SELECT user_id, blog_id, count(*), sum(rating) FROM posts GROUP BY 1, 2)
	UNION ALL (SELECT -1, blog_id, count(*), 0 FROM posts GROUP BY 2 EXCEPT SELECT -1, blog_id, posts, 0 FROM bp)
	UNION ALL (SELECT -1, blog_id, posts, 0 FROM bp EXCEPT SELECT -1, blog_id, count(*), 0 FROM posts GROUP BY 2)) d}),
	'0',
	'every counter equals a GROUP BY of posts');
is($node->safe_psql('postgres', 'SELECT count(*) FROM counters.verify()'), '0', 'counters.verify() is empty');
is($node->safe_psql('postgres', "SELECT string_agg(name || ' ' || mode, ', ' ORDER BY name) FROM counters.counter"),
	'bp sharded, ub exact', 'the counters are in the modes asked for');

done_testing();
