# What the upgrade tests share: the older installation's node, the application database (test/upgrade/schema.sql),
# rounds of writes (write.sql) and the check (check.sql).
package UpgradeTest;
use strict;
use warnings;
use Exporter 'import';
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

our @EXPORT = qw(old_node create_app write_rounds check check_sql exact strip_attver $old_version);

my $dir = "$FindBin::RealBin/..";
sub slurp_sql { return PostgreSQL::Test::Utils::slurp_file("$dir/$_[0]"); }
our $old_version;

# old_node(name[, settings]): a cluster of COUNTERS_OLD_INSTALL, initialized, with the settings appended
sub old_node
{
	my ($name, $settings) = @_;
	my $install = $ENV{COUNTERS_OLD_INSTALL} or die "COUNTERS_OLD_INSTALL is not set";
	my $node = PostgreSQL::Test::Cluster->new($name, install_path => $install);
	$node->init;
	$node->append_conf('postgresql.conf', $settings) if defined $settings;
	return $node;
}

# create_app(node): the role app (not a superuser) and its database app with the schema, declared by app
sub create_app
{
	my ($node) = @_;
	$node->safe_psql('postgres', 'CREATE ROLE app LOGIN; CREATE DATABASE app OWNER app');
	# (verify() says NOTICE that a sink is not verified: polls need a quiet stderr)
	$node->safe_psql('postgres', 'ALTER DATABASE app SET client_min_messages = warning');
	$node->safe_psql('app', 'SET ROLE app; ' . slurp_sql('schema.sql'));
	$old_version //= $node->safe_psql('app', "SELECT extversion FROM pg_extension WHERE extname = 'counters'");
}

# write_rounds(node, from, to): the rounds of writes, as app
sub write_rounds
{
	my ($node, $from, $to) = @_;
	$node->safe_psql('app', 'SET ROLE app; ' . slurp_sql('write.sql'), extra_params => [ '-v', "r=$_" ])
	  for $from .. $to;
}

# check_sql(rounds): check.sql with its variable set; check(node, rounds): its result
sub check_sql
{
	my ($rounds) = @_;
	(my $sql = slurp_sql('check.sql')) =~ s/:rounds\b/$rounds/g;
	$sql =~ s/;\s*$//;
	return $sql;
}
sub check { my ($node, $rounds) = @_; return $node->safe_psql('app', check_sql($rounds)); }

# strip_attver(node): Debian 12's PostgreSQL 15.20 gives every column of every table an attribute option pg_attver,
# which the pg_dump of 17 and 18 (upstream) dumps and their servers refuse ('unrecognized parameter "pg_attver"'):
# pg_upgrade from it fails for any database with a table, counters or not. The test removes the option from the
# app database's columns (as the superuser, allow_system_table_mods) before the upgrade; docs/operations.md says so.
# Returns how many columns had it.
sub strip_attver
{
	my ($node) = @_;
	return $node->safe_psql('app', q{
SET allow_system_table_mods = on;
WITH s AS (
  UPDATE pg_attribute SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(attoptions) o WHERE o !~ '^pg_attver='), '{}')
   WHERE attrelid >= 16384 AND EXISTS (SELECT FROM unnest(attoptions) o WHERE o ~ '^pg_attver=') RETURNING 1)
SELECT count(*) FROM s});
}

# what check returns when everything is exact
sub exact
{
	return join("\n",
		map { "$_|0" } sort('blog_comments', 'blog_posts', 'blog_posts_cache', 'like events', 'post_likes',
			'post_likes_sharded', 'post_views', 'seat events', 'tag_hourly', 'trip_seats', 'verify()',
			'window events'));
}

1;
