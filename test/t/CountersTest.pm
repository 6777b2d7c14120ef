# What the TAP tests in test/t share: a cluster of the test's own, started, and a database with the extension.
# A test finds this module beside it: use FindBin; use lib $FindBin::RealBin; use CountersTest;
package CountersTest;
use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;

our @EXPORT = qw(start_node create_database);

# start_node(name[, settings]): a new cluster named name, initialized, with the settings (postgresql.conf lines, if
# given) appended to its postgresql.conf, and started.
sub start_node
{
	my ($name, $settings) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', $settings) if defined $settings;
	$node->start;
	return $node;
}

# create_database(node, name): creates the database name on node and the extension in it; returns name.
sub create_database
{
	my ($node, $db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION counters');
	return $db;
}

1;
