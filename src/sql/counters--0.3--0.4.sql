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
       s.n_tup_ins + s.n_tup_upd + s.n_tup_del AS source_writes,
       (SELECT f.calls FROM pg_catalog.pg_stat_user_functions f
         WHERE f.funcid = 'counters.capture()'::pg_catalog.regprocedure) AS trigger_calls,
       m.rebuilt_at AS last_rebuild,
       m.verified_at AS last_verify,
       m.verify_wrong AS last_verify_wrong,
       m.compacted_at AS last_compact,
       m.compact_error AS last_compact_error
  FROM counters.counter c
  LEFT JOIN pg_catalog.pg_stat_all_tables t ON t.relid = COALESCE(c.totals, c.target)
  LEFT JOIN pg_catalog.pg_stat_all_tables l ON l.relid = c.log
  LEFT JOIN pg_catalog.pg_stat_all_tables s ON s.relid = c.source
  LEFT JOIN counters.maintenance m ON m.counter = c.name;

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
-- C functions: the catalog is written only after the caller's rights on every relation are checked
-- ---------------------------------------------------------------------------------------------------------------

CREATE FUNCTION counters._forget(name text,
	OUT source regclass, OUT target regclass, OUT query regclass, OUT owns_target boolean)
	RETURNS record
	AS 'MODULE_PATHNAME', 'counters_forget'
	LANGUAGE C STRICT VOLATILE;

CREATE FUNCTION counters._require_owner(name text) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_require_owner'
	LANGUAGE C STRICT STABLE;

-- (0.2 revoked it from PUBLIC; it checks the caller's rights, and non-superuser owners need it)
GRANT EXECUTE ON FUNCTION counters._set_option(text, text, jsonb) TO PUBLIC;

-- (verify, rebuild, compact and apply_retention become C functions; the others change)
-- Attach the capture triggers to a source table: INSERT, UPDATE and DELETE statement triggers with transition tables
-- on the table and (for a partitioned table) on every partition, since statement triggers of a parent do not fire for
-- statements that name a partition; a BEFORE statement trigger that prepares the statement's delta collection;
-- TRUNCATE handling on the table or on each leaf partition. Idempotent.
CREATE OR REPLACE FUNCTION counters.attach(source regclass) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	rel regclass;
	leaf boolean;
	kind "char";
BEGIN
	-- pg_partition_tree() lists nothing for a table that is not partitioned.
	FOR rel, leaf IN
		SELECT source, true WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_partition_tree(source))
		UNION ALL
		SELECT t.relid, t.isleaf FROM pg_catalog.pg_partition_tree(source) t
	LOOP
		SELECT c.relkind INTO kind FROM pg_catalog.pg_class c WHERE c.oid = rel;
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t WHERE t.tgrelid = rel AND t.tgname = 'counters_begin') THEN
			EXECUTE pg_catalog.format('CREATE TRIGGER counters_begin BEFORE INSERT OR UPDATE OR DELETE ON %s '
				'FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()', rel);
		END IF;
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t WHERE t.tgrelid = rel AND t.tgname = 'counters_insert') THEN
			EXECUTE pg_catalog.format('CREATE TRIGGER counters_insert AFTER INSERT ON %s '
				'REFERENCING NEW TABLE AS counters_new FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()', rel);
		END IF;
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t WHERE t.tgrelid = rel AND t.tgname = 'counters_update') THEN
			EXECUTE pg_catalog.format('CREATE TRIGGER counters_update AFTER UPDATE ON %s '
				'REFERENCING OLD TABLE AS counters_old NEW TABLE AS counters_new '
				'FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()', rel);
		END IF;
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t WHERE t.tgrelid = rel AND t.tgname = 'counters_delete') THEN
			EXECUTE pg_catalog.format('CREATE TRIGGER counters_delete AFTER DELETE ON %s '
				'REFERENCING OLD TABLE AS counters_old FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()', rel);
		END IF;
		-- TRUNCATE: the whole source is emptied in one go (counters are zeroed); a leaf partition's rows are
		-- subtracted before it is emptied. A partitioned table has no rows of its own: its leaves' triggers fire.
		IF kind = 'r' AND NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
		                              WHERE t.tgrelid = rel AND t.tgname = 'counters_truncate') THEN
			IF rel = source THEN
				EXECUTE pg_catalog.format('CREATE TRIGGER counters_truncate AFTER TRUNCATE ON %s '
					'FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()', rel);
			ELSE
				EXECUTE pg_catalog.format('CREATE TRIGGER counters_truncate BEFORE TRUNCATE ON %s '
					'FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()', rel);
			END IF;
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION counters.attach(regclass) IS
	'(re)create the capture triggers on a table and all its partitions; idempotent, does not recount';

-- Remove the capture triggers from a source table and its partitions.
CREATE OR REPLACE FUNCTION counters.detach(source regclass) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	rel regclass;
	trg name;
BEGIN
	FOR rel, trg IN
		SELECT t.tgrelid::regclass, t.tgname
		  FROM (SELECT source AS relid UNION SELECT p.relid FROM pg_catalog.pg_partition_tree(source) p) p
		  JOIN pg_catalog.pg_trigger t ON t.tgrelid = p.relid
		 WHERE t.tgname IN ('counters_begin', 'counters_insert', 'counters_update', 'counters_delete',
		                    'counters_truncate')
		   AND t.tgfoid = 'counters.capture()'::pg_catalog.regprocedure
	LOOP
		EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trg, rel);
	END LOOP;
END
$$;
COMMENT ON FUNCTION counters.detach(regclass) IS
	'remove the capture triggers from a table and its partitions: its counters stop being maintained';

-- The first declaration step (counters._declare runs it): create the definition view and the counter table, record
-- the counter, fill the table, attach the triggers. The fill reads the source through the definition under pinned
-- output settings, and with row_security off: a policy that would hide rows from the declaring role makes it fail
-- instead of undercounting.
CREATE OR REPLACE FUNCTION counters._create_counter(name text, definition text, target text, caller_search_path text)
	RETURNS regclass
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp SET row_security = off SET DateStyle = 'ISO, MDY'
	SET IntervalStyle = postgres SET extra_float_digits = 1 SET bytea_output = hex
AS $$
DECLARE
	src regclass;
	tgt regclass;
	owns boolean;
	tgt_schema text;
	tgt_name text;
	parts text[];
	view_name text;
	q regclass;
	col_defs text;
	key_list text;
	value_list text;
	all_keys_not_null boolean;
	nonzero text;
	join_cond text;
	missing text;
	descr counters._describe_row[];
	cur_schema name;
BEGIN
	IF name IS NULL OR pg_catalog.length(name) = 0 OR pg_catalog.length(name) > 52 THEN
		RAISE EXCEPTION 'invalid counter name %', pg_catalog.quote_literal(name)
			USING ERRCODE = 'invalid_name', DETAIL = 'A counter name has 1 to 52 characters.';
	END IF;
	IF definition IS NULL THEN
		RAISE EXCEPTION 'counter "%": the definition is null', name USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF EXISTS (SELECT FROM counters.counter c WHERE c.name = _create_counter.name) THEN
		RAISE EXCEPTION 'counter "%" already exists', name USING ERRCODE = 'duplicate_object';
	END IF;

	-- Names in the definition and the target resolve with the caller's search_path, like any SQL they type.
	PERFORM pg_catalog.set_config('search_path', caller_search_path, true);
	descr := ARRAY(SELECT ROW(d.*)::counters._describe_row FROM counters._describe(name, definition) d);
	src := descr[1].source;
	-- (Only name resolution happens here: no operator may be resolved with the caller's search_path.)
	IF target IS NOT NULL THEN
		tgt := pg_catalog.to_regclass(target);
		cur_schema := pg_catalog.current_schema();
	END IF;
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	IF target IS NOT NULL AND tgt IS NULL THEN
		parts := pg_catalog.parse_ident(target);
		IF pg_catalog.array_length(parts, 1) = 1 THEN
			tgt_schema := cur_schema;
			tgt_name := parts[1];
		ELSIF pg_catalog.array_length(parts, 1) = 2 THEN
			tgt_schema := parts[1];
			tgt_name := parts[2];
		ELSE
			RAISE EXCEPTION 'counter "%": invalid target name %', name, pg_catalog.quote_literal(target)
				USING ERRCODE = 'invalid_name';
		END IF;
		IF tgt_schema IS NULL THEN
			RAISE EXCEPTION 'counter "%": no schema has been selected to create target %', name, target
				USING ERRCODE = 'invalid_schema_name';
		END IF;
	END IF;

	-- No write may slip between the initial fill and the trigger: block writers of the source until commit.
	EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', src);

	owns := tgt IS NULL;
	IF tgt IS NULL AND tgt_name IS NULL THEN
		SELECT n.nspname, name INTO tgt_schema, tgt_name
		  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		 WHERE c.oid = src;
	END IF;
	IF tgt IS NOT NULL THEN
		SELECT n.nspname INTO tgt_schema
		  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		 WHERE c.oid = tgt;
	END IF;

	SELECT pg_catalog.string_agg(pg_catalog.quote_ident(d.column_name), ', ' ORDER BY d.ord) FILTER (WHERE d.is_key),
	       pg_catalog.string_agg(pg_catalog.quote_ident(d.column_name), ', ' ORDER BY d.ord) FILTER (WHERE NOT d.is_key),
	       pg_catalog.string_agg(pg_catalog.format('COALESCE(q.%I, 0) OPERATOR(pg_catalog.<>) 0', d.column_name),
	                             ' OR ' ORDER BY d.ord) FILTER (WHERE NOT d.is_key),
	       pg_catalog.bool_and(d.not_null) FILTER (WHERE d.is_key)
	  INTO key_list, value_list, nonzero, all_keys_not_null
	  FROM pg_catalog.unnest(descr) WITH ORDINALITY AS d(source, column_name, is_key, column_type, not_null, ord);

	-- The definition becomes a view next to the counter table: PostgreSQL tracks what it depends on, renames follow
	-- it, pg_dump dumps it as SQL, and selecting from it recomputes the counter from scratch.
	view_name := name || '_definition';
	PERFORM pg_catalog.set_config('search_path', caller_search_path, true);
	EXECUTE pg_catalog.format('CREATE VIEW %I.%I AS %s', tgt_schema, view_name, definition);
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	q := pg_catalog.format('%I.%I', tgt_schema, view_name)::regclass;

	IF owns THEN
		SELECT pg_catalog.string_agg(pg_catalog.format('%I %s%s', d.column_name, d.column_type,
		                             CASE WHEN d.is_key THEN '' ELSE ' NOT NULL DEFAULT 0' END), ', ')
		  INTO col_defs FROM pg_catalog.unnest(descr) d;
		IF all_keys_not_null THEN
			col_defs := col_defs || pg_catalog.format(', PRIMARY KEY (%s)', key_list);
		ELSE
			col_defs := col_defs || pg_catalog.format(', UNIQUE NULLS NOT DISTINCT (%s)', key_list);
		END IF;
		EXECUTE pg_catalog.format('CREATE TABLE %I.%I (%s)', tgt_schema, tgt_name, col_defs);
		tgt := pg_catalog.format('%I.%I', tgt_schema, tgt_name)::regclass;
		-- A table published for logical replication needs a replica identity to publish its updates and deletes;
		-- keys that may be NULL cannot make one.
		IF NOT all_keys_not_null THEN
			EXECUTE pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY FULL', tgt);
		END IF;
		PERFORM counters._register(name, q, tgt, owns);
		-- Rows whose values are all zero are not stored (the trigger deletes them too).
		EXECUTE pg_catalog.format('INSERT INTO %s (%s, %s) SELECT %s, %s FROM %s q WHERE %s',
			tgt, key_list, value_list, key_list,
			(SELECT pg_catalog.string_agg(pg_catalog.format('COALESCE(q.%I, 0)', d.column_name), ', ')
			   FROM pg_catalog.unnest(descr) d WHERE NOT d.is_key),
			q, nonzero);
	ELSE
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(d.column_name), ', ')
		  INTO missing
		  FROM pg_catalog.unnest(descr) d
		 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
		                    WHERE a.attrelid = tgt AND a.attname = d.column_name AND a.attnum > 0
		                      AND NOT a.attisdropped);
		IF missing IS NOT NULL THEN
			RAISE EXCEPTION 'counter "%": target table % has no column %', name, tgt, missing
				USING ERRCODE = 'undefined_column',
				      HINT = 'The key and value aliases of the definition must name columns of the target table.';
		END IF;
		SELECT pg_catalog.string_agg(pg_catalog.format('%I (%s)', d.column_name,
		                             pg_catalog.format_type(a.atttypid, a.atttypmod)), ', ')
		  INTO missing
		  FROM pg_catalog.unnest(descr) d
		  JOIN pg_catalog.pg_attribute a ON a.attrelid = tgt AND a.attname = d.column_name
		 WHERE NOT d.is_key
		   AND a.atttypid NOT IN ('pg_catalog.int2'::regtype, 'pg_catalog.int4'::regtype,
		                          'pg_catalog.int8'::regtype, 'pg_catalog.numeric'::regtype);
		IF missing IS NOT NULL THEN
			RAISE EXCEPTION 'counter "%": target column % is not of an integer or numeric type', name, missing
				USING ERRCODE = 'datatype_mismatch';
		END IF;
		IF NOT EXISTS (
			SELECT FROM pg_catalog.pg_index i
			 WHERE i.indrelid = tgt AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
			   AND i.indisvalid
			   AND (SELECT pg_catalog.array_agg(a.attname ORDER BY a.attname)
			          FROM pg_catalog.pg_attribute a
			         WHERE a.attrelid = tgt AND a.attnum = ANY (i.indkey::int2[]))
			     = (SELECT pg_catalog.array_agg(d.column_name ORDER BY d.column_name)
			          FROM pg_catalog.unnest(descr) d WHERE d.is_key)) THEN
			RAISE EXCEPTION 'counter "%": key columns (%) are not a unique key of target table %', name, key_list, tgt
				USING ERRCODE = 'invalid_object_definition',
				      HINT = 'Create a unique index or primary key on exactly the key columns.';
		END IF;
		-- (checks that the key columns have the definition's key types: compared without conversion)
		PERFORM counters._register(name, q, tgt, owns);
		SELECT pg_catalog.string_agg(pg_catalog.format('t.%I OPERATOR(pg_catalog.=) q.%I', d.column_name,
		                             d.column_name), ' AND ')
		  INTO join_cond
		  FROM pg_catalog.unnest(descr) d
		 WHERE d.is_key;
		EXECUTE pg_catalog.format('UPDATE %s SET %s', tgt,
			(SELECT pg_catalog.string_agg(pg_catalog.format('%I = 0', d.column_name), ', ')
			   FROM pg_catalog.unnest(descr) d WHERE NOT d.is_key));
		EXECUTE pg_catalog.format('UPDATE %s t SET %s FROM %s q WHERE %s', tgt,
			(SELECT pg_catalog.string_agg(pg_catalog.format('%I = COALESCE(q.%I, 0)', d.column_name, d.column_name),
			                              ', ')
			   FROM pg_catalog.unnest(descr) d WHERE NOT d.is_key),
			q, join_cond);
	END IF;

	PERFORM counters.attach(src);
	RETURN tgt;
END
$$;

CREATE OR REPLACE FUNCTION counters.drop_counter(name text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	m record;
BEGIN
	PERFORM counters._require_owner(name);
	SELECT k.mode, k.totals, k.log INTO m FROM counters.counter k WHERE k.name = drop_counter.name;
	SELECT * INTO c FROM counters._unregister(name);
	IF NOT EXISTS (SELECT FROM counters.counter k WHERE k.source = c.source) THEN
		PERFORM counters.detach(c.source);
	END IF;
	EXECUTE pg_catalog.format('DROP VIEW %s', c.query);
	IF m.mode IN ('log', 'sharded') THEN
		EXECUTE pg_catalog.format('DROP VIEW %s', c.target);
		EXECUTE pg_catalog.format('DROP TABLE %s, %s', m.log, m.totals);
	ELSIF c.owns_target THEN
		EXECUTE pg_catalog.format('DROP TABLE %s', c.target);
	END IF;
END
$$;
COMMENT ON FUNCTION counters.drop_counter(text) IS
	'drop a counter: catalog row, definition view, the tables it created, and the triggers once none is left';

-- When a source, counter table or definition view is dropped (DROP TABLE ... CASCADE, ALTER TABLE ... DROP COLUMN
-- ... CASCADE, DROP TABLE of the counter table), the counter goes with it: its catalog row, what remains of its view
-- and of the tables it created, and the triggers once no counter of the source is left. It runs as the role that
-- dropped (not as the extension's owner): what that role may not drop stays, and is reported.
CREATE OR REPLACE FUNCTION counters._on_sql_drop() RETURNS event_trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	rel oid;
	kind text;
	dropped oid[];
BEGIN
	dropped := ARRAY(SELECT d.objid FROM pg_catalog.pg_event_trigger_dropped_objects() d
	                  WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid = 0);
	FOR c IN
		SELECT k.name, k.source::oid AS source, k.target::oid AS target, k.query::oid AS query, k.owns_target,
		       k.totals::oid AS totals, k.log::oid AS log
		  FROM counters.counter k
		 WHERE k.source::oid = ANY (dropped) OR k.target::oid = ANY (dropped) OR k.query::oid = ANY (dropped)
		    OR k.totals::oid = ANY (dropped) OR k.log::oid = ANY (dropped)
	LOOP
		PERFORM counters._forget(c.name);
		-- what is left of it, views first
		FOR rel, kind IN
			SELECT x.rel, x.kind
			  FROM (VALUES (c.query, 'VIEW', 1),
			               (CASE WHEN c.log IS NOT NULL THEN c.target END, 'VIEW', 2),
			               (c.log, 'TABLE', 3), (c.totals, 'TABLE', 4),
			               (CASE WHEN c.log IS NULL AND c.owns_target THEN c.target END, 'TABLE', 5)) x(rel, kind, ord)
			 WHERE x.rel IS NOT NULL AND NOT x.rel = ANY (dropped)
			   AND EXISTS (SELECT FROM pg_catalog.pg_class r WHERE r.oid = x.rel)
			 ORDER BY x.ord
		LOOP
			IF pg_catalog.pg_has_role((SELECT r.relowner FROM pg_catalog.pg_class r WHERE r.oid = rel), 'USAGE') THEN
				EXECUTE pg_catalog.format('DROP %s IF EXISTS %s', kind, rel::regclass);
			ELSE
				RAISE NOTICE 'counter "%": % % is left in place: it belongs to another role', c.name,
					pg_catalog.lower(kind), rel::regclass;
			END IF;
		END LOOP;
		IF NOT c.source = ANY (dropped)
		   AND NOT EXISTS (SELECT FROM counters.counter k WHERE k.source::oid = c.source)
		   AND pg_catalog.pg_has_role((SELECT r.relowner FROM pg_catalog.pg_class r WHERE r.oid = c.source), 'USAGE')
		THEN
			PERFORM counters.detach(c.source::regclass);
		END IF;
		RAISE NOTICE 'counter "%" was dropped with the objects it depends on', c.name;
	END LOOP;
END
$$;

-- Switch a counter between modes; values stay exact throughout (the source is locked against writes meanwhile).
--   exact -> log:     the counter table becomes <name>_totals, deltas go to a new <name>_log, and <name> becomes a
--                     view adding both, so readers keep reading the same name.
--   exact -> sharded: the same, with <name>_slots (keys, values, slot number) in place of the log.
--   back to exact:    everything is folded, the view and log/slots are dropped, <name>_totals gets the name back.
--   log <-> sharded:  through exact.
-- max_slots (sharded mode, default 16) bounds the slot rows per key; giving it alone changes it.
CREATE OR REPLACE FUNCTION counters.alter_counter(name text, mode text, max_slots integer DEFAULT NULL) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	nsp name;
	rel name;
	totals regclass;
	log regclass;
	suffix text;
	keys text;
	cols text;
	sums text;
	nonzero text;
	nullable boolean;
	grantee regrole;
BEGIN
	PERFORM counters._require_owner(name);
	SELECT k.* INTO c FROM counters.counter k WHERE k.name = alter_counter.name;
	IF mode IS NULL OR mode NOT IN ('exact', 'log', 'sharded') THEN
		RAISE EXCEPTION 'counter "%": unknown mode %', name, pg_catalog.quote_literal(mode)
			USING ERRCODE = 'invalid_parameter_value', HINT = 'The modes are ''exact'', ''sharded'' and ''log''.';
	END IF;
	IF max_slots IS NOT NULL AND (mode <> 'sharded' OR max_slots NOT BETWEEN 1 AND 1024) THEN
		RAISE EXCEPTION 'counter "%": max_slots applies to sharded mode, from 1 to 1024', name
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF c.mode = mode THEN
		IF max_slots IS NOT NULL THEN
			PERFORM counters._set_option(name, 'max_slots', pg_catalog.to_jsonb(max_slots));
		END IF;
		RETURN;
	END IF;
	IF NOT c.owns_target THEN
		RAISE EXCEPTION 'counter "%": a counter kept in columns of an existing table can only be exact', name
			USING ERRCODE = 'feature_not_supported';
	END IF;
	-- (folding the log or slots after locking writers out must see every delta committed before the lock)
	PERFORM counters._require_read_committed('counters.alter_counter()');
	IF c.mode <> 'exact' AND mode <> 'exact' THEN
		PERFORM counters.alter_counter(name, 'exact');
		SELECT k.* INTO c FROM counters.counter k WHERE k.name = alter_counter.name;
	END IF;
	EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', c.source);

	IF mode IN ('log', 'sharded') THEN
		suffix := CASE mode WHEN 'log' THEN '_log' ELSE '_slots' END;
		SELECT n.nspname, r.relname INTO nsp, rel
		  FROM pg_catalog.pg_class r JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace WHERE r.oid = c.target;
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(d.name), ', ' ORDER BY d.ord) FILTER (WHERE d.is_key),
		       pg_catalog.string_agg(pg_catalog.quote_ident(d.name), ', ' ORDER BY d.ord),
		       -- the view's columns in the counter table's order (keys and values interleaved as declared)
		       pg_catalog.string_agg(CASE WHEN d.is_key THEN pg_catalog.quote_ident(d.name)
		                             ELSE pg_catalog.format('pg_catalog.sum(%I)::%s AS %I', d.name,
		                                 pg_catalog.format_type(a.atttypid, a.atttypmod), d.name) END, ', ' ORDER BY d.ord),
		       pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(%I) OPERATOR(pg_catalog.<>) 0', d.name),
		                             ' OR ' ORDER BY d.ord) FILTER (WHERE NOT d.is_key),
		       pg_catalog.bool_or(NOT a.attnotnull) FILTER (WHERE d.is_key)
		  INTO keys, cols, sums, nonzero, nullable
		  FROM counters._columns(c.target, c.query) d
		  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.target AND a.attname = d.name;
		EXECUTE pg_catalog.format('ALTER TABLE %s RENAME TO %I', c.target, pg_catalog.left(rel, 56) || '_totals');
		totals := c.target;
		EXECUTE pg_catalog.format('CREATE TABLE %I.%I (LIKE %s INCLUDING DEFAULTS)', nsp,
			pg_catalog.left(rel, 57) || suffix, totals);
		log := pg_catalog.format('%I.%I', nsp, pg_catalog.left(rel, 57) || suffix)::regclass;
		-- (published for logical replication, compaction's deletes need a replica identity)
		EXECUTE pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY FULL', log);
		IF mode = 'log' THEN
			EXECUTE pg_catalog.format('CREATE INDEX ON %s (%s)', log, keys);
		ELSE
			-- the slot number: the column after the definition's (the trigger finds it by position)
			EXECUTE pg_catalog.format('ALTER TABLE %s ADD COLUMN counters_slot integer NOT NULL', log);
			EXECUTE pg_catalog.format('ALTER TABLE %s ADD UNIQUE %s (%s, counters_slot)', log,
				CASE WHEN nullable THEN 'NULLS NOT DISTINCT' ELSE '' END, keys);
			PERFORM counters._set_option(name, 'max_slots', pg_catalog.to_jsonb(COALESCE(max_slots, 16)));
		END IF;
		-- Readers see totals plus pending deltas as of their snapshot: exact and transactional, never a cache.
		EXECUTE pg_catalog.format(
			'CREATE VIEW %I.%I AS SELECT %s FROM (SELECT %s FROM %s UNION ALL SELECT %s FROM %s) u '
			'GROUP BY %s HAVING %s', nsp, rel, sums, cols, totals, cols, log, keys, nonzero);
		FOR grantee IN
			SELECT DISTINCT g.grantee::regrole FROM pg_catalog.pg_class r, pg_catalog.aclexplode(r.relacl) g
			 WHERE r.oid = totals AND g.privilege_type = 'SELECT' AND g.grantee <> r.relowner AND g.grantee <> 0
		LOOP
			EXECUTE pg_catalog.format('GRANT SELECT ON %I.%I TO %s', nsp, rel, grantee);
		END LOOP;
		IF EXISTS (SELECT FROM pg_catalog.pg_class r, pg_catalog.aclexplode(r.relacl) g
		            WHERE r.oid = totals AND g.privilege_type = 'SELECT' AND g.grantee = 0) THEN
			EXECUTE pg_catalog.format('GRANT SELECT ON %I.%I TO PUBLIC', nsp, rel);
		END IF;
		PERFORM counters._set_mode(name, pg_catalog.format('%I.%I', nsp, rel)::regclass, mode, totals, log);
	ELSE
		PERFORM counters.compact(name);
		SELECT n.nspname, r.relname INTO nsp, rel
		  FROM pg_catalog.pg_class r JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace WHERE r.oid = c.target;
		PERFORM counters._set_mode(name, c.totals, 'exact', NULL, NULL);
		PERFORM counters._set_option(name, 'max_slots', NULL);
		-- SELECT grants on the view go back to the table that takes its name.
		FOR grantee IN
			SELECT DISTINCT g.grantee::regrole FROM pg_catalog.pg_class r, pg_catalog.aclexplode(r.relacl) g
			 WHERE r.oid = c.target AND g.privilege_type = 'SELECT' AND g.grantee <> r.relowner AND g.grantee <> 0
		LOOP
			EXECUTE pg_catalog.format('GRANT SELECT ON %s TO %s', c.totals, grantee);
		END LOOP;
		IF EXISTS (SELECT FROM pg_catalog.pg_class r, pg_catalog.aclexplode(r.relacl) g
		            WHERE r.oid = c.target AND g.privilege_type = 'SELECT' AND g.grantee = 0) THEN
			EXECUTE pg_catalog.format('GRANT SELECT ON %s TO PUBLIC', c.totals);
		END IF;
		EXECUTE pg_catalog.format('DROP VIEW %s', c.target);
		EXECUTE pg_catalog.format('DROP TABLE %s', c.log);
		EXECUTE pg_catalog.format('ALTER TABLE %s RENAME TO %I', c.totals, rel);
	END IF;
END
$$;
COMMENT ON FUNCTION counters.alter_counter(text, text, integer) IS
	'switch a counter between exact, sharded and log mode (values exact throughout), or change max_slots';

-- Bounds on one value column of a counter (NULL = unbounded; calling again replaces them, two NULLs remove them).
-- A statement whose deltas would move a value outside its bounds fails with check_violation (23514) and changes
-- nothing. Checked while the counter row is locked, so concurrent writers cannot overshoot together. Only counters
-- whose values are exact at write time (mode 'exact') can have bounds. Setting bounds that current values already
-- break is refused; the source is locked against writes (SHARE) meanwhile, so that no write slips in between the
-- check and the bounds taking effect.
CREATE OR REPLACE FUNCTION counters.set_bounds(name text, column_name text, min numeric DEFAULT NULL, max numeric DEFAULT NULL)
	RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c counters.counter;
	col record;
	bounds jsonb;
	outside text;
	violating bigint;
BEGIN
	PERFORM counters._require_owner(name);
	SELECT * INTO c FROM counters.counter k WHERE k.name = set_bounds.name;
	SELECT * INTO col FROM counters._value_column(c.name, column_name);
	IF c.mode <> 'exact' THEN
		RAISE EXCEPTION 'counter "%" is in % mode, whose values are not exact at write time: it cannot have bounds',
			c.name, c.mode
			USING ERRCODE = 'feature_not_supported',
			      HINT = pg_catalog.format('Switch it to exact mode first: SELECT counters.alter_counter(%L, ''exact'');',
			                               c.name);
	END IF;
	IF set_bounds.min > set_bounds.max THEN
		RAISE EXCEPTION 'counter "%": minimum % of "%" is above its maximum %', c.name, set_bounds.min,
			col.definition_name, set_bounds.max
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF set_bounds.min IS NOT NULL OR set_bounds.max IS NOT NULL THEN
		PERFORM counters._require_read_committed('counters.set_bounds()');
		EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE MODE', c.source);
		outside := pg_catalog.concat_ws(' OR ',
			pg_catalog.format('%I < %L', col.table_name, set_bounds.min) || CASE WHEN set_bounds.min IS NOT NULL THEN '' END,
			pg_catalog.format('%I > %L', col.table_name, set_bounds.max) || CASE WHEN set_bounds.max IS NOT NULL THEN '' END);
		EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %s WHERE %s', c.target, outside) INTO violating;
		IF violating > 0 THEN
			RAISE EXCEPTION 'counter "%": % of its keys have a value of "%" outside [%, %]', c.name, violating,
				col.definition_name, COALESCE(set_bounds.min::text, '-infinity'),
				COALESCE(set_bounds.max::text, 'infinity')
				USING ERRCODE = 'check_violation',
				      HINT = pg_catalog.format('SELECT * FROM %s WHERE %s lists them.', c.target, outside);
		END IF;
	END IF;
	bounds := COALESCE(c.options -> 'bounds', '{}') - col.definition_name::text;
	IF set_bounds.min IS NOT NULL OR set_bounds.max IS NOT NULL THEN
		bounds := bounds || pg_catalog.jsonb_build_object(col.definition_name,
			pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object('min', set_bounds.min, 'max', set_bounds.max)));
	END IF;
	PERFORM counters._set_option(c.name, 'bounds', NULLIF(bounds, '{}'));
END $$;
COMMENT ON FUNCTION counters.set_bounds(text, text, numeric, numeric) IS
	'bounds on a value column of an exact counter: statements that would cross them fail with 23514';

-- Thresholds on one value column of a counter (an empty array removes them). When a statement moves a value from
-- below a threshold to at or above it (direction "up"), or back below it ("down"), the extension sends
--   NOTIFY "counters.<counter name>", '{"counter": ..., "key": {...}, "column": ..., "old": ..., "new": ...,
--                                      "threshold": ..., "direction": "up" | "down"}'
-- (delivered only if the transaction commits), and calls the callback, if given, in the same transaction with the
-- same fields as arguments: callback(counter text, key jsonb, column_name text, old numeric, new numeric,
-- threshold numeric, direction text). The callback runs as the counter's owner in a security-restricted operation
-- (as the rest of the counter's code), with search_path = pg_catalog, pg_temp: it should qualify the names it uses
-- (or SET its own search_path). A value that crosses several thresholds at once reports each. Only exact-mode
-- counters can have thresholds.
CREATE OR REPLACE FUNCTION counters.set_thresholds(name text, column_name text, thresholds numeric[],
	callback regprocedure DEFAULT NULL) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c counters.counter;
	col record;
	entries jsonb;
	args regtype[];
	owner regrole;
BEGIN
	PERFORM counters._require_owner(name);
	SELECT * INTO c FROM counters.counter k WHERE k.name = set_thresholds.name;
	SELECT * INTO col FROM counters._value_column(c.name, column_name);
	IF thresholds IS NULL OR pg_catalog.array_position(thresholds, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'counter "%": thresholds of "%" must be an array without NULLs', c.name, col.definition_name
			USING ERRCODE = 'null_value_not_allowed', HINT = 'An empty array removes the thresholds.';
	END IF;
	IF c.mode <> 'exact' AND pg_catalog.cardinality(thresholds) > 0 THEN
		RAISE EXCEPTION 'counter "%" is in % mode, whose values are not exact at write time: it cannot have thresholds',
			c.name, c.mode
			USING ERRCODE = 'feature_not_supported',
			      HINT = pg_catalog.format('Switch it to exact mode first: SELECT counters.alter_counter(%L, ''exact'');',
			                               c.name);
	END IF;
	IF callback IS NOT NULL THEN
		SELECT ARRAY(SELECT pg_catalog.unnest(p.proargtypes::oid[]))::regtype[] INTO args
		  FROM pg_catalog.pg_proc p WHERE p.oid = callback;
		IF args IS DISTINCT FROM '{text,jsonb,text,numeric,numeric,numeric,text}'::regtype[] THEN
			RAISE EXCEPTION 'counter "%": callback % must take (text, jsonb, text, numeric, numeric, numeric, text)',
				c.name, callback
				USING ERRCODE = 'invalid_function_definition',
				      HINT = 'The arguments are counter, key, column_name, old, new, threshold, direction.';
		END IF;
		-- it will run as the counter's owner
		SELECT r.relowner::regrole INTO owner FROM pg_catalog.pg_class r WHERE r.oid = COALESCE(c.totals, c.target);
		IF NOT pg_catalog.has_function_privilege(callback, 'EXECUTE')
		   OR NOT pg_catalog.has_function_privilege(owner, callback, 'EXECUTE') THEN
			RAISE EXCEPTION 'counter "%": permission denied for callback %', c.name, callback
				USING ERRCODE = 'insufficient_privilege',
				      DETAIL = pg_catalog.format('The callback runs as the counter''s owner, %s.', owner);
		END IF;
	END IF;
	entries := COALESCE(c.options -> 'thresholds', '{}') - col.definition_name::text;
	IF pg_catalog.cardinality(thresholds) > 0 THEN
		entries := entries || pg_catalog.jsonb_build_object(col.definition_name, pg_catalog.jsonb_strip_nulls(
			pg_catalog.jsonb_build_object(
				'values', (SELECT pg_catalog.jsonb_agg(DISTINCT t ORDER BY t) FROM pg_catalog.unnest(thresholds) t),
				'callback', callback::text)));
	END IF;
	PERFORM counters._set_option(c.name, 'thresholds', NULLIF(entries, '{}'));
END $$;
COMMENT ON FUNCTION counters.set_thresholds(text, text, numeric[], regprocedure) IS
	'thresholds on a value column of an exact counter: each crossing sends NOTIFY "counters.<name>" and calls the callback';

-- Keep only recent time buckets of a counter keyed by one (a key column of type date, timestamp or timestamptz, e.g.
-- date_trunc('hour', used_at) AS hour): buckets older than now() - keep are deleted by counters.apply_retention()
-- (which counters.compact(), the worker and a pg_cron job call), and deltas to them are dropped by the trigger, so a
-- late change to an old source row cannot bring an expired bucket back. verify() and rebuild() compare only the
-- buckets kept. keep NULL removes the retention. For timestamp (without time zone) buckets the horizon is computed in
-- the session's time zone: keep writers and the compacting job in one TimeZone (UTC is simplest).
CREATE OR REPLACE FUNCTION counters.set_retention(name text, column_name text, keep interval) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c counters.counter;
	col record;
BEGIN
	PERFORM counters._require_owner(name);
	SELECT * INTO c FROM counters.counter k WHERE k.name = set_retention.name;
	IF keep IS NULL THEN
		PERFORM counters._set_option(c.name, 'retention', NULL);
		RETURN;
	END IF;
	IF NOT c.owns_target THEN
		RAISE EXCEPTION 'counter "%": retention applies to counters with a table of their own', c.name
			USING ERRCODE = 'feature_not_supported';
	END IF;
	SELECT x.definition_name, x.name AS table_name, a.atttypid::regtype AS typ INTO col
	  FROM counters._columns(COALESCE(c.totals, c.target), c.query) x
	  JOIN pg_catalog.pg_attribute a ON a.attrelid = COALESCE(c.totals, c.target) AND a.attname = x.name
	 WHERE x.is_key AND (x.definition_name = column_name OR x.name = column_name)
	 ORDER BY x.definition_name = column_name DESC LIMIT 1;
	IF col IS NULL OR col.typ NOT IN ('date'::regtype, 'timestamp'::regtype, 'timestamptz'::regtype) THEN
		RAISE EXCEPTION 'counter "%": retention needs a key column of type date, timestamp or timestamptz, not "%"',
			c.name, column_name
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF keep <= interval '0' THEN
		RAISE EXCEPTION 'counter "%": retention must keep a positive interval, not %', c.name, keep
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM counters._set_option(c.name, 'retention',
		pg_catalog.jsonb_build_object('column', col.definition_name, 'keep', keep::text));
END $$;
COMMENT ON FUNCTION counters.set_retention(text, text, interval) IS
	'keep only time buckets newer than now() - keep (a date, timestamp or timestamptz key); NULL removes it';

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
-- retention, buckets older than it are not compared. The recount runs as the counter's owner with row_security off
-- (a policy hiding rows from the owner makes it fail, not undercount). Without a name: every counter the caller may
-- read; each run is recorded in counters.maintenance.
CREATE OR REPLACE FUNCTION counters.verify(name text DEFAULT NULL)
	RETURNS TABLE (counter text, key jsonb, column_name text, stored numeric, expected numeric)
	AS 'MODULE_PATHNAME', 'counters_verify'
	LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION counters.verify(text) IS
	'every stored counter value that differs from its definition recomputed now';

-- Make stored counters equal to their definition again; returns how many counter rows it inserted, updated or
-- deleted. `condition` (optional) is an SQL condition over the counter's key columns, as named in the counter table
-- ('blog_id = 7'): only those keys are rebuilt. Locking: the source is locked in SHARE mode for the duration, so
-- writers of the source wait until the rebuild commits (they would otherwise change counters being recomputed) while
-- readers of the source and of the counters go on. A log-mode or sharded counter is compacted first, then its totals
-- rebuilt. NOTICEs report the keys that differed and the rows changed, per counter.
CREATE OR REPLACE FUNCTION counters.rebuild(name text DEFAULT NULL, condition text DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'counters_rebuild'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION counters.rebuild(text, text) IS
	'make stored counters equal to their definitions, only the keys that differ; returns rows changed';

-- The k largest keys of a counter by one value column, exactly, as of the caller's snapshot. In log or sharded mode
-- it reads the top k + m keys of the totals (add an index on the column to make that an index scan) plus the m keys
-- that have pending deltas: any key without pending deltas is exact in the totals, so these contain the true top k.
-- `filter` is an SQL condition on the counter's columns, e.g. 'blog_id = 7'.
CREATE OR REPLACE FUNCTION counters.top(name text, column_name text, k integer, filter text DEFAULT NULL)
	RETURNS TABLE (key jsonb, value numeric)
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	keys text;
	key_json text;
	match text;
	null_match text;
	any_null text;
	nonzero text;
	xcols text;
	cond text := COALESCE('(' || filter || ')', 'true');
	col name;
BEGIN
	SELECT x.* INTO c FROM counters.counter x WHERE x.name = top.name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'counter "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
	SELECT d.name INTO col FROM counters._columns(COALESCE(c.totals, c.target), c.query) d
	 WHERE NOT d.is_key AND d.name = column_name;
	IF col IS NULL THEN
		RAISE EXCEPTION 'counter "%" has no value column %', name, pg_catalog.quote_ident(column_name)
			USING ERRCODE = 'undefined_column';
	END IF;
	SELECT pg_catalog.string_agg(pg_catalog.quote_ident(d.name), ', ' ORDER BY d.ord),
	       pg_catalog.string_agg(pg_catalog.format('%L, %I', d.name, d.name), ', ' ORDER BY d.ord),
	       pg_catalog.string_agg(pg_catalog.format('x.%I OPERATOR(pg_catalog.=) p.%I', d.name, d.name), ' AND '
	                             ORDER BY d.ord),
	       pg_catalog.string_agg(pg_catalog.format('x.%I IS NOT DISTINCT FROM p.%I', d.name, d.name), ' AND '
	                             ORDER BY d.ord),
	       pg_catalog.string_agg(pg_catalog.format('x.%I IS NULL', d.name), ' OR ' ORDER BY d.ord)
	  INTO keys, key_json, match, null_match, any_null
	  FROM counters._columns(COALESCE(c.totals, c.target), c.query) d WHERE d.is_key;
	-- a key is present when some value is nonzero, as in the counter's view
	SELECT pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(%I) OPERATOR(pg_catalog.<>) 0', d.name), ' OR '),
	       pg_catalog.string_agg(pg_catalog.format('x.%I', d.name), ', ' ORDER BY d.ord)
	  INTO nonzero, xcols
	  FROM counters._columns(COALESCE(c.totals, c.target), c.query) d WHERE NOT d.is_key;
	xcols := (SELECT pg_catalog.string_agg(pg_catalog.format('x.%I', d.name), ', ' ORDER BY d.ord)
	            FROM counters._columns(COALESCE(c.totals, c.target), c.query) d);
	-- In log and sharded mode a key's value is spread over several rows: the filter may name key columns only.
	IF c.mode <> 'exact' AND filter IS NOT NULL THEN
		BEGIN
			EXECUTE pg_catalog.format('SELECT 1 FROM (SELECT %s FROM %s LIMIT 0) x WHERE %s', keys, c.totals, cond);
		EXCEPTION WHEN undefined_column THEN
			RAISE EXCEPTION 'counter "%": in % mode the filter of top() may name key columns only (%)', name, c.mode, keys
				USING ERRCODE = 'feature_not_supported',
				      HINT = pg_catalog.format('Filter the result instead: SELECT * FROM %s WHERE ... ORDER BY ... LIMIT ...', c.target);
		END;
	END IF;
	IF c.mode = 'exact' THEN
		RETURN QUERY EXECUTE pg_catalog.format(
			'SELECT pg_catalog.jsonb_build_object(%s), %I::pg_catalog.numeric FROM %s WHERE %s '
			'ORDER BY %I DESC, %s LIMIT %s', key_json, col, c.target, cond, col, keys, k);
	ELSE
		RETURN QUERY EXECUTE pg_catalog.format(
			'WITH pending AS MATERIALIZED (SELECT DISTINCT %s FROM %s WHERE %s), '
			'     candidates AS MATERIALIZED ( '
			'         (SELECT %s FROM %s WHERE %s ORDER BY %I DESC, %s LIMIT %s + (SELECT pg_catalog.count(*) FROM pending)) '
			'         UNION SELECT * FROM pending) '
			'SELECT pg_catalog.jsonb_build_object(%s), pg_catalog.sum(%I) '
			'  FROM (SELECT %s FROM %s x JOIN candidates p ON %s '
			'        UNION ALL SELECT %s FROM %s x JOIN candidates p ON %s '
			'        UNION ALL SELECT %s FROM %s x JOIN candidates p ON %s WHERE %s '
			'        UNION ALL SELECT %s FROM %s x JOIN candidates p ON %s WHERE %s) u '
			' GROUP BY %s HAVING %s ORDER BY 2 DESC, %s LIMIT %s',
			keys, c.log, cond,
			keys, c.totals, cond, col, keys, k,
			key_json, col,
			xcols, c.totals, match, xcols, c.log, match,
			xcols, c.totals, null_match, any_null, xcols, c.log, null_match, any_null,
			keys, nonzero, keys, k);
	END IF;
END
$$;
COMMENT ON FUNCTION counters.top(text, text, integer, text) IS
	'the k largest keys of a counter by one value column, exactly, as of the caller''s snapshot';

-- Declaring a counter locks writers of the source out and then fills the counter table: at REPEATABLE READ or
-- SERIALIZABLE the fill would read with a snapshot taken before the lock and could miss rows committed in between.
CREATE OR REPLACE FUNCTION counters.create_counter(name text, definition text, target text DEFAULT NULL,
                                        mode text DEFAULT 'exact')
	RETURNS regclass
	LANGUAGE sql
AS $$
	SELECT counters._require_read_committed('counters.create_counter()');
	SELECT counters._declare($1, $2, $3, $4, pg_catalog.current_setting('search_path'));
$$;
COMMENT ON FUNCTION counters.create_counter(text, text, text, text) IS
	'declare a counter as an aggregate query; returns the relation to read';

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
