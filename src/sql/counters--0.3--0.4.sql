-- counters 0.3 -> 0.4: the security model (a counter's code runs as its owner in a security-restricted operation,
-- whoever triggers it; the catalog is written only after checking the caller's rights on every relation it names),
-- maintenance in C (verify, rebuild, compact, apply_retention: per counter, as its owner, skipping or refusing what
-- the caller may not do, a failing counter no longer stopping a compaction round), counters.maintenance, replica
-- identities for counter tables, the counters_begin trigger and DDL that would make counters silently wrong refused.
\echo Use "ALTER EXTENSION counters UPDATE TO '0.4'" to load this file. \quit

-- ---------------------------------------------------------------------------------------------------------------
-- catalog
-- ---------------------------------------------------------------------------------------------------------------

CREATE TABLE counters.maintenance (
	counter           text PRIMARY KEY REFERENCES counters.counter (name) ON UPDATE CASCADE ON DELETE CASCADE,
	verified_at       timestamptz,
	verify_wrong      bigint,
	compacted_at      timestamptz,
	compact_failed_at timestamptz,
	compact_error     text,
	rebuilt_at        timestamptz
);
GRANT SELECT ON counters.maintenance TO PUBLIC;
INSERT INTO counters.maintenance (counter, verified_at, verify_wrong, rebuilt_at)
SELECT c.name, v.verified_at, v.wrong, (c.options OPERATOR(pg_catalog.->>) 'last_rebuild')::pg_catalog.timestamptz
  FROM counters.counter c LEFT JOIN counters.verified v ON v.counter OPERATOR(pg_catalog.=) c.name
 WHERE v.counter IS NOT NULL OR c.options OPERATOR(pg_catalog.?) 'last_rebuild';
UPDATE counters.counter SET options = options OPERATOR(pg_catalog.-) 'last_rebuild'::pg_catalog.text
 WHERE options OPERATOR(pg_catalog.?) 'last_rebuild';

-- Every operator of the views is pg_catalog's, written so: at install time the extension's schema (public, owned by
-- the database owner) comes first in search_path, and an operator planted there must not be bound.
CREATE OR REPLACE VIEW counters.bounds AS
SELECT c.name AS counter, b.key AS column_name, (b.value OPERATOR(pg_catalog.->>) 'min')::pg_catalog.numeric AS min,
       (b.value OPERATOR(pg_catalog.->>) 'max')::pg_catalog.numeric AS max
  FROM counters.counter c, pg_catalog.jsonb_each(c.options OPERATOR(pg_catalog.->) 'bounds') b;
CREATE OR REPLACE VIEW counters.thresholds AS
SELECT c.name AS counter, t.key AS column_name,
       ARRAY(SELECT x::pg_catalog.numeric FROM pg_catalog.jsonb_array_elements_text(t.value OPERATOR(pg_catalog.->) 'values') x) AS thresholds,
       pg_catalog.to_regprocedure(t.value OPERATOR(pg_catalog.->>) 'callback') AS callback,
       'counters.' OPERATOR(pg_catalog.||) c.name AS channel
  FROM counters.counter c, pg_catalog.jsonb_each(c.options OPERATOR(pg_catalog.->) 'thresholds') t;
CREATE OR REPLACE VIEW counters.stats AS
SELECT c.name AS counter,
       c.mode,
       c.source,
       c.target,
       t.n_live_tup AS rows,
       l.n_live_tup AS log_rows,
       t.n_tup_ins AS rows_inserted,
       t.n_tup_upd AS rows_updated,
       t.n_tup_del AS rows_deleted,
       l.n_tup_ins AS log_appends,
       s.n_tup_ins OPERATOR(pg_catalog.+) s.n_tup_upd OPERATOR(pg_catalog.+) s.n_tup_del AS source_writes,
       (SELECT f.calls FROM pg_catalog.pg_stat_user_functions f
         WHERE f.funcid OPERATOR(pg_catalog.=) 'counters.capture()'::pg_catalog.regprocedure::pg_catalog.oid) AS trigger_calls,
       m.rebuilt_at AS last_rebuild,
       m.verified_at AS last_verify,
       m.verify_wrong AS last_verify_wrong,
       m.compacted_at AS last_compact,
       m.compact_error AS last_compact_error
  FROM counters.counter c
  LEFT JOIN pg_catalog.pg_stat_all_tables t ON t.relid OPERATOR(pg_catalog.=) COALESCE(c.totals, c.target)::pg_catalog.oid
  LEFT JOIN pg_catalog.pg_stat_all_tables l ON l.relid OPERATOR(pg_catalog.=) c.log::pg_catalog.oid
  LEFT JOIN pg_catalog.pg_stat_all_tables s ON s.relid OPERATOR(pg_catalog.=) c.source::pg_catalog.oid
  LEFT JOIN counters.maintenance m ON m.counter OPERATOR(pg_catalog.=) c.name;

DROP FUNCTION counters._note_verified(text, bigint);
DROP TABLE counters.verified;
DROP FUNCTION counters._check_columns(text);
DROP FUNCTION counters._retention_filter(text, boolean);
DROP FUNCTION counters._qualified(regclass);

COMMENT ON SCHEMA counters IS 'declarative, exact, transactional counters (the counters extension)';
COMMENT ON TABLE counters.counter IS
	'one row per counter: its source, the relation to read, the definition view, mode and options';
COMMENT ON TABLE counters.maintenance IS
	'when verify(), compact() and rebuild() last ran for each counter, and the last compaction error';
COMMENT ON VIEW counters.counters IS 'the counters of this database, with their definitions as SQL';
COMMENT ON VIEW counters.bounds IS 'bounds set with counters.set_bounds(), one row per bounded column';
COMMENT ON VIEW counters.thresholds IS 'thresholds set with counters.set_thresholds() and the NOTIFY channel of each';
COMMENT ON VIEW counters.stats IS
	'one row per counter: table sizes and writes from the cumulative statistics, and the last maintenance runs';
COMMENT ON FUNCTION counters.capture() IS
	'the trigger that keeps counters: counters_begin, counters_insert, counters_update, counters_delete, counters_truncate';

-- ---------------------------------------------------------------------------------------------------------------
-- every function in C: the internal SQL helpers go (the C functions do their work and check the caller's rights)
-- ---------------------------------------------------------------------------------------------------------------

DROP FUNCTION counters._create_counter(text, text, text, text);
DROP FUNCTION counters._declare(text, text, text, text, text);
DROP FUNCTION counters._describe(text, text);
DROP FUNCTION counters._describe_keys(regclass);
DROP FUNCTION counters._register(text, regclass, regclass, boolean);
DROP FUNCTION counters._set_mode(text, regclass, text, regclass, regclass);
DROP FUNCTION counters._set_option(text, text, jsonb);
DROP FUNCTION counters._unregister(text);
DROP FUNCTION counters._columns(regclass, regclass);
DROP FUNCTION counters._value_column(text, text);
DROP FUNCTION counters._require_read_committed(text);
DROP TYPE counters._describe_row;

-- Declare a counter: the definition is one aggregate query over one table (names resolve with the caller's
-- search_path); creates the view <name>_definition and the counter table (or fills columns of the existing table
-- `target`), fills it, attaches the triggers, and switches it to `mode`. Locks writers of the source out until the
-- declaring transaction ends; runs at READ COMMITTED. Returns the relation to read.
CREATE OR REPLACE FUNCTION counters.create_counter(name text, definition text, target text DEFAULT NULL,
                                        mode text DEFAULT 'exact')
	RETURNS regclass
	AS 'MODULE_PATHNAME', 'counters_create_counter'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.create_counter(text, text, text, text) IS
	'declare a counter as an aggregate query; returns the relation to read';

-- Switch a counter between modes; values stay exact throughout (the source is locked against writes meanwhile).
--   exact -> log:     the counter table becomes <name>_totals, deltas go to a new <name>_log, and <name> becomes a
--                     view adding both, so readers keep reading the same name.
--   exact -> sharded: the same, with <name>_slots (keys, values, slot number) in place of the log.
--   back to exact:    everything is folded, the view and log/slots are dropped, <name>_totals gets the name back.
--   log <-> sharded:  through exact.
-- max_slots (sharded mode, default 16) bounds the slot rows per key; giving it alone changes it.
CREATE OR REPLACE FUNCTION counters.alter_counter(name text, mode text, max_slots integer DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_alter_counter'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.alter_counter(text, text, integer) IS
	'switch a counter between exact, sharded and log mode (values exact throughout), or change max_slots';

CREATE OR REPLACE FUNCTION counters.drop_counter(name text) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_drop_counter'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.drop_counter(text) IS
	'drop a counter: catalog row, definition view, the tables it created, and the triggers once none is left';

-- The capture triggers on a source and, for a partitioned table, every partition (statement triggers of a parent do
-- not fire for statements that name a partition): INSERT, UPDATE and DELETE with transition tables, counters_begin
-- before the statement, TRUNCATE. Idempotent; does not recount.
CREATE OR REPLACE FUNCTION counters.attach(source regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_attach'
	LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION counters.attach(regclass) IS
	'(re)create the capture triggers on a table and all its partitions; idempotent, does not recount';

CREATE OR REPLACE FUNCTION counters.detach(source regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_detach'
	LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION counters.detach(regclass) IS
	'remove the capture triggers from a table and its partitions: its counters stop being maintained';

-- After CREATE TABLE ... PARTITION OF / ATTACH PARTITION: new partitions of a counted table get their triggers.
-- After a column of an existing target was renamed: the definition's alias follows. After DETACH PARTITION: the
-- table that left loses its triggers.
CREATE OR REPLACE FUNCTION counters._on_ddl_end() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'counters_on_ddl_end'
	LANGUAGE C;

-- When a source, counter table or definition view is dropped, the counter goes with it (catalog row, what remains of
-- its view and tables, the triggers once no counter of the source is left), as far as the role that dropped may
-- drop: what it may not stays, and is reported.
CREATE OR REPLACE FUNCTION counters._on_sql_drop() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'counters_on_sql_drop'
	LANGUAGE C;

-- Fold pending deltas into the totals, one key at a time in sorted order, in one statement: readers see the pending
-- rows or their folded sum, never both or neither. Log mode: every log row (writers keep appending and are never
-- blocked). Sharded mode: the slot rows no transaction holds (busy slots wait for the next compaction). Then deletes
-- expired buckets (apply_retention). Returns the number of rows folded. Each counter is folded as its owner; without
-- a name, the counters the caller may maintain, each on its own (one that fails is reported and the others go on).
CREATE OR REPLACE FUNCTION counters.compact(name text DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'counters_compact'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.compact(text) IS
	'fold the log or idle slots of one or all counters into their totals, then apply retentions; returns rows folded';

-- The k largest keys of a counter by one value column, exactly, as of the caller's snapshot (read with the caller's
-- rights). In log or sharded mode it reads the top k + m keys of the totals (add an index on the column to make that
-- an index scan) plus the m keys that have pending deltas. `filter` is an SQL condition on the counter's columns,
-- e.g. 'blog_id = 7' (key columns only in log and sharded mode).
CREATE OR REPLACE FUNCTION counters.top(name text, column_name text, k integer, filter text DEFAULT NULL)
	RETURNS TABLE (key jsonb, value numeric)
	AS 'MODULE_PATHNAME', 'counters_top'
	LANGUAGE C STABLE;
COMMENT ON FUNCTION counters.top(text, text, integer, text) IS
	'the k largest keys of a counter by one value column, exactly, as of the caller''s snapshot';

-- Bounds on one value column of an exact counter (NULL = unbounded; calling again replaces them, two NULLs remove
-- them). A statement whose deltas would move a value outside its bounds fails with check_violation (23514) and
-- changes nothing; checked while the counter row is locked. Bounds that current values already break are refused
-- (the source is locked against writes meanwhile).
CREATE OR REPLACE FUNCTION counters.set_bounds(name text, column_name text, min numeric DEFAULT NULL, max numeric DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_bounds'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_bounds(text, text, numeric, numeric) IS
	'bounds on a value column of an exact counter: statements that would cross them fail with 23514';

-- Thresholds on one value column of an exact counter (an empty array removes them). When a statement moves a value
-- from below a threshold to at or above it (direction "up"), or back below it ("down"), the extension sends
--   NOTIFY "counters.<counter name>", '{"counter": ..., "key": {...}, "column": ..., "old": ..., "new": ...,
--                                      "threshold": ..., "direction": "up" | "down"}'
-- (delivered only if the transaction commits), and calls the callback, if given, in the same transaction with the
-- same fields as arguments: callback(counter text, key jsonb, column_name text, old numeric, new numeric,
-- threshold numeric, direction text), as the counter's owner in a security-restricted operation, with
-- search_path = pg_catalog, pg_temp. A value that crosses several thresholds at once reports each.
CREATE OR REPLACE FUNCTION counters.set_thresholds(name text, column_name text, thresholds numeric[],
	callback regprocedure DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_thresholds'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_thresholds(text, text, numeric[], regprocedure) IS
	'thresholds on a value column of an exact counter: each crossing sends NOTIFY "counters.<name>" and calls the callback';

-- Keep only recent time buckets of a counter keyed by one (a key column of type date, timestamp or timestamptz):
-- buckets older than now() - keep are deleted by apply_retention() (which compact(), the worker and a pg_cron job
-- call), and deltas to them are dropped by the trigger. verify() and rebuild() compare only the buckets kept. keep
-- NULL removes the retention. For timestamp (without time zone) buckets the horizon is computed in the session's
-- time zone: keep writers and the compacting job in one TimeZone (UTC is simplest).
CREATE OR REPLACE FUNCTION counters.set_retention(name text, column_name text, keep interval) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_retention'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_retention(text, text, interval) IS
	'keep only time buckets newer than now() - keep (a date, timestamp or timestamptz key); NULL removes it';

-- Delete the expired buckets of one or all counters with a retention (from the totals and the log or slots too), as
-- each counter's owner; returns the number of rows deleted. counters.compact() calls it.
CREATE OR REPLACE FUNCTION counters.apply_retention(name text DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'counters_apply_retention'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.apply_retention(text) IS
	'delete expired time buckets of one or all counters now; returns rows deleted';

-- One row per counter value that differs from its definition recomputed now, in one snapshot per counter (a plain
-- read: it takes no lock that blocks writers). A missing counter row counts as zeros; for a counter kept in an
-- existing table, keys that have no row there are not reported (their deltas are skipped by design); with a
-- retention, buckets older than it are not compared. The recount runs as the counter's owner with row_security off.
-- Without a name: every counter the caller may read; each run is recorded in counters.maintenance.
CREATE OR REPLACE FUNCTION counters.verify(name text DEFAULT NULL)
	RETURNS TABLE (counter text, key jsonb, column_name text, stored numeric, expected numeric)
	AS 'MODULE_PATHNAME', 'counters_verify'
	LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION counters.verify(text) IS
	'every stored counter value that differs from its definition recomputed now';

-- Make stored counters equal to their definition again; returns how many counter rows it inserted, updated or
-- deleted. `condition` (optional) is an SQL condition over the counter's key columns, as named in the counter table
-- ('blog_id = 7'): only those keys are rebuilt. The source is locked in SHARE mode meanwhile (writers wait, readers go
-- on). A log-mode or sharded counter is compacted first, then its totals rebuilt. NOTICEs report the keys that
-- differed and the rows changed, per counter.
CREATE OR REPLACE FUNCTION counters.rebuild(name text DEFAULT NULL, condition text DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'counters_rebuild'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.rebuild(text, text) IS
	'make stored counters equal to their definitions, only the keys that differ; returns rows changed';

-- ---------------------------------------------------------------------------------------------------------------
-- DDL that would make counters silently wrong is refused; partitions dropped with their schema or owner are counted
-- ---------------------------------------------------------------------------------------------------------------

DROP EVENT TRIGGER counters_ddl_start;
CREATE EVENT TRIGGER counters_ddl_start ON ddl_command_start
	WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'DROP OWNED', 'DROP SCHEMA', 'DROP TABLE')
	EXECUTE FUNCTION counters._on_ddl_start();

-- ---------------------------------------------------------------------------------------------------------------
-- existing counters
-- ---------------------------------------------------------------------------------------------------------------

-- Counter tables without a primary key (NULL keys), logs and slots get a replica identity, so that publishing them
-- for logical replication no longer makes writes to the source fail.
DO $$
DECLARE
	rel regclass;
BEGIN
	FOR rel IN
		SELECT r.oid::regclass FROM pg_catalog.pg_class r
		 WHERE r.relreplident OPERATOR(pg_catalog.=) 'd'
		   AND (r.oid IN (SELECT c.log::pg_catalog.oid FROM counters.counter c)
		        OR (r.oid IN (SELECT COALESCE(c.totals, c.target)::pg_catalog.oid FROM counters.counter c WHERE c.owns_target)
		            AND NOT EXISTS (SELECT FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) r.oid
		                               AND i.indisprimary)))
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY FULL', rel);
	END LOOP;
END
$$;

-- The counters_begin trigger on every source and partition.
SELECT counters.attach(s.source) FROM (SELECT DISTINCT c.source FROM counters.counter c) s;

-- event trigger functions explain themselves in \df+
COMMENT ON FUNCTION counters._on_ddl_start() IS
	'event trigger (counters_ddl_start): counts partitions that join or leave a counted table, refuses DDL that would make a counter wrong';
COMMENT ON FUNCTION counters._on_ddl_end() IS
	'event trigger (counters_ddl_end): new partitions get the capture triggers, renamed target columns are followed';
COMMENT ON FUNCTION counters._on_sql_drop() IS
	'event trigger (counters_sql_drop): a counter whose source, table or view was dropped goes with it';
