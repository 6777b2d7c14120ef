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
