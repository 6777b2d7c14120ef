# The role matrix: whoever starts the work, a counter's code runs as its owner, in a security-restricted operation.
#
# m_owner (not a superuser) owns a schema with counters of every feature -- exact (with thresholds every 1, bounds,
# keep_zero, a CHECK constraint and a bool_or() column), max() and count(DISTINCT) columns with a FILTER, log (with an avg() column), sharded (with thresholds), a counter cache with set_touch, a count through
# a parent row, a count through a chain of parent rows (items -> groups -> zones, one counter per level), a sink, window thresholds with a retention -- and plants code everywhere a counter runs it: in the
# definition (an IMMUTABLE wrapper), in a key type's cast to json, in threshold and window callbacks, in triggers on
# the counter tables and in a CHECK constraint of one. Each records the step, the role it runs as, and whether it runs
# restricted (creating a temporary table fails only inside a security-restricted operation).
#
# Every operation -- writing (also deferred to the commit), declaring, setting options, redefining, retyping a column, switching modes, compacting,
# rebuilding (also concurrently), verifying, top(), checking windows, applying retention, dropping -- is started in
# turn by the owner, by a role that is a member of the owner (m_admin), and by a superuser; writes also by a role that
# may only write the sources (m_writer), which may do nothing else (42501); then the background worker compacts.
# After each step: every record says m_owner and restricted; the code the step must run did run (the probes are
# reached); and every counter equals a recount of its source that calls none of the planted code. Then a tenant
# without rights names its own planted function at every entry point that takes SQL text, over the owner's tables:
# each is refused before the text is parsed or planned, and its code never runs, as anyone.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CountersTest;

my $node = start_node(
	'matrix', q{
shared_preload_libraries = 'counters'
counters.compact_databases = 'matrix'
counters.compact_interval = 0
max_worker_processes = 16
});
my $db = create_database($node, 'matrix');
$node->safe_psql(
	$db, q{
CREATE ROLE m_owner LOGIN;
CREATE ROLE m_admin LOGIN IN ROLE m_owner;
CREATE ROLE m_writer LOGIN;
CREATE SCHEMA m AUTHORIZATION m_owner;
GRANT USAGE ON SCHEMA m TO m_writer, m_admin;
});

# The owner's schema: the planted code first, then the sources and the counters.
$node->safe_psql(
	$db, q{
SET ROLE m_owner;
CREATE TABLE m.audit (step text, what text, who name, restricted boolean);
GRANT INSERT ON m.audit TO PUBLIC;
CREATE FUNCTION m.record(what text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	restricted boolean;
BEGIN
	BEGIN
		CREATE TEMP TABLE matrix_probe ();
		RAISE EXCEPTION 'not restricted';
	EXCEPTION WHEN OTHERS THEN
		restricted := SQLERRM LIKE '%security-restricted%';
	END;
	INSERT INTO m.audit VALUES (coalesce(nullif(current_setting('matrix.step', true), ''), 'worker'), what,
	                            current_user, restricted);
END $$;
GRANT EXECUTE ON FUNCTION m.record(text) TO PUBLIC;
CREATE FUNCTION m.bucket(v bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM m.record('definition');
	RETURN v % 3;
END $$;
CREATE TYPE m.kind AS ENUM ('a', 'b');
CREATE FUNCTION m.kind_json(k m.kind) RETURNS json LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM m.record('cast');
	RETURN pg_catalog.to_json(k::text);
END $$;
CREATE CAST (m.kind AS json) WITH FUNCTION m.kind_json(m.kind);
CREATE FUNCTION m.on_event(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                           direction text) RETURNS void LANGUAGE plpgsql AS $$BEGIN PERFORM m.record('callback'); END$$;
CREATE FUNCTION m.on_table() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM m.record('trigger'); RETURN NULL; END$$;
CREATE FUNCTION m.check_ok(n bigint) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM m.record('check');
	RETURN n >= 0;
END $$;

CREATE TABLE m.groups (id int PRIMARY KEY, region text NOT NULL, zone int NOT NULL DEFAULT 1);
INSERT INTO m.groups VALUES (1, 'eu', 1), (2, 'us', 1), (3, 'eu', 2);
CREATE TABLE m.zones (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO m.zones VALUES (1, 'north'), (2, 'south');
CREATE TABLE m.items (id int PRIMARY KEY, v int NOT NULL, k m.kind NOT NULL, grp int NOT NULL,
                      day date NOT NULL DEFAULT current_date);
CREATE INDEX ON m.items (grp);
INSERT INTO m.items SELECT g, g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END::m.kind, 1 + g % 3, current_date - g % 4
  FROM generate_series(1, 24) g;
CREATE TABLE m.blogs (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0, touched timestamptz);
INSERT INTO m.blogs (id) VALUES (1), (2), (3);
CREATE TABLE m.clicks (id int NOT NULL, v int NOT NULL, k m.kind NOT NULL);
-- (what went into the sink, kept by the test: a sink stores nothing to recount from)
CREATE TABLE m.clicks_shadow (id int NOT NULL, v int NOT NULL, k m.kind NOT NULL);
GRANT INSERT, UPDATE, DELETE ON m.items, m.groups, m.zones, m.clicks, m.clicks_shadow TO m_writer;
GRANT SELECT ON m.items, m.groups, m.zones TO m_writer;

SELECT counters.create_counter('c_exact', 'SELECT m.bucket(v) AS b, k, count(*) AS n, sum(v) AS s, bool_or(m.bucket(v) = 0) AS z FROM m.items GROUP BY 1, 2');
SELECT counters.set_thresholds('c_exact', 'n', NULL, 'm.on_event(text, jsonb, text, numeric, numeric, numeric, text)', every => 1);
SELECT counters.set_bounds('c_exact', 'n', min => 0);
SELECT counters.set_keep_zero('c_exact');
SELECT counters.create_counter('c_direct', 'SELECT m.bucket(v) AS b, count(*) AS n FROM m.items GROUP BY 1');
-- (max(): a removal of a group's largest v reads the next one through the index, its FILTER run as the owner)
CREATE INDEX ON m.items (grp, v);
CREATE INDEX ON m.items (grp, k);
SELECT counters.create_counter('c_max', 'SELECT grp, count(*) AS n, max(v) FILTER (WHERE m.bucket(v) >= 0) AS mx, count(DISTINCT k) FILTER (WHERE m.bucket(v) >= 0) AS kinds FROM m.items GROUP BY grp');
SELECT counters.create_counter('c_log', 'SELECT m.bucket(v) AS b, k, count(*) AS n, avg(m.bucket(v)) AS a FROM m.items GROUP BY 1, 2', mode => 'log');
SELECT counters.create_counter('c_sharded', 'SELECT m.bucket(v) AS b, k, count(*) AS n FROM m.items GROUP BY 1, 2', mode => 'sharded');
SELECT counters.set_thresholds('c_sharded', 'n', NULL, 'm.on_event(text, jsonb, text, numeric, numeric, numeric, text)', every => 1);
SELECT counters.create_counter('c_cache', 'SELECT grp AS id, count(*) AS n FROM m.items WHERE m.bucket(v) >= 0 GROUP BY grp', target => 'm.blogs');
SELECT counters.set_touch('c_cache', 'touched');
SELECT counters.create_counter('c_parent', 'SELECT g.region, m.bucket(i.v) AS b, count(*) AS n FROM m.items i JOIN m.groups g ON i.grp = g.id GROUP BY 1, 2');
-- (planted code at the leaf, in a key, and in the middle level's WHERE: each level runs it as the owner)
SELECT counters.create_counter('c_chain', 'SELECT z.name, m.bucket(i.v) AS b, count(*) AS n FROM m.items i JOIN m.groups g ON i.grp = g.id JOIN m.zones z ON g.zone = z.id WHERE m.bucket(g.id) >= 0 GROUP BY 1, 2');
SELECT counters.create_counter('c_sink', 'SELECT k, m.bucket(v) AS b, count(*) AS n FROM m.clicks GROUP BY 1, 2');
SELECT counters.set_sink('m.clicks');
SELECT counters.create_counter('c_window', 'SELECT k, day, count(*) AS n FROM m.items WHERE m.bucket(v) >= 0 GROUP BY k, day');
SELECT counters.set_window_thresholds('c_window', 'n', '{3, 5}', 'day', '2 days', 'm.on_event(text, jsonb, text, numeric, numeric, numeric, text)');
SELECT counters.set_retention('c_window', 'day', '30 days');
GRANT SELECT ON m.c_exact, m.c_direct, m.c_log, m.c_sharded, m.c_parent, m.c_chain, m.c_sink, m.c_window, m.blogs TO m_writer;
});

# Triggers on the counter tables (and the CHECK constraint), again after each step: a new definition makes a new table.
my $plant = q{
SET ROLE m_owner;
DO $$
DECLARE
	t regclass;
BEGIN
	FOR t IN SELECT x::regclass FROM unnest(ARRAY['m.c_exact', 'm.c_log_totals', 'm.c_log_log', 'm.c_sharded_totals',
	                                              'm.blogs', 'm.c_parent', 'm.c_window', 'm.c_chain',
	                                              'm.c_chain_by_grp']) x
	          WHERE to_regclass(x) IS NOT NULL LOOP
		IF NOT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = t AND tgname = 'planted') THEN
			EXECUTE format('CREATE TRIGGER planted AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION m.on_table()', t);
		END IF;
	END LOOP;
	IF to_regclass('m.c_direct') IS NOT NULL
	   AND NOT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'm.c_direct'::regclass AND conname = 'planted') THEN
		ALTER TABLE m.c_direct ADD CONSTRAINT planted CHECK (m.check_ok(n));
	END IF;
END $$;
TRUNCATE m.audit;
};
$node->safe_psql($db, $plant);

# Every counter against a recount that calls none of the planted code (v % 3 for m.bucket(v)); rows: what differs.
sub pair
{
	my ($name, $counter, $recount) = @_;
	return "SELECT '$name' AS counter, count(*) AS differing FROM (($counter) EXCEPT ($recount)) d HAVING count(*) > 0
	        UNION ALL SELECT '$name recount', count(*) FROM (($recount) EXCEPT ($counter)) d HAVING count(*) > 0";
}
my $drift = join(
	"\nUNION ALL ",
	pair(
		'c_exact', 'SELECT b, k, n, s::numeric, z FROM m.c_exact WHERE n <> 0',
		'SELECT v % 3, k, count(*), sum(v)::numeric, bool_or(v % 3 = 0) FROM m.items GROUP BY 1, 2'),
	pair('c_direct', 'SELECT b, n FROM m.c_direct', 'SELECT v % 3, count(*) FROM m.items GROUP BY 1'),
	pair('c_max', 'SELECT grp, n, mx, kinds FROM m.c_max', 'SELECT grp, count(*), max(v), count(DISTINCT k) FROM m.items GROUP BY 1'),
	pair(
		'c_log', 'SELECT b, k, n, a FROM m.c_log WHERE n <> 0',
		'SELECT v % 3, k, count(*), avg(v % 3) FROM m.items GROUP BY 1, 2'),
	pair(
		'c_sharded', 'SELECT b, k, n FROM m.c_sharded WHERE n <> 0',
		'SELECT v % 3, k, count(*) FROM m.items GROUP BY 1, 2'),
	pair(
		'c_cache', 'SELECT id, n FROM m.blogs',
		'SELECT b.id, count(i.id) FROM m.blogs b LEFT JOIN m.items i ON i.grp = b.id GROUP BY b.id'),
	pair(
		'c_parent', 'SELECT region, b, n FROM m.c_parent',
		'SELECT g.region, i.v % 3, count(*) FROM m.items i JOIN m.groups g ON i.grp = g.id GROUP BY 1, 2'),
	pair(
		'c_chain', 'SELECT name, b, n FROM m.c_chain',
		'SELECT z.name, i.v % 3, count(*) FROM m.items i JOIN m.groups g ON i.grp = g.id JOIN m.zones z ON g.zone = z.id GROUP BY 1, 2'),
	pair(
		'c_sink', 'SELECT k, b, n FROM m.c_sink WHERE n <> 0',
		'SELECT k, v % 3, count(*) FROM m.clicks_shadow GROUP BY 1, 2'),
	pair('c_window', 'SELECT k, day, n FROM m.c_window', 'SELECT k, day, count(*) FROM m.items GROUP BY 1, 2'));

my %login = (owner => 'm_owner', admin => 'm_admin', writer => 'm_writer', superuser => undef);

# One step: its SQL as `who`, then what its code recorded; `expect`: what it must have run.
sub step
{
	my ($who, $label, $sql, @expect) = @_;
	my $name = "$who: $label";
	my @login = defined $login{$who} ? ('-U', $login{$who}) : ();
	my ($ret, $stdout, $stderr) =
	  $node->psql($db, "SET matrix.step = '$name';\n$sql", extra_params => [ @login, '-v', 'ON_ERROR_STOP=1' ]);
	is($ret, 0, "$name: succeeds") or diag($stderr);
	check_audit($name, @expect);
	$node->safe_psql($db, $plant);
	return;
}

sub check_audit
{
	my ($name, @expect) = @_;
	is( $node->safe_psql(
			$db,
			"SELECT string_agg(DISTINCT what || ' as ' || who || CASE WHEN restricted THEN '' ELSE ', unrestricted' END, '; ')
			   FROM m.audit WHERE who <> 'm_owner' OR NOT restricted"),
		'',
		"$name: every planted code ran as m_owner, restricted");
	for my $what (@expect)
	{
		ok($node->safe_psql($db, "SELECT count(*) > 0 FROM m.audit WHERE what = '$what'") eq 't',
			"$name: ran the $what code (the probe is reached)");
	}
	is($node->safe_psql($db, $drift), '', "$name: every counter equals its recount");
	return;
}

is($node->safe_psql($db, $drift), '', 'the counters start equal to their recounts');

my $id = 1000;
for my $who (qw(owner admin superuser))
{
	my ($a, $b, $c) = ($id + 1, $id + 2, $id + 3);
	$id += 10;
	step($who, 'write', qq{
INSERT INTO m.items VALUES ($a, $a, 'a', 1), ($b, $b, 'b', 2), ($c, $c, 'a', 3);
UPDATE m.items SET v = v + 1, k = 'b' WHERE id = $a;
DELETE FROM m.items WHERE id = $b;
UPDATE m.groups SET region = CASE region WHEN 'eu' THEN 'us' ELSE 'eu' END WHERE id = 2;
UPDATE m.groups SET zone = 3 - zone WHERE id = 1;
INSERT INTO m.clicks VALUES ($a, $a, 'a'), ($b, $b, 'b');
INSERT INTO m.clicks_shadow VALUES ($a, $a, 'a'), ($b, $b, 'b');
}, qw(definition trigger callback cast check));
	# (deferred: the deltas wait for apply_deferred() and the commit, which run the same code, as the owner)
	step($who, 'write deferred', qq{
BEGIN;
SET LOCAL counters.apply = deferred;
INSERT INTO m.items VALUES ($a + 7, $a, 'a', 1), ($a + 8, $b, 'b', 2);
UPDATE m.groups SET zone = 3 - zone WHERE id = 1;
SELECT counters.apply_deferred();
DELETE FROM m.items WHERE id = $a + 8;
INSERT INTO m.clicks VALUES ($a + 7, $a, 'a');
INSERT INTO m.clicks_shadow VALUES ($a + 7, $a, 'a');
COMMIT;
}, qw(definition trigger callback cast check));
	step($who, 'declare',
		"SELECT counters.create_counter('x_$who', 'SELECT m.bucket(v) AS b, count(*) AS n FROM m.items GROUP BY 1')",
		qw(definition));
	is($node->safe_psql($db, "SELECT relowner::regrole FROM pg_class WHERE oid = 'm.x_$who'::regclass"),
		'm_owner', "$who: the counter declared belongs to the owner of the table it counts");
	step($who, 'options', qq{
SELECT counters.set_thresholds('x_$who', 'n', '{1000}', 'm.on_event(text, jsonb, text, numeric, numeric, numeric, text)');
SELECT counters.set_bounds('x_$who', 'n', min => 0);
SELECT counters.set_keep_zero('x_$who');
SELECT counters.set_retention('c_window', 'day', '31 days');
});
	step($who, 'switch', q{
-- (the log holds the rows of the write step: leaving log mode folds them into the totals)
SELECT counters.alter_counter('c_log', 'exact');
SELECT counters.alter_counter('c_log', 'log');
SELECT counters.alter_counter('c_direct', 'sharded');
SELECT counters.alter_counter('c_direct', 'exact');
}, qw(trigger));
	step($who, 'redefine', q{
SELECT counters.alter_counter('c_exact', definition => 'SELECT m.bucket(v) AS b, k, count(*) AS n, sum(v) AS s, bool_or(m.bucket(v) = 0) AS z FROM m.items GROUP BY 1, 2');
}, qw(definition));
	step($who, 'retype', q{
ALTER TABLE m.items ALTER COLUMN v TYPE bigint;
ALTER TABLE m.items ALTER COLUMN v TYPE int;
}, qw(definition));
	step($who, 'write again', qq{
INSERT INTO m.items VALUES ($a + 5, 7, 'b', 2);
DELETE FROM m.items WHERE id = $c;
}, qw(definition trigger));
	step($who, 'compact', 'SELECT counters.compact()', qw(trigger callback cast));
	step($who, 'rebuild', "SELECT counters.rebuild('c_exact'); SELECT counters.rebuild('c_parent'); SELECT counters.rebuild('c_chain')", qw(definition));
	step($who, 'rebuild concurrently', "CALL counters.rebuild_concurrently('c_sharded')", qw(definition));
	step($who, 'verify', 'SELECT count(*) FROM counters.verify()', qw(definition));
	step($who, 'top', "SELECT * FROM counters.top('c_exact', 'n', 3); SELECT * FROM counters.top(NULL::m.c_log, 'n', 2)",
		qw(cast));
	step($who, 'windows', 'SELECT counters.check_windows(); SELECT counters.apply_retention()', qw(cast));
	step($who, 'drop', "SELECT counters.drop_counter('x_$who')");
}

# A role that may only write the sources: its writes are counted as the owner; it may change nothing.
step('writer', 'write', q{
INSERT INTO m.items VALUES (2001, 5, 'a', 1), (2002, 6, 'b', 3);
UPDATE m.items SET grp = 2 WHERE id = 2001;
DELETE FROM m.items WHERE id = 2002;
UPDATE m.groups SET zone = 3 - zone WHERE id = 3;
INSERT INTO m.clicks VALUES (2001, 1, 'b');
INSERT INTO m.clicks_shadow VALUES (2001, 1, 'b');
}, qw(definition trigger callback cast));
for my $sql (
	"SELECT counters.compact('c_log')", "SELECT counters.rebuild('c_exact')",
	"SELECT counters.alter_counter('c_log', 'exact')", "SELECT counters.drop_counter('c_direct')",
	"SELECT counters.set_bounds('c_exact', 'n', min => 1)", "SELECT counters.set_deferred('c_exact')",
	"SELECT counters.create_counter('x_writer', 'SELECT v AS b, count(*) AS n FROM m.items GROUP BY 1')")
{
	my ($ret, $stdout, $stderr) = $node->psql($db, $sql, extra_params => [ '-U', 'm_writer' ]);
	like($stderr, qr/ERROR:.*(must be owner|permission denied)/, "writer: $sql is refused");
}
check_audit('writer: refusals');

# A caller without rights: a tenant with CREATE on a schema of its own (and USAGE on the owner's) plants an IMMUTABLE
# function and names it at every entry point that takes SQL text, over the owner's tables. Each is refused before
# anything of the text is parsed or planned, as anyone: the planted code never runs -- not as the owner, not as the
# tenant, not as a superuser.
$node->safe_psql(
	$db, q{
CREATE ROLE m_tenant LOGIN;
CREATE SCHEMA t AUTHORIZATION m_tenant;
GRANT USAGE ON SCHEMA m TO m_tenant;
SET ROLE m_tenant;
CREATE FUNCTION t.planted() RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	INSERT INTO m.audit VALUES ('tenant', 'tenant code', current_user, false);
	RETURN true;
END $$;
GRANT EXECUTE ON FUNCTION t.planted() TO PUBLIC;
CREATE FUNCTION t.on_event(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                           direction text) RETURNS void LANGUAGE plpgsql AS $$BEGIN PERFORM t.planted(); END$$;
CREATE TABLE t.own (id int PRIMARY KEY, grp int NOT NULL);
CREATE INDEX ON t.own (grp);
});
for my $sql (
	"SELECT counters.create_counter('x_tenant', 'SELECT grp, count(*) AS n FROM m.items WHERE t.planted() GROUP BY grp')",
	"SELECT counters.create_counter('x_tenant', 'SELECT g.region, count(*) AS n FROM t.own o JOIN m.groups g ON o.grp = g.id WHERE t.planted() GROUP BY 1')",
	"SELECT counters.create_counter('x_tenant', 'SELECT z.name, count(*) AS n FROM t.own o JOIN m.groups g ON o.grp = g.id JOIN m.zones z ON g.zone = z.id WHERE t.planted() GROUP BY 1')",
	"SELECT counters.create_counter('x_tenant', 'SELECT g.zone, count(*) AS n FROM t.own o JOIN m.c_chain_by_grp c ON o.grp = c.grp JOIN m.groups g ON c.grp = g.id WHERE t.planted() GROUP BY 1')",
	"SELECT counters.alter_counter('c_chain', definition => 'SELECT z.name, count(*) AS n FROM m.items i JOIN m.groups g ON i.grp = g.id JOIN m.zones z ON g.zone = z.id WHERE t.planted() GROUP BY 1')",
	"SELECT counters.rebuild('c_chain')",
	"SELECT counters.create_counter('x_tenant', 'SELECT id, count(*) AS n FROM t.own WHERE t.planted() GROUP BY id', target => 'm.blogs')",
	"SELECT counters.create_counter('x_tenant', 'SELECT id, count(*) AS n FROM t.own WHERE id IN (SELECT id FROM m.items WHERE t.planted()) GROUP BY id')",
	"CALL counters.create_counter_concurrently('x_tenant', 'SELECT grp, count(*) AS n FROM m.items WHERE t.planted() GROUP BY grp')",
	"SELECT counters.alter_counter('c_exact', definition => 'SELECT v % 3 AS b, k, count(*) AS n, sum(v) AS s FROM m.items WHERE t.planted() GROUP BY 1, 2')",
	"CALL counters.alter_counter_concurrently('c_log', 'SELECT v % 3 AS b, k, count(*) AS n FROM m.items WHERE t.planted() GROUP BY 1, 2')",
	"SELECT counters.rebuild('c_exact', 'b = 0 AND t.planted()')",
	"SELECT counters.set_thresholds('c_exact', 'n', '{1}', 't.on_event(text, jsonb, text, numeric, numeric, numeric, text)')",
	"SELECT counters.set_window_thresholds('c_window', 'n', '{1}', 'day', '1 day', 't.on_event(text, jsonb, text, numeric, numeric, numeric, text)')",
	"SELECT * FROM counters.verify('c_exact')",
	"SELECT counters.attach('m.items')")
{
	my ($ret, $stdout, $stderr) = $node->psql($db, $sql, extra_params => [ '-U', 'm_tenant' ]);
	like($stderr, qr/ERROR:.*(must be owner|permission denied|must have the privileges)/, "tenant: $sql is refused");
}
is($node->safe_psql($db, "SELECT string_agg(DISTINCT who, ', ') FROM m.audit WHERE what = 'tenant code'"),
	'', 'tenant: its planted code never ran, as anyone');
check_audit('tenant: refusals');

# The background worker (connected as the bootstrap superuser) compacts: pending log rows, slots crossing thresholds.
$node->safe_psql(
	$db, q{
SET ROLE m_writer;
INSERT INTO m.items SELECT g, g, 'a', 1 + g % 3 FROM generate_series(3001, 3020) g;
DELETE FROM m.items WHERE id BETWEEN 3001 AND 3005;
});
$node->safe_psql($db, 'TRUNCATE m.audit');
$node->safe_psql($db, "ALTER SYSTEM SET counters.compact_interval = 1; SELECT pg_reload_conf()");
ok( $node->poll_query_until(
		$db, 'SELECT (SELECT count(*) FROM m.c_log_log) = 0 AND (SELECT count(*) FROM m.c_sharded_slots) = 0'),
	'the background worker compacts');
$node->safe_psql($db, "ALTER SYSTEM SET counters.compact_interval = 0; SELECT pg_reload_conf()");
is($node->safe_psql($db, "SELECT count(*) > 0 FROM m.audit WHERE step = 'worker'"),
	't', 'the worker ran planted code');
check_audit('worker', qw(trigger callback cast));
is($node->safe_psql($db, "SELECT rolsuper FROM pg_roles WHERE rolname = 'm_owner'"),
	'f', 'm_owner is still not a superuser');

$node->stop;
done_testing();
