# Bounds under real parallel load: 50 pgbench clients keep trying to buy seats of 3 excursions limited to 20 paid
# participants each (counters.set_bounds('seats', 'paid', max => 20)), with unpaid bookings, cancellations and moves
# between excursions mixed in. A refused booking is caught in the transaction (check_violation) and counted.
# Afterwards: no excursion has more than 20 paid bookings (recounted from the bookings table), every excursion is
# full (the load kept going long after it could fill them), the counter equals the recount (counters.verify empty),
# some bookings were refused, and no other error happened (pgbench: no failed transaction, no aborted client). Then
# the same bound with deferred counters: 30 concurrent bookers of 20 seats, checked at commit: exactly 20 commit.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

# 50 pgbench clients at once (initdb may pick fewer connections on a small machine).
my $node = start_node('bounds', 'max_connections = 100');

my $db = create_database($node, 'counters_bounds_pgbench');
$node->safe_psql(
	$db, q{
CREATE TABLE bookings (id bigserial PRIMARY KEY, excursion_id int NOT NULL, paid boolean NOT NULL);
CREATE TABLE outcomes (accepted boolean NOT NULL);
SELECT counters.create_counter('seats',
	'SELECT excursion_id, count(*) FILTER (WHERE paid) AS paid, count(*) AS booked FROM bookings GROUP BY excursion_id');
SELECT counters.set_bounds('seats', 'paid', max => 20);
-- What an application does: try to book, and tell the customer when the excursion is full.
CREATE FUNCTION book(excursion int, pay boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO bookings (excursion_id, paid) VALUES (excursion, pay);
	INSERT INTO outcomes VALUES (true);
	RETURN true;
EXCEPTION WHEN check_violation THEN
	INSERT INTO outcomes VALUES (false);
	RETURN false;
END $$;
CREATE FUNCTION pay(excursion int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	UPDATE bookings SET paid = true
	 WHERE id = (SELECT id FROM bookings WHERE excursion_id = excursion AND NOT paid LIMIT 1 FOR UPDATE SKIP LOCKED);
	RETURN true;
EXCEPTION WHEN check_violation THEN
	INSERT INTO outcomes VALUES (false);
	RETURN false;
END $$;
CREATE FUNCTION move(from_excursion int, to_excursion int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	UPDATE bookings SET excursion_id = to_excursion
	 WHERE id = (SELECT id FROM bookings WHERE excursion_id = from_excursion AND paid LIMIT 1 FOR UPDATE SKIP LOCKED);
	RETURN true;
EXCEPTION WHEN check_violation THEN
	INSERT INTO outcomes VALUES (false);
	RETURN false;
END $$;
});

# 50 clients x 40 transactions: 6 in 10 buy a paid seat, 3 book unpaid, pay one and move one, 1 cancels a paid one.
# Any error other than a refused booking (caught above) fails a transaction (pgbench does not retry: --max-tries is
# 1) or aborts a client (pgbench then exits with status 2).
$node->pgbench(
	'-n -c 50 -j 4 -t 40',
	0,
	[ qr{^number of transactions actually processed: 2000/2000$}m, qr{^number of failed transactions: 0 }m ],
	[],
	'bounds under pgbench: every transaction completed, none failed, no client aborted',
	{
		'bounds_book.pgbench@6' => q{\set e random(1, 3)
SELECT book(:e, true);
},
		'bounds_mixed.pgbench@3' => q{\set e random(1, 3)
\set f random(1, 3)
SELECT book(:e, false);
SELECT pay(:e);
SELECT move(:e, :f);
},
		'bounds_cancel.pgbench@1' => q{\set e random(1, 3)
DELETE FROM bookings WHERE id = (SELECT id FROM bookings WHERE excursion_id = :e AND paid ORDER BY id DESC LIMIT 1 FOR UPDATE SKIP LOCKED);
}
	},
	$db);

# One last round of bookings after the load, so that every excursion ends full whatever the cancellations did.
$node->safe_psql($db, 'SELECT book(e, true) FROM generate_series(1, 3) e, generate_series(1, 25)');

is( $node->safe_psql(
		$db,
		'SELECT count(*) FROM (SELECT excursion_id FROM bookings WHERE paid GROUP BY 1 HAVING count(*) > 20) o'),
	'0',
	'no excursion has more than 20 paid bookings');
is( $node->safe_psql(
		$db,
		'SELECT count(*) FROM (SELECT excursion_id FROM bookings WHERE paid GROUP BY 1 HAVING count(*) = 20) f'),
	'3',
	'every excursion is full');
is($node->safe_psql($db, "SELECT count(*) FROM counters.verify('seats')"),
	'0', 'the counter equals the recount (counters.verify is empty)');
my $refused = $node->safe_psql($db, 'SELECT count(*) FROM outcomes WHERE NOT accepted');
cmp_ok($refused, '>', 0, 'some bookings were refused, so the bound was tested');
note("refused: $refused, accepted: "
	  . $node->safe_psql($db, 'SELECT count(*) FROM outcomes WHERE accepted'));

# Deferred (counters.apply = deferred): 30 bookers of the last 20 seats of excursion 4, each one transaction of its
# own; the bound is checked when each applies its delta, at commit: exactly 20 commits go through, the other 10 fail
# at COMMIT with check_violation (pgbench then aborts those clients: exit status 2).
$node->pgbench(
	'-n -c 30 -j 4 -t 1 --max-tries=1',
	2,
	[ qr{^number of transactions actually processed: 20/30$}m ],
	[ qr{check_violation|would be 21 for key}m ],
	'deferred bounds: 30 bookers of 20 seats, 20 commits',
	{
		'bounds_deferred.pgbench' => q{BEGIN;
SET LOCAL counters.apply = deferred;
INSERT INTO bookings (excursion_id, paid) VALUES (4, true);
COMMIT;
}
	},
	$db);
is($node->safe_psql($db, 'SELECT count(*) FROM bookings WHERE excursion_id = 4 AND paid'),
	'20', 'deferred: exactly 20 seats of excursion 4 were sold');
is($node->safe_psql($db, "SELECT count(*) FROM counters.verify('seats')"), '0', 'deferred: the counter equals the recount');

$node->stop;
done_testing();
