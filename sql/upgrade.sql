--
-- upgrade: ALTER EXTENSION counters UPDATE from every released version (0.1 to 0.4) keeps existing counters
-- working, and an updated installation has exactly the objects of a fresh one: same members, and each with the same
-- definition, privileges, comment, columns, constraints, indexes and replica identity.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
-- Every member of the installed extension, with what defines it.
CREATE TEMP VIEW extension_objects AS
WITH members AS (
	SELECT d.classid, d.objid FROM pg_depend d
	 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'counters'))
SELECT 'function' AS kind, p.oid::regprocedure::text AS name,
       pg_get_functiondef(p.oid) || E'\nacl: ' || (SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(COALESCE(p.proacl, acldefault('f', p.proowner))) x)
       || E'\ncomment: ' || COALESCE(obj_description(p.oid, 'pg_proc'), '') AS definition
  FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
UNION ALL
SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'r' THEN 'table' WHEN 'i' THEN 'index' WHEN 'c' THEN 'type' ELSE c.relkind::text END,
       c.oid::regclass::text,
       concat_ws(E'\n',
         (SELECT string_agg(format('%I %s%s%s', a.attname, format_type(a.atttypid, a.atttypmod),
                                   CASE WHEN a.attnotnull THEN ' NOT NULL' END,
                                   ' DEFAULT ' || pg_get_expr(ad.adbin, ad.adrelid)), E'\n' ORDER BY a.attnum)
            FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
           WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
         (SELECT string_agg(format('constraint %s %s', con.conname, pg_get_constraintdef(con.oid)), E'\n' ORDER BY con.conname)
            FROM pg_constraint con WHERE con.conrelid = c.oid),
         (SELECT string_agg(pg_get_indexdef(i.indexrelid), E'\n' ORDER BY 1) FROM pg_index i WHERE i.indrelid = c.oid),
         CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
         'acl: ' || (SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(COALESCE(c.relacl, acldefault('r', c.relowner))) x),
         'replica identity: ' || c.relreplident::text,
         'comment: ' || COALESCE(obj_description(c.oid, 'pg_class'), ''))
  FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
UNION ALL
SELECT CASE WHEN t.typrelid <> 0 OR EXISTS (SELECT FROM pg_type e WHERE e.typarray = t.oid) THEN 'row or array type'
            ELSE 'type' END,
       t.oid::regtype::text, format_type(t.oid, NULL) || ' ' || t.typtype::text
  FROM members m JOIN pg_type t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
UNION ALL
SELECT 'event trigger', e.evtname, concat_ws(' ', e.evtevent, e.evtfoid::regproc::text, e.evtenabled::text, e.evttags::text)
  FROM members m JOIN pg_event_trigger e ON m.classid = 'pg_event_trigger'::regclass AND e.oid = m.objid
UNION ALL
SELECT 'schema', n.nspname, (SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(COALESCE(n.nspacl, acldefault('n', n.nspowner))) x) || ' ' || COALESCE(obj_description(n.oid, 'pg_namespace'), '')
  FROM members m JOIN pg_namespace n ON m.classid = 'pg_namespace'::regclass AND n.oid = m.objid
UNION ALL
SELECT 'config', e.extname, (SELECT string_agg(x::regclass::text, ',') FROM unnest(e.extconfig) x) || ' ' || e.extcondition::text
  FROM pg_extension e WHERE e.extname = 'counters';

-- The objects of a fresh installation (this run installed the default version).
CREATE TEMP TABLE fresh AS SELECT * FROM extension_objects;
SELECT extversion FROM pg_extension WHERE extname = 'counters';
-- (PostgreSQL 17 and later also record the row types and array types of the extension's tables and views as
-- members: they are compared like every member below, but not counted here, where versions differ)
SELECT kind, count(*) FROM fresh WHERE kind <> 'row or array type' GROUP BY kind ORDER BY kind;
-- After an update: the objects missing or defined differently, and the objects not in a fresh installation (none
-- expected either way).
CREATE TEMP VIEW member_diff AS
(SELECT 'missing or different after update' AS side, kind, name FROM
  (SELECT * FROM fresh EXCEPT SELECT * FROM extension_objects) x)
UNION ALL
(SELECT 'not in a fresh install', kind, name FROM (SELECT * FROM extension_objects EXCEPT SELECT * FROM fresh) y)
ORDER BY 1, 2, 3;

-- What the steps from a release below (but 0.3's) start with once it is installed: a schema upgrade_test, first in
-- the search_path, with 40 posts in 4 blogs and a counter of them; and what each step ends with.
SELECT $$
CREATE SCHEMA upgrade_test;
SET search_path = upgrade_test;
CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL DEFAULT 0);
INSERT INTO posts (blog_id, rating) SELECT 1 + g % 4, g FROM generate_series(1, 40) g;
SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id');
$$ AS posts \gset
\set step_end 'RESET search_path; DROP SCHEMA upgrade_test CASCADE;'

-- Releases before 0.4 are not trusted: only a superuser installs (and updates) them.
DROP EXTENSION counters;
CREATE EXTENSION counters VERSION '0.3';
\echo SQLSTATE :SQLSTATE
SET ROLE NONE;

-- Install 0.1 and declare counters with it, in both modes.
CREATE EXTENSION counters VERSION '0.1';
:posts
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
:step_end

--
-- From 0.2 to 0.3: counters of every mode keep counting; a counter 0.2 let be declared on a temporary table, left
-- behind when the table went away (the end of a session fires no event trigger), broke verify()
-- for every counter; the update forgets it, and verify() records its runs in counters.stats.
--
DROP EXTENSION counters;
CREATE EXTENSION counters VERSION '0.2';
:posts
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
SELECT count(*) AS maintenance_rows_left FROM counters.maintenance;
:step_end

--
-- From 0.3 to 0.4: counters of every mode keep counting; what verify() and rebuild() recorded moves to
-- counters.maintenance; every source gets the counters_begin trigger; counter tables without a primary key, logs and
-- slots get a replica identity; maintenance runs in C, as each counter's owner.
--
DROP EXTENSION counters;
CREATE EXTENSION counters VERSION '0.3';
CREATE SCHEMA upgrade_test;
SET search_path = upgrade_test;
CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL, user_id int, rating int NOT NULL DEFAULT 0);
INSERT INTO posts (blog_id, user_id, rating) SELECT 1 + g % 4, nullif(g % 3, 0), g FROM generate_series(1, 40) g;
SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id');
SELECT counters.create_counter('user_posts', 'SELECT user_id, count(*) AS posts FROM posts GROUP BY user_id');
SELECT counters.create_counter('blog_posts_log', 'SELECT count(*) AS posts, blog_id FROM posts GROUP BY blog_id', mode => 'log');
SELECT counters.create_counter('user_posts_sharded', 'SELECT user_id, sum(rating) AS rating FROM posts GROUP BY user_id', mode => 'sharded');
SELECT counters.set_bounds('blog_posts', 'posts', max => 100);
SELECT count(*) FROM counters.verify();
SET client_min_messages = warning;
SELECT counters.rebuild('user_posts');
RESET client_min_messages;
ALTER EXTENSION counters UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'counters';
SELECT * FROM member_diff;
SELECT counter, last_verify IS NOT NULL AS verified, last_verify_wrong, last_rebuild IS NOT NULL AS rebuilt
  FROM counters.stats ORDER BY 1;
SELECT name, options FROM counters.counter ORDER BY name;
SELECT c.relname, c.relreplident FROM pg_class c
 WHERE c.relnamespace = 'upgrade_test'::regnamespace AND c.relkind = 'r' ORDER BY 1;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'posts'::regclass AND NOT tgisinternal ORDER BY 1;
INSERT INTO posts (blog_id, user_id, rating) VALUES (1, 7, 7), (3, NULL, 1), (5, 2, 2);
UPDATE posts SET blog_id = 4, user_id = NULL, rating = rating + 1 WHERE id % 5 = 0;
DELETE FROM posts WHERE id % 7 = 0;
SELECT counters.compact() > 0 AS compacted;
SELECT * FROM counters.verify();
INSERT INTO posts (blog_id) SELECT 2 FROM generate_series(1, 100);
\echo SQLSTATE :SQLSTATE
SELECT counters.drop_counter(name) FROM counters.counter ORDER BY name;
:step_end

--
-- From 0.4 to 0.5: counters declared with 0.4 keep counting; thresholds set with 0.4 (through 0.4's four-argument
-- set_thresholds, which the new library still serves) keep firing, and the updated set_thresholds takes "every".
--
DROP EXTENSION counters;
CREATE EXTENSION counters VERSION '0.4';
:posts
SELECT counters.create_counter('blog_posts_log', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', mode => 'log');
CREATE TABLE crossings (blog_id int, threshold numeric, direction text);
CREATE FUNCTION note(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                     direction text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO upgrade_test.crossings VALUES ((key ->> 'blog_id')::int, threshold, direction)
$$;
SELECT counters.set_thresholds('blog_posts', 'posts', '{12}', 'note'::regproc);
CREATE TABLE blogs (id int PRIMARY KEY, post_count int NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g FROM generate_series(1, 5) g;
SELECT counters.create_counter('blog_cache', 'SELECT blog_id AS id, count(*) AS post_count FROM posts GROUP BY blog_id',
                               target => 'blogs');
-- (as a 0.4 library left it: without the trigger 0.5 gives an existing table that keeps counter-cache columns)
DROP TRIGGER counters_target_key ON blogs;
-- (and a counter the superuser declared under 0.4 over an application's table, which 0.4 made the superuser's: the
-- library declares it as the application's now, so the test gives its relations to the superuser as 0.4 did)
CREATE ROLE counters_upgrade_app;
GRANT USAGE, CREATE ON SCHEMA upgrade_test TO counters_upgrade_app;
CREATE TABLE app_posts (id serial PRIMARY KEY, blog_id int NOT NULL);
ALTER TABLE app_posts OWNER TO counters_upgrade_app;
INSERT INTO app_posts (blog_id) SELECT g % 3 FROM generate_series(1, 9) g;
SELECT counters.create_counter('app_posts_su', 'SELECT blog_id, count(*) AS posts FROM app_posts GROUP BY blog_id', mode => 'log');
ALTER TABLE app_posts_su_totals OWNER TO CURRENT_USER;
ALTER TABLE app_posts_su_log OWNER TO CURRENT_USER;
ALTER VIEW app_posts_su OWNER TO CURRENT_USER;
ALTER VIEW app_posts_su_definition OWNER TO CURRENT_USER;
-- a DBA took set_thresholds from PUBLIC, and gave it and alter_counter to one role: the update keeps both
SELECT current_user AS installer \gset
SET ROLE NONE;
CREATE ROLE counters_upgrade_dba;
REVOKE EXECUTE ON FUNCTION counters.set_thresholds(text, text, numeric[], regprocedure) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION counters.set_thresholds(text, text, numeric[], regprocedure) TO counters_upgrade_dba;
GRANT EXECUTE ON FUNCTION counters.alter_counter(text, text, integer) TO counters_upgrade_dba WITH GRANT OPTION;
SET ROLE :"installer";
ALTER EXTENSION counters UPDATE;
SELECT p.oid::regprocedure AS function, has_function_privilege('public', p.oid, 'EXECUTE') AS public,
       has_function_privilege('counters_upgrade_dba', p.oid, 'EXECUTE') AS dba,
       has_function_privilege('counters_upgrade_dba', p.oid, 'EXECUTE WITH GRANT OPTION') AS dba_grants
  FROM pg_proc p WHERE p.proname IN ('set_thresholds', 'alter_counter') AND p.pronamespace = 'counters'::regnamespace
 ORDER BY 1;
SET ROLE NONE;
GRANT EXECUTE ON FUNCTION counters.set_thresholds(text, text, numeric[], regprocedure, numeric) TO PUBLIC;
REVOKE ALL ON FUNCTION counters.set_thresholds(text, text, numeric[], regprocedure, numeric) FROM counters_upgrade_dba;
REVOKE ALL ON FUNCTION counters.alter_counter(text, text, integer, text) FROM counters_upgrade_dba CASCADE;
-- (the kept grants became the extension's initial privileges: from PostgreSQL 17 on, DROP ROLE refuses a role they
-- name until DROP OWNED BY removes them)
DROP OWNED BY counters_upgrade_dba;
DROP ROLE counters_upgrade_dba;
SET ROLE :"installer";
SELECT extversion FROM pg_extension WHERE extname = 'counters';
SELECT * FROM member_diff;
-- (the superuser's counter now belongs to the owner of the table it counts, who may change it)
SELECT relname, pg_get_userbyid(relowner) AS owner
  FROM pg_class WHERE relname LIKE 'app\_posts\_su%' AND relkind IN ('r', 'v') ORDER BY 1;
SET ROLE counters_upgrade_app;
SELECT counters.alter_counter('app_posts_su', 'exact');
SELECT * FROM counters.verify('app_posts_su');
SELECT counters.drop_counter('app_posts_su');
SET ROLE :"installer";
DROP TABLE app_posts;
REVOKE ALL ON SCHEMA upgrade_test FROM counters_upgrade_app;
DROP ROLE counters_upgrade_app;
SELECT counter, column_name, thresholds, callback, every FROM counters.thresholds;
-- (the update described every counter in its definition view's comment, which a schema-only dump carries)
SELECT name, obj_description(query, 'pg_class') IS NOT NULL AS described FROM counters.counter ORDER BY 1;
-- (the update gave the counter cache's table its trigger: a row taking another key takes that key's values)
SELECT tgname FROM pg_trigger WHERE tgrelid = 'blogs'::regclass AND NOT tgisinternal ORDER BY 1;
UPDATE blogs SET id = 50 WHERE id = 1;
SELECT * FROM counters.verify('blog_cache');
INSERT INTO posts (blog_id) SELECT 2 FROM generate_series(1, 3);
SELECT counters.set_thresholds('blog_posts', 'posts', '{12}', 'note'::regproc, every => 5);
INSERT INTO posts (blog_id) SELECT 3 FROM generate_series(1, 12);
SELECT * FROM crossings;
SELECT counter, column_name, thresholds, callback, every FROM counters.thresholds;
INSERT INTO posts (blog_id, rating) VALUES (1, 7), (5, 2);
UPDATE posts SET blog_id = 4, rating = rating + 1 WHERE id % 5 = 0;
DELETE FROM posts WHERE id % 7 = 0;
SELECT counters.compact() > 0 AS compacted;
SELECT * FROM counters.verify();
SELECT counters.drop_counter(name) FROM counters.counter ORDER BY name;
:step_end

--
-- DROP EXTENSION counters CASCADE with counters declared: no trigger or function of the extension is left on user
-- tables, the source and its data stay; the counter tables stay as plain tables (yours); CREATE EXTENSION works again
-- and counters can be declared anew.
--
-- (The application role installs the extension itself: it is trusted.)
DROP EXTENSION counters;
RESET ROLE;
CREATE EXTENSION counters;
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

--
-- A hostile public schema: the database owner (who may install the trusted extension, and owns public) plants
-- operators there that pg_catalog has no exact match for, or that shadow pg_catalog's for some argument types. No
-- object of the extension binds them, after a fresh install by the database owner or an update by a superuser:
-- otherwise the next superuser reading counters.stats would run the owner's code.
--
CREATE FUNCTION public.planted_oid(a oid, b regclass) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE FUNCTION public.planted_proc(a oid, b regprocedure) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE FUNCTION public.planted_arrow(a jsonb, b jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS 'SELECT a';
CREATE FUNCTION public.planted_text(a jsonb, b jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS 'SELECT b::text';
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.planted_oid);
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regprocedure, FUNCTION = public.planted_proc);
CREATE OPERATOR public.-> (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = public.planted_arrow);
CREATE OPERATOR public.->> (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = public.planted_text);
-- (what any member of the extension, or a view's rule, depends on outside pg_catalog and the extension's schema)
CREATE TEMP VIEW planted_bindings AS
WITH members AS (
	SELECT d.classid, d.objid FROM pg_depend d
	 WHERE d.refclassid = 'pg_extension'::regclass::oid AND d.deptype = 'e'
	   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'counters')),
objects AS (
	SELECT classid, objid FROM members
	UNION SELECT 'pg_rewrite'::regclass::oid, r.oid FROM pg_rewrite r JOIN members m
	    ON m.classid = 'pg_class'::regclass::oid AND r.ev_class::oid = m.objid)
SELECT pg_describe_object(d.classid, d.objid, 0) AS member, pg_describe_object(d.refclassid, d.refobjid, 0) AS binds
  FROM pg_depend d JOIN objects o ON o.classid = d.classid AND o.objid = d.objid
 WHERE (d.refclassid = 'pg_operator'::regclass::oid
        AND (SELECT oprnamespace::regnamespace::text FROM pg_operator WHERE oid = d.refobjid) <> 'pg_catalog')
    OR (d.refclassid = 'pg_proc'::regclass::oid
        AND (SELECT pronamespace::regnamespace::text FROM pg_proc WHERE oid = d.refobjid) NOT IN ('pg_catalog', 'counters'))
 ORDER BY 1, 2;
DROP EXTENSION counters;
CREATE EXTENSION counters;
SELECT * FROM planted_bindings;
SELECT count(*) AS stats_rows FROM counters.stats;
-- (the frozen 0.3 script itself does not survive the planted jsonb operators; only a superuser installs it)
DROP OPERATOR public.-> (jsonb, jsonb), public.->> (jsonb, jsonb);
SET ROLE NONE;
DROP EXTENSION counters;
CREATE EXTENSION counters VERSION '0.3';
ALTER EXTENSION counters UPDATE;
SELECT * FROM planted_bindings;
DROP EXTENSION counters;
RESET ROLE;
DROP VIEW planted_bindings;
DROP OPERATOR public.= (oid, regclass), public.= (oid, regprocedure);
DROP FUNCTION public.planted_oid(oid, regclass), public.planted_proc(oid, regprocedure),
	public.planted_arrow(jsonb, jsonb), public.planted_text(jsonb, jsonb);
CREATE EXTENSION counters;
