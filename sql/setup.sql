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
