/*
 * counters.sql: the install script of the current version, every object once, in its current form. The build copies
 * it to counters--<version>.sql; the upgrade scripts counters--<from>--<to>.sql beside it are frozen once released.
 */

\echo Use "CREATE EXTENSION counters" to load this file. \quit

-- The extension owns its schema: creating it here fails loudly if a schema of that name already belongs to someone
-- else (who could otherwise plant objects next to the extension's).
CREATE SCHEMA counters;
GRANT USAGE ON SCHEMA counters TO PUBLIC;
COMMENT ON SCHEMA counters IS 'declarative, exact, transactional counters (the counters extension)';

-- ---------------------------------------------------------------------------------------------------------------
-- catalog
-- ---------------------------------------------------------------------------------------------------------------

-- One row per counter. The relations are stored as regclass, which pg_upgrade keeps, never as OIDs or node strings. The
-- definition itself lives in the view named by "query": PostgreSQL records its dependencies on the source columns and
-- functions, keeps it correct across renames, and pg_dump dumps it as SQL text. Readable by everyone; written only by
-- the extension's C functions, as the catalog's owner, after they have authorized the caller for every relation a row
-- names (no role is granted a write). Not dumped: a dump keeps each counter as the comment of its definition view
-- ("counters: {...}", its row as JSON), from which a restored database declares it again, as the view's owner could.
CREATE TABLE counters.counter (
	name        text PRIMARY KEY,
	source      regclass NOT NULL,
	target      regclass NOT NULL,
	query       regclass NOT NULL UNIQUE,
	owns_target boolean NOT NULL,
	-- 'exact': one row per key in target, updated in place. 'log': each statement appends its deltas to "log";
	-- counters.compact() folds them into "totals"; target is a view adding both. 'sharded': up to max_slots rows per
	-- key in "log" (the slots table), folded into "totals" by counters.compact(); target is a view adding both.
	mode        text NOT NULL DEFAULT 'exact' CHECK (mode IN ('exact', 'log', 'sharded')),
	totals      regclass,
	log         regclass,
	options     jsonb NOT NULL DEFAULT '{}',
	created_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- window thresholds (an exact counter with a table of its own): which thresholds each prefix's window sum is at or
	-- above, as announced. A table of the counter's owner, dumped with the counter's tables.
	crossings   regclass,
	CHECK ((mode IN ('log', 'sharded')) = (log IS NOT NULL AND totals IS NOT NULL))
);
CREATE INDEX counter_source_idx ON counters.counter (source);
GRANT SELECT ON counters.counter TO PUBLIC;
COMMENT ON TABLE counters.counter IS
	'one row per counter: its source, the relation to read, the definition view, mode and options';
-- A row of counters.counter inserted by anyone but the extension's functions (only a superuser may: a restore of a
-- dump made by an earlier version, which dumped the rows, or a row typed by hand) is a declaration like any other: it
-- is validated as declaring validates it, for the inserting role, and its options are written back in their typed form.
CREATE FUNCTION counters._catalog_row() RETURNS trigger
	AS 'MODULE_PATHNAME', 'counters_catalog_row'
	LANGUAGE C;
CREATE TRIGGER catalog_row BEFORE INSERT ON counters.counter FOR EACH ROW EXECUTE FUNCTION counters._catalog_row();

-- What maintenance last did to each counter (counters.stats shows it). Written by verify(), compact() and rebuild()
-- unless their transaction is read-only, without waiting on a concurrent run of the same counter. Not dumped: a
-- restored database has not been verified, compacted or rebuilt yet.
CREATE TABLE counters.maintenance (
	counter           text PRIMARY KEY REFERENCES counters.counter (name) ON UPDATE CASCADE ON DELETE CASCADE,
	verified_at       timestamptz,
	verify_wrong      bigint,
	compacted_at      timestamptz,
	compact_failed_at timestamptz,
	compact_error     text,
	rebuilt_at        timestamptz,
	-- the compactions that succeeded (since the counter was declared, or its row was first written): how many, the
	-- rows they folded and their time in milliseconds, and the last one's
	compactions       bigint,
	compacted_rows    bigint,
	compact_time      double precision,
	last_compact_rows bigint,
	last_compact_time double precision,
	-- the rounds of maintenance whose compaction failed since the last that succeeded: a round backs off from it
	compact_failures  bigint,
	-- the last write to its source that counters.suspend left uncounted (a data load by its owner)
	suspended_at      timestamptz
);
GRANT SELECT ON counters.maintenance TO PUBLIC;
COMMENT ON TABLE counters.maintenance IS
	'when verify(), compact() and rebuild() last ran for each counter, the last compaction error, and the compactions'' history';

-- ---------------------------------------------------------------------------------------------------------------
-- the trigger
-- ---------------------------------------------------------------------------------------------------------------

-- The generic trigger: statement-level, reads the transition tables, applies summed deltas per key, once per
-- statement. Every function of the extension is written in C (the library does the work; this script only declares
-- it): nothing is SECURITY DEFINER, and a counter's code runs as the counter's owner, restricted.
CREATE FUNCTION counters.capture() RETURNS trigger
	AS 'MODULE_PATHNAME', 'counters_capture'
	LANGUAGE C;
COMMENT ON FUNCTION counters.capture() IS
	'the trigger that keeps counters: counters_begin, counters_insert, counters_update, counters_delete, counters_truncate';

-- ---------------------------------------------------------------------------------------------------------------
-- views
-- ---------------------------------------------------------------------------------------------------------------

CREATE VIEW counters.counters AS
SELECT c.name,
       c.source,
       c.target,
       c.owns_target AS created_target,
       c.mode,
       pg_catalog.pg_get_viewdef(c.query, true) AS definition,
       c.query AS definition_view,
       c.options,
       c.created_at
  FROM counters.counter c;
GRANT SELECT ON counters.counters TO PUBLIC;
COMMENT ON VIEW counters.counters IS 'the counters of this database, with their definitions as SQL';

-- The options of a catalog row as rows, read in C (the one reader of options, src/model/counter.cpp): its bounds, and
-- its thresholds (the callback NULL when it no longer exists).
CREATE FUNCTION counters._bounds(options jsonb)
	RETURNS TABLE (column_name text, min numeric, max numeric)
	AS 'MODULE_PATHNAME', 'counters_bounds_rows'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION counters._bounds(jsonb) IS 'the bounds in a counter''s options, one row per column (for counters.bounds)';
CREATE FUNCTION counters._thresholds(options jsonb)
	RETURNS TABLE (column_name text, thresholds numeric[], callback regprocedure, every numeric)
	AS 'MODULE_PATHNAME', 'counters_thresholds_rows'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION counters._thresholds(jsonb) IS
	'the thresholds in a counter''s options, one row per column (for counters.thresholds)';

-- Every counter's bounds, one row per bounded column.
CREATE VIEW counters.bounds AS
SELECT c.name AS counter, b.column_name, b.min, b.max
  FROM counters.counter c, counters._bounds(c.options) b;
GRANT SELECT ON counters.bounds TO PUBLIC;
COMMENT ON VIEW counters.bounds IS 'bounds set with counters.set_bounds(), one row per bounded column';

-- Every counter's thresholds, one row per column: the thresholds listed and the step of the repeating ones ("every",
-- last: 0.5 added it to 0.4's view).
CREATE VIEW counters.thresholds AS
SELECT c.name AS counter, t.column_name, t.thresholds, t.callback,
       'counters.' OPERATOR(pg_catalog.||) c.name AS channel, t.every
  FROM counters.counter c, counters._thresholds(c.options) t;
GRANT SELECT ON counters.thresholds TO PUBLIC;
COMMENT ON VIEW counters.thresholds IS
	'thresholds set with counters.set_thresholds() (listed, and the step of repeating ones) and the NOTIFY channel of each';

-- One row per counter, for people and for monitoring, from PostgreSQL's cumulative statistics of the counter's own
-- tables (shared by all backends, kept across restarts, reset with pg_stat_reset()) and counters.maintenance:
--   rows, log_rows          live rows of the counter table (totals in log and sharded mode) and of the log or slots
--   rows_inserted/_updated/_deleted   writes the trigger (and compaction, rebuild) made to the counter table
--   log_appends             delta rows appended to the log (log mode) or slot rows created (sharded)
--   source_writes           rows inserted, updated and deleted in the source since statistics were reset (a sink,
--                           which stores none: the rows its counters counted, as counted_rows)
--   trigger_calls           calls of counters.capture() for all counters (track_functions = 'all' needed)
--   last_rebuild            when counters.rebuild() last ran for this counter
--   last_verify, last_verify_wrong      when counters.verify() last ran for it and how many wrong values it found
--   last_compact, last_compact_error    when a compaction last succeeded, and the error of the last round if it failed
--   compact_failures        the rounds whose compaction failed since one succeeded (rounds back off from it)
--   last_suspended          the last write to the source left uncounted by counters.suspend (a data load)
--   compactions ... last_compact_time   the compactions' history (counters.maintenance)
--   building, stats_reset   being built concurrently; when the database's statistics were last reset
--   calls, counted_rows, written_keys, total_time, calls_since   this counter's share of the write path: statements
--                           that counted rows for it, the source rows it evaluated, the counter keys it wrote, the
--                           milliseconds spent (writing its deltas, plus an even share of the statements' row passes
--                           over the source's counters), since calls_since; NULL unless counters is in
--                           shared_preload_libraries (kept in shared memory, until restart or counters.reset_stats())
--   oldest_pending          log and sharded mode: the commit time of the oldest delta no compaction has folded yet
--                           (NULL: none; never later than the truth), kept as calls ... are (NULL without the preload)
-- Whether a counter's options say it is being built concurrently (create_counter_concurrently or
-- rebuild_concurrently stopped, or under way): its values are not complete until the call completes.
CREATE FUNCTION counters._building(options jsonb) RETURNS boolean
	AS 'MODULE_PATHNAME', 'counters_building'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION counters._building(jsonb) IS
	'whether a counter''s options say it is being built concurrently (for counters.stats)';
-- The write path's statistics of a counter, by its definition view (NULL unless counters is in
-- shared_preload_libraries): kept in shared memory since the server started or the last counters.reset_stats().
CREATE FUNCTION counters._counter_stats(definition_view oid, OUT calls bigint, OUT counted_rows bigint,
                                        OUT written_keys bigint, OUT total_time double precision,
                                        OUT calls_since timestamptz, OUT oldest_pending timestamptz)
	AS 'MODULE_PATHNAME', 'counters_counter_stats'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION counters._counter_stats(oid) IS
	'the write path''s statistics of a counter, by its definition view (for counters.stats)';
-- Start this database's write-path statistics (calls ... calls_since of counters.stats) again from zero, as
-- pg_stat_reset() does PostgreSQL's; false when they are not kept. Like pg_stat_reset(), for superusers and roles
-- granted it.
CREATE FUNCTION counters.reset_stats() RETURNS boolean
	AS 'MODULE_PATHNAME', 'counters_reset_stats'
	LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION counters.reset_stats() FROM PUBLIC;
COMMENT ON FUNCTION counters.reset_stats() IS
	'start this database''s write-path statistics of counters (counters.stats: calls ... calls_since) from zero';
CREATE VIEW counters.stats AS
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
       CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_trigger g WHERE g.tgrelid OPERATOR(pg_catalog.=) c.source
                            AND g.tgname OPERATOR(pg_catalog.=) 'zz_counters_sink')
            THEN w.counted_rows  -- (a sink stores no row: the rows it took are the ones counted)
            ELSE (SELECT pg_catalog.sum(s.n_tup_ins OPERATOR(pg_catalog.+) s.n_tup_upd OPERATOR(pg_catalog.+) s.n_tup_del)::pg_catalog.int8
                    FROM (SELECT c.source::pg_catalog.oid AS relid
                           UNION SELECT t.relid::pg_catalog.oid FROM pg_catalog.pg_partition_tree(c.source) t) p
                    JOIN pg_catalog.pg_stat_all_tables s ON s.relid OPERATOR(pg_catalog.=) p.relid) END AS source_writes,
       (SELECT f.calls FROM pg_catalog.pg_stat_user_functions f
         WHERE f.funcid OPERATOR(pg_catalog.=) 'counters.capture()'::pg_catalog.regprocedure::pg_catalog.oid) AS trigger_calls,
       m.rebuilt_at AS last_rebuild,
       m.verified_at AS last_verify,
       m.verify_wrong AS last_verify_wrong,
       m.compacted_at AS last_compact,
       m.compact_error AS last_compact_error,
       COALESCE(m.compact_failures, 0) AS compact_failures,
       m.suspended_at AS last_suspended,
       COALESCE(m.compactions, 0) AS compactions,
       COALESCE(m.compacted_rows, 0) AS compacted_rows,
       COALESCE(m.compact_time, 0) AS compact_time,
       m.last_compact_rows,
       m.last_compact_time,
       counters._building(c.options) AS building,
       (SELECT d.stats_reset FROM pg_catalog.pg_stat_database d
         WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) AS stats_reset,
       w.calls,
       w.counted_rows,
       w.written_keys,
       w.total_time,
       w.calls_since,
       CASE WHEN c.mode OPERATOR(pg_catalog.<>) 'exact' THEN w.oldest_pending END AS oldest_pending
  FROM counters.counter c
  CROSS JOIN LATERAL counters._counter_stats(c.query::pg_catalog.oid) w
  LEFT JOIN pg_catalog.pg_stat_all_tables t ON t.relid OPERATOR(pg_catalog.=) COALESCE(c.totals, c.target)::pg_catalog.oid
  LEFT JOIN pg_catalog.pg_stat_all_tables l ON l.relid OPERATOR(pg_catalog.=) c.log::pg_catalog.oid
  LEFT JOIN counters.maintenance m ON m.counter OPERATOR(pg_catalog.=) c.name;
GRANT SELECT ON counters.stats TO PUBLIC;
COMMENT ON VIEW counters.stats IS
	'one row per counter: table sizes and writes from the cumulative statistics (since stats_reset), the last maintenance runs, and whether it is being built concurrently';

-- ---------------------------------------------------------------------------------------------------------------
-- declaring, switching and dropping counters
-- ---------------------------------------------------------------------------------------------------------------

-- Declare a counter: the definition is one aggregate query over one table (names resolve with the caller's
-- search_path); creates the view <name>_definition and the counter table (or fills columns of the existing table
-- `target`), fills it, attaches the triggers, and switches it to `mode`. Locks writers of the source out until the
-- declaring transaction ends; runs at READ COMMITTED. Returns the relation to read.
CREATE FUNCTION counters.create_counter(name text, definition text, target text DEFAULT NULL,
                                        mode text DEFAULT 'exact')
	RETURNS regclass
	AS 'MODULE_PATHNAME', 'counters_create_counter'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.create_counter(text, text, text, text) IS
	'declare a counter as an aggregate query; returns the relation to read';

-- The same without blocking writers, in the spirit of CREATE INDEX CONCURRENTLY: CALL it outside a transaction block.
-- Three transactions: (1) the counter is declared in log mode without its fill (writers wait only for the triggers);
-- (2) the totals are filled from the definition as of one snapshot, and the logged deltas that snapshot sees are
-- deleted (they are in the fill), while writers go on logging theirs; (3) the counter switches to `mode`. NOTICEs
-- and pg_stat_activity.query name each step. If it stops after step 1, CALL counters.rebuild_concurrently(name)
-- completes it (until then compaction refuses the counter) or counters.drop_counter(name) removes it.
CREATE PROCEDURE counters.create_counter_concurrently(name text, definition text, mode text DEFAULT 'exact')
	AS 'MODULE_PATHNAME', 'counters_create_counter_concurrently'
	LANGUAGE C;
COMMENT ON PROCEDURE counters.create_counter_concurrently(text, text, text) IS
	'declare a counter without blocking writers of its source (three transactions; CALL outside a transaction block)';

-- alter_counter(name, definition => ...) without blocking writers: CALL outside a transaction block. The new definition
-- is declared concurrently under a temporary name (create_counter_concurrently's steps, in the counter's mode); then
-- writers wait while the counter is dropped and the new one takes its name, options and grants. Not for counters kept
-- in columns of an existing table.
CREATE PROCEDURE counters.alter_counter_concurrently(name text, definition text)
	AS 'MODULE_PATHNAME', 'counters_alter_counter_concurrently'
	LANGUAGE C;
COMMENT ON PROCEDURE counters.alter_counter_concurrently(text, text) IS
	'change a counter''s definition without blocking writers (CALL outside a transaction block)';

-- Switch a counter between modes; values stay exact throughout (the source is locked against writes meanwhile).
--   exact -> log:     the counter table becomes <name>_totals, deltas go to a new <name>_log, and <name> becomes a
--                     view adding both, so readers keep reading the same name.
--   exact -> sharded: the same, with <name>_slots (keys, values, slot number) in place of the log.
--   back to exact:    everything is folded, the view and log/slots are dropped, <name>_totals gets the name back.
--   log <-> sharded:  through exact.
-- max_slots (sharded mode, default 16) bounds the slot rows per key; giving it alone changes it.
-- definition => a new definition: the counter is dropped and declared again in one transaction (writers of the source
-- wait, as for create_counter), in `mode` (NULL: its mode), keeping its options that still apply (bounds and
-- thresholds of value columns it still has, a retention of a key it still has, touch, max_slots) and the SELECT
-- grants of its table. CALL counters.alter_counter_concurrently(name, definition) does it without blocking writers.
CREATE FUNCTION counters.alter_counter(name text, mode text DEFAULT NULL, max_slots integer DEFAULT NULL,
                                       definition text DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_alter_counter'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.alter_counter(text, text, integer, text) IS
	'switch a counter between exact, sharded and log mode (values exact throughout), change max_slots, or change its definition';

CREATE FUNCTION counters.drop_counter(name text) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_drop_counter'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.drop_counter(text) IS
	'drop a counter: catalog row, definition view, the tables it created, and the triggers once none is left';

-- The capture triggers on a source and, for a partitioned table, every partition (statement triggers of a parent do
-- not fire for statements that name a partition): INSERT, UPDATE and DELETE with transition tables, counters_begin
-- before the statement, TRUNCATE. Idempotent; does not recount.
CREATE FUNCTION counters.attach(source regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_attach'
	LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION counters.attach(regclass) IS
	'(re)create the capture triggers on a table and all its partitions; idempotent, does not recount';

CREATE FUNCTION counters.detach(source regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_detach'
	LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION counters.detach(regclass) IS
	'remove the capture triggers from a table and its partitions: its counters stop being maintained';

-- A sink: rows inserted into `source` are counted by its counters and never stored (a BEFORE INSERT row trigger,
-- zz_counters_sink, counts each row after checking its NOT NULL and CHECK constraints, and returns NULL); UPDATE and
-- DELETE are refused; TRUNCATE zeroes its counters. Only an empty table with counters becomes one; false makes it a
-- table that stores its rows again.
CREATE FUNCTION counters.set_sink(source regclass, sink boolean DEFAULT true) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_sink'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_sink(regclass, boolean) IS
	'make a table a sink: inserted rows are counted by its counters and not stored (false: store them again)';

-- Citus: whether the current role has the privileges of the owner of the relation named `rel` (qualified); NULL if
-- no such relation. The row-level security of counters.counter_replica calls it on every node.
CREATE FUNCTION counters._owns_relation(rel text) RETURNS boolean
	LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE')
        FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(rel) $$;
COMMENT ON FUNCTION counters._owns_relation(text) IS
	'internal (Citus): whether the current role has the privileges of the owner of a relation, for the row-level security of counters.counter_replica';

-- Citus: on every copy of counters.counter_replica, a changed row makes the node's backends compile the counters of
-- its source again (counters.enable_citus() creates the trigger).
CREATE FUNCTION counters._replica_changed() RETURNS trigger
	AS 'MODULE_PATHNAME', 'counters_replica_changed'
	LANGUAGE C;
COMMENT ON FUNCTION counters._replica_changed() IS
	'internal (Citus): the trigger on counters.counter_replica that makes backends compile the counters of a changed row again';

-- Citus: keep the counters of Citus tables on every node (counters.counter_replica, a reference table). The
-- extension's owner runs it once, in a transaction of its own, before other roles declare counters over Citus
-- tables; the first such declaration by the owner does it too. Run on the coordinator.
CREATE FUNCTION counters.enable_citus() RETURNS void
	AS 'MODULE_PATHNAME', 'counters_enable_citus'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.enable_citus() IS
	'Citus: create counters.counter_replica, the counters of Citus tables on every node (once, as the extension owner)';

-- Citus: distribute a counted local table by `column` (create_distributed_table), and the tables of its counters
-- co-located with it, without counting its rows again (the capture triggers are off while Citus copies them). Every
-- counter of the table must be exact, in a table of its own, with `column` in its key. Run on the coordinator.
CREATE FUNCTION counters.distribute(source regclass, column_name text) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_distribute'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.distribute(regclass, text) IS
	'Citus: distribute a counted table and its counter tables, co-located, without counting its rows again';

-- ---------------------------------------------------------------------------------------------------------------
-- keeping up with DDL
-- ---------------------------------------------------------------------------------------------------------------

-- Before DDL that changes what a counted table holds or is: count the rows of partitions that join or leave a
-- counted table (DROP TABLE, ATTACH/DETACH PARTITION, DROP SCHEMA, DROP OWNED), and refuse what would make a counter
-- silently wrong or break writes (a counted table becoming a partition or inheritance child or parent, dropping or
-- retyping a counter table's counted columns, dropping one of a counter's own tables or views by itself).
CREATE FUNCTION counters._on_ddl_start() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'counters_on_ddl_start'
	LANGUAGE C;
CREATE EVENT TRIGGER counters_ddl_start ON ddl_command_start
	WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'DROP OWNED', 'DROP SCHEMA', 'DROP TABLE', 'DROP VIEW')
	EXECUTE FUNCTION counters._on_ddl_start();
COMMENT ON EVENT TRIGGER counters_ddl_start IS
	'counters: refuses DDL that would break a counter (dropping its relations or counted columns, inheritance, unlogged tables), warns of DDL after which writes are not counted, counts partitions that leave';
COMMENT ON FUNCTION counters._on_ddl_start() IS
	'event trigger (counters_ddl_start): counts partitions that join or leave a counted table, refuses DDL that would make a counter wrong';

-- After CREATE TABLE ... PARTITION OF / ATTACH PARTITION: new partitions of a counted table get their triggers.
-- After a column of an existing target was renamed: the definition's alias follows. After DETACH PARTITION: the
-- table that left loses its triggers. After CREATE VIEW or ALTER VIEW: a view with a check option over a sink is
-- refused (a sink's rows are never stored, so the option would never be checked). After ALTER SCHEMA ... RENAME: the
-- descriptions of counters with a relation in it name it anew. After CREATE TRIGGER of counters' triggers on a table
-- without counters (a restore creates them after loading the data): the counters the descriptions of its views
-- describe are declared again (Adopt).
CREATE FUNCTION counters._on_ddl_end() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'counters_on_ddl_end'
	LANGUAGE C;
CREATE EVENT TRIGGER counters_ddl_end ON ddl_command_end
	WHEN TAG IN ('ALTER SCHEMA', 'ALTER TABLE', 'ALTER VIEW', 'CREATE TABLE', 'CREATE TRIGGER', 'CREATE VIEW')
	EXECUTE FUNCTION counters._on_ddl_end();
COMMENT ON EVENT TRIGGER counters_ddl_end IS
	'counters: gives new partitions of counted tables their triggers, follows renamed counter-cache columns, declares counters again after the type of a counted column changed or from their descriptions when a restore creates their triggers';
COMMENT ON FUNCTION counters._on_ddl_end() IS
	'event trigger (counters_ddl_end): new partitions get the capture triggers, renamed target columns are followed';

-- When a source, counter table or definition view is dropped, the counter goes with it (catalog row, what remains of
-- its view and tables, the triggers once no counter of the source is left), as far as the role that dropped may
-- drop: what it may not stays, and is reported.
CREATE FUNCTION counters._on_sql_drop() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'counters_on_sql_drop'
	LANGUAGE C;
CREATE EVENT TRIGGER counters_sql_drop ON sql_drop
	EXECUTE FUNCTION counters._on_sql_drop();
COMMENT ON EVENT TRIGGER counters_sql_drop IS
	'counters: a counter whose source, table or view was dropped goes with it';
COMMENT ON FUNCTION counters._on_sql_drop() IS
	'event trigger (counters_sql_drop): a counter whose source, table or view was dropped goes with it';

-- ---------------------------------------------------------------------------------------------------------------
-- modes and compaction
-- ---------------------------------------------------------------------------------------------------------------

-- Fold pending deltas into the totals, one key at a time in sorted order, in one statement: readers see the pending
-- rows or their folded sum, never both or neither. Log mode: every log row (writers keep appending and are never
-- blocked). Sharded mode: the slot rows no transaction holds (busy slots wait for the next compaction). Then deletes
-- expired buckets (apply_retention). Returns the number of rows folded. Each counter is folded as its owner; without
-- a name, the counters the caller may maintain, each on its own (one that fails is reported and the others go on).
CREATE FUNCTION counters.compact(name text DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'counters_compact'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.compact(text) IS
	'fold the log or idle slots of one or all counters into their totals, then apply retentions; returns rows folded';

-- On a Citus worker: fold this node's log or slots shards of one counter into their co-located totals shards; returns
-- the rows folded and the crossings of its thresholds ({"folded": n, "crossings": [...]}), which the coordinator's
-- compact(name), its caller on every worker, announces.
CREATE FUNCTION counters.compact_placements(name text) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'counters_compact_placements'
	LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION counters.compact_placements(text) IS
	'on a Citus worker: fold this node''s placements of a counter; the coordinator''s compact() calls it and announces the crossings';

-- The k largest keys of a counter by one value column, exactly, as of the caller's snapshot (read with the caller's
-- rights). In log or sharded mode it reads the top k + m keys of the totals (add an index on the column to make that
-- an index scan) plus the m keys that have pending deltas. `filter` is an SQL condition on the counter's columns,
-- e.g. 'blog_id = 7' (key columns only in log and sharded mode).
CREATE FUNCTION counters.top(name text, column_name text, k integer, filter text DEFAULT NULL)
	RETURNS TABLE (key jsonb, value numeric)
	AS 'MODULE_PATHNAME', 'counters_top'
	LANGUAGE C STABLE;
COMMENT ON FUNCTION counters.top(text, text, integer, text) IS
	'the k largest keys of a counter by one value column, exactly, as of the caller''s snapshot';

-- The same rows in the counter's own row type: counter is a value of the row type of the relation the counter is
-- read from (its table, or in log and sharded mode its view), usually NULL::<that relation>, e.g.
--   SELECT post_id, likes FROM counters.top(NULL::post_likes, 'likes', 10);
-- (a string literal as first argument still calls the form above: an unknown-type argument prefers text)
CREATE FUNCTION counters.top(counter anyelement, column_name text, k integer, filter text DEFAULT NULL)
	RETURNS SETOF anyelement
	AS 'MODULE_PATHNAME', 'counters_top_rows'
	LANGUAGE C STABLE;
COMMENT ON FUNCTION counters.top(anyelement, text, integer, text) IS
	'the k largest keys of a counter by one value column, exactly, as rows of the counter''s own row type';

-- ---------------------------------------------------------------------------------------------------------------
-- bounds and thresholds
-- ---------------------------------------------------------------------------------------------------------------

-- Bounds on one value column of an exact counter (NULL = unbounded; calling again replaces them, two NULLs remove
-- them). A statement whose deltas would move a value outside its bounds fails with check_violation (23514) and
-- changes nothing; checked while the counter row is locked. Bounds that current values already break are refused
-- (the source is locked against writes meanwhile).
CREATE FUNCTION counters.set_bounds(name text, column_name text, min numeric DEFAULT NULL, max numeric DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_bounds'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_bounds(text, text, numeric, numeric) IS
	'bounds on a value column of an exact counter: statements that would cross them fail with 23514';

-- Thresholds on one value column (calling again replaces them; an empty array and no "every" removes them): the
-- crossings, up and down, and the callback's arguments are in docs/decisions.md and docs/security.md.
CREATE FUNCTION counters.set_thresholds(name text, column_name text, thresholds numeric[] DEFAULT NULL,
	callback regprocedure DEFAULT NULL, every numeric DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_thresholds'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_thresholds(text, text, numeric[], regprocedure, numeric) IS
	'thresholds on a value column (listed, or every multiple of a step; exact and counter-cache counters cross them as they are written, log and sharded ones when compaction folds them): each crossing calls the callback as the counter''s owner and sends NOTIFY "counters.<name>" naming the counter and the column';

-- ---------------------------------------------------------------------------------------------------------------
-- time windows
-- ---------------------------------------------------------------------------------------------------------------

-- Keep only recent time buckets of a counter keyed by one (a key column of type date, timestamp or timestamptz):
-- buckets older than now() - keep are deleted by apply_retention() (which compact(), the worker and a pg_cron job
-- call), and deltas to them are dropped by the trigger. verify() and rebuild() compare only the buckets kept. keep
-- NULL removes the retention. For timestamp (without time zone) buckets the horizon is computed in the session's
-- time zone: keep writers and the compacting job in one TimeZone (UTC is simplest).
CREATE FUNCTION counters.set_retention(name text, column_name text, keep interval) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_retention'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_retention(text, text, interval) IS
	'keep only time buckets newer than now() - keep (a date, timestamp or timestamptz key); NULL removes it';

-- A timestamp column of a counter-cache counter's target table, set to the transaction's start time whenever the
-- counter changes that row's values (for cache keys, as Rails counter_culture's touch). Kept by name: renaming the
-- column makes writes fail naming the counter until set_touch is called again. NULL removes it.
CREATE FUNCTION counters.set_touch(name text, column_name text) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_touch'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_touch(text, text) IS
	'a timestamp column of a counter-cache target set to the transaction start time when the counter changes the row; NULL removes it';

-- Rows of an exact counter whose values all come back to zero stay, with zeros, instead of being deleted (an absent
-- row means zeros): for ORMs that read a missing row as a missing object. Keys never counted still have no row.
-- false removes it (zero rows then go when next written, or at rebuild).
CREATE FUNCTION counters.set_keep_zero(name text, keep boolean DEFAULT true) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_keep_zero'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_keep_zero(text, boolean) IS
	'keep rows of an exact counter whose values all come back to zero (false: delete them again)';

-- Deferred counters: a transaction's deltas of the counter are summed until it commits and applied then, once per
-- key, in sorted key order (so its rows are locked only at the end, in one order: no deadlock between transactions
-- that write keys in different orders). Like DEFERRABLE INITIALLY DEFERRED: SET LOCAL counters.apply = immediate (or
-- deferred) overrides it for a transaction, and counters.apply_deferred() applies what is held now. Readers see the
-- counter without the transaction's held deltas until then; bounds fail the commit (23514). See docs/decisions.md.
CREATE FUNCTION counters.set_deferred(name text, deferred boolean DEFAULT true) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_deferred'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_deferred(text, boolean) IS
	'apply the counter''s deltas at commit instead of at the end of each statement (false: at each statement again)';

CREATE FUNCTION counters.apply_deferred() RETURNS bigint
	AS 'MODULE_PATHNAME', 'counters_apply_deferred'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.apply_deferred() IS
	'apply the deltas this transaction''s deferred counters hold, now (returns the keys written)';

-- Thresholds on a sliding-window sum: for each prefix (the key columns but `bucket_column`, a date/timestamp/timestamptz
-- key), the sum of `column_name` over the rows whose bucket is later than now() - `width`. Crossings up and down are
-- announced once, like thresholds' (NOTIFY "counters.<name>" at commit, with "window" in the payload, and the callback
-- with old NULL): by the statement that writes a prefix, and by counters.check_windows() (compact() calls it) for
-- buckets ageing out. One window per counter; exact counters with a table of their own. NULL or '{}' removes the
-- column's thresholds.
CREATE FUNCTION counters.set_window_thresholds(name text, column_name text, thresholds numeric[],
                                               bucket_column text DEFAULT NULL, width interval DEFAULT NULL,
                                               callback regprocedure DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_window_thresholds'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_window_thresholds(text, text, numeric[], text, interval, regprocedure) IS
	'thresholds on the sum of a value column over a sliding window of time buckets, per prefix of the other keys';

-- Check the window sums of one or all counters the caller maintains (buckets ageing out, writes missed); returns the
-- crossings announced. compact() calls it.
CREATE FUNCTION counters.check_windows(name text DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'counters_check_windows'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.check_windows(text) IS
	'announce window threshold crossings that no write announced (buckets ageing out); returns how many';

-- The element of a counter table's key index for a key of an unbounded string type (text, bytea, varchar or char
-- without a short length limit): its bytes when short, else a tag and their SHA-256, so that a key of any length
-- fits a btree entry; a row found by it is compared with the key exactly. IMMUTABLE: an index expression.
CREATE FUNCTION counters.key_digest(key text) RETURNS bytea
	AS 'MODULE_PATHNAME', 'counters_key_digest_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION counters.key_digest(text) IS
	'the digest a counter table''s key index holds for a long text key (its bytes when short, else their SHA-256)';
CREATE FUNCTION counters.key_digest(key bytea) RETURNS bytea
	AS 'MODULE_PATHNAME', 'counters_key_digest_bytea'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION counters.key_digest(bytea) IS
	'the digest a counter table''s key index holds for a long bytea key (its bytes when short, else their SHA-256)';

-- Which window thresholds each prefix is at or above, as announced, for the counters (one, or all) whose values the
-- caller may read (SELECT on the relation they are read from). Each counter keeps them in a table of its owner's,
-- counters.counter.crossings.
CREATE FUNCTION counters.window_state(name text DEFAULT NULL)
	RETURNS TABLE (counter text, column_name text, prefix jsonb, threshold numeric, crossed_at timestamptz)
	AS 'MODULE_PATHNAME', 'counters_window_state'
	LANGUAGE C STABLE;
COMMENT ON FUNCTION counters.window_state(text) IS
	'the window thresholds each prefix is at or above, for the counters the caller may read';

-- Delete the expired buckets of one or all counters with a retention (from the totals and the log or slots too), as
-- each counter's owner; returns the number of rows deleted. counters.compact() calls it.
CREATE FUNCTION counters.apply_retention(name text DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'counters_apply_retention'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.apply_retention(text) IS
	'delete expired time buckets of one or all counters now; returns rows deleted';

-- ---------------------------------------------------------------------------------------------------------------
-- verify and repair
-- ---------------------------------------------------------------------------------------------------------------

-- One row per counter value that differs from its definition recomputed now, in one snapshot per counter (a plain
-- read: it takes no lock that blocks writers). A missing counter row counts as zeros; for a counter kept in an
-- existing table, keys that have no row there are not reported (their deltas are skipped by design); with a
-- retention, buckets older than it are not compared. The recount runs as the counter's owner with row_security off.
-- Without a name: every counter the caller may read; each run is recorded in counters.maintenance.
CREATE FUNCTION counters.verify(name text DEFAULT NULL)
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
CREATE FUNCTION counters.rebuild(name text DEFAULT NULL, condition text DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'counters_rebuild'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.rebuild(text, text) IS
	'make stored counters equal to their definitions, only the keys that differ; returns rows changed';

-- rebuild() without blocking writers: CALL outside a transaction block. Three transactions: switch to log mode (a
-- short lock), refill the totals as of one snapshot keeping the deltas logged after it pending, switch back. Not for
-- counters kept in columns of an existing table, nor for counters with bounds (they need exact mode).
CREATE PROCEDURE counters.rebuild_concurrently(name text)
	AS 'MODULE_PATHNAME', 'counters_rebuild_concurrently'
	LANGUAGE C;
COMMENT ON PROCEDURE counters.rebuild_concurrently(text) IS
	'make a counter equal to its definition without blocking writers (three transactions; CALL outside a transaction block)';
