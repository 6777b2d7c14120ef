--
-- upgrade: ALTER EXTENSION counters UPDATE from the previous release (0.1) keeps existing counters working, and an
-- updated installation has exactly the objects of a fresh one.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
-- The members of a fresh installation (this run installed the default version).
CREATE TEMP TABLE fresh AS
SELECT pg_describe_object(classid, objid, 0) AS member
  FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'counters') AND deptype = 'e';
SELECT extversion FROM pg_extension WHERE extname = 'counters';
-- After an update: the members missing, or not in a fresh installation (none expected either way).
CREATE TEMP VIEW member_diff AS
WITH now_members AS (
	SELECT pg_describe_object(classid, objid, 0) AS member
	  FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
	   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'counters') AND deptype = 'e')
(SELECT 'missing after update' AS side, member FROM fresh EXCEPT SELECT 'missing after update', member FROM now_members)
UNION ALL
(SELECT 'not in a fresh install', member FROM now_members EXCEPT SELECT 'not in a fresh install', member FROM fresh)
ORDER BY 1, 2;

-- Install 0.1 and declare counters with it, in both modes.
DROP EXTENSION counters;
CREATE EXTENSION counters VERSION '0.1';
CREATE SCHEMA upgrade_test;
SET search_path = upgrade_test;
CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL DEFAULT 0);
INSERT INTO posts (blog_id, rating) SELECT 1 + g % 4, g FROM generate_series(1, 40) g;
SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id');
SELECT counters.create_counter('blog_posts_log', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', mode => 'log');
INSERT INTO posts (blog_id) VALUES (2), (5);

-- Update, in a session that has used the 0.1 functions already.
ALTER EXTENSION counters UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'counters';
-- Same members as a fresh installation, nothing more, nothing less.
SELECT * FROM member_diff;

-- The counters declared with 0.1 keep counting, and 0.2's features apply to them.
INSERT INTO posts (blog_id, rating) VALUES (1, 7), (3, 1);
UPDATE posts SET blog_id = 4 WHERE id % 5 = 0;
DELETE FROM posts WHERE id % 7 = 0;
SELECT * FROM counters.verify();
SELECT counters.compact('blog_posts_log') > 0 AS compacted;
SELECT counters.set_bounds('blog_posts', 'posts', max => 15);
INSERT INTO posts (blog_id) SELECT 1 FROM generate_series(1, 10);
\echo SQLSTATE :SQLSTATE
SELECT * FROM counters.bounds;
SELECT * FROM counters.verify();
SELECT name, mode FROM counters.counters ORDER BY name;

SELECT counters.drop_counter('blog_posts');
SELECT counters.drop_counter('blog_posts_log');
RESET search_path;
DROP SCHEMA upgrade_test CASCADE;

--
-- From 0.2 to 0.3: counters of every mode keep counting; a counter 0.2 let be declared on a temporary table, left
-- behind when the table went away (the end of a session fires no event trigger), broke verify()
-- for every counter; the update forgets it, and verify() records its runs in counters.stats.
--
DROP EXTENSION counters;
CREATE EXTENSION counters VERSION '0.2';
CREATE SCHEMA upgrade_test;
SET search_path = upgrade_test;
CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL DEFAULT 0);
INSERT INTO posts (blog_id, rating) SELECT 1 + g % 4, g FROM generate_series(1, 40) g;
SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id');
SELECT counters.create_counter('blog_posts_log', 'SELECT count(*) AS posts, blog_id FROM posts GROUP BY blog_id', mode => 'log');
SELECT counters.create_counter('blog_posts_sharded', 'SELECT blog_id, sum(rating) AS rating FROM posts GROUP BY blog_id', mode => 'sharded');
-- (what 0.2 left of a counter on a temporary table: a catalog row naming relations that are gone; made by hand
-- here, since the library refuses temporary sources now whatever the SQL version)
CREATE TABLE scratch (a int);
SELECT 'scratch'::regclass::oid AS gone \gset
DROP TABLE scratch;
INSERT INTO counters.counter (name, source, target, query, owns_target) VALUES ('on_temp', :gone, :gone, :gone, true);
\set VERBOSITY terse
SELECT count(*) FROM counters.verify();
\set VERBOSITY default
\echo SQLSTATE :SQLSTATE
ALTER EXTENSION counters UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'counters';
SELECT * FROM member_diff;
SELECT name, mode FROM counters.counters ORDER BY name;
INSERT INTO posts (blog_id, rating) VALUES (1, 7), (3, 1), (5, 2);
UPDATE posts SET blog_id = 4, rating = rating + 1 WHERE id % 5 = 0;
DELETE FROM posts WHERE id % 7 = 0;
SELECT counters.compact('blog_posts_log') > 0 AS compacted;
SELECT * FROM counters.verify();
SELECT counter, last_verify IS NOT NULL AS verified, last_verify_wrong FROM counters.stats ORDER BY 1;
SELECT counters.drop_counter('blog_posts');
SELECT counters.drop_counter('blog_posts_log');
SELECT counters.drop_counter('blog_posts_sharded');
SELECT count(*) AS verified_rows_left FROM counters.verified;
RESET search_path;
DROP SCHEMA upgrade_test CASCADE;

--
-- DROP EXTENSION counters CASCADE with counters declared: no trigger or function of the extension is left on user
-- tables, the source and its data stay; the counter tables stay as plain tables (yours); CREATE EXTENSION works again
-- and counters can be declared anew.
--
CREATE SCHEMA dropext_test;
SET search_path = dropext_test;
CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL);
INSERT INTO posts (blog_id) SELECT 1 + g % 3 FROM generate_series(1, 30) g;
SELECT counters.create_counter('dx_exact', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
SELECT counters.create_counter('dx_log', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id', mode => 'log');
SELECT count(*) AS triggers_before FROM pg_trigger WHERE tgrelid = 'posts'::regclass AND NOT tgisinternal;
SET client_min_messages = warning;
DROP EXTENSION counters CASCADE;
RESET client_min_messages;
SELECT count(*) AS triggers_after FROM pg_trigger WHERE tgrelid = 'posts'::regclass AND NOT tgisinternal;
SELECT count(*) AS extension_functions FROM pg_proc WHERE pronamespace::regnamespace::text = 'counters';
SELECT count(*) AS event_triggers FROM pg_event_trigger WHERE evtname LIKE 'counters%';
SELECT to_regnamespace('counters') AS counters_schema;
SELECT count(*) AS posts_kept FROM posts;
SELECT c.relname, c.relkind FROM pg_class c WHERE c.relnamespace = 'dropext_test'::regnamespace AND c.relname LIKE 'dx%' ORDER BY 1;
-- writes no longer touch the leftover tables
INSERT INTO posts (blog_id) VALUES (1);
SELECT n FROM dx_exact WHERE blog_id = 1;
-- (PostgreSQL records the first schema of the search_path as the extension's schema: create it from public, not
-- from a schema that may be dropped with the extension in it)
RESET search_path;
CREATE EXTENSION counters;
SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'counters';
SET search_path = dropext_test;
DROP TABLE dx_exact, dx_log_totals, dx_log_log CASCADE;
DROP VIEW IF EXISTS dx_exact_definition, dx_log_definition;
SELECT counters.create_counter('dx_exact', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
INSERT INTO posts (blog_id) VALUES (2);
SELECT * FROM counters.verify();
SELECT counters.drop_counter('dx_exact');
RESET search_path;
DROP SCHEMA dropext_test CASCADE;
