# The blue/green move of docs/replication.md, topology (a), from an older major (COUNTERS_OLD_INSTALL) to the
# PostgreSQL this harness belongs to: the old server publishes the sources and the counters' own tables, the new one
# subscribes (its schema from the same create_counter() calls), follows while subscribed (a local write is refused),
# then the cut-over (writes stopped, caught up, DROP SUBSCRIPTION, sequences set) and the new server counts its own
# writes. Every counter is compared with a recount of the new server's rows at each step.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use UpgradeTest;

my $blue = old_node('blue', "wal_level = logical\nmax_replication_slots = 10\nmax_wal_senders = 10");
$blue->start;
my $green = PostgreSQL::Test::Cluster->new('green');
$green->init;
$green->append_conf('postgresql.conf', "max_logical_replication_workers = 8\nmax_sync_workers_per_subscription = 4");
$green->start;
create_app($blue);
create_app($green);
write_rounds($blue, 1, 2);

# the sources (the counter cache's table without its counter column) and every table the counters keep
my $tables = $blue->safe_psql('app', q{
SELECT string_agg(t::text, ', ') FROM (
  SELECT target AS t FROM counters.counter WHERE owns_target AND mode = 'exact'
  UNION ALL SELECT totals FROM counters.counter UNION ALL SELECT log FROM counters.counter
  UNION ALL SELECT crossings FROM counters.counter) x WHERE t IS NOT NULL});
$blue->safe_psql('app',
	"SET ROLE app; CREATE PUBLICATION app FOR TABLE blogs (id, name), posts, comments, likes, seats, tag_uses, events, $tables");
$green->safe_psql('app', "CREATE SUBSCRIPTION app CONNECTION '" . $blue->connstr . " dbname=app' PUBLICATION app");
$green->wait_for_subscription_sync($blue, 'app', 'app');
$blue->wait_for_catchup('app');
ok($green->poll_query_until('app', "SELECT bool_and(n = 0) FROM (" . check_sql(2) . ") c(name, n)"),
	'green: the initial copy arrives, counted once');
write_rounds($blue, 3, 3);
$blue->wait_for_catchup('app');
is(check($green, 3), exact(), 'green follows blue\'s counts');
my ($ret, $out, $err) = $green->psql('app', 'SET ROLE app; INSERT INTO posts VALUES (999, 1)');
like($err, qr/is replicated from a publisher/, 'green refuses a local write while subscribed');

# the cut-over: blue takes no more writes; green catches up, drops the subscription, takes the sequences
$blue->wait_for_catchup('app');
$green->safe_psql('app', 'DROP SUBSCRIPTION app');
for my $seq ('comments_id_seq', 'likes_id_seq', 'seats_id_seq')
{
	my $last = $blue->safe_psql('app', "SELECT last_value FROM $seq");
	$green->safe_psql('app', "SELECT setval('$seq', $last)");
}
write_rounds($green, 4, 4);
is(check($green, 4), exact(), 'after the cut-over green counts its own writes; thresholds fire');

$blue->stop;
$green->stop;
done_testing();
