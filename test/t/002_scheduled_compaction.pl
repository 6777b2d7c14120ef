# Scheduled compaction of log-mode counters, on a cluster of its own (both paths need shared_preload_libraries):
#  1. the built-in background worker compacts the databases in counters.compact_databases;
#  2. pg_cron running SELECT counters.compact() compacts another database;
#  3. in a database neither touches, the log keeps growing and the counters stay exact;
#  4. the worker connects as the bootstrap superuser: a trigger that a role that is not a superuser put on its own
#     counter table, and that tries to make it a superuser, runs as that role (restricted) when the worker compacts;
#  5. a counter whose compaction cannot end (a trigger on its totals that sleeps) holds up no other: the worker cancels
#     its step after counters.step_timeout, shows why in counters.stats and goes on compacting the rest; rounds back
#     off from it after it failed in a row (counters.stats.compact_failures), and an idle worker says so in
#     pg_stat_activity.query.
# Polls (poll_query_until, up to the harness's timeout): the worker runs every second, pg_cron every minute.
# Without pg_cron for the PostgreSQL under test (test/matrix.sh runs source builds that have none), 2 is skipped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

my $node = PostgreSQL::Test::Cluster->new('scheduled');
$node->init;
my $cron = -e $node->config_data('--pkglibdir') . '/pg_cron.so'
  && -e $node->config_data('--sharedir') . '/extension/pg_cron.control';
$node->append_conf(
	'postgresql.conf', q{
counters.compact_databases = 'counters_worker'
counters.compact_interval = 1
counters.step_timeout = '1s'
max_worker_processes = 16
});
$node->append_conf(
	'postgresql.conf', $cron ? q{
shared_preload_libraries = 'counters, pg_cron'
cron.database_name = 'counters_cron'
cron.use_background_workers = on
} : q{
shared_preload_libraries = 'counters'
});
$node->start;

# A database with a log-mode counter and pending log rows: inserts, then deletes.
sub setup_db
{
	my ($db) = @_;
	create_database($node, $db);
	$node->safe_psql(
		$db, q{
CREATE TABLE likes (id bigserial PRIMARY KEY, post_id int NOT NULL);
SELECT counters.create_counter('post_likes', 'SELECT post_id, count(*) AS likes FROM likes GROUP BY post_id', mode => 'log');
});
	$node->safe_psql($db, 'INSERT INTO likes (post_id) SELECT 1 + g % 5 FROM generate_series(1, 1000) g');
	$node->safe_psql($db, 'INSERT INTO likes (post_id) VALUES (1)');
	$node->safe_psql($db, 'DELETE FROM likes WHERE id % 10 = 0');
	return;
}

# counters.verify() is empty and a recount agrees with the counter (EXCEPT both ways).
sub check_exact
{
	my ($db) = @_;
	is($node->safe_psql($db, 'SELECT count(*) FROM counters.verify()'),
		'0', "$db: counters.verify() reports no wrong value");
	is( $node->safe_psql(
			$db, q{
SELECT count(*) FROM ((SELECT post_id, count(*) FROM likes GROUP BY 1 EXCEPT SELECT * FROM post_likes)
                      UNION ALL (SELECT * FROM post_likes EXCEPT SELECT post_id, count(*) FROM likes GROUP BY 1)) d
}),
		'0',
		"$db: no counter row differs from a recount");
	return;
}

setup_db('counters_worker');
# counters_mallory, not a superuser, owns a counter whose totals table carries a trigger that records who runs it and
# tries to make counters_mallory a superuser. Only compaction writes the totals of a log-mode counter, so the trigger
# runs in the background worker.
$node->safe_psql(
	'counters_worker', q{
CREATE ROLE counters_mallory;
GRANT CREATE ON SCHEMA public TO counters_mallory;
SET ROLE counters_mallory;
CREATE TABLE m_likes (id int PRIMARY KEY, post_id int NOT NULL);
CREATE TABLE m_audit (who name, superuser boolean);
CREATE FUNCTION m_attack() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.m_audit SELECT current_user, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
	BEGIN
		EXECUTE 'ALTER ROLE counters_mallory SUPERUSER';
	EXCEPTION WHEN OTHERS THEN
		NULL;
	END;
	RETURN NULL;
END $$;
SELECT counters.create_counter('m_likes_n', 'SELECT post_id, count(*) AS n FROM m_likes GROUP BY post_id', mode => 'log');
CREATE TRIGGER attack AFTER INSERT OR UPDATE ON m_likes_n_totals FOR EACH ROW EXECUTE FUNCTION m_attack();
INSERT INTO m_likes SELECT g, g % 3 FROM generate_series(1, 30) g;
});
if ($cron)
{
	setup_db('counters_cron');
	$node->safe_psql('counters_cron',
		"CREATE EXTENSION pg_cron; SELECT cron.schedule('counters-compact', '* * * * *', 'SELECT counters.compact()')"
	);
}
setup_db('counters_idle');

# 1. The background worker.
ok($node->poll_query_until('counters_worker', 'SELECT count(*) = 0 FROM post_likes_log'),
	'the background worker compacts counters_worker');
check_exact('counters_worker');
# (the worker's deletes reach the statistics at the end of its round: counters.stats.log_rows follows the log)
ok( $node->poll_query_until(
		'counters_worker',
		"SELECT n_tup_del > 0 FROM pg_stat_all_tables WHERE relid = 'post_likes_log'::regclass"),
	"the worker's compaction is in the table statistics");
ok( $node->poll_query_until(
		'counters_worker',
		"SELECT log_rows = (SELECT count(*) FROM post_likes_log) FROM counters.stats WHERE counter = 'post_likes'"),
	'counters.stats.log_rows counts the rows left in the log');
ok( $node->poll_query_until(
		'counters_worker', "SELECT oldest_pending IS NULL FROM counters.stats WHERE counter = 'post_likes'"),
	"counters.stats.oldest_pending is cleared by the worker's compaction");
is( $node->safe_psql(
		'counters_worker',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'counters compaction worker'"),
	'1',
	'one counters compaction worker runs');

# 4. The worker ran counters_mallory's trigger as counters_mallory, who did not become a superuser.
ok($node->poll_query_until('counters_worker', 'SELECT count(*) = 0 FROM m_likes_n_log'),
	"the background worker compacts counters_mallory's counter");
is( $node->safe_psql('counters_worker',
		"SELECT string_agg(DISTINCT who || ':' || superuser, ',') FROM m_audit"),
	'counters_mallory:false',
	"the worker ran a counter table's trigger as its owner, not as a superuser");
is($node->safe_psql('counters_worker', "SELECT rolsuper FROM pg_roles WHERE rolname = 'counters_mallory'"),
	'f', 'the trigger did not make its owner a superuser');

# 5. A counter whose totals' trigger sleeps for an hour: each round cancels its compaction after a second.
$node->safe_psql(
	'counters_worker', q{
CREATE TABLE slow_items (id int PRIMARY KEY, k int NOT NULL);
SELECT counters.create_counter('slow_n', 'SELECT k, count(*) AS n FROM slow_items GROUP BY k', mode => 'log');
CREATE FUNCTION slow_totals() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM pg_sleep(3600); RETURN NEW; END$$;
CREATE TRIGGER slow BEFORE INSERT OR UPDATE ON slow_n_totals FOR EACH ROW EXECUTE FUNCTION slow_totals();
INSERT INTO slow_items SELECT g, g % 3 FROM generate_series(1, 30) g;
});
ok( $node->poll_query_until(
		'counters_worker',
		"SELECT last_compact_error LIKE 'canceled after 1000 ms%' FROM counters.stats WHERE counter = 'slow_n'"),
	'the worker cancels a step that outlasts counters.step_timeout and shows it in counters.stats');
$node->safe_psql('counters_worker', 'INSERT INTO likes (post_id) VALUES (2), (3), (3)');
ok($node->poll_query_until('counters_worker', 'SELECT count(*) = 0 FROM post_likes_log'),
	'the worker goes on compacting the other counters of the database');
# ... and backs off from it: after rounds that failed in a row, a round skips it (for 2^(n-1) step_timeouts), so that
# the others are not held up by a step_timeout each round.
ok( $node->poll_query_until(
		'counters_worker', "SELECT compact_failures >= 2 FROM counters.stats WHERE counter = 'slow_n'"),
	'counters.stats counts the rounds whose compaction failed in a row');
ok(eval { $node->wait_for_log(qr/counter "slow_n": compaction skipped until/); 1 },
	'the worker backs off from a counter whose compaction keeps failing, saying so in the server log');
# Between rounds the worker says it waits (not the last counter it compacted).
ok( $node->poll_query_until(
		'counters_worker',
		"SELECT bool_and(query = 'counters: waiting for the next round') FROM pg_stat_activity WHERE backend_type = 'counters compaction worker' AND state = 'idle'"
	),
	'an idle worker says so in pg_stat_activity.query');
check_exact('counters_worker');
is( $node->safe_psql(
		'counters_worker', q{
SELECT count(*) FROM ((SELECT k, count(*) FROM slow_items GROUP BY 1 EXCEPT SELECT k, n FROM slow_n)
                      UNION ALL (SELECT k, n FROM slow_n EXCEPT SELECT k, count(*) FROM slow_items GROUP BY 1)) d
}),
	'0',
	'the counter whose compaction is canceled stays exact (its rows wait in the log)');
cmp_ok($node->safe_psql('counters_worker', 'SELECT count(*) FROM slow_n_log'),
	'>', 0, 'its log keeps the rows no compaction could fold');

# 2. pg_cron (its schedule has a one-minute resolution).
SKIP:
{
	skip 'pg_cron is not installed for this PostgreSQL', 4 unless $cron;
	ok($node->poll_query_until('counters_cron', 'SELECT count(*) = 0 FROM post_likes_log'),
		'pg_cron compacts counters_cron');
	check_exact('counters_cron');
	ok( $node->poll_query_until(
			'counters_cron', "SELECT count(*) >= 1 FROM cron.job_run_details WHERE status = 'succeeded'"),
		"pg_cron records the compaction's run as succeeded");
}

# 3. Without compaction the log grows and the counters stay exact.
cmp_ok($node->safe_psql('counters_idle', 'SELECT count(*) FROM post_likes_log'),
	'>', 0, 'counters_idle: nothing compacts its log');
check_exact('counters_idle');

$node->stop;
done_testing();
