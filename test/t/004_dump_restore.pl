# Dump and restore with the real pg_dump / pg_restore. A database with counters in every mode (exact with its own
# table, a counter-cache target `blogs`, sharded, log with an expression key date_trunc('day', created_at), and a
# counter over the exact counter's table; avg() and bool_or() columns in exact and log mode, whose generated columns
# and accumulators a dump keeps; max(), min() and count(DISTINCT) columns), bounds, thresholds and retention, pending log and slot rows, and a counted
# partitioned table, is dumped and restored into
# fresh databases (created from template0: the extension is available but not created) along every path a backup
# takes, each with its errors fatal (psql -v ON_ERROR_STOP=1, pg_restore --exit-on-error):
#   plain format through psql, plain format through psql --single-transaction, custom format through pg_restore (also
#   --single-transaction), pg_restore -j 2, pg_restore --section=pre-data / data / post-data, and pg_restore
#   --schema-only followed by pg_restore --data-only --disable-triggers.
# In each restored database: the same counters are declared (counters.counters equals the original), the counter
# tables (and their log and slot rows) hold the original data, counters.verify() is empty and a hand-written recount
# of each counter agrees, the capture triggers on the source exist exactly once each, and INSERT, UPDATE moving rows
# between keys and DELETE after the restore are counted (verify and recount again); bounds still refuse.
# Every path is checked in a subtest of its own, which stops at its first failed check (later ones would only repeat
# it); the other paths still run.
# The catalog's rows are not dumped: each counter is declared again from its description (the comment of its
# definition view) when the restore creates its triggers, as the view's owner could declare it.
# The parallel and split paths guard against a bug fixed in 17ac51a: the DDL event trigger, run after every
# ALTER TABLE, dropped capture triggers from every table without a row in counters.counter; an ALTER TABLE (a primary
# key, a foreign key, --disable-triggers) that ran after CREATE TRIGGER and before the catalog had its rows removed
# them.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

my $node = start_node('dump');

my $src = 'counters_dump_src';
my @paths = qw(plain plain_1 custom custom_1 parallel sections split);
my $dir = PostgreSQL::Test::Utils::tempdir;

create_database($node, $src);
$node->safe_psql(
	$src, q{
CREATE TABLE blogs (id int PRIMARY KEY, post_count bigint NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g FROM generate_series(1, 5) g;
CREATE TABLE posts (id serial PRIMARY KEY, user_id int, blog_id int NOT NULL REFERENCES blogs,
                    is_published boolean NOT NULL DEFAULT true, is_deleted boolean NOT NULL DEFAULT false,
                    rating int NOT NULL DEFAULT 0, created_at timestamp NOT NULL DEFAULT localtimestamp);
INSERT INTO posts (user_id, blog_id, is_published, rating, created_at)
SELECT nullif(g % 7, 0), 1 + g % 5, g % 3 <> 0, g % 11, localtimestamp - g * interval '1 hour' FROM generate_series(1, 500) g;
CREATE FUNCTION public.on_crossing(counter text, key jsonb, column_name text, old numeric, new numeric,
                                   threshold numeric, direction text) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT counters.create_counter('user_blog', $$SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating,
	avg(rating) AS avg_rating, bool_or(rating > 5) AS any_high
	FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id$$);
SELECT counters.create_counter('blog_cache', $$SELECT blog_id AS id, count(*) AS post_count FROM posts GROUP BY blog_id$$,
                               target => 'blogs');
SELECT counters.create_counter('blog_sharded', $$SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id$$,
                               mode => 'sharded');
SELECT counters.create_counter('daily_log', $$SELECT date_trunc('day', created_at) AS day, count(*) AS n, sum(rating) AS r,
	avg(rating) AS avg_r FROM posts GROUP BY date_trunc('day', created_at)$$, mode => 'log');
-- a counter over another counter's table (distinct (user, blog) pairs per blog: docs/aggregates.md); a restore must
-- not count the pair table's rows again on top of its own restored rows
SELECT counters.create_counter('blog_authors', $$SELECT blog_id, count(*) AS authors FROM user_blog GROUP BY blog_id$$);
-- max() and min() (the index they read a key's next extreme through is the user's, restored after the data)
CREATE INDEX ON posts (blog_id, created_at);
CREATE INDEX ON posts (blog_id, rating);
CREATE INDEX ON posts (blog_id, user_id);
SELECT counters.create_counter('blog_latest', $$SELECT blog_id, count(*) AS n, max(created_at) AS latest,
	min(rating) AS lowest, count(DISTINCT user_id) AS authors FROM posts WHERE is_published GROUP BY blog_id$$);
-- a counter through a chain of parent rows (comments -> posts -> blogs, no foreign key): one exact counter per level,
-- each declared again from its own description, the counter itself with its whole definition
CREATE TABLE comments (id serial PRIMARY KEY, post_id int, score int NOT NULL DEFAULT 1);
INSERT INTO comments (post_id, score) SELECT 1 + g % 500, g % 4 FROM generate_series(1, 1500) g;
SELECT counters.create_counter('blog_comments', $$SELECT b.id AS blog_id, count(*) AS comments, sum(c.score) AS score
	FROM comments c JOIN posts p ON c.post_id = p.id JOIN blogs b ON p.blog_id = b.id WHERE p.is_published
	GROUP BY b.id$$);
SELECT counters.set_bounds('user_blog', 'posts', max => 1000);
SELECT counters.set_thresholds('user_blog', 'rating', '{100}', 'public.on_crossing'::regproc, every => 250);
SELECT counters.set_retention('daily_log', 'day', '30 days');  -- the data is at most 22 days old: nothing expires
-- writes after declaring, some left pending in the log and the slots
INSERT INTO posts (user_id, blog_id, rating) VALUES (1, 2, 50), (NULL, 3, 7);
UPDATE posts SET blog_id = 4 WHERE id % 10 = 0;
DELETE FROM posts WHERE id % 17 = 0;
-- Tables without counters, sized like a real database's: one large table keeps one pg_restore -j 2 worker busy
-- while the other loads posts, creates its triggers, then loads a small table and adds its primary key, all
-- before loading the (one-page) counters catalog. pg_restore orders data by size (relpages, set by VACUUM).
CREATE TABLE page_views (id int PRIMARY KEY, path text NOT NULL);
INSERT INTO page_views SELECT g, '/posts/' || g || repeat('/x', 20) FROM generate_series(1, 100000) g;
CREATE TABLE tags (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO tags SELECT g, 'tag ' || g FROM generate_series(1, 300) g;
-- A counted partitioned table: each partition carries the triggers, which the restore creates one by one.
CREATE TABLE visits (id int NOT NULL, day date NOT NULL, page int NOT NULL) PARTITION BY RANGE (day);
CREATE TABLE visits_1 PARTITION OF visits FOR VALUES FROM ('2026-01-01') TO ('2026-07-01');
CREATE TABLE visits_2 PARTITION OF visits FOR VALUES FROM ('2026-07-01') TO ('2027-01-01');
INSERT INTO visits SELECT g, date '2026-01-01' + g % 360, g % 7 FROM generate_series(1, 700) g;
SELECT counters.create_counter('page_visits', 'SELECT page, count(*) AS n FROM visits GROUP BY page');
});
$node->safe_psql($src, 'VACUUM ANALYZE');

my $catalog =
  "SELECT name, mode, definition, options - 'last_rebuild', created_target FROM counters.counters ORDER BY name";
# Everything the counters store, raw tables included (pending log rows, slot rows), in a comparable order.
my $stored = q{
SELECT * FROM user_blog ORDER BY user_id, blog_id;
SELECT * FROM blog_authors ORDER BY blog_id;
SELECT * FROM blog_latest ORDER BY blog_id;
SELECT * FROM blog_comments ORDER BY blog_id;
SELECT * FROM blog_comments_by_post_id ORDER BY post_id;
SELECT * FROM blog_comments_by_blog_id ORDER BY blog_id_2;
SELECT * FROM blogs ORDER BY id;
SELECT * FROM blog_sharded_totals ORDER BY blog_id;
SELECT * FROM blog_sharded_slots ORDER BY 1, 2, 3;
SELECT * FROM daily_log_totals ORDER BY day;
SELECT * FROM daily_log_log ORDER BY 1, 2, 3;
};

# A recount of every counter by hand from posts, compared both ways with what the counter shows; rows = differences.
sub pair
{
	my ($label, $recount, $stored) = @_;
	return "SELECT '$label: recount has ' || d::text FROM (($recount) EXCEPT ALL ($stored)) d
	        UNION ALL SELECT '$label: counter has ' || d::text FROM (($stored) EXCEPT ALL ($recount)) d";
}
my $recount = 'SELECT * FROM ('
  . join(
	"\nUNION ALL ",
	pair(
		'user_blog',
		'SELECT user_id, blog_id, count(*), sum(rating), avg(rating), bool_or(rating > 5) FROM posts
		  WHERE is_published AND NOT is_deleted GROUP BY 1, 2',
		'SELECT user_id, blog_id, posts, rating, avg_rating, any_high FROM user_blog'),
	pair(
		'blog_authors',
		'SELECT blog_id, count(*) FROM (SELECT DISTINCT user_id, blog_id FROM posts WHERE is_published AND NOT is_deleted) p
		  GROUP BY 1',
		'SELECT blog_id, authors FROM blog_authors'),
	pair(
		'blog_latest',
		'SELECT blog_id, count(*), max(created_at), min(rating), count(DISTINCT user_id) FROM posts WHERE is_published
		  GROUP BY 1',
		'SELECT blog_id, n, latest, lowest, authors FROM blog_latest'),
	pair(
		'blog_comments',
		'SELECT b.id, count(*), sum(c.score) FROM comments c JOIN posts p ON c.post_id = p.id
		   JOIN blogs b ON p.blog_id = b.id WHERE p.is_published GROUP BY b.id',
		'SELECT blog_id, comments, score FROM blog_comments'),
	pair(
		'blog_cache',
		'SELECT b.id, count(p.id) FROM blogs b LEFT JOIN posts p ON p.blog_id = b.id GROUP BY b.id',
		'SELECT id, post_count FROM blogs'),
	pair(
		'blog_sharded',
		'SELECT blog_id, count(*) FROM posts GROUP BY 1',
		'SELECT blog_id, n FROM blog_sharded WHERE n <> 0'),
	pair(
		'daily_log',
		"SELECT date_trunc('day', created_at), count(*), sum(rating), avg(rating) FROM posts GROUP BY 1",
		'SELECT day, n, r, avg_r FROM daily_log WHERE n <> 0 OR r <> 0'),
	pair('page_visits', 'SELECT page, count(*) FROM visits GROUP BY 1', 'SELECT page, n FROM page_visits'))
  . ') d LIMIT 3';
my $triggers = q{
SELECT string_agg(tgname || '=' || tgfoid::regproc || ':' || tgenabled::text, ',' ORDER BY tgname) FROM pg_trigger
 WHERE tgrelid = 'posts'::regclass AND NOT tgisinternal};
# (the counters' triggers on their own tables: the guard against TRUNCATE, and the key trigger of a counter cache)
my $capture_elsewhere = q{
SELECT string_agg(tgrelid::regclass::text || '.' || tgname, ',' ORDER BY tgrelid::regclass::text, tgname)
  FROM pg_trigger WHERE tgfoid = 'counters.capture()'::regprocedure AND tgrelid <> 'posts'::regclass};
# (the replica triggers enabled for the replica role only, as attach() made them: a dump keeps that)
# (posts is also the middle of blog_comments' chain: the parent's triggers too)
my $expected_triggers = join(',',
	map { "counters_$_=counters.capture:" . (/replica/ ? 'R' : 'O') }
	  qw(begin delete insert parent_begin parent_insert parent_replica parent_replica_truncate parent_row
	  parent_truncate replica replica_truncate truncate update));

# Like is() for long outputs: on failure, shows the first line that differs instead of both outputs.
sub same_text
{
	my ($got, $expected, $name) = @_;
	return 1 if ok($got eq $expected, $name);
	my @got = split /\n/, $got, -1;
	my @expected = split /\n/, $expected, -1;
	for my $i (0 .. ($#got > $#expected ? $#got : $#expected))
	{
		my ($g, $e) = ($got[$i] // '(nothing)', $expected[$i] // '(nothing)');
		next if $g eq $e;
		diag("line " . ($i + 1) . ": got '$g', expected '$e'");
		last;
	}
	return 0;
}

is($node->safe_psql($src, 'SELECT count(*) FROM counters.verify()'), '0',
	'the source database has no drift before dumping') or die;
is($node->safe_psql($src, $recount), '', 'the recount agrees in the source database') or die;
is($node->safe_psql($src, $triggers), $expected_triggers,
	'the source database has each capture trigger on posts once') or die;
ok( $node->safe_psql($src, 'SELECT count(*) FROM daily_log_log') > 0
	  && $node->safe_psql($src, 'SELECT count(*) FROM blog_sharded_slots') > 0,
	'the source database has pending log and slot rows to carry over') or die;
my $expected_elsewhere = $node->safe_psql($src, $capture_elsewhere);
like($expected_elsewhere, qr/(^|,)blog_sharded_slots\.counters_guard,.*blogs\.counters_target_key/,
	'the counter tables of the source database have their guards') or die;
my $expected_catalog = $node->safe_psql($src, $catalog);
my $expected_stored = $node->safe_psql($src, $stored);

# Runs a client program against the node (its output goes to the test's log); passes if it exits with status 0.
# ($node->command_ok does the same but does not say whether it passed.)
sub command_passes
{
	my ($command, $name) = @_;
	return ok($node->run_log($command), $name);
}

command_passes([ 'pg_dump', '-Fp', '-f', "$dir/plain.sql", $src ], 'pg_dump, plain format') or die;
command_passes([ 'pg_dump', '-Fc', '-f', "$dir/custom.dump", $src ], 'pg_dump, custom format') or die;

# Restores along one path; each command's output is in the test's log.
sub restore
{
	my ($path, $db) = @_;
	my @psql = ('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $db);
	my @pg_restore = ('pg_restore', '--exit-on-error', '-d', $db);
	my %commands = (
		plain => [ [ @psql, '-f', "$dir/plain.sql" ] ],
		plain_1 => [ [ @psql, '--single-transaction', '-f', "$dir/plain.sql" ] ],
		custom => [ [ @pg_restore, "$dir/custom.dump" ] ],
		custom_1 => [ [ @pg_restore, '--single-transaction', "$dir/custom.dump" ] ],
		parallel => [ [ @pg_restore, '-j', '2', "$dir/custom.dump" ] ],
		sections => [ map { [ @pg_restore, "--section=$_", "$dir/custom.dump" ] } qw(pre-data data post-data) ],
		split => [
			[ @pg_restore, '--schema-only', "$dir/custom.dump" ],
			[ @pg_restore, '--data-only', '--disable-triggers', "$dir/custom.dump" ]
		]);
	for my $command (@{ $commands{$path} })
	{
		command_passes($command, "restore: @$command[0 .. $#$command - 1]") or return 0;
	}
	return 1;
}

# The checks of one path, in order; returns at the first that fails.
sub check
{
	my ($path, $db) = @_;
	is($node->safe_psql($db, "SELECT count(*) FROM pg_extension WHERE extname = 'counters'"),
		'0', 'the fresh database does not have the extension') or return;
	is($node->safe_psql($db, "SELECT count(*) FROM pg_available_extensions WHERE name = 'counters'"),
		'1', 'the extension is available') or return;
	restore($path, $db) or return;
	same_text($node->safe_psql($db, $catalog), $expected_catalog, 'counters.counters equals the original')
	  or return;
	same_text($node->safe_psql($db, $stored), $expected_stored,
		'the counter tables (totals, log and slot rows, blogs) equal the original') or return;
	is($node->safe_psql($db, 'SELECT count(*) FROM counters.verify()'),
		'0', 'counters.verify() lists no drift right after the restore') or return;
	is($node->safe_psql($db, $recount), '', 'the recount agrees right after the restore') or return;
	is($node->safe_psql($db, $triggers), $expected_triggers, 'each capture trigger on posts exists exactly once')
	  or return;
	is($node->safe_psql($db, $capture_elsewhere), $expected_elsewhere,
		"the counters' triggers on their own tables exist exactly once each") or return;
	# writes after the restore: inserts, rows moving between keys of every counter, soft and hard deletes (each blog's
	# newest and lowest-rated post among them)
	my ($ret, $stdout, $stderr) = $node->psql(
		$db, q{
INSERT INTO posts (user_id, blog_id, rating) SELECT g % 4, 1 + g % 5, 40 FROM generate_series(1, 60) g;
UPDATE posts SET is_deleted = true WHERE id % 9 = 0;
UPDATE posts SET blog_id = 1 + blog_id % 5, user_id = coalesce(user_id, 0) + 1 WHERE id % 13 = 0;
UPDATE posts SET created_at = created_at - interval '1 day', rating = rating + 1 WHERE id % 7 = 0;
DELETE FROM posts WHERE id % 19 = 0;
DELETE FROM posts WHERE id IN (SELECT DISTINCT ON (blog_id) id FROM posts ORDER BY blog_id, created_at DESC, id);
DELETE FROM posts WHERE id IN (SELECT DISTINCT ON (blog_id) id FROM posts ORDER BY blog_id, rating, id);
INSERT INTO comments (post_id, score) SELECT 1 + g % 520, 3 FROM generate_series(1, 80) g;
UPDATE comments SET post_id = post_id + 1 WHERE id % 6 = 0;
UPDATE posts SET is_published = NOT is_published WHERE id % 23 = 0;
INSERT INTO visits SELECT g, date '2026-03-01' + g % 200, g % 9 FROM generate_series(1001, 1100) g;
DELETE FROM visits WHERE id % 11 = 0;
});
	is($ret, 0, 'writes after the restore succeed') or return diag($stderr);
	is($node->safe_psql($db, 'SELECT count(*) FROM counters.verify()'),
		'0', 'counters.verify() lists no drift after writes following the restore (the writes were counted)')
	  or return;
	is($node->safe_psql($db, $recount), '', 'the recount agrees after writes following the restore') or return;
	($ret, $stdout, $stderr) = $node->psql($db, 'SELECT counters.compact()');
	is($ret, 0, 'compaction succeeds') or return diag($stderr);
	is($node->safe_psql($db, $recount), '', 'the recount agrees after compaction') or return;
	isnt(scalar $node->psql($db, "SELECT counters.set_bounds('user_blog', 'posts', max => 1)"),
		0, 'a bound that current values break is refused') or return;
	($ret, $stdout, $stderr) = $node->psql($db, "SELECT counters.set_bounds('user_blog', 'posts', max => 30)");
	is($ret, 0, 'a bound that holds is accepted') or return diag($stderr);
	($ret, $stdout, $stderr) =
	  $node->psql($db, 'INSERT INTO posts (user_id, blog_id) SELECT 1, 1 FROM generate_series(1, 40)');
	isnt($ret, 0, 'the bound refuses a write after the restore') or return;
	like($stderr, qr/above its maximum 30/, "the write fails with the bound's error");
	return;
}

for my $path (@paths)
{
	my $db = "counters_dump_$path";
	$node->safe_psql('postgres', "CREATE DATABASE $db TEMPLATE template0");
	subtest "restore path $path" => sub { check($path, $db) };
}

# As the application's role, not a superuser: the owner of a database, who created the extension there (it is
# trusted) and its counters (one with window thresholds, whose state it keeps in a table of its own), dumps it and
# restores it into another database it owns. In 0.5 before this test the dump failed: it read an extension table
# that only a superuser could read.
$node->safe_psql(
	'postgres', q{
CREATE ROLE counters_owner LOGIN;
CREATE DATABASE counters_owned OWNER counters_owner;
CREATE DATABASE counters_owned_restored OWNER counters_owner TEMPLATE template0;
});
my @as_owner = ('-U', 'counters_owner');
my $owned = q{
CREATE EXTENSION counters;
CREATE TABLE tags (tag text PRIMARY KEY);
INSERT INTO tags SELECT 't' || g FROM generate_series(0, 9) g;
CREATE TABLE uses (id serial PRIMARY KEY, tag text NOT NULL REFERENCES tags, used_at timestamp NOT NULL DEFAULT localtimestamp);
SELECT counters.create_counter('tag_hourly', $$SELECT tag, date_trunc('hour', used_at) AS hour, count(*) AS uses
	FROM uses GROUP BY tag, date_trunc('hour', used_at)$$);
SELECT counters.create_counter('tag_log', $$SELECT tag, count(*) AS uses FROM uses GROUP BY tag$$, mode => 'log');
SELECT counters.create_counter('tag_sharded', $$SELECT tag, count(*) AS uses FROM uses GROUP BY tag$$,
                               mode => 'sharded');
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{3, 100}', 'hour', '1 day');
SELECT counters.set_bounds('tag_hourly', 'uses', min => 0);
INSERT INTO uses (tag) SELECT 't' || g % 4 FROM generate_series(1, 30) g;
};
my $owned_state = q{
SELECT 'window' AS what, prefix::text, threshold::text FROM counters.window_state() UNION ALL
SELECT 'tag_hourly', tag, uses::text FROM tag_hourly UNION ALL
SELECT 'tag_log', tag, uses::text FROM tag_log UNION ALL
SELECT 'tag_sharded', tag, uses::text FROM tag_sharded ORDER BY 1, 2, 3};
my $owned_recount = q{
SELECT (SELECT count(*) FROM (SELECT tag, date_trunc('hour', used_at), count(*) FROM uses GROUP BY 1, 2
                              EXCEPT SELECT * FROM tag_hourly) d)
     + (SELECT count(*) FROM (SELECT * FROM tag_hourly
                              EXCEPT SELECT tag, date_trunc('hour', used_at), count(*) FROM uses GROUP BY 1, 2) d)
     + (SELECT count(*) FROM (SELECT tag, count(*) FROM uses GROUP BY 1 EXCEPT SELECT * FROM tag_log) d)
     + (SELECT count(*) FROM (SELECT * FROM tag_log EXCEPT SELECT tag, count(*) FROM uses GROUP BY 1) d)
     + (SELECT count(*) FROM (SELECT tag, count(*) FROM uses GROUP BY 1 EXCEPT SELECT * FROM tag_sharded) d)
     + (SELECT count(*) FROM (SELECT * FROM tag_sharded EXCEPT SELECT tag, count(*) FROM uses GROUP BY 1) d)
     + (SELECT count(*) FROM ((SELECT s.tag, th FROM (SELECT tag, count(*) AS n FROM uses
                                WHERE date_trunc('hour', used_at) > localtimestamp - interval '1 day' GROUP BY tag) s,
                               unnest('{3, 100}'::numeric[]) th WHERE s.n >= th)
                              EXCEPT SELECT prefix ->> 'tag', threshold FROM counters.window_state()) d)};
subtest 'dump and restore as the owner of the database, not a superuser' => sub {
	my ($ret, $stdout, $stderr) = $node->psql('counters_owned', "SET ROLE counters_owner;
$owned");
	is($ret, 0, 'the owner creates the extension and its counters') or return diag($stderr);
	is($node->safe_psql('counters_owned', 'SELECT count(*) FROM counters.window_state()'),
		'4', 'the window thresholds record four crossings') or return;
	is($node->safe_psql('counters_owned', $owned_recount), '0', 'the counters agree with a recount') or return;
	my $expected = $node->safe_psql('counters_owned', $owned_state);
	command_passes([ 'pg_dump', @as_owner, '-Fc', '-f', "$dir/owned.dump", 'counters_owned' ],
		'pg_dump as the owner') or return;
	command_passes([ 'pg_dump', @as_owner, '-Fp', '-f', "$dir/owned.sql", 'counters_owned' ],
		'pg_dump as the owner, plain format') or return;
	command_passes(
		[ 'pg_restore', @as_owner, '--exit-on-error', '-d', 'counters_owned_restored', "$dir/owned.dump" ],
		'pg_restore as the owner') or return;
	same_text($node->safe_psql('counters_owned_restored', $owned_state),
		$expected, 'the restored counters and window state equal the original') or return;
	is($node->safe_psql('counters_owned_restored', $owned_recount), '0', 'the restored counters agree with a recount')
	  or return;
	# writes after the restore: counted, and a crossing recorded before the dump is not announced again
	($ret, $stdout, $stderr) = $node->psql('counters_owned_restored', q{SET ROLE counters_owner;
INSERT INTO uses (tag) SELECT 't' || g % 5 FROM generate_series(1, 20) g;
DELETE FROM uses WHERE id % 7 = 0;
SELECT counters.compact();
});
	is($ret, 0, 'writes and compaction after the restore succeed') or return diag($stderr);
	is($node->safe_psql('counters_owned_restored', $owned_recount), '0',
		'the counters agree with a recount after writes following the restore') or return;
	return;
};

# The split restore as the owner, of a schema with a foreign key: pg_restore --data-only --disable-triggers needs a
# superuser (PostgreSQL lets only a superuser disable a foreign key's triggers), and without it the loaded rows would be
# counted on top of the loaded counter tables. The owner loads the data with counters.suspend on instead: not
# counted, noted (counters.stats.last_suspended, a NOTICE of verify()), and refused to a role without the owner's
# privileges.
subtest 'split restore as the owner of a schema with a foreign key: counters.suspend' => sub {
	$node->safe_psql('postgres', 'CREATE DATABASE counters_split OWNER counters_owner TEMPLATE template0;
CREATE ROLE counters_other LOGIN');
	my $expected = $node->safe_psql('counters_owned', $owned_state);
	my @restore = ('pg_restore', @as_owner, '--exit-on-error', '-d', 'counters_split');
	command_passes([ @restore, '--schema-only', "$dir/owned.dump" ], 'pg_restore --schema-only as the owner')
	  or return;
	ok( !$node->run_log(
			[ @restore, '--single-transaction', '--data-only', '--disable-triggers', "$dir/owned.dump" ]),
		'pg_restore --data-only --disable-triggers as the owner fails: a foreign key\'s triggers');
	{
		local $ENV{PGOPTIONS} = '-c counters.suspend=on';
		command_passes([ @restore, '--single-transaction', '--data-only', "$dir/owned.dump" ],
			'pg_restore --data-only as the owner, with counters.suspend on')
		  or return;
	}
	same_text($node->safe_psql('counters_split', $owned_state),
		$expected, 'the counters hold the loaded values, not counted twice') or return;
	is($node->safe_psql('counters_split', $owned_recount), '0', 'the counters agree with a recount') or return;
	is( $node->safe_psql(
			'counters_split', "SELECT count(*) FROM counters.stats WHERE last_suspended IS NOT NULL"),
		'3', 'counters.stats shows the suspended writes of each counter');
	my ($ret, $stdout, $stderr) = $node->psql('counters_split', 'SELECT count(*) FROM counters.verify()',
		extra_params => [@as_owner]);
	is($stdout, '0', 'verify() finds nothing wrong');
	like($stderr, qr/counter "tag_hourly": writes to its source were left uncounted/, '... and says what was suspended');
	($ret, $stdout, $stderr) = $node->psql('counters_split', q{
INSERT INTO uses (tag) SELECT 't' || g % 5 FROM generate_series(1, 20) g;
DELETE FROM uses WHERE id % 7 = 0;
}, extra_params => [@as_owner]);
	is($ret, 0, 'later writes succeed') or return diag($stderr);
	is($node->safe_psql('counters_split', $owned_recount), '0', 'later writes are counted');
	$node->safe_psql('counters_split', 'GRANT INSERT ON uses TO counters_other; GRANT USAGE ON SEQUENCE uses_id_seq TO counters_other');
	($ret, $stdout, $stderr) = $node->psql('counters_split', "SET counters.suspend = on; INSERT INTO uses (tag) VALUES ('t1')",
		extra_params => [ '-U', 'counters_other' ]);
	like($stderr, qr/counters.suspend is for a role with its owner's privileges/,
		'a role without the owner\'s privileges may not suspend the counters');
	is($node->safe_psql('counters_split', $owned_recount), '0', 'and nothing went uncounted');
	return;
};

# A schema-only dump (Rails' structure.sql, a test database made from migrations' output) carries each counter's
# catalog row in its definition view's comment. A tenant of the source database -- a role with CREATE on one schema --
# put descriptions of its own on views over the owner's table (a view needs no privilege on the table it reads), one
# naming a table of the owner as its target, one a superuser's table, their views calling a planted IMMUTABLE function.
# The DBA dumps the schema and restores it as a superuser (pg_dump -s | psql), then writes: the owner's counters are
# declared again as the owner, in their mode and with their options, when the restore creates their triggers; the
# tenant's descriptions are not honoured (a WARNING each); the planted code never runs, as anyone; and the DBA's
# writes count. (Before 0.5, every write failed until counters.counter was restored; before this test's change, the
# tenant's description became a superuser's counter, which ran its code as the superuser.)
subtest 'schema-only dump, restored by a superuser: the counters declared again, a tenant\'s descriptions not' => sub {
	$node->safe_psql('postgres', 'CREATE DATABASE counters_schema OWNER counters_owner TEMPLATE template0');
	my ($ret, $stdout, $stderr) = $node->psql('counters_owned', q{
CREATE TABLE public.vault (tag text PRIMARY KEY, uses bigint NOT NULL DEFAULT 0);
CREATE SCHEMA tenant AUTHORIZATION counters_other;
CREATE TABLE public.audit (who name, superuser boolean);
GRANT INSERT ON public.audit TO PUBLIC;
SET ROLE counters_other;
CREATE FUNCTION tenant.planted() RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	INSERT INTO public.audit SELECT current_user, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
	BEGIN
		EXECUTE 'ALTER ROLE counters_other SUPERUSER';
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
	RETURN true;
END $$;
CREATE VIEW tenant.forged AS SELECT tag, count(*) AS uses FROM public.uses WHERE tenant.planted() GROUP BY tag;
COMMENT ON VIEW tenant.forged IS 'counters: {"name": "forged", "mode": "exact", "target": "public.tag_log_totals", "options": {}, "owns_target": true}';
CREATE VIEW tenant.forged_vault AS SELECT tag, count(*) AS uses FROM public.uses WHERE tenant.planted() GROUP BY tag;
COMMENT ON VIEW tenant.forged_vault IS 'counters: {"name": "forged_vault", "mode": "exact", "target": "public.vault", "options": {}, "owns_target": false}';
});
	is($ret, 0, 'a tenant describes counters over the owner\'s table') or return diag($stderr);
	command_passes([ 'pg_dump', '--schema-only', '-f', "$dir/schema.sql", 'counters_owned' ],
		'pg_dump --schema-only') or return;
	($ret, $stdout, $stderr) = $node->psql('counters_schema', undef,
		extra_params => [ '-X', '-q', '-v', 'ON_ERROR_STOP=1', '--single-transaction', '-f', "$dir/schema.sql" ]);
	is($ret, 0, 'the schema loads as a superuser, in one transaction') or return diag($stderr);
	like($stderr, qr/WARNING:  the description of view tenant\.forged, owned by counters_other, is not honoured/,
		'the tenant\'s description naming the owner\'s table is not honoured');
	like($stderr, qr/WARNING:  the description of view tenant\.forged_vault, owned by counters_other, is not honoured/,
		'the tenant\'s description naming the superuser\'s table is not honoured');
	is( $node->safe_psql('counters_schema',
			q{SELECT string_agg(k.name || ' ' || k.mode || ' ' || (k.options ? 'bounds')::text || ' ' || (k.options ? 'window')::text || ' ' || pg_get_userbyid(c.relowner), ', ' ORDER BY k.name) FROM counters.counter k JOIN pg_class c ON c.oid = k.target}),
		'tag_hourly exact true true counters_owner, tag_log log false false counters_owner, tag_sharded sharded false false counters_owner',
		'the restore declared the counters again, as the owner, in their modes, with their bounds and window thresholds; not the forged ones');
	($ret, $stdout, $stderr) = $node->psql('counters_schema', q{
INSERT INTO tags SELECT 't' || g FROM generate_series(0, 9) g;
INSERT INTO uses (tag) SELECT 't' || g % 4 FROM generate_series(1, 30) g;
DELETE FROM uses WHERE id % 7 = 0;
SELECT counters.compact();
});
	is($ret, 0, 'the superuser\'s writes succeed') or return diag($stderr);
	is($node->safe_psql('counters_schema', 'SELECT count(*) FROM public.audit'), '0',
		'the planted code never ran, as anyone');
	is($node->safe_psql('counters_schema', "SELECT rolsuper FROM pg_roles WHERE rolname = 'counters_other'"), 'f',
		'the tenant is not a superuser');
	is($node->safe_psql('counters_schema', $owned_recount), '0', 'the counters agree with a recount') or return;
	is($node->safe_psql('counters_schema', 'SELECT count(*) FROM counters.verify()'), '0', 'verify() is empty');
	return;
};

$node->stop;
done_testing();
