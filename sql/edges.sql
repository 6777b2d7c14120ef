--
-- edges: where a counter could end silently wrong or break writes. Each case ends exact (compared with an
-- independent recount) or fails loudly, naming the counter.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA edge_test;
SET search_path = edge_test;
-- rows that differ between a relation and a query (EXCEPT ALL both ways): none means equal
CREATE FUNCTION differs(rel regclass, recount text) RETURNS TABLE (side text, row_value text) LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXECUTE format('SELECT ''counter'', c::text FROM (TABLE %1$s EXCEPT ALL %2$s) c
	                             UNION ALL SELECT ''recount'', r::text FROM (%2$s EXCEPT ALL TABLE %1$s) r ORDER BY 1, 2',
	                            rel, recount);
END $$;

--
-- 1. Row-level security forced on a source owned by a non-superuser: the trigger counts every row, so a recount
-- that saw only the rows a policy shows would be wrong. Declaring, verify() and rebuild() refuse instead.
--
SET ROLE NONE; CREATE ROLE counters_edge_owner; RESET ROLE;
GRANT USAGE, CREATE ON SCHEMA edge_test TO counters_edge_owner;
SET ROLE counters_edge_owner;
CREATE TABLE secrets (id int PRIMARY KEY, team int NOT NULL, hidden boolean NOT NULL);
INSERT INTO secrets SELECT i, i % 3, i % 2 = 0 FROM generate_series(1, 12) i;
ALTER TABLE secrets ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY visible ON secrets FOR SELECT USING (NOT hidden);
CREATE POLICY writable ON secrets FOR INSERT WITH CHECK (true);
SELECT count(*) AS rows_the_owner_sees FROM secrets;
\set SHOW_CONTEXT errors
SELECT counters.create_counter('per_team', 'SELECT team, count(*) AS n FROM secrets GROUP BY team');
\set SHOW_CONTEXT never
\echo SQLSTATE :SQLSTATE
ALTER TABLE secrets NO FORCE ROW LEVEL SECURITY;
SELECT counters.create_counter('per_team', 'SELECT team, count(*) AS n FROM secrets GROUP BY team');
ALTER TABLE secrets FORCE ROW LEVEL SECURITY;
INSERT INTO secrets VALUES (100, 1, true), (101, 1, false);
SELECT * FROM counters.verify('per_team');
\echo SQLSTATE :SQLSTATE
SELECT counters.rebuild('per_team');
\echo SQLSTATE :SQLSTATE
-- (the superuser sees every row: the recount)
SET ROLE NONE;
SELECT * FROM differs('per_team', 'SELECT team, count(*) FROM secrets GROUP BY team');
SET ROLE counters_edge_owner;
SET ROLE counters_edge_owner;
SELECT counters.drop_counter('per_team');
DROP TABLE secrets;
RESET ROLE;

--
-- 2. A counted table becoming a partition or an inheritance child or parent is refused; partitions that go with
-- DROP SCHEMA ... CASCADE or DROP OWNED take their rows out of the counters; a partition detached concurrently is
-- refused (its rows would leave in a second transaction).
--
CREATE TABLE plain (id int PRIMARY KEY, k int NOT NULL);
INSERT INTO plain SELECT i, i % 2 FROM generate_series(1, 4) i;
SELECT counters.create_counter('plain_k', 'SELECT k, count(*) AS n FROM plain GROUP BY k');
CREATE TABLE parent (id int, k int NOT NULL) PARTITION BY LIST (k);
ALTER TABLE parent ATTACH PARTITION plain FOR VALUES IN (0, 1);
\echo SQLSTATE :SQLSTATE
CREATE TABLE child () INHERITS (plain);
\echo SQLSTATE :SQLSTATE
CREATE TABLE other (id int, k int NOT NULL);
ALTER TABLE other INHERIT plain;
\echo SQLSTATE :SQLSTATE
ALTER TABLE plain INHERIT other;
\echo SQLSTATE :SQLSTATE
SELECT relname FROM pg_class WHERE relname IN ('child') AND relnamespace = 'edge_test'::regnamespace;
CREATE SCHEMA edge_parts;
SET ROLE NONE; CREATE ROLE counters_edge_partitioner; RESET ROLE;
GRANT USAGE, CREATE ON SCHEMA edge_test, edge_parts TO counters_edge_partitioner;
CREATE TABLE events (id int, region text NOT NULL, day int NOT NULL) PARTITION BY LIST (region);
SET ROLE NONE; ALTER TABLE events OWNER TO counters_edge_partitioner; RESET ROLE;
SET ROLE counters_edge_partitioner;
CREATE TABLE edge_parts.events_eu PARTITION OF events FOR VALUES IN ('eu') PARTITION BY RANGE (day);
CREATE TABLE events_eu_1 PARTITION OF edge_parts.events_eu FOR VALUES FROM (0) TO (10);
CREATE TABLE edge_parts.events_eu_2 PARTITION OF edge_parts.events_eu FOR VALUES FROM (10) TO (20);
CREATE TABLE edge_parts.events_us PARTITION OF events FOR VALUES IN ('us');
CREATE TABLE events_jp PARTITION OF events FOR VALUES IN ('jp');
INSERT INTO events SELECT i, (ARRAY['eu', 'us', 'jp'])[1 + i % 3], i % 20 FROM generate_series(1, 60) i;
SELECT counters.create_counter('per_region', 'SELECT region, day / 10 AS decade, count(*) AS n FROM events GROUP BY 1, 2');
RESET ROLE;
SET ROLE NONE; CREATE ROLE counters_edge_guest; RESET ROLE;
GRANT USAGE, CREATE ON SCHEMA edge_test TO counters_edge_guest;
SET ROLE NONE; ALTER TABLE events_jp OWNER TO counters_edge_guest; RESET ROLE;
ALTER TABLE edge_parts.events_eu DETACH PARTITION events_eu_1 CONCURRENTLY;
\echo SQLSTATE :SQLSTATE
SET ROLE NONE;
DROP SCHEMA edge_parts CASCADE;
SELECT * FROM differs('per_region', 'SELECT region, day / 10, count(*) FROM events GROUP BY 1, 2');
DROP OWNED BY counters_edge_guest;
SELECT * FROM differs('per_region', 'SELECT region, day / 10, count(*) FROM events GROUP BY 1, 2');
SELECT * FROM counters.verify();
SET ROLE counters_edge_partitioner;
SELECT counters.drop_counter('per_region');
RESET ROLE;

--
-- 3. Columns of an existing table keep a counter only if their key columns have the definition's key types: a
-- narrower column (varchar(3) for text, integer for bigint) would fold different keys into one row.
--
CREATE TABLE tags (tag varchar(3) PRIMARY KEY, uses bigint NOT NULL DEFAULT 0);
INSERT INTO tags VALUES ('abc'), ('xyz');
CREATE TABLE tagged (id int PRIMARY KEY, tag text NOT NULL, big bigint NOT NULL DEFAULT 0);
INSERT INTO tagged VALUES (1, 'abc'), (2, 'abcd'), (3, 'abcde'), (4, 'xyz');
SELECT counters.create_counter('tag_uses', 'SELECT tag, count(*) AS uses FROM tagged GROUP BY tag', target => 'tags');
\echo SQLSTATE :SQLSTATE
CREATE TABLE bigs (big int PRIMARY KEY, uses bigint NOT NULL DEFAULT 0);
SELECT counters.create_counter('big_uses', 'SELECT big, count(*) AS uses FROM tagged GROUP BY big', target => 'bigs');
\echo SQLSTATE :SQLSTATE
-- with the key cast to the column's type in the definition, the counter means what it says
SELECT counters.create_counter('tag_uses', 'SELECT tag::varchar(3) AS tag, count(*) AS uses FROM tagged GROUP BY 1', target => 'tags');
INSERT INTO tagged VALUES (5, 'xyzw');
SELECT * FROM tags ORDER BY tag;
SELECT * FROM differs('tags', 'SELECT t.tag, count(g.id) FROM tags t LEFT JOIN tagged g ON g.tag::varchar(3) = t.tag GROUP BY t.tag');
SELECT counters.drop_counter('tag_uses');

--
-- 4. Keys computed as text from values whose text depends on session settings (extra_float_digits for float4 and
-- float8, bytea_output for bytea): PostgreSQL marks these conversions immutable. Writers in differently set
-- sessions, and the recount, all see the same text: the counter stays exact.
--
CREATE TABLE readings (id int PRIMARY KEY, x float8 NOT NULL, y float4 NOT NULL, b bytea NOT NULL);
SELECT counters.create_counter('by_text', $$
	SELECT x::text AS x, y::text AS y, b::text AS b, count(*) AS n FROM samples GROUP BY 1, 2, 3
$$);
SET extra_float_digits = 3; SET bytea_output = escape;
INSERT INTO samples VALUES (1, 0.1, 0.1, 'ab'), (2, 1e-20, 2.2, '\x00ff');
SET extra_float_digits = -5; SET bytea_output = hex;
INSERT INTO readings VALUES (3, 0.1, 0.1, 'ab');
DELETE FROM readings WHERE id = 2;
UPDATE readings SET x = 2.5 WHERE id = 3;
UPDATE readings SET b = 'ab'::bytea || '\x00'::bytea WHERE id = 1;
RESET extra_float_digits; RESET bytea_output;
SELECT * FROM by_text ORDER BY 1, 2, 3;
SELECT * FROM differs('by_text', 'SELECT x::text, y::text, b::text, count(*) FROM samples GROUP BY 1, 2, 3');
SET extra_float_digits = 0; SET bytea_output = escape;
SELECT * FROM counters.verify('by_text');
RESET extra_float_digits; RESET bytea_output;
SELECT counters.drop_counter('by_text');

--
-- 5. A CHECK constraint on a counter table: decrements work (the constraint holds for the row as it will be, not
-- for the delta alone), also through the executor (a trigger on the table), and a write that breaks it fails.
--
CREATE TABLE seats_src (id int PRIMARY KEY, excursion int NOT NULL);
INSERT INTO seats_src SELECT i, i % 2 FROM generate_series(1, 10) i;
SELECT counters.create_counter('seats', 'SELECT excursion, count(*) AS taken FROM seats_src GROUP BY excursion');
ALTER TABLE seats ADD CHECK (taken BETWEEN 0 AND 6);
DELETE FROM seats_src WHERE id IN (1, 2);
INSERT INTO seats_src VALUES (11, 1);
INSERT INTO seats_src VALUES (12, 1), (13, 1);
\echo SQLSTATE :SQLSTATE
CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
CREATE TRIGGER noop AFTER UPDATE ON seats FOR EACH ROW EXECUTE FUNCTION noop();
DELETE FROM seats_src WHERE id IN (3, 4, 5);
UPDATE seats_src SET excursion = 1 - excursion WHERE id IN (6, 7);
SELECT * FROM differs('seats', 'SELECT excursion, count(*) FROM seats_src GROUP BY excursion');
SELECT counters.drop_counter('seats');

--
-- 6. A key too long for a btree entry (6,400 bytes): the write succeeds and is counted (the counter table indexes
-- the key by its digest: sql/long_keys.sql). Counter tables without a primary key (NULL keys, keys by their digest)
-- and logs have a replica identity, so that publishing them does not make writes to the source fail.
--
CREATE TABLE notes (id int PRIMARY KEY, body text, grp int);
SELECT counters.create_counter('per_body', 'SELECT body, grp, count(*) AS n FROM notes GROUP BY body, grp');
SELECT counters.create_counter('per_grp', 'SELECT grp, count(*) AS n FROM notes GROUP BY grp', mode => 'log');
-- (the error's fields as a client reads them; psql's verbose report would add the C source line, which changes
-- with PostgreSQL's releases)
CREATE FUNCTION error_fields(statement text) RETURNS TABLE (field text, value text) LANGUAGE plpgsql AS $$
DECLARE
	state text;
	message text;
	detail text;
	hint text;
	schema_name text;
	table_name text;
	constraint_name text;
BEGIN
	EXECUTE statement;
	RETURN QUERY SELECT 'no error', NULL::text;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL,
		hint = PG_EXCEPTION_HINT, schema_name = SCHEMA_NAME, table_name = TABLE_NAME, constraint_name = CONSTRAINT_NAME;
	RETURN QUERY VALUES ('sqlstate', state), ('message', message), ('detail', detail), ('hint', hint),
		('schema', schema_name), ('table', table_name), ('constraint', constraint_name);
END $$;
SELECT * FROM error_fields($$INSERT INTO notes SELECT 1, string_agg(md5(i::text), ''), 1 FROM generate_series(1, 200) i$$);
SELECT length(body), grp, n FROM per_body;
SELECT relname, relreplident FROM pg_class WHERE relname IN ('per_body', 'per_grp_log', 'per_grp_totals') ORDER BY 1;
-- (without the warning that wal_level is not logical: the cluster's setting, worded differently from PostgreSQL 17 on)
SET client_min_messages = error;
CREATE PUBLICATION counters_edge_pub FOR TABLE per_body, per_grp_log, per_grp_totals;
RESET client_min_messages;
INSERT INTO notes VALUES (2, 'a', NULL), (3, 'a', NULL), (4, NULL, 1);
DELETE FROM notes WHERE id = 2;
SELECT counters.compact('per_grp');
SELECT * FROM counters.verify();
DROP PUBLICATION counters_edge_pub;

--
-- 7. A compaction round over all counters goes on when one counter fails: the failure is a WARNING and shows in
-- counters.stats until a round succeeds; compact() of that one counter raises the error.
--
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'the totals refuse the fold'; END$$;
CREATE TRIGGER refuse BEFORE UPDATE ON per_grp_totals FOR EACH ROW EXECUTE FUNCTION refuse();
CREATE TABLE clicks (id int PRIMARY KEY, grp int NOT NULL);
SELECT counters.create_counter('clicks_log', 'SELECT grp, count(*) AS n FROM clicks GROUP BY grp', mode => 'log');
INSERT INTO notes VALUES (5, 'b', NULL);
INSERT INTO clicks VALUES (1, 1), (2, 1);
SELECT counters.compact() AS folded;
SELECT counter, last_compact IS NOT NULL AS compacted, last_compact_error FROM counters.stats WHERE mode = 'log' ORDER BY 1;
SELECT (SELECT count(*) FROM clicks_log_log) AS clicks_pending, (SELECT count(*) FROM per_grp_log) AS per_grp_pending;
SELECT counters.compact('per_grp');
\echo SQLSTATE :SQLSTATE
DROP TRIGGER refuse ON per_grp_totals;
SELECT counters.compact() AS folded;
SELECT counter, last_compact_error FROM counters.stats WHERE mode = 'log' ORDER BY 1;
-- (the compactions' history counts those that succeeded: how many, the rows folded, their time)
SELECT counter, compactions, compacted_rows, last_compact_rows, compact_time >= last_compact_time AS timed
  FROM counters.stats WHERE mode = 'log' ORDER BY 1;
SELECT * FROM counters.verify();
-- A step that outlasts counters.step_timeout (here an owner's trigger that sleeps) is canceled, rolled back and
-- reported the same way; the round goes on with the other counters.
CREATE FUNCTION dawdle() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM pg_sleep(600); RETURN NEW; END$$;
CREATE TRIGGER dawdle BEFORE UPDATE ON per_grp_totals FOR EACH ROW EXECUTE FUNCTION dawdle();
INSERT INTO notes VALUES (6, 'b', NULL);
INSERT INTO clicks VALUES (5, 3);
SET counters.step_timeout = '100ms';
SELECT counters.compact() AS folded;
RESET counters.step_timeout;
SELECT counter, last_compact_error FROM counters.stats WHERE mode = 'log' ORDER BY 1;
SELECT (SELECT count(*) FROM clicks_log_log) AS clicks_pending, (SELECT count(*) FROM per_grp_log) AS per_grp_pending;
DROP TRIGGER dawdle ON per_grp_totals;
SELECT counters.compact() AS folded;
-- (both compared with a recount: no row)
SELECT 'clicks_log' AS counter, * FROM ((SELECT grp, count(*) FROM clicks GROUP BY grp EXCEPT SELECT grp, n FROM clicks_log)
	UNION ALL (SELECT grp, n FROM clicks_log EXCEPT SELECT grp, count(*) FROM clicks GROUP BY grp)) d
UNION ALL
SELECT 'per_grp', * FROM ((SELECT grp, count(*) FROM notes GROUP BY grp EXCEPT SELECT grp, n FROM per_grp)
	UNION ALL (SELECT grp, n FROM per_grp EXCEPT SELECT grp, count(*) FROM notes GROUP BY grp)) d;

--
-- 8. A transaction that crossed a threshold sent a NOTIFY, which PREPARE TRANSACTION refuses: the error says which
-- counter, and the transaction is rolled back with everything it counted.
--
SELECT counters.create_counter('per_grp_exact', 'SELECT grp, count(*) AS n FROM clicks GROUP BY grp');
SELECT counters.set_thresholds('per_grp_exact', 'n', '{3}');
BEGIN;
INSERT INTO clicks VALUES (3, 1);
PREPARE TRANSACTION 'counters_edge';
\echo SQLSTATE :SQLSTATE
SELECT * FROM per_grp_exact ORDER BY grp;
-- (a crossing rolled back to a savepoint took its notification with it)
BEGIN;
SAVEPOINT s;
INSERT INTO clicks VALUES (3, 1);
ROLLBACK TO SAVEPOINT s;
INSERT INTO clicks VALUES (4, 2);
PREPARE TRANSACTION 'counters_edge';
COMMIT PREPARED 'counters_edge';
SELECT * FROM differs('per_grp_exact', 'SELECT grp, count(*) FROM clicks GROUP BY grp');

--
-- 9. Triggers without a catalog row (a restored database: the extension's catalog rows are not dumped). The
-- definition view's comment describes the counter: the first write (by any role: the description is honoured as its
-- view's owner could declare it) declares it again from there, in its mode and with its options, and is counted.
-- Without the description, writes fail, saying so, instead of counting nothing.
--
CREATE TABLE orphan (id int PRIMARY KEY, k int);
SELECT counters.create_counter('orphaned', 'SELECT k, count(*) AS n FROM orphan GROUP BY k', mode => 'log');
SELECT counters.set_thresholds('orphaned', 'n', '{2}');
SELECT obj_description('orphaned_definition'::regclass, 'pg_class');
-- (as a schema-only restore leaves it: the triggers, the tables and the view with its comment, no catalog row)
SET ROLE NONE;
DELETE FROM counters.counter WHERE name = 'orphaned';
RESET ROLE;
INSERT INTO orphan VALUES (1, 1), (2, 1);
SELECT name, mode, options FROM counters.counter WHERE name = 'orphaned';
SELECT * FROM differs('orphaned', 'SELECT k, count(*) FROM orphan GROUP BY k');
-- without the description
SET ROLE NONE;
DELETE FROM counters.counter WHERE name = 'orphaned';
COMMENT ON VIEW orphaned_definition IS NULL;
RESET ROLE;
INSERT INTO orphan VALUES (3, 1);
\echo SQLSTATE :SQLSTATE
SELECT counters.detach('orphan');
INSERT INTO orphan VALUES (3, 1);
-- a schema renamed: the description names the counter's relations in it anew, and adoption finds them
CREATE SCHEMA orphan_s;
CREATE TABLE orphan_s.t (id int PRIMARY KEY, k int);
SELECT counters.create_counter('orphan_s_counts', 'SELECT k, count(*) AS n FROM orphan_s.t GROUP BY k');
ALTER SCHEMA orphan_s RENAME TO orphan_r;
SELECT obj_description('orphan_r.orphan_s_counts_definition'::regclass, 'pg_class');
SET ROLE NONE;
DELETE FROM counters.counter WHERE name = 'orphan_s_counts';
RESET ROLE;
INSERT INTO orphan_r.t VALUES (1, 1), (2, 1);
SELECT name, target FROM counters.counter WHERE name = 'orphan_s_counts';
SELECT * FROM differs('orphan_r.orphan_s_counts', 'SELECT k, count(*) FROM orphan_r.t GROUP BY k');
SELECT counters.drop_counter('orphan_s_counts');
DROP SCHEMA orphan_r CASCADE;

--
-- 10. Definitions whose meaning changes without a write: reading the whole row (a column added or dropped changes
-- `t IS NOT NULL` for every row), and a source that is an inheritance child (statements naming the parent change its
-- rows without firing its triggers). Both are refused when declaring.
--
CREATE TABLE wide (id int PRIMARY KEY, k int, note text);
SELECT counters.create_counter('whole_row', 'SELECT k, count(*) FILTER (WHERE w IS NOT NULL) AS n FROM wide w GROUP BY k');
\echo SQLSTATE :SQLSTATE
CREATE TABLE base (id int, k int);
CREATE TABLE child () INHERITS (base);
SELECT counters.create_counter('child_k', 'SELECT k, count(*) AS n FROM child GROUP BY k');
\echo SQLSTATE :SQLSTATE

--
-- 11. Session settings that change how values become text, also inside an IMMUTABLE function the definition calls
-- (where nothing in the definition itself shows a conversion): a key is the same text in every session.
--
CREATE FUNCTION label(x float8) RETURNS text LANGUAGE sql IMMUTABLE AS 'SELECT x::text';
CREATE TABLE samples (id int PRIMARY KEY, x float8 NOT NULL, raw bytea NOT NULL);
SELECT counters.create_counter('by_label', 'SELECT label(x) AS label, count(*) AS n FROM samples GROUP BY 1');
SELECT counters.create_counter('by_xml', 'SELECT xmlelement(name p, raw)::text AS p, count(*) AS n FROM samples GROUP BY 1');
INSERT INTO samples VALUES (1, 0.1::float8 + 0.2::float8, '\x0102');
SET extra_float_digits = 0;
SET xmlbinary = hex;
DELETE FROM samples;
RESET extra_float_digits;
RESET xmlbinary;
SELECT (SELECT count(*) FROM by_label) AS label_rows, (SELECT count(*) FROM by_xml) AS xml_rows;

--
-- 12. DROP OWNED BY a role ... CASCADE drops the schemas it owns with everything in them, also a partition another
-- role owns there: its rows leave the counted table and are counted.
--
SET ROLE NONE; CREATE ROLE counters_edge_schemer; RESET ROLE;
SET ROLE NONE; CREATE SCHEMA edge_other AUTHORIZATION counters_edge_schemer; RESET ROLE;
CREATE TABLE spread (id int NOT NULL, k int NOT NULL) PARTITION BY RANGE (id);
CREATE TABLE spread_1 PARTITION OF spread FOR VALUES FROM (0) TO (10);
SET ROLE NONE; GRANT USAGE, CREATE ON SCHEMA edge_other TO counters_app; RESET ROLE;
CREATE TABLE edge_other.spread_2 PARTITION OF spread FOR VALUES FROM (10) TO (20);
INSERT INTO spread VALUES (1, 1), (11, 11), (12, 12);
SELECT counters.create_counter('spread_k', 'SELECT k, count(*) AS n FROM spread GROUP BY k');
SET ROLE NONE;
SET client_min_messages = warning;
DROP OWNED BY counters_edge_schemer CASCADE;
RESET client_min_messages;
RESET ROLE;
SELECT to_regclass('edge_other.spread_2') AS partition_left;
SELECT * FROM differs('spread_k', 'SELECT k, count(*) FROM spread GROUP BY k');

-- clean up
SET client_min_messages = warning;
SELECT counters.drop_counter(name) FROM counters.counter ORDER BY name;
DROP SCHEMA edge_test CASCADE;
SET ROLE NONE; DROP OWNED BY counters_edge_owner, counters_edge_partitioner, counters_edge_guest; RESET ROLE;
SET ROLE NONE; DROP ROLE counters_edge_owner, counters_edge_partitioner, counters_edge_guest, counters_edge_schemer; RESET ROLE;
RESET client_min_messages;
RESET search_path;
