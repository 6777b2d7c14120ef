# pg_upgrade from an older major (COUNTERS_OLD_INSTALL, e.g. /usr/lib/postgresql/15) to the PostgreSQL this harness
# belongs to, with counters in use (test/upgrade/schema.sql: every mode, a counter cache, bounds, thresholds, window
# thresholds, a sink, a counter through a parent row), declared and written by an application role. After the
# upgrade every counter equals a recount, writes are counted, the bound refuses, and thresholds still fire.
# Run by test/upgrade.sh, which installs counters into both first.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use UpgradeTest;

my $old = old_node('old');
$old->start;
create_app($old);
write_rounds($old, 1, 2);
is(check($old, 2), exact(), 'before: every counter equals its recount');
note('columns with pg_attver removed: ' . strip_attver($old));
$old->stop;

my $new = PostgreSQL::Test::Cluster->new('new');
# (PostgreSQL 18's initdb enables data checksums by default; pg_upgrade needs them as the old cluster has them)
$new->init(extra => $new->pg_version >= 18 ? ['--no-data-checksums'] : []);
my $dir = PostgreSQL::Test::Utils::tempdir;
chdir $dir;
command_ok(
	[
		'pg_upgrade', '--no-sync',
		'-d' => $old->data_dir, '-D' => $new->data_dir,
		'-b' => $old->config_data('--bindir'), '-B' => $new->config_data('--bindir'),
		'-s' => $new->host, '-p' => $old->port, '-P' => $new->port
	],
	'pg_upgrade ' . $old->pg_version . ' to ' . $new->pg_version);
$new->start;
is(check($new, 2), exact(), 'after pg_upgrade: every counter equals its recount');
write_rounds($new, 3, 4);
is(check($new, 4), exact(), 'writes after the upgrade are counted; thresholds and window thresholds fire');
my ($ret, $out, $err) = $new->psql('app', 'SET ROLE app; INSERT INTO seats (trip) VALUES (4)');
like($err, qr/counter "trip_seats"/, 'the bound refuses the fourth seat');
is($new->safe_psql('app', 'SELECT extversion FROM pg_extension WHERE extname = \'counters\''),
	$old_version, 'the extension keeps its version');

$new->stop;
done_testing();
