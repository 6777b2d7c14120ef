# Statements that fire several trigger events, under parallel load. 4 pgbench clients, each writing only its own rows
# of one source table, run one multi-event statement per transaction on 3 shared keys: a MERGE with DELETE, UPDATE
# and INSERT actions, a writable CTE that moves rows from one key to another (a DELETE ... RETURNING feeding an
# INSERT), and INSERT ... ON CONFLICT DO UPDATE (which fires both the UPDATE and the INSERT statement triggers). Two
# counters follow the source: an exact-mode counter table per key k (src_by_k) and counter-cache columns per key g
# of an existing table (shelf, target => 'shelf'). k and g are set independently, so deadlocks can form on the
# rows of either.
#
# PostgreSQL fires such a statement's AFTER statement triggers one event after the other (MERGE: DELETE, UPDATE,
# INSERT; ON CONFLICT: UPDATE, INSERT; the CTE: DELETE, then INSERT). The counter rows of the whole statement must be
# locked in one sorted order, as for any other statement: if each event applied its own deltas, two statements that
# reach the same keys through different events would lock them in opposite orders and deadlock. The clients share
# no source row, only counter rows, so any deadlock here is a deadlock on counter rows.
#
# pgbench retries a deadlocked transaction (--max-tries) instead of aborting, and every deadlock is counted: by
# pgbench (transactions retried), in the server log (each "deadlock detected" error, which also names the statement
# and the relation the victim waited for) and in pg_stat_database.deadlocks. Fails if there was any deadlock or any
# other error, or if a counter differs from its recount (EXCEPT both ways). About 10 s when statements deadlock
# (mostly spent waiting for deadlock detection), a few seconds when they don't. MULTI_EVENT_TRANSACTIONS sets the
# number of transactions per client (300).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

my $node = start_node('multi_event');

my $db = 'counters_multi_event_deadlocks';
my $clients = 4;
my $per_client = $ENV{MULTI_EVENT_TRANSACTIONS} // 300;
my $total = $clients * $per_client;

create_database($node, $db);
$node->safe_psql(
	$db, q{
-- A deadlock is detected (and its transaction retried) after deadlock_timeout: keep that short, and the run too.
ALTER DATABASE counters_multi_event_deadlocks SET deadlock_timeout = '50ms';
CREATE TABLE src (id int PRIMARY KEY, k int NOT NULL, g int NOT NULL, v bigint NOT NULL);
CREATE TABLE shelf (g int PRIMARY KEY, name text NOT NULL, items bigint NOT NULL DEFAULT 0, total bigint NOT NULL DEFAULT 0);
INSERT INTO shelf (g, name) SELECT g, 'shelf ' || g FROM generate_series(1, 3) g;
-- Rows nobody writes (ids from 1,000,000) keep every key's counter row in place; client c owns ids c*1000+1 .. +40.
INSERT INTO src SELECT 1000000 + i, 1 + i % 3, 1 + i / 10, i FROM generate_series(0, 29) i;
INSERT INTO src SELECT c * 1000 + r, 1 + (c + r) % 3, 1 + r % 3, r FROM generate_series(0, 3) c, generate_series(1, 40) r;
SELECT counters.create_counter('src_by_k', 'SELECT k, count(*) AS items, sum(v) AS total FROM src GROUP BY k');
SELECT counters.create_counter('shelf_counts', 'SELECT g, count(*) AS items, sum(v) AS total FROM src GROUP BY g',
	target => 'shelf');
});

# Two of the client's rows, a in 1..20 and b in 21..40 (never the same row twice), each with a key k, a key g and a
# value v: what the MERGE and the upsert write.
my $two_rows = q{\set a 1000 * :client_id + random(1, 20)
\set b 1000 * :client_id + random(21, 40)
\set ka random(1, 3)
\set kb random(1, 3)
\set ga random(1, 3)
\set gb random(1, 3)
\set va random(1, 100)
\set vb random(1, 100)
};
my %scripts = (
	# MERGE: a row already in the given key k is deleted, a row in another key moves there (and to the given g), an
	# absent row is inserted.
	'multi_event_merge.pgbench' => $two_rows . q{
MERGE INTO src t USING (VALUES (:a, :ka, :ga, :va), (:b, :kb, :gb, :vb)) AS s (id, k, g, v) ON t.id = s.id
WHEN MATCHED AND t.k = s.k THEN DELETE
WHEN MATCHED THEN UPDATE SET k = s.k, g = s.g, v = s.v
WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.k, s.g, s.v);
},
	# Writable CTE: the client's rows of one key k among ten of its ids move to another k (and to g = their old k).
	'multi_event_move.pgbench' => q{\set lo 1000 * :client_id + random(1, 31)
\set from random(1, 3)
\set to 1 + (:from + random(0, 1)) % 3
WITH moved AS (DELETE FROM src WHERE id BETWEEN :lo AND :lo + 9 AND k = :from RETURNING id, k, v)
INSERT INTO src SELECT id, :to, k, v + 1 FROM moved;
},
	# INSERT ... ON CONFLICT DO UPDATE: rows that exist are updated (and may change keys), absent ones are inserted.
	'multi_event_upsert.pgbench' => $two_rows . q{
INSERT INTO src VALUES (:a, :ka, :ga, :va), (:b, :kb, :gb, :vb)
ON CONFLICT (id) DO UPDATE SET k = excluded.k, g = excluded.g, v = excluded.v;
});

# Each query runs in a session of its own, so the statistics are read afresh.
sub deadlocks_counted
{
	return $node->safe_psql($db, 'SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()');
}

my $deadlocks_before = deadlocks_counted();
my $offset = -s $node->logfile;
my $started = time;
# Status 0: no client aborted (any error other than a deadlock or a serialization failure aborts one). A transaction
# that met a deadlock is retried, and counted as retried; one that met more than 100 fails.
$node->pgbench(
	"-n -c $clients -j $clients -t $per_client --max-tries=100 --failures-detailed",
	0,
	[
		qr{^number of transactions actually processed: $total/$total$}m,
		qr{^number of failed transactions: 0 }m,
		qr{^number of deadlock failures: 0 }m,
		qr{^number of transactions retried: 0 }m
	],
	[],
	'multi-event statements under pgbench: no failed, retried (deadlocked) or aborted transaction',
	\%scripts,
	$db);
my $elapsed = time - $started;

# The server log: every error since the load started. A deadlock's record runs from its ERROR line to its STATEMENT;
# the row the victim waited for is named by its CONTEXT (a transaction lock: "while updating tuple ... in relation")
# or its DETAIL (a tuple lock: "tuple (...) of relation <oid>").
my $log = slurp_file($node->logfile, $offset);
my @errors = $log =~ /^\d.*? ERROR:  (.*)$/mg;
my @deadlocks = $log =~ /( ERROR:  deadlock detected\n.*?STATEMENT:  \S+)/sg;
my (%by_statement, %waited_on);
for my $record (@deadlocks)
{
	my ($statement) = $record =~ /STATEMENT:  (\S+)$/;
	$by_statement{ { MERGE => 'MERGE', WITH => 'CTE', INSERT => 'upsert' }->{$statement} // $statement }++;
	my $relation = 'unknown';
	if ($record =~ /CONTEXT:  .*? in relation "([^"]+)"/)
	{
		$relation = $1;
	}
	elsif ($record =~ /tuple \([0-9,]+\) of relation ([0-9]+)/)
	{
		$relation = $node->safe_psql($db, "SELECT $1::regclass");
	}
	$waited_on{$relation}++;
}
my @other_errors = grep { !/^deadlock detected/ } @errors;

# Backends publish their statistics as they exit: wait for pgbench's to be gone.
ok( $node->poll_query_until(
		$db,
		'SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()'),
	"pgbench's sessions have ended");
my $deadlocks_stat = deadlocks_counted() - $deadlocks_before;

# Independent recount of the source, compared both ways with each counter.
my $drift = $node->safe_psql(
	$db, q{
WITH by_k AS (SELECT k, items, total FROM src_by_k),
     by_k_recount AS (SELECT k, count(*) AS items, sum(v) AS total FROM src GROUP BY k),
     by_g AS (SELECT g, items, total FROM shelf),
     by_g_recount AS (SELECT s.g, count(r.id) AS items, coalesce(sum(r.v), 0) AS total
                        FROM shelf s LEFT JOIN src r ON r.g = s.g GROUP BY s.g)
SELECT concat_ws(' ', counter, only_in, key, items, total) FROM (
	SELECT 'src_by_k' AS counter, 'counter' AS only_in, * FROM (TABLE by_k EXCEPT TABLE by_k_recount) d
	UNION ALL SELECT 'src_by_k', 'recount', * FROM (TABLE by_k_recount EXCEPT TABLE by_k) d
	UNION ALL SELECT 'shelf_counts', 'counter', * FROM (TABLE by_g EXCEPT TABLE by_g_recount) d
	UNION ALL SELECT 'shelf_counts', 'recount', * FROM (TABLE by_g_recount EXCEPT TABLE by_g) d
) x (counter, only_in, key, items, total) ORDER BY 1;
});

my $summary = sub {
	my %n = @_;
	return join(', ', map { "$_: $n{$_}" } sort keys %n) || 'none';
};
note("$total transactions in ${elapsed}s; deadlocks: "
	  . scalar(@deadlocks)
	  . " in the server log (by statement: "
	  . $summary->(%by_statement)
	  . "; waiting for: "
	  . $summary->(%waited_on)
	  . "), $deadlocks_stat in pg_stat_database; other errors: "
	  . scalar(@other_errors));

is(scalar(@other_errors), 0, 'no error other than deadlocks in the server log')
  or diag(join("\n", @other_errors[ 0 .. ($#other_errors < 9 ? $#other_errors : 9) ]));
is(scalar(@deadlocks), 0, 'multi-event statements did not deadlock on counter rows (server log)')
  or diag(join("\n", @deadlocks[ 0 .. ($#deadlocks < 1 ? $#deadlocks : 1) ]));
is($deadlocks_stat, 0, 'multi-event statements did not deadlock on counter rows (pg_stat_database)');
is($drift, '', 'both counters agree with a recount');

$node->stop;
done_testing();
