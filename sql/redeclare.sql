--
-- redeclare: a counter declared again keeps its table as the user left it. A new definition
-- (alter_counter(definition => ...)) and a retyped counted column (ALTER TABLE ... ALTER COLUMN ... TYPE) declare a
-- counter again; one with a table of its own keeps that table -- its name, the names of its columns, its indexes,
-- comments, storage settings, triggers, grants, the views over it and its publication -- and only empties, reshapes and
-- fills it. What would take something of the user's with it is refused before anything changes, with a hint. Every
-- step compares the counter with a recount written out here, and the table's properties with what the user made.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA redeclare_test;
SET search_path = redeclare_test, regress;
SET ROLE NONE; CREATE ROLE counters_redeclare_reader; RESET ROLE;
CREATE TABLE jobs (id int PRIMARY KEY, queue text NOT NULL, state text NOT NULL, attempts int NOT NULL);
INSERT INTO jobs SELECT g, 'q' || g % 3, CASE WHEN g % 4 = 0 THEN 'done' ELSE 'ready' END, g % 5 FROM generate_series(1, 40) g;
SELECT counters.create_counter('queue_counts', 'SELECT queue, count(*) AS jobs, sum(attempts) AS attempts FROM jobs GROUP BY queue');

-- What the application and its DBA made of the counter table.
ALTER TABLE queue_counts RENAME TO queue_stats;
ALTER TABLE queue_stats RENAME COLUMN jobs TO job_count;
CREATE INDEX queue_stats_attempts ON queue_stats (attempts DESC);
COMMENT ON TABLE queue_stats IS 'jobs per queue, kept by counters';
COMMENT ON COLUMN queue_stats.job_count IS 'jobs in the queue';
ALTER TABLE queue_stats SET (fillfactor = 70, autovacuum_enabled = false);
ALTER TABLE queue_stats ALTER COLUMN attempts SET STATISTICS 500;
CREATE TABLE stats_audit (queue text, at_update bigint);
CREATE FUNCTION stats_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO redeclare_test.stats_audit VALUES (NEW.queue, NEW.job_count);
	RETURN NULL;
END $$;
CREATE TRIGGER audited AFTER UPDATE ON queue_stats FOR EACH ROW EXECUTE FUNCTION stats_audit();
GRANT SELECT ON queue_stats TO counters_redeclare_reader;
CREATE VIEW busy_queues AS SELECT queue FROM queue_stats WHERE job_count > 10;
SET client_min_messages = error;  -- (wal_level need not be logical here)
CREATE PUBLICATION redeclare_pub FOR TABLE queue_stats;
RESET client_min_messages;

-- The table as the user left it: one line per property, compared after each step.
CREATE FUNCTION as_left() RETURNS TABLE (property text, value text) LANGUAGE sql AS $$
	SELECT 'table', c.oid::regclass::text FROM pg_class c WHERE c.oid = 'redeclare_test.queue_stats'::regclass
	UNION ALL SELECT 'columns', string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
	  FROM pg_attribute a WHERE a.attrelid = 'redeclare_test.queue_stats'::regclass AND a.attnum > 0 AND NOT a.attisdropped
	UNION ALL SELECT 'index', pg_get_indexdef('redeclare_test.queue_stats_attempts'::regclass)
	UNION ALL SELECT 'comment', obj_description('redeclare_test.queue_stats'::regclass, 'pg_class')
	UNION ALL SELECT 'column comment', col_description('redeclare_test.queue_stats'::regclass, 2)
	UNION ALL SELECT 'storage', array_to_string(c.reloptions, ', ') FROM pg_class c WHERE c.oid = 'redeclare_test.queue_stats'::regclass
	UNION ALL SELECT 'statistics', a.attstattarget::text FROM pg_attribute a
	 WHERE a.attrelid = 'redeclare_test.queue_stats'::regclass AND a.attname = 'attempts'
	UNION ALL SELECT 'trigger', t.tgname FROM pg_trigger t WHERE t.tgrelid = 'redeclare_test.queue_stats'::regclass AND t.tgname = 'audited'
	UNION ALL SELECT 'grant', has_table_privilege('counters_redeclare_reader', 'redeclare_test.queue_stats', 'SELECT')::text
	UNION ALL SELECT 'view', string_agg(a.attname, ', ' ORDER BY a.attname) FROM pg_depend d
	  JOIN pg_rewrite w ON w.oid = d.objid AND d.classid = 'pg_rewrite'::regclass
	  JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
	 WHERE w.ev_class = 'redeclare_test.busy_queues'::regclass AND d.refobjid = 'redeclare_test.queue_stats'::regclass
	UNION ALL SELECT 'publication', string_agg(p.pubname, ', ') FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
	 WHERE r.prrelid = 'redeclare_test.queue_stats'::regclass
	ORDER BY 1 $$;
SELECT * FROM as_left();
CREATE TABLE left_before AS SELECT * FROM as_left() WHERE property <> 'columns';

-- 1. A new definition that keeps the columns (a WHERE clause) and adds one at the end: the same table, refilled.
SELECT counters.alter_counter('queue_counts', definition =>
	'SELECT queue, count(*) AS jobs, sum(attempts) AS attempts, count(*) FILTER (WHERE state = ''done'') AS done
	   FROM jobs WHERE attempts < 4 GROUP BY queue');
SELECT * FROM as_left() EXCEPT SELECT * FROM left_before ORDER BY 1;
SELECT target FROM counters.counters WHERE name = 'queue_counts';
CREATE VIEW queue_counts_expected AS
	SELECT queue, count(*) AS job_count, sum(attempts) AS attempts, count(*) FILTER (WHERE state = 'done') AS done
	  FROM jobs WHERE attempts < 4 GROUP BY queue;
SELECT * FROM diff('queue_stats', 'queue_counts_expected');
-- writes count, through the user's trigger too
TRUNCATE stats_audit;
UPDATE jobs SET state = 'done' WHERE id = 1;
SELECT * FROM diff('queue_stats', 'queue_counts_expected');
SELECT count(*) > 0 AS audited FROM stats_audit;

-- 2. A counted column retyped (int -> numeric): the sum becomes numeric, in the same table (the user's index on it is
--    rebuilt by PostgreSQL, as for any retype). (The test's recount reads the column too: out of the way first.)
DROP VIEW queue_counts_expected;
ALTER TABLE jobs ALTER COLUMN attempts TYPE numeric;
CREATE VIEW queue_counts_expected AS
	SELECT queue, count(*) AS job_count, sum(attempts) AS attempts, count(*) FILTER (WHERE state = 'done') AS done
	  FROM jobs WHERE attempts < 4 GROUP BY queue;
SELECT * FROM as_left() EXCEPT SELECT * FROM left_before ORDER BY 1;
SELECT * FROM diff('queue_stats', 'queue_counts_expected');

-- 3. A new key: the counter's key index is built again; the rest stays.
SELECT counters.alter_counter('queue_counts', definition =>
	'SELECT queue, count(*) AS jobs, sum(attempts) AS attempts, count(*) FILTER (WHERE state = ''done'') AS done,
	        state
	   FROM jobs WHERE attempts < 4 GROUP BY queue, state');
SELECT * FROM as_left() EXCEPT SELECT * FROM left_before ORDER BY 1;
SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'queue_stats'::regclass ORDER BY 1;
CREATE VIEW queue_state_expected AS
	SELECT queue, count(*) AS job_count, sum(attempts) AS attempts, count(*) FILTER (WHERE state = 'done') AS done, state
	  FROM jobs WHERE attempts < 4 GROUP BY queue, state;
SELECT * FROM diff('queue_stats', 'queue_state_expected');

-- 4. Refused, with nothing changed: a definition that drops a column the user's view or index uses, or that moves a
--    column the table keeps.
SELECT * FROM errors(
	$$SELECT counters.alter_counter('queue_counts', definition => 'SELECT queue, sum(attempts) AS attempts, state FROM jobs GROUP BY queue, state')$$,
	$$SELECT counters.alter_counter('queue_counts', definition => 'SELECT queue, count(*) AS jobs, count(*) AS done, state FROM jobs GROUP BY queue, state')$$,
	$$SELECT counters.alter_counter('queue_counts', definition => 'SELECT queue, sum(attempts) AS attempts, count(*) AS jobs, count(*) AS done, state FROM jobs GROUP BY queue, state')$$);
SELECT * FROM diff('queue_stats', 'queue_state_expected');

-- 5. In log mode: declared again through exact mode and back; the table (now the totals) and its view keep the name.
--    (A view over the table keeps a counter in exact mode: out of the way while it is in log mode.)
DROP VIEW busy_queues;
SELECT counters.alter_counter('queue_counts', 'log');
INSERT INTO jobs VALUES (100, 'q1', 'ready', 1);
SELECT counters.alter_counter('queue_counts', definition =>
	'SELECT queue, count(*) AS jobs, sum(attempts) AS attempts, count(*) FILTER (WHERE state = ''done'') AS done,
	        state
	   FROM jobs GROUP BY queue, state');
SELECT name, mode, target, totals FROM counters.counter WHERE name = 'queue_counts';
CREATE VIEW queue_all_expected AS
	SELECT queue, count(*) AS job_count, sum(attempts) AS attempts, count(*) FILTER (WHERE state = 'done') AS done, state
	  FROM jobs GROUP BY queue, state;
SELECT * FROM diff('queue_stats', 'queue_all_expected');
SELECT counters.alter_counter('queue_counts', 'exact');
CREATE VIEW busy_queues AS SELECT queue FROM queue_stats WHERE job_count > 10;
SELECT * FROM as_left() EXCEPT SELECT * FROM left_before ORDER BY 1;
SELECT * FROM diff('queue_stats', 'queue_all_expected');

-- 6. alter_counter_concurrently() counts into new tables: it carries the table's name, comment, storage settings and
--    SELECT grants, and refuses what it would lose (the user's index, trigger, view, publication, renamed columns),
--    with a hint.
CALL counters.alter_counter_concurrently('queue_counts', 'SELECT queue, count(*) AS jobs FROM jobs GROUP BY queue');
\echo SQLSTATE :SQLSTATE
CREATE TABLE events (id int PRIMARY KEY, kind text NOT NULL);
INSERT INTO events SELECT g, 'k' || g % 4 FROM generate_series(1, 20) g;
SELECT counters.create_counter('event_counts', 'SELECT kind, count(*) AS n FROM events GROUP BY kind');
ALTER TABLE event_counts RENAME TO kinds_seen;
COMMENT ON TABLE kinds_seen IS 'events per kind';
ALTER TABLE kinds_seen SET (fillfactor = 60);
GRANT SELECT ON kinds_seen TO counters_redeclare_reader;
SET client_min_messages = warning;
CALL counters.alter_counter_concurrently('event_counts', 'SELECT kind, count(*) AS n FROM events WHERE id > 2 GROUP BY kind');
RESET client_min_messages;
SELECT target, obj_description(target, 'pg_class') AS comment, (SELECT reloptions FROM pg_class WHERE oid = target),
       has_table_privilege('counters_redeclare_reader', target, 'SELECT') AS granted
  FROM counters.counters WHERE name = 'event_counts';
CREATE VIEW event_counts_expected AS SELECT kind, count(*) AS n FROM events WHERE id > 2 GROUP BY kind;
SELECT * FROM diff('kinds_seen', 'event_counts_expected');
INSERT INTO events VALUES (100, 'k9');
SELECT * FROM diff('kinds_seen', 'event_counts_expected');

-- clean up
SET client_min_messages = warning;
DROP PUBLICATION redeclare_pub;
DROP VIEW busy_queues;
SELECT counters.drop_counter('queue_counts');
SELECT counters.drop_counter('event_counts');
DROP SCHEMA redeclare_test CASCADE;
SET ROLE NONE; DROP ROLE counters_redeclare_reader; RESET ROLE;
RESET client_min_messages;
RESET search_path;
