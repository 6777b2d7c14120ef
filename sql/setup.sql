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
