/* counters--0.1.sql: install script */

\echo Use "CREATE EXTENSION counters" to load this file. \quit

-- The extension owns its schema: creating it here (rather than with "schema =" in the control file) fails loudly
-- if a schema of that name already belongs to someone else.
CREATE SCHEMA counters;
GRANT USAGE ON SCHEMA counters TO PUBLIC;

-- ---------------------------------------------------------------------------------------------------------------
-- catalog
-- ---------------------------------------------------------------------------------------------------------------

-- One row per counter. Dumped by pg_dump (see pg_extension_config_dump below); the relations are stored as regclass,
-- which pg_dump writes as names and pg_upgrade keeps, never as OIDs or node strings. The definition itself lives in
-- the view named by "query": PostgreSQL records its dependencies on the source columns and functions, keeps it
-- correct across renames, and pg_dump dumps it as SQL text.
CREATE TABLE counters.counter (
	name        text PRIMARY KEY,
	source      regclass NOT NULL,
	target      regclass NOT NULL,
	query       regclass NOT NULL UNIQUE,
	owns_target boolean NOT NULL,
	-- 'exact': one row per key in target, updated in place. 'log': each statement appends its deltas to "log";
	-- counters.compact() folds them into "totals"; target is a view adding both.
	mode        text NOT NULL DEFAULT 'exact' CHECK (mode IN ('exact', 'log')),
	totals      regclass,
	log         regclass,
	options     jsonb NOT NULL DEFAULT '{}',
	created_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
	CHECK ((mode = 'log') = (log IS NOT NULL AND totals IS NOT NULL))
);
CREATE INDEX counter_source_idx ON counters.counter (source);
SELECT pg_catalog.pg_extension_config_dump('counters.counter', '');
-- Anyone may read counter definitions; rows are written only by counters.create_counter/drop_counter, whose C
-- helpers check that the caller owns the tables involved and then write as the extension's owner.
GRANT SELECT ON counters.counter TO PUBLIC;

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

-- ---------------------------------------------------------------------------------------------------------------
-- C functions
-- ---------------------------------------------------------------------------------------------------------------

-- The generic trigger: statement-level, reads the transition tables, applies summed deltas per key.
CREATE FUNCTION counters.capture() RETURNS trigger
	AS 'MODULE_PATHNAME', 'counters_capture'
	LANGUAGE C;

-- Parse and analyse a definition (with the caller's search_path) and describe the counter table it needs.
CREATE FUNCTION counters._describe(name text, definition text,
	OUT source regclass, OUT column_name name, OUT is_key boolean, OUT column_type text, OUT not_null boolean)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'counters_describe'
	LANGUAGE C STRICT VOLATILE;

-- Record a counter in the catalog (ownership checked), compile it once to validate, invalidate caches.
CREATE FUNCTION counters._register(name text, query regclass, target regclass, owns_target boolean)
	RETURNS regclass
	AS 'MODULE_PATHNAME', 'counters_register'
	LANGUAGE C STRICT VOLATILE;

-- Change a counter's mode and relations in the catalog (ownership checked), invalidate caches.
CREATE FUNCTION counters._set_mode(name text, target regclass, mode text, totals regclass, log regclass)
	RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_mode'
	LANGUAGE C VOLATILE;

-- Remove a counter from the catalog (ownership checked), invalidate caches. Returns the removed row's fields.
CREATE FUNCTION counters._unregister(name text,
	OUT source regclass, OUT target regclass, OUT query regclass, OUT owns_target boolean)
	RETURNS record
	AS 'MODULE_PATHNAME', 'counters_unregister'
	LANGUAGE C STRICT VOLATILE;

REVOKE ALL ON FUNCTION counters._register(text, regclass, regclass, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION counters._unregister(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION counters._register(text, regclass, regclass, boolean) TO PUBLIC;
GRANT EXECUTE ON FUNCTION counters._unregister(text) TO PUBLIC;

-- ---------------------------------------------------------------------------------------------------------------
-- attaching the trigger
-- ---------------------------------------------------------------------------------------------------------------

-- Attach the capture triggers to a source table: INSERT, UPDATE and DELETE statement triggers with transition tables
-- on the table and (for a partitioned table) on every partition, since statement triggers of a parent do not fire for
-- statements that name a partition; TRUNCATE handling on the table or on each leaf partition. Idempotent.
CREATE FUNCTION counters.attach(source regclass) RETURNS void
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

-- Remove the capture triggers from a source table and its partitions.
CREATE FUNCTION counters.detach(source regclass) RETURNS void
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
		 WHERE t.tgname IN ('counters_insert', 'counters_update', 'counters_delete', 'counters_truncate')
		   AND t.tgfoid = 'counters.capture()'::pg_catalog.regprocedure
	LOOP
		EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trg, rel);
	END LOOP;
END
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- declaring counters
-- ---------------------------------------------------------------------------------------------------------------

-- One column of a counter as counters._describe reports it.
CREATE TYPE counters._describe_row AS (
	source regclass, column_name name, is_key boolean, column_type text, not_null boolean);

CREATE FUNCTION counters._create_counter(name text, definition text, target text, caller_search_path text)
	RETURNS regclass
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
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
	cols record;
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
		-- Keys are compared as the trigger compares them: cast to the target column's type.
		SELECT pg_catalog.string_agg(pg_catalog.format('t.%I OPERATOR(pg_catalog.=) CAST(q.%I AS %s)', d.column_name,
		                             d.column_name, pg_catalog.format_type(a.atttypid, a.atttypmod)), ' AND ')
		  INTO join_cond
		  FROM pg_catalog.unnest(descr) d
		  JOIN pg_catalog.pg_attribute a ON a.attrelid = tgt AND a.attname = d.column_name
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

	PERFORM counters._register(name, q, tgt, owns);
	PERFORM counters.attach(src);
	RETURN tgt;
END
$$;

-- Declare a counter. The wrapper passes the caller's search_path on, so that the definition resolves names like a
-- query the caller types; everything the extension runs itself uses a pinned search_path.
CREATE FUNCTION counters.create_counter(name text, definition text, target text DEFAULT NULL,
                                        mode text DEFAULT 'exact')
	RETURNS regclass
	LANGUAGE sql
AS $$
	SELECT counters._create_counter($1, $2, $3, pg_catalog.current_setting('search_path'));
	SELECT counters.alter_counter($1, mode => $4);
	SELECT k.target FROM counters.counter k WHERE k.name OPERATOR(pg_catalog.=) $1;
$$;

CREATE FUNCTION counters.drop_counter(name text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	m record;
BEGIN
	IF NOT EXISTS (SELECT FROM counters.counter k WHERE k.name = drop_counter.name) THEN
		RAISE EXCEPTION 'counter "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
	SELECT k.mode, k.totals, k.log INTO m FROM counters.counter k WHERE k.name = drop_counter.name;
	SELECT * INTO c FROM counters._unregister(name);
	IF NOT EXISTS (SELECT FROM counters.counter k WHERE k.source = c.source) THEN
		PERFORM counters.detach(c.source);
	END IF;
	EXECUTE pg_catalog.format('DROP VIEW %s', c.query);
	IF m.mode = 'log' THEN
		EXECUTE pg_catalog.format('DROP VIEW %s', c.target);
		EXECUTE pg_catalog.format('DROP TABLE %s, %s', m.log, m.totals);
	ELSIF c.owns_target THEN
		EXECUTE pg_catalog.format('DROP TABLE %s', c.target);
	END IF;
END
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- keeping up with DDL
-- ---------------------------------------------------------------------------------------------------------------

-- Before DROP TABLE of a partition and ALTER TABLE ... ATTACH/DETACH PARTITION: count the rows that join or leave a
-- counted partitioned table (no row trigger sees them).
CREATE FUNCTION counters._on_ddl_start() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'counters_on_ddl_start'
	LANGUAGE C;
CREATE EVENT TRIGGER counters_ddl_start ON ddl_command_start
	WHEN TAG IN ('DROP TABLE', 'ALTER TABLE')
	EXECUTE FUNCTION counters._on_ddl_start();

-- After CREATE TABLE ... PARTITION OF / ATTACH PARTITION: give new partitions of a counted table their triggers.
-- After DETACH PARTITION: take the triggers off the table that left.
CREATE FUNCTION counters._on_ddl_end() RETURNS event_trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	src regclass;
	rel regclass;
	trg name;
BEGIN
	FOR src IN
		SELECT DISTINCT k.source
		  FROM pg_catalog.pg_event_trigger_ddl_commands() d
		  JOIN pg_catalog.pg_class c ON c.oid = d.objid AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
		  CROSS JOIN LATERAL (SELECT a.relid FROM pg_catalog.pg_partition_ancestors(c.oid) a) a
		  JOIN counters.counter k ON k.source = a.relid
	LOOP
		PERFORM counters.attach(src);
	END LOOP;
	-- A column of an existing target table was renamed: rename the definition's alias that named it.
	FOR rel, trg, src IN
		SELECT k.query, va.attname, d.objid::regclass
		  FROM pg_catalog.pg_event_trigger_ddl_commands() d
		  JOIN counters.counter k ON k.target = d.objid AND NOT k.owns_target
		  JOIN pg_catalog.pg_attribute va ON va.attrelid = k.query AND va.attnum > 0
		 WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid > 0
		   AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute ta
		                    WHERE ta.attrelid = k.target AND ta.attname = va.attname AND NOT ta.attisdropped)
	LOOP
		EXECUTE pg_catalog.format('ALTER VIEW %s RENAME COLUMN %I TO %I', rel, trg,
			(SELECT a.attname FROM pg_catalog.pg_attribute a
			  WHERE a.attrelid = src
			    AND a.attnum = (SELECT d.objsubid FROM pg_catalog.pg_event_trigger_ddl_commands() d
			                     WHERE d.objid = src AND d.objsubid > 0 LIMIT 1)));
	END LOOP;
	-- A table that carries capture triggers but feeds no counter any more was detached from a counted table.
	FOR rel, trg IN
		SELECT t.tgrelid::regclass, t.tgname
		  FROM pg_catalog.pg_trigger t
		  JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
		 WHERE t.tgfoid = 'counters.capture()'::pg_catalog.regprocedure
		   AND NOT c.relispartition
		   AND pg_catalog.pg_has_role(c.relowner, 'USAGE')
		   AND NOT EXISTS (SELECT FROM counters.counter k WHERE k.source = t.tgrelid)
	LOOP
		EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trg, rel);
	END LOOP;
END
$$;
CREATE EVENT TRIGGER counters_ddl_end ON ddl_command_end
	WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE')
	EXECUTE FUNCTION counters._on_ddl_end();

-- When a source, counter table or definition view is dropped (DROP TABLE ... CASCADE, ALTER TABLE ... DROP COLUMN
-- ... CASCADE, DROP TABLE of the counter table), the counter goes with it: catalog row, what remains of its view
-- and of the table it created, and the triggers once no counter of the source is left. Runs as the extension owner
-- because it edits the catalog.
CREATE FUNCTION counters._on_sql_drop() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
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
		DELETE FROM counters.counter k WHERE k.name = c.name;
		IF NOT c.query = ANY (dropped) THEN
			EXECUTE pg_catalog.format('DROP VIEW IF EXISTS %s', c.query::regclass);
		END IF;
		IF c.log IS NOT NULL THEN
			IF NOT c.target = ANY (dropped) THEN
				EXECUTE pg_catalog.format('DROP VIEW IF EXISTS %s', c.target::regclass);
			END IF;
			IF NOT c.log = ANY (dropped) THEN
				EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %s', c.log::regclass);
			END IF;
			IF NOT c.totals = ANY (dropped) THEN
				EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %s', c.totals::regclass);
			END IF;
		ELSIF c.owns_target AND NOT c.target = ANY (dropped) THEN
			EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %s', c.target::regclass);
		END IF;
		IF NOT c.source = ANY (dropped) THEN
			IF NOT EXISTS (SELECT FROM counters.counter k WHERE k.source::oid = c.source) THEN
				PERFORM counters.detach(c.source::regclass);
			END IF;
		END IF;
		RAISE NOTICE 'counter "%" was dropped with the objects it depends on', c.name;
	END LOOP;
END
$$;
CREATE EVENT TRIGGER counters_sql_drop ON sql_drop
	EXECUTE FUNCTION counters._on_sql_drop();

-- ---------------------------------------------------------------------------------------------------------------
-- verification
-- ---------------------------------------------------------------------------------------------------------------

-- One row per counter value that differs from its definition recomputed now, in one snapshot (a plain read: it takes
-- no lock that blocks writers). A missing counter row counts as zeros; for a counter kept in an existing table, keys
-- that have no row there are not reported (their deltas are skipped by design).
CREATE FUNCTION counters.verify(name text DEFAULT NULL)
	RETURNS TABLE (counter text, key jsonb, column_name text, stored numeric, expected numeric)
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	keys text;
	target_keys text;
	key_json text;
	stored_cols text;
	expected_cols text;
	sums text;
	differs text;
	unpivot text;
BEGIN
	IF name IS NOT NULL AND NOT EXISTS (SELECT FROM counters.counter k WHERE k.name = verify.name) THEN
		RAISE EXCEPTION 'counter "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
	FOR c IN
		SELECT k.name, k.target, k.query, k.owns_target FROM counters.counter k
		 WHERE verify.name IS NULL OR k.name = verify.name ORDER BY k.name
	LOOP
		-- Columns of the definition view and, by position (create_counter made it) or by name (an existing
		-- table), of the counter table.
		WITH v AS (SELECT a.attname, pg_catalog.row_number() OVER (ORDER BY a.attnum) AS ord
		             FROM pg_catalog.pg_attribute a
		            WHERE a.attrelid = c.query AND a.attnum > 0 AND NOT a.attisdropped),
		     t AS (SELECT a.attname, pg_catalog.row_number() OVER (ORDER BY a.attnum) AS ord
		             FROM pg_catalog.pg_attribute a
		            WHERE a.attrelid = c.target AND a.attnum > 0 AND NOT a.attisdropped),
		     cols AS (SELECT v.attname, CASE WHEN c.owns_target THEN t.attname ELSE v.attname END AS tname,
		                     v.ord AS attnum, v.attname IN (SELECT counters._describe_keys(c.query)) AS is_key
		                FROM v LEFT JOIN t ON t.ord = v.ord)
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(attname), ', ' ORDER BY attnum) FILTER (WHERE is_key),
		       pg_catalog.string_agg(pg_catalog.format('%I AS %I', tname, attname), ', ' ORDER BY attnum)
		           FILTER (WHERE is_key),
		       pg_catalog.string_agg(pg_catalog.format('%L, %I', attname, attname), ', ' ORDER BY attnum)
		           FILTER (WHERE is_key),
		       pg_catalog.string_agg(pg_catalog.format('COALESCE(%I, 0)::pg_catalog.numeric AS %I, 0::pg_catalog.numeric AS %I',
		                             tname, 's_' || attname, 'e_' || attname), ', ' ORDER BY attnum) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('0::pg_catalog.numeric, COALESCE(%I, 0)::pg_catalog.numeric',
		                             attname), ', ' ORDER BY attnum) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(%I) AS %I, pg_catalog.sum(%I) AS %I',
		                             's_' || attname, 's_' || attname, 'e_' || attname, 'e_' || attname), ', '
		                             ORDER BY attnum) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(%I) IS DISTINCT FROM pg_catalog.sum(%I)',
		                             's_' || attname, 'e_' || attname), ' OR ' ORDER BY attnum) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('(%L, d.%I, d.%I)', attname, 's_' || attname, 'e_' || attname),
		                             ', ' ORDER BY attnum) FILTER (WHERE NOT is_key)
		  INTO keys, target_keys, key_json, stored_cols, expected_cols, sums, differs, unpivot
		  FROM cols;
		RETURN QUERY EXECUTE pg_catalog.format(
			'SELECT %L::text, pg_catalog.jsonb_build_object(%s), v.column_name::text, v.stored, v.expected
			   FROM (SELECT %s, %s, pg_catalog.bool_or(u.in_target) AS in_target
			           FROM (SELECT %s, %s, true AS in_target FROM %s
			                 UNION ALL
			                 SELECT %s, %s, false FROM %s) u
			          GROUP BY %s
			         HAVING %s) d
			  CROSS JOIN LATERAL (VALUES %s) v(column_name, stored, expected)
			  WHERE v.stored IS DISTINCT FROM v.expected AND (%L OR d.in_target)
			  ORDER BY 2, 3',
			c.name, key_json, keys, sums, target_keys, stored_cols, c.target, keys, expected_cols, c.query, keys, differs,
			unpivot, c.owns_target);
	END LOOP;
END
$$;

-- The key column names of a counter, from its definition view.
CREATE FUNCTION counters._describe_keys(query regclass) RETURNS SETOF name
	AS 'MODULE_PATHNAME', 'counters_describe_keys'
	LANGUAGE C STRICT STABLE;

-- ---------------------------------------------------------------------------------------------------------------
-- modes and compaction
-- ---------------------------------------------------------------------------------------------------------------

-- The columns of a counter's own table(s) in definition order: name in the table (by position, so renames are
-- followed), name in the definition, and whether it is a key.
CREATE FUNCTION counters._columns(table_ regclass, query regclass,
	OUT name name, OUT definition_name name, OUT is_key boolean, OUT ord bigint)
	RETURNS SETOF record
	LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
	WITH v AS (SELECT a.attname, pg_catalog.row_number() OVER (ORDER BY a.attnum) AS ord
	             FROM pg_catalog.pg_attribute a
	            WHERE a.attrelid = query AND a.attnum > 0 AND NOT a.attisdropped),
	     t AS (SELECT a.attname, pg_catalog.row_number() OVER (ORDER BY a.attnum) AS ord
	             FROM pg_catalog.pg_attribute a
	            WHERE a.attrelid = table_ AND a.attnum > 0 AND NOT a.attisdropped)
	SELECT t.attname, v.attname, v.attname IN (SELECT counters._describe_keys(query)), v.ord
	  FROM v JOIN t ON t.ord = v.ord
	 ORDER BY v.ord
$$;

-- Switch a counter between modes; values stay exact throughout (the source is locked against writes meanwhile).
--   exact -> log: the counter table becomes <name>_totals, deltas go to a new <name>_log, and <name> becomes a view
--                 adding both, so readers keep reading the same name.
--   log -> exact: the log is folded, the view and log are dropped, and <name>_totals gets the name back.
CREATE FUNCTION counters.alter_counter(name text, mode text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	nsp name;
	rel name;
	totals regclass;
	log regclass;
	keys text;
	cols text;
	sums text;
	nonzero text;
	grantee regrole;
BEGIN
	SELECT k.* INTO c FROM counters.counter k WHERE k.name = alter_counter.name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'counter "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
	IF mode IS NULL OR mode NOT IN ('exact', 'log') THEN
		RAISE EXCEPTION 'counter "%": unknown mode %', name, pg_catalog.quote_literal(mode)
			USING ERRCODE = 'invalid_parameter_value', HINT = 'The modes are ''exact'' and ''log''.';
	END IF;
	IF c.mode = mode THEN
		RETURN;
	END IF;
	IF NOT c.owns_target THEN
		RAISE EXCEPTION 'counter "%": a counter kept in columns of an existing table can only be exact', name
			USING ERRCODE = 'feature_not_supported';
	END IF;
	EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', c.source);

	IF mode = 'log' THEN
		SELECT n.nspname, r.relname INTO nsp, rel
		  FROM pg_catalog.pg_class r JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace WHERE r.oid = c.target;
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(d.name), ', ' ORDER BY d.ord) FILTER (WHERE d.is_key),
		       pg_catalog.string_agg(pg_catalog.quote_ident(d.name), ', ' ORDER BY d.ord),
		       pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(%I)::%s AS %I', d.name,
		                             pg_catalog.format_type(a.atttypid, a.atttypmod), d.name), ', ' ORDER BY d.ord)
		           FILTER (WHERE NOT d.is_key),
		       pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(%I) OPERATOR(pg_catalog.<>) 0', d.name),
		                             ' OR ' ORDER BY d.ord) FILTER (WHERE NOT d.is_key)
		  INTO keys, cols, sums, nonzero
		  FROM counters._columns(c.target, c.query) d
		  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.target AND a.attname = d.name;
		EXECUTE pg_catalog.format('ALTER TABLE %s RENAME TO %I', c.target, pg_catalog.left(rel, 56) || '_totals');
		totals := c.target;
		EXECUTE pg_catalog.format('CREATE TABLE %I.%I (LIKE %s INCLUDING DEFAULTS)', nsp,
			pg_catalog.left(rel, 59) || '_log', totals);
		log := pg_catalog.format('%I.%I', nsp, pg_catalog.left(rel, 59) || '_log')::regclass;
		EXECUTE pg_catalog.format('CREATE INDEX ON %s (%s)', log, keys);
		-- Readers see totals plus pending deltas as of their snapshot: exact and transactional, never a cache.
		EXECUTE pg_catalog.format(
			'CREATE VIEW %I.%I AS SELECT %s, %s FROM (SELECT %s FROM %s UNION ALL SELECT %s FROM %s) u '
			'GROUP BY %s HAVING %s', nsp, rel, keys, sums, cols, totals, cols, log, keys, nonzero);
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
		PERFORM counters._set_mode(name, pg_catalog.format('%I.%I', nsp, rel)::regclass, 'log', totals, log);
	ELSE
		PERFORM counters.compact(name);
		SELECT n.nspname, r.relname INTO nsp, rel
		  FROM pg_catalog.pg_class r JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace WHERE r.oid = c.target;
		PERFORM counters._set_mode(name, c.totals, 'exact', NULL, NULL);
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

-- Fold pending deltas (log mode) into the totals, one key at a time in sorted order, in one statement: readers see
-- the log rows or their folded sum, never both or neither; writers keep appending and are never blocked. Returns the
-- number of log rows folded. Compactions of one counter queue behind each other.
CREATE FUNCTION counters.compact(name text DEFAULT NULL) RETURNS bigint
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	keys text;
	cols text;
	sums text;
	nonzero text;
	updates text;
	zero text;
	folded bigint;
	zero_rows tid[];
	total bigint := 0;
BEGIN
	IF name IS NOT NULL AND NOT EXISTS (SELECT FROM counters.counter k WHERE k.name = compact.name) THEN
		RAISE EXCEPTION 'counter "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
	FOR c IN
		SELECT k.* FROM counters.counter k
		 WHERE k.mode = 'log' AND (compact.name IS NULL OR k.name = compact.name) ORDER BY k.name
	LOOP
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(d.name), ', ' ORDER BY d.ord) FILTER (WHERE d.is_key),
		       pg_catalog.string_agg(pg_catalog.quote_ident(d.name), ', ' ORDER BY d.ord),
		       pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(%I)', d.name), ', ' ORDER BY d.ord)
		           FILTER (WHERE NOT d.is_key),
		       pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(%I) OPERATOR(pg_catalog.<>) 0', d.name),
		                             ' OR ' ORDER BY d.ord) FILTER (WHERE NOT d.is_key),
		       pg_catalog.string_agg(pg_catalog.format('%I = t.%I OPERATOR(pg_catalog.+) EXCLUDED.%I',
		                             d.name, d.name, d.name), ', ' ORDER BY d.ord) FILTER (WHERE NOT d.is_key),
		       pg_catalog.string_agg(pg_catalog.format('t.%I OPERATOR(pg_catalog.=) 0', d.name), ' AND '
		                             ORDER BY d.ord) FILTER (WHERE NOT d.is_key)
		  INTO keys, cols, sums, nonzero, updates, zero
		  FROM counters._columns(c.totals, c.query) d;
		EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE', c.log);
		EXECUTE pg_catalog.format(
			'WITH moved AS (DELETE FROM %s RETURNING %s), '
			'     folded AS (INSERT INTO %s AS t (%s) SELECT %s, %s FROM moved GROUP BY %s HAVING %s ORDER BY %s '
			'                ON CONFLICT (%s) DO UPDATE SET %s RETURNING t.ctid, (%s) AS zero) '
			'SELECT (SELECT pg_catalog.count(*) FROM moved), '
			'       ARRAY(SELECT f.ctid FROM folded f WHERE f.zero)',
			c.log, cols, c.totals, cols, keys, sums, keys, nonzero, keys, keys, updates, zero)
			INTO folded, zero_rows;
		IF pg_catalog.cardinality(zero_rows) > 0 THEN
			EXECUTE pg_catalog.format('DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)', c.totals)
				USING zero_rows;
		END IF;
		total := total + folded;
	END LOOP;
	RETURN total;
END
$$;

-- The k largest keys of a counter by one value column, exactly, as of the caller's snapshot. In log mode it reads
-- the top k + m keys of the totals (add an index on the column to make that an index scan) plus the m keys that have
-- pending deltas: any key without pending deltas is exact in the totals, so these contain the true top k.
-- `filter` is an SQL condition on the counter's columns, e.g. 'blog_id = 7'.
CREATE FUNCTION counters.top(name text, column_name text, k integer, filter text DEFAULT NULL)
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
	SELECT pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(%I) OPERATOR(pg_catalog.<>) 0', d.name), ' OR ')
	  INTO nonzero
	  FROM counters._columns(COALESCE(c.totals, c.target), c.query) d WHERE NOT d.is_key;
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
			'  FROM (SELECT x.* FROM %s x JOIN candidates p ON %s '
			'        UNION ALL SELECT x.* FROM %s x JOIN candidates p ON %s '
			'        UNION ALL SELECT x.* FROM %s x JOIN candidates p ON %s WHERE %s '
			'        UNION ALL SELECT x.* FROM %s x JOIN candidates p ON %s WHERE %s) u '
			' GROUP BY %s HAVING %s ORDER BY 2 DESC, %s LIMIT %s',
			keys, c.log, cond,
			keys, c.totals, cond, col, keys, k,
			key_json, col,
			c.totals, match, c.log, match,
			c.totals, null_match, any_null, c.log, null_match, any_null,
			keys, nonzero, keys, k);
	END IF;
END
$$;
