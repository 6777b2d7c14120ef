-- counters 0.2 -> 0.3: declarations refused cleanly (system columns, temporary tables, catalogs, reserved or
-- duplicate column names, table row types as keys), every declaration error names the counter, verify() works for
-- any column names and records when it last ran (counters.stats.last_verify).
\echo Use "ALTER EXTENSION counters UPDATE TO '0.3'" to load this file. \quit

-- 0.2 accepted counters on temporary tables; PostgreSQL drops those at the end of their session without firing
-- event triggers, which left catalog rows naming relations that no longer exist (verify() then failed for every
-- counter). 0.3 refuses such declarations; forget what is left of earlier ones.
DELETE FROM counters.counter k
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) k.source::pg_catalog.oid);

-- ---------------------------------------------------------------------------------------------------------------
-- declaring
-- ---------------------------------------------------------------------------------------------------------------

-- The declaration steps (_create_counter, then alter_counter for the mode), with a name measured in bytes and every
-- error naming the counter (PostgreSQL's own errors, such as an existing relation name, get the name put first).
CREATE FUNCTION counters._declare(name text, definition text, target text, mode text, caller_search_path text)
	RETURNS regclass
	AS 'MODULE_PATHNAME', 'counters_declare'
	LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION counters.create_counter(name text, definition text, target text DEFAULT NULL,
                                                   mode text DEFAULT 'exact')
	RETURNS regclass
	LANGUAGE sql
AS $$
	SELECT counters._require_read_committed('counters.create_counter()');
	SELECT counters._declare($1, $2, $3, $4, pg_catalog.current_setting('search_path'));
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- verification
-- ---------------------------------------------------------------------------------------------------------------

-- When verify() last ran for a counter and how many wrong values it returned: written by verify() unless the
-- transaction is read-only (a standby, SET TRANSACTION READ ONLY), without waiting on a concurrent verify() of the
-- same counter. Not dumped: a restored database has not been verified yet.
CREATE TABLE counters.verified (
	counter     text PRIMARY KEY REFERENCES counters.counter (name) ON UPDATE CASCADE ON DELETE CASCADE,
	verified_at timestamptz NOT NULL,
	wrong       bigint NOT NULL
);
GRANT SELECT ON counters.verified TO PUBLIC;

CREATE FUNCTION counters._note_verified(name text, wrong bigint) RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
		RETURN;
	END IF;
	UPDATE counters.verified v SET verified_at = pg_catalog.clock_timestamp(), wrong = _note_verified.wrong
	 WHERE v.ctid = (SELECT x.ctid FROM counters.verified x WHERE x.counter = _note_verified.name
	                   FOR UPDATE SKIP LOCKED);
	IF NOT FOUND THEN
		INSERT INTO counters.verified AS v (counter, verified_at, wrong)
		SELECT k.name, pg_catalog.clock_timestamp(), _note_verified.wrong
		  FROM counters.counter k WHERE k.name = _note_verified.name
		    ON CONFLICT (counter) DO NOTHING;
	END IF;
END
$$;

-- One row per counter value that differs from its definition recomputed now, in one snapshot (a plain read: it takes
-- no lock that blocks writers). A missing counter row counts as zeros; for a counter kept in an existing table, keys
-- that have no row there are not reported (their deltas are skipped by design); with a retention, buckets older than
-- it are not compared. (0.3: the comparison names its columns by position, k<n>, s<n> and e<n>, so that no column
-- name of the counter can collide with another once prefixed and cut to 63 bytes.)
CREATE OR REPLACE FUNCTION counters.verify(name text DEFAULT NULL)
	RETURNS TABLE (counter text, key jsonb, column_name text, stored numeric, expected numeric)
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	keys text;
	view_keys text;
	target_keys text;
	key_json text;
	stored_cols text;
	expected_cols text;
	sums text;
	differs text;
	unpivot text;
	wrong bigint;
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
		                     v.ord, v.attname IN (SELECT counters._describe_keys(c.query)) AS is_key
		                FROM v LEFT JOIN t ON t.ord = v.ord)
		SELECT pg_catalog.string_agg(pg_catalog.format('k%s', ord), ', ' ORDER BY ord) FILTER (WHERE is_key),
		       pg_catalog.string_agg(pg_catalog.quote_ident(attname), ', ' ORDER BY ord) FILTER (WHERE is_key),
		       pg_catalog.string_agg(pg_catalog.format('%I AS k%s', tname, ord), ', ' ORDER BY ord) FILTER (WHERE is_key),
		       pg_catalog.string_agg(pg_catalog.format('%L, d.k%s', attname, ord), ', ' ORDER BY ord) FILTER (WHERE is_key),
		       pg_catalog.string_agg(pg_catalog.format('COALESCE(%I, 0)::pg_catalog.numeric AS s%s, 0::pg_catalog.numeric AS e%s',
		                             tname, ord, ord), ', ' ORDER BY ord) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('0::pg_catalog.numeric, COALESCE(%I, 0)::pg_catalog.numeric',
		                             attname), ', ' ORDER BY ord) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(s%s) AS s%s, pg_catalog.sum(e%s) AS e%s',
		                             ord, ord, ord, ord), ', ' ORDER BY ord) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('pg_catalog.sum(s%s) IS DISTINCT FROM pg_catalog.sum(e%s)',
		                             ord, ord), ' OR ' ORDER BY ord) FILTER (WHERE NOT is_key),
		       pg_catalog.string_agg(pg_catalog.format('(%L, d.s%s, d.e%s)', attname, ord, ord), ', ' ORDER BY ord)
		           FILTER (WHERE NOT is_key)
		  INTO keys, view_keys, target_keys, key_json, stored_cols, expected_cols, sums, differs, unpivot
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
			c.name, key_json, keys, sums, target_keys, stored_cols, c.target, c.live_stored, view_keys, expected_cols,
			c.query, c.live_expected, keys, differs, unpivot, c.owns_target);
		GET DIAGNOSTICS wrong = ROW_COUNT;
		PERFORM counters._note_verified(c.name, wrong);
	END LOOP;
END
$$;

-- (0.3: last_verify and last_verify_wrong from counters.verified)
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
       (c.options ->> 'last_rebuild')::timestamptz AS last_rebuild,
       v.verified_at AS last_verify,
       v.wrong AS last_verify_wrong
  FROM counters.counter c
  LEFT JOIN pg_catalog.pg_stat_all_tables t ON t.relid = COALESCE(c.totals, c.target)
  LEFT JOIN pg_catalog.pg_stat_all_tables l ON l.relid = c.log
  LEFT JOIN pg_catalog.pg_stat_all_tables s ON s.relid = c.source
  LEFT JOIN counters.verified v ON v.counter = c.name;

-- ---------------------------------------------------------------------------------------------------------------
-- compaction
-- ---------------------------------------------------------------------------------------------------------------

-- The schema-qualified name of a relation that still exists, for a statement to open (and wait for) by name;
-- an undefined_table error when it is gone (formatting a dropped regclass would give its bare OID).
CREATE FUNCTION counters._qualified(rel regclass) RETURNS text
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	q text;
BEGIN
	SELECT pg_catalog.format('%I.%I', n.nspname, r.relname) INTO q
	  FROM pg_catalog.pg_class r JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
	 WHERE r.oid = rel::pg_catalog.oid;
	IF q IS NULL THEN
		RAISE EXCEPTION 'relation % does not exist', rel::pg_catalog.oid USING ERRCODE = 'undefined_table';
	END IF;
	RETURN q;
END
$$;


-- (0.3: a counter dropped or switched to another mode while compact() waits for its log is skipped)
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
		-- (0.3) The counter may be dropped or switched to another mode meanwhile, by a transaction that holds its
		-- log's lock until it commits: then the log is gone or no longer the counter's, and the counter is skipped
		-- (compact() of all counters, as the worker runs it, used to fail as a whole).
		BEGIN
			EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE', counters._qualified(c.log));
		EXCEPTION WHEN undefined_table THEN
			CONTINUE;
		END;
		CONTINUE WHEN NOT EXISTS (SELECT FROM counters.counter k
		                           WHERE k.name = c.name AND k.mode = c.mode AND k.log = c.log AND k.totals = c.totals);
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


-- (0.3: a counter dropped or switched while this waits for its tables is skipped; compact() of all counters ends
-- with it, so one concurrent drop no longer failed a whole compaction round)
CREATE OR REPLACE FUNCTION counters.apply_retention(name text DEFAULT NULL) RETURNS bigint
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
	n bigint;
	tbl text;
	lg text;
	total bigint := 0;
	live text;
BEGIN
	FOR c IN
		SELECT k.* FROM counters.counter k
		 WHERE k.options ? 'retention' AND (apply_retention.name IS NULL OR k.name = apply_retention.name)
		 ORDER BY k.name
	LOOP
		-- (0.3) A counter dropped or switched by a transaction that commits while this waits for its tables is
		-- skipped: lock them by name first, then check that the catalog row is unchanged and still names them.
		BEGIN
			tbl := counters._qualified(COALESCE(c.totals, c.target));
			EXECUTE pg_catalog.format('LOCK TABLE %s IN ROW EXCLUSIVE MODE', tbl);
			IF c.log IS NOT NULL THEN
				lg := counters._qualified(c.log);
				EXECUTE pg_catalog.format('LOCK TABLE %s IN ROW EXCLUSIVE MODE', lg);
			END IF;
		EXCEPTION WHEN undefined_table THEN
			CONTINUE;
		END;
		CONTINUE WHEN NOT EXISTS (
			SELECT FROM counters.counter k
			 WHERE k.name = c.name AND k.mode = c.mode AND k.target = c.target
			   AND k.totals IS NOT DISTINCT FROM c.totals AND k.log IS NOT DISTINCT FROM c.log
			   AND pg_catalog.to_regclass(tbl) = COALESCE(c.totals, c.target)
			   AND (c.log IS NULL OR pg_catalog.to_regclass(lg) = c.log));
		live := counters._retention_filter(c.name, false);
		EXECUTE pg_catalog.format('DELETE FROM %s WHERE NOT (%s)', tbl, live);
		GET DIAGNOSTICS n = ROW_COUNT;
		total := total + n;
		IF c.log IS NOT NULL THEN
			EXECUTE pg_catalog.format('DELETE FROM %s WHERE NOT (%s)', lg, live);
			GET DIAGNOSTICS n = ROW_COUNT;
			total := total + n;
		END IF;
	END LOOP;
	RETURN total;
END $$;
