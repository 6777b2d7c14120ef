# Counters are exact after a crash. On a cluster of its own, 6 pgbench clients insert posts, move them between keys of
# every counter (blog, author, publish flag, soft delete, hour bucket) and delete them, through counters in every
# mode (exact, sharded, log with an expression key, a counter-cache column of `blogs`), with an occasional
# counters.compact() in the mix, while
#   1. one backend is killed with SIGKILL, which makes the postmaster end every session and replay WAL, and
#   2. the server is stopped in immediate mode and started again (crash recovery).
# After each recovery: counters.verify() is empty, a hand-written recount of every counter agrees, and inserts,
# updates moving rows between keys and deletes made after recovery are counted (verify and recount again).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;
use IPC::Run;

# The harness turns fsync and restart_after_crash off; a crash test needs both. Transactions moving rows between keys
# deadlock now and then: a short deadlock_timeout, and pgbench retries them. Statements are not logged: the load
# would fill the log.
my $node = start_node(
	'crash', q{
fsync = on
synchronous_commit = on
restart_after_crash = on
deadlock_timeout = '20ms'
log_statement = none
});

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION counters;
CREATE TABLE blogs (id int PRIMARY KEY, posts bigint NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g FROM generate_series(1, 20) g;
CREATE TABLE posts (id bigserial PRIMARY KEY, user_id int NOT NULL, blog_id int NOT NULL REFERENCES blogs,
                    is_published boolean NOT NULL DEFAULT true, is_deleted boolean NOT NULL DEFAULT false,
                    rating int NOT NULL DEFAULT 0, created_at timestamp NOT NULL DEFAULT localtimestamp);
INSERT INTO posts (user_id, blog_id, rating, created_at)
SELECT g % 50, 1 + g % 20, g % 7, localtimestamp - g * interval '1 minute' FROM generate_series(1, 5000) g;
SELECT counters.create_counter('ub', $$SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating
	FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id$$);
SELECT counters.create_counter('bs', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', mode => 'sharded');
SELECT counters.create_counter('hl', $$SELECT date_trunc('hour', created_at) AS hour, count(*) AS n, sum(rating) AS rating
	FROM posts GROUP BY date_trunc('hour', created_at)$$, mode => 'log');
SELECT counters.create_counter('bc', 'SELECT blog_id AS id, count(*) AS posts FROM posts WHERE NOT is_deleted GROUP BY blog_id',
                               target => 'blogs');
});

# The load: each transaction inserts a post, moves a recent one between keys of every counter, soft-deletes (or
# restores) another and deletes an old one; one script in 21 compacts.
my $write_script = $node->basedir . '/write.pgbench';
my $compact_script = $node->basedir . '/compact.pgbench';
append_to_file($write_script, q{\set u random(0, 49)
\set b random(1, 20)
\set r random(0, 9)
BEGIN;
INSERT INTO posts (user_id, blog_id, rating, created_at) VALUES (:u, :b, :r, localtimestamp - :r * interval '1 hour');
UPDATE posts SET blog_id = :b, user_id = :u, is_published = NOT is_published WHERE id = (SELECT max(id) - :r FROM posts);
UPDATE posts SET is_deleted = NOT is_deleted, created_at = created_at - interval '1 hour', rating = rating + 1
 WHERE id = (SELECT max(id) - 3 * :r FROM posts);
DELETE FROM posts WHERE id = (SELECT min(id) + :u FROM posts);
COMMIT;
});
append_to_file($compact_script, "SELECT counters.compact();\n");

# A recount of every counter by hand from posts, compared both ways with what the counter shows; rows = differences.
sub pair
{
	my ($label, $recount, $stored) = @_;
	return "SELECT '$label: recount has ' || d::text FROM (($recount) EXCEPT ALL ($stored)) d
	        UNION ALL SELECT '$label: counter has ' || d::text FROM (($stored) EXCEPT ALL ($recount)) d";
}
my $recount = join(
	"\nUNION ALL ",
	pair(
		'ub',
		'SELECT user_id, blog_id, count(*), sum(rating) FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1, 2',
		'SELECT user_id, blog_id, posts, rating FROM ub'),
	pair('bs', 'SELECT blog_id, count(*) FROM posts GROUP BY 1', 'SELECT blog_id, posts FROM bs WHERE posts <> 0'),
	pair(
		'hl',
		"SELECT date_trunc('hour', created_at), count(*), sum(rating) FROM posts GROUP BY 1",
		'SELECT hour, n, rating FROM hl WHERE n <> 0 OR rating <> 0'),
	pair(
		'bc',
		'SELECT b.id, count(p.id) FROM blogs b LEFT JOIN posts p ON p.blog_id = b.id AND NOT p.is_deleted GROUP BY b.id',
		'SELECT id, posts FROM blogs'));

# counters.verify() is empty and the recount agrees (the first ten differences are shown when not).
sub exact
{
	my ($label) = @_;
	is($node->safe_psql('postgres', 'SELECT count(*) FROM counters.verify()'),
		'0', "$label: counters.verify() lists no drifted value")
	  or diag($node->safe_psql('postgres', 'SELECT * FROM counters.verify() LIMIT 10'));
	is($node->safe_psql('postgres', "SELECT * FROM ($recount) d LIMIT 10"),
		'', "$label: a recount of every counter agrees");
	return;
}

sub newest
{
	return $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM posts');
}

# Starts the load in the background for up to $seconds; returns the harness and a reference to pgbench's output.
sub start_load
{
	my ($seconds) = @_;
	my $output = '';
	# The harness names every session after the test; the load's sessions are told apart by their own name.
	local $ENV{PGAPPNAME} = 'counters_load';
	my $load = IPC::Run::start(
		[
			'pgbench', '-n', '-c', '6', '-j', '2', '-T', $seconds, '--max-tries=10',
			'-h', $node->host, '-p', $node->port,
			'-f', "$write_script\@20", '-f', "$compact_script\@1", 'postgres'
		],
		'>', \$output, '2>', \$output,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return ($load, \$output);
}

# Waits until the load has committed $n posts after $before (and so is running, with compactions among its
# transactions), then names one of its backends: one in the middle of a transaction or statement if any is.
sub load_running
{
	my ($label, $before, $n, $output) = @_;
	ok($node->poll_query_until('postgres', "SELECT max(id) >= $before + $n FROM posts"),
		"$label: the load commits posts") or diag($$output);
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'counters_load' ORDER BY state = 'idle' LIMIT 1");
	ok($pid ne '', "$label: the load is still running when the crash comes") or diag($$output);
	return $pid;
}

# Recovered, the load had committed writes, exact, later writes counted.
sub after_recovery
{
	my ($label, $before) = @_;
	my $survived = newest() - $before;
	cmp_ok($survived, '>', 0, "$label: the load committed posts before the crash, so the crash tested something");
	exact($label);
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres', q{
INSERT INTO posts (user_id, blog_id, rating) SELECT g % 50, 1 + g % 20, 3 FROM generate_series(1, 200) g;
UPDATE posts SET blog_id = 1 + blog_id % 20, user_id = (user_id + 1) % 50 WHERE id % 11 = 0;
UPDATE posts SET is_deleted = NOT is_deleted, created_at = created_at - interval '2 hours' WHERE id % 13 = 0;
DELETE FROM posts WHERE id % 17 = 0;
});
	is($ret, 0, "$label: writes after recovery succeed") or diag($stderr);
	exact("$label, then writes after recovery");
	note("$label (newest post id +$survived): counters exact after recovery, later writes counted");
	return;
}

exact('before any crash');

# 1. SIGKILL of one backend in the middle of the load: the postmaster ends every session and replays WAL.
my $label = 'after SIGKILL of a backend';
my $before = newest();
my $offset = -s $node->logfile;
my ($load, $output) = start_load(60);
my $victim = load_running($label, $before, 1000, $output);
ok(kill('KILL', $victim), "$label: backend $victim killed") if $victim ne '';
$load->finish;    # the load's sessions end with the reset; pgbench fails, as it should
# The postmaster restarts by itself after replaying WAL. Waiting for its log line (not merely for a connection, which
# could come before the postmaster has noticed the death) orders the checks below after the recovery.
ok(eval { $node->wait_for_log(qr/database system is ready to accept connections/, $offset) },
	"$label: the server comes back");
ok($node->poll_query_until('postgres', 'SELECT 1', '1'), "$label: the server accepts connections");
ok($node->log_contains('was terminated by signal 9', $offset), "$label: the server log shows the killed backend");
ok($node->log_contains('all server processes terminated; reinitializing', $offset),
	"$label: the kill reset the cluster");
ok($node->log_contains('redo starts at', $offset), "$label: WAL was replayed");
after_recovery($label, $before);

# 2. Immediate shutdown of the whole server in the middle of the load, then a start that replays WAL.
$label = 'after an immediate stop';
$before = newest();
$offset = -s $node->logfile;
($load, $output) = start_load(60);
load_running($label, $before, 1000, $output);
$node->stop('immediate');
$load->finish;
$node->start;
ok($node->log_contains('database system was interrupted', $offset),
	"$label: crash recovery at start");
ok($node->log_contains('redo starts at', $offset), "$label: WAL was replayed");
after_recovery($label, $before);

$node->safe_psql('postgres', 'SELECT counters.compact()');
exact('after a final compaction');

$node->stop;
done_testing();
