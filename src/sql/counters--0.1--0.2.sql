-- counters 0.1 -> 0.2: bounds (counters.set_bounds) and thresholds (counters.set_thresholds) on counter values.
\echo Use "ALTER EXTENSION counters UPDATE TO '0.2'" to load this file. \quit

-- ---------------------------------------------------------------------------------------------------------------
-- options
-- ---------------------------------------------------------------------------------------------------------------

-- Set (or, with a NULL value, remove) one entry of a counter's options, ownership checked, caches invalidated.
CREATE FUNCTION counters._set_option(name text, key text, value jsonb) RETURNS void
	AS 'MODULE_PATHNAME', 'counters_set_option'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE;
REVOKE ALL ON FUNCTION counters._set_option(text, text, jsonb) FROM PUBLIC;

-- A value column of a counter, named as in the definition or (for a table create_counter made) as in the table.
CREATE FUNCTION counters._value_column(counter text, column_name text,
	OUT definition_name name, OUT table_name name)
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c counters.counter;
BEGIN
	SELECT * INTO c FROM counters.counter k WHERE k.name = counter;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'counter "%" does not exist', counter USING ERRCODE = 'undefined_object';
	END IF;
	IF c.owns_target THEN
		SELECT x.definition_name, x.name INTO definition_name, table_name
		  FROM counters._columns(COALESCE(c.totals, c.target), c.query) x
		 WHERE NOT x.is_key AND (x.definition_name = column_name OR x.name = column_name)
		 ORDER BY x.definition_name = column_name DESC
		 LIMIT 1;
	ELSE
		SELECT a.attname, a.attname INTO definition_name, table_name
		  FROM pg_catalog.pg_attribute a
		 WHERE a.attrelid = c.query AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = column_name
		   AND a.attname NOT IN (SELECT counters._describe_keys(c.query));
	END IF;
	IF definition_name IS NULL THEN
		RAISE EXCEPTION 'counter "%" has no value column "%"', counter, column_name
			USING ERRCODE = 'undefined_column',
			      HINT = 'Bounds and thresholds apply to the count() and sum() columns of the definition.';
	END IF;
END $$;

-- Functions that lock the source and then read must see everything committed before the lock: a transaction
-- snapshot (REPEATABLE READ, SERIALIZABLE) taken earlier would not.
CREATE FUNCTION counters._require_read_committed(what text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION '% must run at READ COMMITTED, not %', what,
			pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))
			USING ERRCODE = 'active_sql_transaction',
			      HINT = 'Its lock on the source must come before the snapshot it reads with.';
	END IF;
END $$;

-- ---------------------------------------------------------------------------------------------------------------
-- bounds
-- ---------------------------------------------------------------------------------------------------------------

-- Bounds on one value column of a counter (NULL = unbounded; calling again replaces them, two NULLs remove them).
-- A statement whose deltas would move a value outside its bounds fails with check_violation (23514) and changes
-- nothing. Checked while the counter row is locked, so concurrent writers cannot overshoot together. Only counters
-- whose values are exact at write time (mode 'exact') can have bounds. Setting bounds that current values already
-- break is refused; the source is locked against writes (SHARE) meanwhile, so that no write slips in between the
-- check and the bounds taking effect.
CREATE FUNCTION counters.set_bounds(name text, column_name text, min numeric DEFAULT NULL, max numeric DEFAULT NULL)
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
	SELECT * INTO c FROM counters.counter k WHERE k.name = set_bounds.name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'counter "%" does not exist', set_bounds.name USING ERRCODE = 'undefined_object';
	END IF;
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

-- Every counter's bounds, one row per bounded column.
CREATE VIEW counters.bounds AS
SELECT c.name AS counter, b.key AS column_name, (b.value ->> 'min')::numeric AS min, (b.value ->> 'max')::numeric AS max
  FROM counters.counter c, pg_catalog.jsonb_each(c.options -> 'bounds') b;
GRANT SELECT ON counters.bounds TO PUBLIC;

-- ---------------------------------------------------------------------------------------------------------------
-- thresholds
-- ---------------------------------------------------------------------------------------------------------------

-- Thresholds on one value column of a counter (an empty array removes them). When a statement moves a value from
-- below a threshold to at or above it (direction "up"), or back below it ("down"), the extension sends
--   NOTIFY "counters.<counter name>", '{"counter": ..., "key": {...}, "column": ..., "old": ..., "new": ...,
--                                      "threshold": ..., "direction": "up" | "down"}'
-- (delivered only if the transaction commits), and calls the callback, if given, in the same transaction with the
-- same fields as arguments: callback(counter text, key jsonb, column_name text, old numeric, new numeric,
-- threshold numeric, direction text). The callback runs as the user whose statement crossed the threshold, with
-- search_path = pg_catalog, pg_temp: it should qualify the names it uses (or SET its own search_path). A value
-- that crosses several thresholds at once reports each. Only exact-mode counters can have thresholds.
CREATE FUNCTION counters.set_thresholds(name text, column_name text, thresholds numeric[],
	callback regprocedure DEFAULT NULL) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c counters.counter;
	col record;
	entries jsonb;
	args regtype[];
BEGIN
	SELECT * INTO c FROM counters.counter k WHERE k.name = set_thresholds.name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'counter "%" does not exist', set_thresholds.name USING ERRCODE = 'undefined_object';
	END IF;
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
		IF NOT pg_catalog.has_function_privilege(callback, 'EXECUTE') THEN
			RAISE EXCEPTION 'counter "%": permission denied for callback %', c.name, callback
				USING ERRCODE = 'insufficient_privilege';
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

-- Every counter's thresholds, one row per column.
CREATE VIEW counters.thresholds AS
SELECT c.name AS counter, t.key AS column_name,
       ARRAY(SELECT x::numeric FROM pg_catalog.jsonb_array_elements_text(t.value -> 'values') x) AS thresholds,
       pg_catalog.to_regprocedure(t.value ->> 'callback') AS callback,
       'counters.' || c.name AS channel
  FROM counters.counter c, pg_catalog.jsonb_each(c.options -> 'thresholds') t;
GRANT SELECT ON counters.thresholds TO PUBLIC;


-- A counter table that lost a column (ALTER TABLE ... DROP COLUMN on it) can no longer be compared or repaired.
CREATE FUNCTION counters._check_columns(name text) RETURNS void
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c counters.counter;
BEGIN
	SELECT * INTO c FROM counters.counter k WHERE k.name = _check_columns.name;
	IF c.owns_target AND
	   (SELECT pg_catalog.count(*) FROM counters._columns(COALESCE(c.totals, c.target), c.query)) <
	   (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a
	     WHERE a.attrelid = c.query AND a.attnum > 0 AND NOT a.attisdropped) THEN
		RAISE EXCEPTION 'counter "%": counter table % has fewer columns than the definition', c.name,
			COALESCE(c.totals, c.target)
			USING ERRCODE = 'invalid_table_definition', HINT = 'Drop and declare the counter again.';
	END IF;
END $$;

-- ---------------------------------------------------------------------------------------------------------------
-- repair
-- ---------------------------------------------------------------------------------------------------------------

-- Make stored counters equal to their definition again; returns how many counter rows it inserted, updated or
-- deleted. `condition` (optional) is an SQL condition over the counter's key columns, as named in the counter
-- table ('blog_id = 7'): only those keys are rebuilt.
-- Locking: the source is locked in SHARE mode for the duration, so writers of the source wait until the rebuild
-- commits (they would otherwise change counters being recomputed) while readers of the source and of the counters
-- go on. A log-mode or sharded counter is compacted first, then its totals rebuilt. Progress is reported with NOTICEs (keys
-- recomputed, rows changed) per counter.
CREATE FUNCTION counters.rebuild(name text DEFAULT NULL, condition text DEFAULT NULL) RETURNS bigint
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	t regclass;
	keys text;
	view_cols text;
	table_cols text;
	stored_cols text;
	expected_cols text;
	sums text;
	differs text;
	nonzero text;
	new_values text;
	sets text;
	value_cols text;
	diff text;
	inserted bigint;
	updated bigint;
	deleted bigint;
	total bigint := 0;
	started timestamptz;
	message text;
	state text;
	live text;
BEGIN
	IF name IS NOT NULL AND NOT EXISTS (SELECT FROM counters.counter k WHERE k.name = rebuild.name) THEN
		RAISE EXCEPTION 'counter "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
	IF condition IS NOT NULL AND name IS NULL THEN
		RAISE EXCEPTION 'a rebuild condition needs a counter name' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM counters._require_read_committed('counters.rebuild()');
	FOR c IN
		SELECT k.* FROM counters.counter k WHERE rebuild.name IS NULL OR k.name = rebuild.name ORDER BY k.name
	LOOP
		started := pg_catalog.clock_timestamp();
		PERFORM counters._check_columns(c.name);
		EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE MODE', c.source);
		IF c.mode IN ('log', 'sharded') THEN
			PERFORM counters.compact(c.name);
		END IF;
		t := COALESCE(c.totals, c.target);
		-- Columns as the counter table names them (by position for a table create_counter made, by name otherwise).
		WITH d AS (
			SELECT x.name AS tname, x.definition_name AS vname, x.is_key, x.ord
			  FROM counters._columns(t, c.query) x WHERE c.owns_target
			UNION ALL
			SELECT a.attname, a.attname, a.attname IN (SELECT counters._describe_keys(c.query)), a.attnum
			  FROM pg_catalog.pg_attribute a
			 WHERE NOT c.owns_target AND a.attrelid = c.query AND a.attnum > 0 AND NOT a.attisdropped)
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(tname), ', ' ORDER BY ord) FILTER (WHERE is_key),
		       pg_catalog.string_agg(pg_catalog.format('v.%I AS %I', vname, tname), ', ' ORDER BY ord) FILTER (WHERE is_key),
		       pg_catalog.string_agg(pg_catalog.format('COALESCE(%I, 0)::pg_catalog.numeric AS %I, NULL::pg_catalog.numeric AS %I',
		                             tname, 's_' || ord, 'e_' || ord), ', ' ORDER BY ord) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('NULL::pg_catalog.numeric AS %I, COALESCE(v.%I, 0)::pg_catalog.numeric AS %I',
		                             's_' || ord, vname, 'e_' || ord), ', ' ORDER BY ord) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('COALESCE(pg_catalog.sum(%I), 0) AS %I, COALESCE(pg_catalog.sum(%I), 0) AS %I',
		                             's_' || ord, 's_' || ord, 'e_' || ord, 'e_' || ord), ', ' ORDER BY ord)
		           FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('d.%I IS DISTINCT FROM d.%I', 's_' || ord, 'e_' || ord), ' OR '
		                             ORDER BY ord) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('d.%I OPERATOR(pg_catalog.<>) 0', 'e_' || ord), ' OR '
		                             ORDER BY ord) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('d.%I', 'e_' || ord), ', ' ORDER BY ord) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('%I = EXCLUDED.%I', tname, tname), ', ' ORDER BY ord)
		           FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.quote_ident(tname), ', ' ORDER BY ord) FILTER (WHERE NOT is_key)
		  INTO keys, view_cols, stored_cols, expected_cols, sums, differs, nonzero, new_values, sets, value_cols
		  FROM d;
		-- (with a retention, only the buckets kept; the view side's columns carry the table's names here)
		live := counters._retention_filter(c.name, false);
		-- The condition must be a boolean expression over the key columns (it runs with the caller's privileges).
		IF condition IS NOT NULL THEN
			BEGIN
				EXECUTE pg_catalog.format('SELECT 1 FROM (SELECT %s FROM %s LIMIT 0) k WHERE (%s)', keys, t, condition);
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS message = MESSAGE_TEXT, state = RETURNED_SQLSTATE;
				RAISE EXCEPTION 'counter "%": rebuild condition "%" is not a condition over the key columns (%): %',
					c.name, condition, keys, message
					USING ERRCODE = state;
			END;
		END IF;
		-- The keys whose stored values differ from the definition (a missing row is zeros), computed in one
		-- snapshot: stored and recomputed rows grouped by key, so that NULL keys group as the counter groups them.
		-- The condition sees only the key columns.
		diff := pg_catalog.format(
			'SELECT %s, %s, pg_catalog.max(u.row_id) AS row_id
			   FROM (SELECT * FROM (SELECT %s, %s, ctid AS row_id FROM %s) s WHERE %s
			         UNION ALL
			         SELECT * FROM (SELECT %s, %s, NULL::pg_catalog.tid FROM %s v) e WHERE %s) u
			  GROUP BY %s',
			keys, sums, keys, stored_cols, t, COALESCE('(' || condition || ')', 'true') || ' AND ' || live,
			view_cols, expected_cols, c.query, COALESCE('(' || condition || ')', 'true') || ' AND ' || live, keys);
		EXECUTE pg_catalog.format('CREATE TEMP TABLE counters_rebuild ON COMMIT DROP AS SELECT * FROM (%s) d WHERE %s',
		                          diff, differs);
		GET DIAGNOSTICS updated = ROW_COUNT;
		RAISE NOTICE 'counter "%": % keys differ from the definition (% s)', c.name, updated,
			pg_catalog.round(EXTRACT(epoch FROM pg_catalog.clock_timestamp() - started)::pg_catalog.numeric, 1);
		IF c.owns_target THEN
			-- Rows that should not exist (all zeros), then the upsert of the others.
			EXECUTE pg_catalog.format(
				'DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
				     SELECT d.row_id FROM counters_rebuild d WHERE d.row_id IS NOT NULL AND NOT (%s)))',
				t, nonzero);
			GET DIAGNOSTICS deleted = ROW_COUNT;
			EXECUTE pg_catalog.format(
				'WITH up AS (INSERT INTO %s AS t (%s) SELECT %s, %s FROM counters_rebuild d WHERE %s ORDER BY %s
				             ON CONFLICT (%s) DO UPDATE SET %s RETURNING (t.xmax OPERATOR(pg_catalog.=) 0) AS inserted)
				 SELECT pg_catalog.count(*) FILTER (WHERE inserted), pg_catalog.count(*) FILTER (WHERE NOT inserted) FROM up',
				t, keys || ', ' || value_cols, keys, new_values, nonzero, keys, keys, sets)
			   INTO inserted, updated;
		ELSE
			-- A counter kept in an existing table: its rows are updated, none created or deleted.
			EXECUTE pg_catalog.format(
				'UPDATE %s AS t SET (%s) = (SELECT %s) FROM counters_rebuild d
				  WHERE t.ctid OPERATOR(pg_catalog.=) d.row_id',
				t, value_cols, new_values);
			GET DIAGNOSTICS updated = ROW_COUNT;
			inserted := 0;
			deleted := 0;
		END IF;
		DROP TABLE counters_rebuild;
		PERFORM counters._set_option(c.name, 'last_rebuild', pg_catalog.to_jsonb(pg_catalog.now()));
		RAISE NOTICE 'counter "%": % rows inserted, % updated, % deleted (% s)', c.name, inserted, updated, deleted,
			pg_catalog.round(EXTRACT(epoch FROM pg_catalog.clock_timestamp() - started)::pg_catalog.numeric, 1);
		total := total + inserted + updated + deleted;
	END LOOP;
	RETURN total;
END $$;

-- ---------------------------------------------------------------------------------------------------------------
-- observability
-- ---------------------------------------------------------------------------------------------------------------

-- One row per counter, for people and for monitoring. Everything comes from PostgreSQL's cumulative statistics of
-- the counter's own tables (shared by all backends, kept across restarts, reset with pg_stat_reset()), so it works
-- without shared_preload_libraries:
--   rows, log_rows          live rows of the counter table (totals in log mode) and of the log (estimates)
--   rows_inserted/_updated/_deleted   writes the trigger (and compaction, rebuild) made to the counter table
--   log_appends             delta rows appended to the log (log mode): one per statement and key
--   source_writes           rows inserted, updated and deleted in the source since statistics were reset
--   trigger_calls           calls of counters.capture() for all counters (track_functions = 'all' needed)
--   last_rebuild            when counters.rebuild() last changed or checked this counter
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
       s.n_tup_ins + s.n_tup_upd + s.n_tup_del AS source_writes,
       (SELECT f.calls FROM pg_catalog.pg_stat_user_functions f
         WHERE f.funcid = 'counters.capture()'::pg_catalog.regprocedure) AS trigger_calls,
       (c.options ->> 'last_rebuild')::timestamptz AS last_rebuild
  FROM counters.counter c
  LEFT JOIN pg_catalog.pg_stat_all_tables t ON t.relid = COALESCE(c.totals, c.target)
  LEFT JOIN pg_catalog.pg_stat_all_tables l ON l.relid = c.log
  LEFT JOIN pg_catalog.pg_stat_all_tables s ON s.relid = c.source;
GRANT SELECT ON counters.stats TO PUBLIC;

-- ---------------------------------------------------------------------------------------------------------------
-- sharded mode
-- ---------------------------------------------------------------------------------------------------------------

-- 'sharded': the counter keeps up to max_slots rows per key in <name>_slots; a writer updates a slot row no other
-- transaction holds (it never waits while one is free), creates a new slot when all are busy, and waits only when
-- max_slots are all busy. counters.compact() folds idle slots into <name>_totals. As in log mode, <name> is a view
-- adding both: exact and transactional. "log" holds the slots table.
ALTER TABLE counters.counter DROP CONSTRAINT counter_mode_check,
	ADD CONSTRAINT counter_mode_check CHECK (mode IN ('exact', 'log', 'sharded'));
ALTER TABLE counters.counter DROP CONSTRAINT counter_check,
	ADD CONSTRAINT counter_check CHECK ((mode IN ('log', 'sharded')) = (log IS NOT NULL AND totals IS NOT NULL));

-- Switch a counter between modes; values stay exact throughout (the source is locked against writes meanwhile).
--   exact -> log:     the counter table becomes <name>_totals, deltas go to a new <name>_log, and <name> becomes a
--                     view adding both, so readers keep reading the same name.
--   exact -> sharded: the same, with <name>_slots (keys, values, slot number) in place of the log.
--   back to exact:    everything is folded, the view and log/slots are dropped, <name>_totals gets the name back.
--   log <-> sharded:  through exact.
-- max_slots (sharded mode, default 16) bounds the slot rows per key; giving it alone changes it.
DROP FUNCTION counters.alter_counter(text, text);
CREATE FUNCTION counters.alter_counter(name text, mode text, max_slots integer DEFAULT NULL) RETURNS void
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
	SELECT k.* INTO c FROM counters.counter k WHERE k.name = alter_counter.name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'counter "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
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

-- Fold pending deltas into the totals, one key at a time in sorted order, in one statement: readers see the pending
-- rows or their folded sum, never both or neither. Log mode: every log row (writers keep appending and are never
-- blocked). Sharded mode: the slot rows no transaction holds (busy slots wait for the next compaction), so idle
-- slots disappear and a cold key is back to its one row in the totals. Returns the number of rows folded.
-- Compactions of one counter queue behind each other.
CREATE OR REPLACE FUNCTION counters.compact(name text DEFAULT NULL) RETURNS bigint
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
	pending text;
	vals text;
	folded bigint;
	zero_rows tid[];
	total bigint := 0;
BEGIN
	IF name IS NOT NULL AND NOT EXISTS (SELECT FROM counters.counter k WHERE k.name = compact.name) THEN
		RAISE EXCEPTION 'counter "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
	FOR c IN
		SELECT k.* FROM counters.counter k
		 WHERE k.mode IN ('log', 'sharded') AND (compact.name IS NULL OR k.name = compact.name) ORDER BY k.name
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
		                             ORDER BY d.ord) FILTER (WHERE NOT d.is_key),
		       pg_catalog.string_agg(pg_catalog.quote_ident(d.name), ', ' ORDER BY d.ord) FILTER (WHERE NOT d.is_key)
		  INTO keys, cols, sums, nonzero, updates, zero, vals
		  FROM counters._columns(c.totals, c.query) d;
		pending := CASE c.mode WHEN 'log' THEN 'true'
		           ELSE pg_catalog.format('ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM %s FOR UPDATE SKIP LOCKED))',
		                                  c.log) END;
		EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE', c.log);
		EXECUTE pg_catalog.format(
			'WITH moved AS (DELETE FROM %s WHERE %s RETURNING %s), '
			'     folded AS (INSERT INTO %s AS t (%s) SELECT %s, %s FROM moved GROUP BY %s HAVING %s ORDER BY %s '
			'                ON CONFLICT (%s) DO UPDATE SET %s RETURNING t.ctid, (%s) AS zero) '
			'SELECT (SELECT pg_catalog.count(*) FROM moved), '
			'       ARRAY(SELECT f.ctid FROM folded f WHERE f.zero)',
			c.log, pending, cols, c.totals, keys || ', ' || vals, keys, sums, keys, nonzero, keys, keys, updates, zero)
			INTO folded, zero_rows;
		IF pg_catalog.cardinality(zero_rows) > 0 THEN
			EXECUTE pg_catalog.format('DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)', c.totals)
				USING zero_rows;
		END IF;
		total := total + folded;
	END LOOP;
	-- the maintenance entry point: expired buckets go too (not counted in the result)
	PERFORM counters.apply_retention(name);
	RETURN total;
END
$$;

CREATE OR REPLACE FUNCTION counters.drop_counter(name text) RETURNS void
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
	IF m.mode IN ('log', 'sharded') THEN
		EXECUTE pg_catalog.format('DROP VIEW %s', c.target);
		EXECUTE pg_catalog.format('DROP TABLE %s, %s', m.log, m.totals);
	ELSIF c.owns_target THEN
		EXECUTE pg_catalog.format('DROP TABLE %s', c.target);
	END IF;
END
$$;

-- The k largest keys of a counter by one value column, exactly, as of the caller's snapshot. In log or sharded
-- mode it reads
-- the top k + m keys of the totals (add an index on the column to make that an index scan) plus the m keys that have
-- pending deltas: any key without pending deltas is exact in the totals, so these contain the true top k.
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

-- ---------------------------------------------------------------------------------------------------------------
-- retention
-- ---------------------------------------------------------------------------------------------------------------

-- Keep only recent time buckets of a counter keyed by one (a key column of type date, timestamp or timestamptz, e.g.
-- date_trunc('hour', used_at) AS hour): buckets older than now() - keep are deleted by counters.apply_retention()
-- (which counters.compact(), the worker and a pg_cron job call), and deltas to them are dropped by the trigger, so a
-- late change to an old source row cannot bring an expired bucket back. verify() and rebuild() compare only the
-- buckets kept. keep NULL removes the retention. For timestamp (without time zone) buckets the horizon is computed in
-- the session's time zone: keep writers and the compacting job in one TimeZone (UTC is simplest).
CREATE FUNCTION counters.set_retention(name text, column_name text, keep interval) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c counters.counter;
	col record;
	typ regtype;
BEGIN
	SELECT * INTO c FROM counters.counter k WHERE k.name = set_retention.name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'counter "%" does not exist', set_retention.name USING ERRCODE = 'undefined_object';
	END IF;
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

-- The condition selecting the buckets a counter keeps (its retention), over the counter table's columns or (expected)
-- the definition view's; 'true' without retention.
CREATE FUNCTION counters._retention_filter(name text, expected boolean) RETURNS text
	LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
	SELECT COALESCE((
		SELECT pg_catalog.format('%I OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) %L::pg_catalog.interval)::%s',
		                         CASE WHEN expected THEN x.definition_name ELSE x.name END,
		                         c.options -> 'retention' ->> 'keep', a.atttypid::regtype)
		  FROM counters.counter c
		  JOIN counters._columns(COALESCE(c.totals, c.target), c.query) x
		    ON x.definition_name = c.options -> 'retention' ->> 'column'
		  JOIN pg_catalog.pg_attribute a ON a.attrelid = COALESCE(c.totals, c.target) AND a.attname = x.name
		 WHERE c.name = $1 AND c.options ? 'retention'), 'true')
$$;

-- Delete the expired buckets of one or all counters with a retention (from the totals and the log or slots too);
-- returns the number of rows deleted. counters.compact() calls it.
CREATE FUNCTION counters.apply_retention(name text DEFAULT NULL) RETURNS bigint
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	n bigint;
	total bigint := 0;
	live text;
BEGIN
	FOR c IN
		SELECT k.* FROM counters.counter k
		 WHERE k.options ? 'retention' AND (apply_retention.name IS NULL OR k.name = apply_retention.name)
		 ORDER BY k.name
	LOOP
		live := counters._retention_filter(c.name, false);
		EXECUTE pg_catalog.format('DELETE FROM %s WHERE NOT (%s)', COALESCE(c.totals, c.target), live);
		GET DIAGNOSTICS n = ROW_COUNT;
		total := total + n;
		IF c.log IS NOT NULL THEN
			EXECUTE pg_catalog.format('DELETE FROM %s WHERE NOT (%s)', c.log, live);
			GET DIAGNOSTICS n = ROW_COUNT;
			total := total + n;
		END IF;
	END LOOP;
	RETURN total;
END $$;
-- One row per counter value that differs from its definition recomputed now, in one snapshot (a plain read: it takes
-- no lock that blocks writers). A missing counter row counts as zeros; for a counter kept in an existing table, keys
-- that have no row there are not reported (their deltas are skipped by design); with a retention, buckets older than
-- it are not compared.
CREATE OR REPLACE FUNCTION counters.verify(name text DEFAULT NULL)
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
		SELECT k.name, k.target, k.query, k.owns_target, counters._retention_filter(k.name, false) AS live_stored,
		       counters._retention_filter(k.name, true) AS live_expected
		  FROM counters.counter k
		 WHERE verify.name IS NULL OR k.name = verify.name ORDER BY k.name
	LOOP
		PERFORM counters._check_columns(c.name);
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
			           FROM (SELECT %s, %s, true AS in_target FROM %s WHERE %s
			                 UNION ALL
			                 SELECT %s, %s, false FROM %s WHERE %s) u
			          GROUP BY %s
			         HAVING %s) d
			  CROSS JOIN LATERAL (VALUES %s) v(column_name, stored, expected)
			  WHERE v.stored IS DISTINCT FROM v.expected AND (%L OR d.in_target)
			  ORDER BY 2, 3',
			c.name, key_json, keys, sums, target_keys, stored_cols, c.target, c.live_stored, keys, expected_cols, c.query,
			c.live_expected, keys, differs,
			unpivot, c.owns_target);
	END LOOP;
END
$$;

-- Declaring a counter locks writers of the source out and then fills the counter table: at REPEATABLE READ or
-- SERIALIZABLE the fill would read with a snapshot taken before the lock and could miss rows committed in between.
CREATE OR REPLACE FUNCTION counters.create_counter(name text, definition text, target text DEFAULT NULL,
                                                   mode text DEFAULT 'exact')
	RETURNS regclass
	LANGUAGE sql
AS $$
	SELECT counters._require_read_committed('counters.create_counter()');
	SELECT counters._create_counter($1, $2, $3, pg_catalog.current_setting('search_path'));
	SELECT counters.alter_counter($1, mode => $4);
	SELECT k.target FROM counters.counter k WHERE k.name OPERATOR(pg_catalog.=) $1;
$$;

-- (0.2) Keeping up with DDL without breaking restores: see the DETACH comment below.
CREATE OR REPLACE FUNCTION counters._on_ddl_end() RETURNS event_trigger
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
	-- A table that carries capture triggers but feeds no counter any more was detached from a counted table: looked
	-- for only when the command altered a counted table (DETACH PARTITION names the partitioned source). Any other
	-- ALTER TABLE leaves triggers alone: during a restore the triggers exist before the catalog rows are loaded.
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_ddl_commands() d
	                 JOIN counters.counter k ON k.source = d.objid
	                WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass) THEN
		RETURN;
	END IF;
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
