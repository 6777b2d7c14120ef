--
-- setup: runs first. Every test after it runs as counters_app, an application role that is not a superuser: it owns
-- the test database (so it may create schemas) and installs the extension itself (a trusted extension). A test that
-- needs the superuser (to create roles, to set session_replication_role) says SET ROLE NONE, and RESET ROLE to come
-- back to counters_app.
--
SET client_min_messages = warning;
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'counters_app') THEN
		CREATE ROLE counters_app;
	END IF;
	EXECUTE format('ALTER DATABASE %I OWNER TO counters_app', current_database());
	EXECUTE format('ALTER DATABASE %I SET role = counters_app', current_database());
END $$;
DROP EXTENSION IF EXISTS counters CASCADE;
RESET client_min_messages;
SELECT rolsuper, rolcreaterole, rolbypassrls FROM pg_roles WHERE rolname = 'counters_app';
SET ROLE counters_app;
CREATE EXTENSION counters;
SELECT e.extname, e.extversion, e.extowner::regrole, n.nspname AS schema
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'counters';

-- Shared by the tests (search_path = <test schema>, regress): compare a counter's relation with a recount written
-- out in the test, both directions with EXCEPT; the recount leaves out groups whose values are all zero (such rows
-- are never stored: an absent row means zeros). check_all() compares every pair in the test's own table `checks`
-- (counter, expected: relations, by regclass or by name).
CREATE SCHEMA regress;
CREATE FUNCTION regress.diff(counter regclass, expected regclass) RETURNS TABLE (side text, row_value text)
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXECUTE format(
		'SELECT ''counter only'', c::text FROM (TABLE %1$s EXCEPT TABLE %2$s) c
		 UNION ALL
		 SELECT ''recomputed only'', e::text FROM (TABLE %2$s EXCEPT TABLE %1$s) e
		 ORDER BY 1, 2', counter, expected);
END $$;
CREATE FUNCTION regress.check_all() RETURNS TABLE (counter text, side text, row_value text)
LANGUAGE plpgsql AS $$
DECLARE
	r record;
BEGIN
	FOR r IN EXECUTE 'SELECT counter::text AS counter, expected::text AS expected FROM checks ORDER BY 1' LOOP
		RETURN QUERY SELECT r.counter, d.side, d.row_value
		               FROM regress.diff(r.counter::regclass, r.expected::regclass) d;
	END LOOP;
END $$;

-- Rejected statements. regress.errors(statement, ...) runs each statement in a subtransaction of its own and returns
-- a row for each, in order: its number n, and the SQLSTATE and message of its error, the DETAIL and HINT after it as
-- psql prints them (NULLs where it succeeded). For statements rejected up front (their arguments, the caller's
-- rights); a rejection whose transaction must end (what it leaves behind after the abort) is run by psql itself,
-- followed by \echo SQLSTATE :SQLSTATE or regress.rejected().
CREATE FUNCTION regress.errors(VARIADIC statements text[]) RETURNS TABLE (n int, sqlstate text, error text)
LANGUAGE plpgsql AS $$
DECLARE
	err_state text;
	err_message text;
	err_detail text;
	err_hint text;
BEGIN
	FOR i IN 1 .. cardinality(statements) LOOP
		err_state := NULL;
		err_message := NULL;
		BEGIN
			EXECUTE statements[i];
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS err_state = RETURNED_SQLSTATE, err_message = MESSAGE_TEXT,
			                        err_detail = PG_EXCEPTION_DETAIL, err_hint = PG_EXCEPTION_HINT;
			err_message := err_message || coalesce(E'\nDETAIL:  ' || nullif(err_detail, ''), '')
			                           || coalesce(E'\nHINT:  ' || nullif(err_hint, ''), '');
		END;
		RETURN QUERY SELECT i, err_state, err_message;
	END LOOP;
END $$;
-- Rejected declarations (declare.sql, target.sql), each run by psql: regress.baseline(table, ...) notes the relations,
-- counters and triggers that exist and the rows of the tables given; after each rejection,
-- regress.rejected(:'SQLSTATE') returns the SQLSTATE and what the statement left behind since the baseline: the
-- relations, catalog rows and triggers it added, and the tables given whose rows changed ('nothing', or a list).
-- SECURITY DEFINER: also called under other roles (the baseline is in temporary tables of counters_app).
CREATE FUNCTION regress.baseline(VARIADIC watched regclass[] DEFAULT '{}') RETURNS void
LANGUAGE plpgsql SET client_min_messages = warning AS $$
BEGIN
	DROP TABLE IF EXISTS pg_temp.baseline_relations, pg_temp.baseline_counters, pg_temp.baseline_triggers,
	                     pg_temp.baseline_watched, pg_temp.baseline_rows;
	CREATE TEMP TABLE baseline_relations AS SELECT oid FROM pg_class;
	CREATE TEMP TABLE baseline_counters AS SELECT name FROM counters.counter;
	CREATE TEMP TABLE baseline_triggers AS SELECT oid FROM pg_trigger;
	CREATE TEMP TABLE baseline_watched AS SELECT w AS rel FROM unnest(watched) w;
	CREATE TEMP TABLE baseline_rows (rel regclass, row_value text);
	FOR i IN 1 .. cardinality(watched) LOOP
		EXECUTE format('INSERT INTO pg_temp.baseline_rows SELECT %L, t::text FROM %s t', watched[i], watched[i]);
	END LOOP;
END $$;
CREATE FUNCTION regress.rejected(state text) RETURNS TABLE (sqlstate text, left_behind text)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
	watched regclass;
	changed boolean;
	changed_tables text[] := '{}';
BEGIN
	FOR watched IN SELECT w.rel FROM pg_temp.baseline_watched w ORDER BY w.rel::text LOOP
		EXECUTE format('SELECT EXISTS (SELECT t::text FROM %1$s t
		                               EXCEPT SELECT row_value FROM pg_temp.baseline_rows WHERE rel = $1)
		                    OR EXISTS (SELECT row_value FROM pg_temp.baseline_rows WHERE rel = $1
		                               EXCEPT SELECT t::text FROM %1$s t)', watched) INTO changed USING watched;
		IF changed THEN
			changed_tables := changed_tables || (watched::text || ' changed');
		END IF;
	END LOOP;
	RETURN QUERY SELECT state, coalesce(nullif(concat_ws('; ',
		(SELECT 'relations: ' || string_agg(c.relname, ', ' ORDER BY c.relname) FROM pg_class c
		  WHERE c.oid NOT IN (SELECT b.oid FROM pg_temp.baseline_relations b)
		    AND c.relnamespace <> 'pg_toast'::regnamespace AND c.relpersistence <> 't'),
		(SELECT 'catalog rows: ' || string_agg(k.name, ', ' ORDER BY k.name) FROM counters.counter k
		  WHERE k.name NOT IN (SELECT b.name FROM pg_temp.baseline_counters b)),
		(SELECT 'triggers: ' || string_agg(t.tgrelid::regclass || '.' || t.tgname, ', ' ORDER BY 1) FROM pg_trigger t
		  WHERE t.oid NOT IN (SELECT b.oid FROM pg_temp.baseline_triggers b)),
		nullif(array_to_string(changed_tables, ', '), '')), ''), 'nothing');
END $$;
-- The seed article's example, which declare.sql and seed.sql declare over posts tables of their own: posts and rating
-- sums per (user, blog), published and not deleted.
CREATE FUNCTION regress.seed_example() RETURNS text LANGUAGE sql IMMUTABLE RETURN $$
	SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating_sum
	  FROM posts
	 WHERE is_published AND NOT is_deleted
	 GROUP BY user_id, blog_id
$$;
-- (the roles the tests create and switch to find these helpers too)
GRANT USAGE ON SCHEMA regress TO PUBLIC;
