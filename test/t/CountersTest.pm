# What the TAP tests in test/t share: a cluster of the test's own, started, and a database with the extension.
# A test finds this module beside it: use FindBin; use lib $FindBin::RealBin; use CountersTest;
package CountersTest;
use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;

our @EXPORT = qw(start_node create_database hold_open release);

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

# hold_open(node, db, sql[, psql options]): a session of psql on db that runs sql in a transaction it holds open,
# returned once sql has run, until release(held) commits it.
sub hold_open
{
	my ($node, $db, $sql, @options) = @_;
	my ($in, $out) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port, @options, '-d', $db ],
		'<', \$in, '>', \$out, '2>', \$out,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	$in .= "BEGIN;\n$sql;\nSELECT 'held';\n";
	$h->pump until $out =~ /held/;
	return [ $h, \$in ];
}

# release(held): commits a session's transaction of hold_open and ends the session.
sub release
{
	my ($held) = @_;
	${ $held->[1] } .= "COMMIT;\n\\q\n";
	$held->[0]->finish;
	return;
}

1;
