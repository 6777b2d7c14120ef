-- counters 0.4 to 0.5 (complain if this file is sourced in psql rather than through ALTER EXTENSION)
\echo Use "ALTER EXTENSION counters UPDATE TO '0.5'" to load this file. \quit

-- Two functions are replaced by ones with a new last argument (set_thresholds, alter_counter). Each keeps the
-- privileges a DBA granted or revoked on the old one: its ACL is read before the DROP (into a setting of this
-- transaction) and given to the new function after the CREATE. (They become the function's initial privileges, which
-- pg_dump does not dump: see the CHANGELOG.)
CREATE FUNCTION counters._keep_privileges(old text, fn regprocedure) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	g record;
BEGIN
	IF coalesce(old, '') = '' THEN
		RETURN; /* the default privileges, as the new function has */
	END IF;
	EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
	FOR g IN SELECT a.grantee, a.is_grantable FROM aclexplode(old::aclitem[]) a WHERE a.privilege_type = 'EXECUTE' LOOP
		EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s%s', fn,
		               CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(g.grantee)) END,
		               CASE WHEN g.is_grantable AND g.grantee <> 0 THEN ' WITH GRANT OPTION' ELSE '' END);
	END LOOP;
END $$;

-- counters.maintenance: the compactions' history (how many, rows folded, time; the last one's rows and time).
ALTER TABLE counters.maintenance ADD COLUMN compactions bigint, ADD COLUMN compacted_rows bigint,
	ADD COLUMN compact_time double precision, ADD COLUMN last_compact_rows bigint,
	ADD COLUMN last_compact_time double precision, ADD COLUMN compact_failures bigint,
	ADD COLUMN suspended_at timestamptz;
COMMENT ON TABLE counters.maintenance IS
	'when verify(), compact() and rebuild() last ran for each counter, the last compaction error, and the compactions'' history';
-- counters.stats: source_writes of a partitioned source add its partitions' writes; building and stats_reset; the
-- compactions' history; per-counter calls and time of the write path (with shared_preload_libraries).
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
COMMENT ON VIEW counters.stats IS
	'one row per counter: table sizes and writes from the cumulative statistics (since stats_reset), the last maintenance runs, and whether it is being built concurrently';

-- ---- typed top(): counters.top(counter anyelement, ...) returns rows of the counter's own row type ----
CREATE FUNCTION counters.top(counter anyelement, column_name text, k integer, filter text DEFAULT NULL)
	RETURNS SETOF anyelement
	AS 'MODULE_PATHNAME', 'counters_top_rows'
	LANGUAGE C STABLE;
COMMENT ON FUNCTION counters.top(anyelement, text, integer, text) IS
	'the k largest keys of a counter by one value column, exactly, as rows of the counter''s own row type';
-- ---- end of typed top() ----
-- Repeating thresholds: set_thresholds takes `every` (a new last argument, so the function is replaced, keeping its
-- privileges), and counters.thresholds shows it (as its last column).
SELECT pg_catalog.set_config('counters_update.acl', p.proacl::text, true)
  FROM pg_catalog.pg_proc p WHERE p.oid = 'counters.set_thresholds(text, text, numeric[], regprocedure)'::regprocedure;
DROP FUNCTION counters.set_thresholds(text, text, numeric[], regprocedure);
-- every => N (N > 0) adds repeating thresholds: every multiple of N but 0 (see counters.sql).
CREATE FUNCTION counters.set_thresholds(name text, column_name text, thresholds numeric[] DEFAULT NULL,
	callback regprocedure DEFAULT NULL, every numeric DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_thresholds'
	LANGUAGE C VOLATILE;
SELECT counters._keep_privileges(pg_catalog.current_setting('counters_update.acl', true),
                                 'counters.set_thresholds(text, text, numeric[], regprocedure, numeric)');
COMMENT ON FUNCTION counters.set_thresholds(text, text, numeric[], regprocedure, numeric) IS
	'thresholds on a value column (listed, or every multiple of a step; exact and counter-cache counters cross them as they are written, log and sharded ones when compaction folds them): each crossing calls the callback as the counter''s owner and sends NOTIFY "counters.<name>" naming the counter and the column';

-- The views of bounds and thresholds read the options in C (counters.sql), as every other reader does.
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
CREATE OR REPLACE VIEW counters.bounds AS
SELECT c.name AS counter, b.column_name, b.min, b.max
  FROM counters.counter c, counters._bounds(c.options) b;
CREATE OR REPLACE VIEW counters.thresholds AS
SELECT c.name AS counter, t.column_name, t.thresholds, t.callback,
       'counters.' OPERATOR(pg_catalog.||) c.name AS channel, t.every
  FROM counters.counter c, counters._thresholds(c.options) t;
COMMENT ON VIEW counters.thresholds IS
	'thresholds set with counters.set_thresholds() (listed, and the step of repeating ones) and the NOTIFY channel of each';

-- ---- counter-cache touch ----
-- A timestamp column of a counter-cache counter's target table, set to the transaction's start time whenever the
-- counter changes that row's values (for cache keys, as Rails counter_culture's touch). Kept by name: renaming the
-- column makes writes fail naming the counter until set_touch is called again. NULL removes it.
CREATE FUNCTION counters.set_touch(name text, column_name text) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_touch'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_touch(text, text) IS
	'a timestamp column of a counter-cache target set to the transaction start time when the counter changes the row; NULL removes it';
-- ---- end of counter-cache touch ----

-- ---- sinks ----
-- A sink: rows inserted into `source` are counted by its counters and never stored (a BEFORE INSERT row trigger,
-- zz_counters_sink, counts each row after checking its NOT NULL and CHECK constraints, and returns NULL); UPDATE and
-- DELETE are refused; TRUNCATE zeroes its counters. Only an empty table with counters becomes one; false makes it a
-- table that stores its rows again.
CREATE FUNCTION counters.set_sink(source regclass, sink boolean DEFAULT true) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_sink'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_sink(regclass, boolean) IS
	'make a table a sink: inserted rows are counted by its counters and not stored (false: store them again)';
-- ---- end of sinks ----

-- ---- concurrent declaring and rebuilding ----
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

-- rebuild() without blocking writers: CALL outside a transaction block. Three transactions: switch to log mode (a
-- short lock), refill the totals as of one snapshot keeping the deltas logged after it pending, switch back. Not for
-- counters kept in columns of an existing table, nor for counters with bounds (they need exact mode).
CREATE PROCEDURE counters.rebuild_concurrently(name text)
	AS 'MODULE_PATHNAME', 'counters_rebuild_concurrently'
	LANGUAGE C;
COMMENT ON PROCEDURE counters.rebuild_concurrently(text) IS
	'make a counter equal to its definition without blocking writers (three transactions; CALL outside a transaction block)';
-- ---- end of concurrent declaring and rebuilding ----

-- ---- alter_counter(definition => ...) ----
-- A new last argument (and mode may be NULL): the function is replaced, keeping its privileges.
SELECT pg_catalog.set_config('counters_update.acl', p.proacl::text, true)
  FROM pg_catalog.pg_proc p WHERE p.oid = 'counters.alter_counter(text, text, integer)'::regprocedure;
DROP FUNCTION counters.alter_counter(text, text, integer);
-- definition => a new definition: the counter is dropped and declared again in one transaction (writers of the source
-- wait, as for create_counter), in `mode` (NULL: its mode), keeping its options that still apply (bounds and
-- thresholds of value columns it still has, a retention of a key it still has, touch, max_slots) and the SELECT
-- grants of its table. CALL counters.alter_counter_concurrently(name, definition) does it without blocking writers.
CREATE FUNCTION counters.alter_counter(name text, mode text DEFAULT NULL, max_slots integer DEFAULT NULL,
                                       definition text DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_alter_counter'
	LANGUAGE C VOLATILE;
SELECT counters._keep_privileges(pg_catalog.current_setting('counters_update.acl', true),
                                 'counters.alter_counter(text, text, integer, text)');
COMMENT ON FUNCTION counters.alter_counter(text, text, integer, text) IS
	'switch a counter between exact, sharded and log mode (values exact throughout), change max_slots, or change its definition';

-- alter_counter(name, definition => ...) without blocking writers: CALL outside a transaction block. The new definition
-- is declared concurrently under a temporary name (create_counter_concurrently's steps, in the counter's mode); then
-- writers wait while the counter is dropped and the new one takes its name, options and grants. Not for counters kept
-- in columns of an existing table.
CREATE PROCEDURE counters.alter_counter_concurrently(name text, definition text)
	AS 'MODULE_PATHNAME', 'counters_alter_counter_concurrently'
	LANGUAGE C;
COMMENT ON PROCEDURE counters.alter_counter_concurrently(text, text) IS
	'change a counter''s definition without blocking writers (CALL outside a transaction block)';
-- ---- end of alter_counter(definition => ...) ----

-- ---- keep_zero ----
-- Rows of an exact counter whose values all come back to zero stay, with zeros, instead of being deleted (an absent
-- row means zeros): for ORMs that read a missing row as a missing object. Keys never counted still have no row.
-- false removes it (zero rows then go when next written, or at rebuild).
CREATE FUNCTION counters.set_keep_zero(name text, keep boolean DEFAULT true) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_keep_zero'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.set_keep_zero(text, boolean) IS
	'keep rows of an exact counter whose values all come back to zero (false: delete them again)';
-- ---- end of keep_zero ----

-- ---- deferred ----
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
-- ---- end of deferred ----

-- ---- window thresholds ----
-- Which thresholds of its window each prefix's window sum is at or above, as announced: a table of the counter's
-- owner, dumped with the counter's tables.
ALTER TABLE counters.counter ADD COLUMN crossings regclass;

-- The catalog's rows are no longer dumped: a dump keeps each counter as the comment of its definition view, from which
-- a restored database declares it again, as the view's owner could (no role needs to write the catalog to restore).
-- Dropping the table from the extension and adding it back takes it out of the extension's configuration tables.
ALTER EXTENSION counters DROP TABLE counters.counter;
ALTER EXTENSION counters ADD TABLE counters.counter;
-- A row of counters.counter inserted by anyone but the extension's functions (only a superuser may: a restore of a
-- dump made by an earlier version, which dumped the rows, or a row typed by hand) is a declaration like any other: it
-- is validated as declaring validates it, for the inserting role, and its options are written back in their typed form.
CREATE FUNCTION counters._catalog_row() RETURNS trigger
	AS 'MODULE_PATHNAME', 'counters_catalog_row'
	LANGUAGE C;
CREATE TRIGGER catalog_row BEFORE INSERT ON counters.counter FOR EACH ROW EXECUTE FUNCTION counters._catalog_row();

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

CREATE FUNCTION counters.window_state(name text DEFAULT NULL)
	RETURNS TABLE (counter text, column_name text, prefix jsonb, threshold numeric, crossed_at timestamptz)
	AS 'MODULE_PATHNAME', 'counters_window_state'
	LANGUAGE C STABLE;
COMMENT ON FUNCTION counters.window_state(text) IS
	'the window thresholds each prefix is at or above, for the counters the caller may read';
-- ---- end of window thresholds ----

-- ---- Citus ----
-- Citus: distribute a counted local table by `column` (create_distributed_table), and the tables of its counters
-- co-located with it, without counting its rows again (the capture triggers are off while Citus copies them). Every
-- counter of the table must be exact, in a table of its own, with `column` in its key. Run on the coordinator.
CREATE FUNCTION counters.distribute(source regclass, column_name text) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_distribute'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.distribute(regclass, text) IS
	'Citus: distribute a counted table and its counter tables, co-located, without counting its rows again';

-- Citus: keep the counters of Citus tables on every node (counters.counter_replica, a reference table). The
-- extension's owner runs it once, in a transaction of its own, before other roles declare counters over Citus
-- tables; the first such declaration by the owner does it too. Run on the coordinator.
CREATE FUNCTION counters.enable_citus() RETURNS void
	AS 'MODULE_PATHNAME', 'counters_enable_citus'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.enable_citus() IS
	'Citus: create counters.counter_replica, the counters of Citus tables on every node (once, as the extension owner)';

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

-- ---- views with a check option over sinks are refused ----
-- counters_ddl_end fires after CREATE VIEW and ALTER VIEW too: a view whose check option would never be checked on
-- the rows of a sink is refused; after ALTER SCHEMA, whose rename the definition views' descriptions follow; and after
-- CREATE TRIGGER, when a restore creates the triggers of counters the catalog has no row of, which it declares again
-- from their descriptions (an event trigger's tags cannot be altered: it is created again).
DROP EVENT TRIGGER counters_ddl_end;
CREATE EVENT TRIGGER counters_ddl_end ON ddl_command_end
	WHEN TAG IN ('ALTER SCHEMA', 'ALTER TABLE', 'ALTER VIEW', 'CREATE TABLE', 'CREATE TRIGGER', 'CREATE VIEW')
	EXECUTE FUNCTION counters._on_ddl_end();
COMMENT ON EVENT TRIGGER counters_ddl_end IS
	'counters: gives new partitions of counted tables their triggers, follows renamed counter-cache columns, declares counters again after the type of a counted column changed or from their descriptions when a restore creates their triggers';
-- ---- end of views over sinks ----

-- ---- a counter's own relations are guarded ----
-- counters_ddl_start fires for DROP VIEW too: a counter's definition view, and the view of log and sharded mode, are
-- dropped with the counter (drop_counter), not by themselves; so are its tables. (Created again: an event trigger's
-- tags cannot be altered.) Their TRUNCATE is refused by the trigger counters_guard, which attach() creates.
DROP EVENT TRIGGER counters_ddl_start;
CREATE EVENT TRIGGER counters_ddl_start ON ddl_command_start
	WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'DROP OWNED', 'DROP SCHEMA', 'DROP TABLE', 'DROP VIEW')
	EXECUTE FUNCTION counters._on_ddl_start();
COMMENT ON EVENT TRIGGER counters_ddl_start IS
	'counters: refuses DDL that would break a counter (dropping its relations or counted columns, inheritance, unlogged tables), warns of DDL after which writes are not counted, counts partitions that leave';
-- ---- end of guarded relations ----

-- ---- the triggers of counter caches and of counters' own tables ----
-- An existing table that keeps counter-cache columns gets the trigger counters_target_key (BEFORE UPDATE OF the key
-- columns): a row whose key changes takes the new key's values, recounted; a counter's own tables get
-- counters_guard (BEFORE TRUNCATE). A counted table gets counters_replica and counters_replica_truncate, enabled for
-- the replica role only, which count the changes logical replication applies (docs/replication.md). attach() of each
-- counted table creates them (and changes nothing else: its other triggers exist).
SELECT counters.attach(s.source) FROM (SELECT DISTINCT c.source FROM counters.counter c) s;
-- ---- end of the triggers ----

-- ---- a counter belongs to the owner of the table it counts ----
-- 0.1 to 0.4 made a counter's tables and views the declaring role's: a superuser's declaration over an application's
-- table left the application unable to read or change its counter, and ran the application's code as the superuser.
-- The counter's own relations (its table, the view, totals and log of log and sharded mode, its definition view) now
-- go to the owner of its source, as a new declaration would make them; a counter kept in columns of an existing table
-- belongs to that table's owner already.
DO $$
DECLARE
	c record;
	rel pg_catalog.regclass;
	kind pg_catalog.text;
BEGIN
	FOR c IN SELECT k.name, k.query, k.target, k.totals, k.log, s.relowner AS source_owner
	           FROM counters.counter k
	           JOIN pg_catalog.pg_class s ON s.oid OPERATOR(pg_catalog.=) k.source
	           JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) COALESCE(k.totals, k.target)
	          WHERE k.owns_target AND t.relowner OPERATOR(pg_catalog.<>) s.relowner
	          ORDER BY k.name LOOP
		FOR rel, kind IN SELECT r.oid, CASE WHEN r.relkind OPERATOR(pg_catalog.=) 'v' THEN 'VIEW' ELSE 'TABLE' END
		                   FROM pg_catalog.pg_class r
		                  WHERE r.oid OPERATOR(pg_catalog.=) ANY (ARRAY[c.query, c.target, c.totals, c.log]) LOOP
			EXECUTE pg_catalog.format('ALTER %s %s OWNER TO %I', kind, rel, pg_catalog.pg_get_userbyid(c.source_owner));
		END LOOP;
		RAISE NOTICE 'counter "%": its tables and views now belong to %, the owner of the table it counts', c.name,
			pg_catalog.pg_get_userbyid(c.source_owner);
	END LOOP;
END $$;
-- ---- end of ownership ----

COMMENT ON EVENT TRIGGER counters_sql_drop IS
	'counters: a counter whose source, table or view was dropped goes with it';

DROP FUNCTION counters._keep_privileges(text, regprocedure);

-- On a Citus worker: fold this node's log or slots shards of one counter into their co-located totals shards; returns
-- the rows folded and the crossings of its thresholds ({"folded": n, "crossings": [...]}), which the coordinator's
-- compact(name), its caller on every worker, announces.
CREATE FUNCTION counters.compact_placements(name text) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'counters_compact_placements'
	LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION counters.compact_placements(text) IS
	'on a Citus worker: fold this node''s placements of a counter; the coordinator''s compact() calls it and announces the crossings';
