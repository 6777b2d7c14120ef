--
-- declare: declaring counters (the counter table's shape, the catalog, expression keys, count(x), FILTER, numeric
-- sums, NULL keys, a new table named as target, several counters on one source, drop_counter), then every
-- rejection at declaration with its SQLSTATE, each followed by proof that nothing was left behind.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA declare_test;
SET search_path = declare_test, regress;

-- The seed article's table.
CREATE TABLE posts (
	id           int PRIMARY KEY,
	user_id      int NOT NULL,
	blog_id      int NOT NULL,
	rating       int,
	is_published boolean NOT NULL DEFAULT true,
	is_deleted   boolean NOT NULL DEFAULT false,
	tag          text,
	created      timestamp,
	amount       numeric,
	email        text
);
INSERT INTO posts VALUES
	(1, 1, 1, 5,    true,  false, 'SQL',  '2024-03-01 09:00', 10.50, 'a@x'),
	(2, 1, 1, 3,    true,  false, 'sql',  '2024-03-01 17:30', 0.25,  NULL),
	(3, 1, 2, NULL, true,  false, 'Perf', '2024-03-02 08:00', NULL,  'a@x'),
	(4, 2, 1, 4,    false, false, 'SQL',  '2024-03-02 10:00', 7,     'b@x'),
	(5, 2, 1, 2,    true,  true,  NULL,   '2024-03-02 11:00', -1.5,  NULL),
	(6, 2, 2, 1,    true,  false, NULL,   '2024-03-03 12:00', 3.333, 'b@x'),
	(7, 3, 2, 5,    true,  false, 'perf', '2024-03-03 13:00', 100,   NULL),
	(8, 3, 3, NULL, false, true,  'Misc', NULL,               NULL,  NULL);

-- Each counter table and the recomputation written out in this test that check_all() compares it with (setup.sql).
CREATE TABLE checks (counter regclass PRIMARY KEY, expected regclass NOT NULL);
-- The capture triggers of a table.
CREATE FUNCTION capture_triggers(rel regclass) RETURNS TABLE (trigger_definition text)
LANGUAGE sql AS $$
	SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t
	 WHERE t.tgrelid = rel AND t.tgfoid = 'counters.capture()'::regprocedure ORDER BY t.tgname
$$;

--
-- The seed's example: posts and rating sums per (user, blog), published and not deleted.
--
-- (regress.seed_example(): setup.sql; counters.counters shows the definition below)
SELECT counters.create_counter('user_blog_posts', regress.seed_example());
-- Both keys are NOT NULL columns of the source: a primary key. Values are NOT NULL DEFAULT 0; sum(int) is bigint.
\d user_blog_posts
SELECT * FROM user_blog_posts ORDER BY user_id, blog_id;
CREATE VIEW expect_user_blog_posts AS
	SELECT user_id, blog_id, count(*) AS posts, coalesce(sum(rating), 0) AS rating_sum
	  FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id;
INSERT INTO checks VALUES ('user_blog_posts', 'expect_user_blog_posts');
SELECT * FROM check_all();
-- The definition view recomputes from scratch (sum() of no non-null rating is NULL there, 0 in the counter).
SELECT * FROM user_blog_posts_definition ORDER BY user_id, blog_id;
-- The catalog.
SELECT name, source, target, created_target, definition_view, options FROM counters.counters ORDER BY name;
SELECT definition FROM counters.counters WHERE name = 'user_blog_posts';
SELECT name, source, target, query, owns_target FROM counters.counter ORDER BY name;
-- The triggers it attached to the source.
SELECT * FROM capture_triggers('posts');
-- The counter follows writes.
INSERT INTO posts VALUES (9, 3, 3, 4, true, false, 'misc', '2024-03-04 00:00', 1, NULL);
UPDATE posts SET is_published = true WHERE id = 4;
UPDATE posts SET is_deleted = true WHERE id = 1;
SELECT * FROM user_blog_posts ORDER BY user_id, blog_id;
SELECT * FROM check_all();

--
-- Expression keys (lower(tag), date_trunc('day', ts) on timestamp without time zone), count(x), FILTER, numeric
-- sums, and NULL keys: a nullable key makes the key UNIQUE NULLS NOT DISTINCT, a NULL key is one group.
--
SELECT counters.create_counter('tag_days', $$
	SELECT lower(tag) AS tag, date_trunc('day', created) AS day,
	       count(*) AS posts,
	       count(email) AS with_email,
	       count(*) FILTER (WHERE rating >= 4) AS good,
	       sum(amount) AS amount
	  FROM posts
	 GROUP BY lower(tag), date_trunc('day', created)
$$);
\d tag_days
SELECT * FROM tag_days ORDER BY tag, day;
CREATE VIEW expect_tag_days AS
	SELECT lower(tag) AS tag, date_trunc('day', created) AS day, count(*) AS posts, count(email) AS with_email,
	       count(*) FILTER (WHERE rating >= 4) AS good, coalesce(sum(amount), 0) AS amount
	  FROM posts GROUP BY lower(tag), date_trunc('day', created);
INSERT INTO checks VALUES ('tag_days', 'expect_tag_days');
SELECT * FROM check_all();
-- Into and out of the NULL group; a key that differs only in case is the same group.
INSERT INTO posts VALUES (10, 4, 4, 4, true, false, NULL, NULL, 0.125, 'c@x'),
                         (11, 4, 4, NULL, true, false, 'PERF', '2024-03-03 23:59:59', NULL, NULL);
UPDATE posts SET tag = NULL WHERE id = 7;
UPDATE posts SET tag = 'Sql', created = NULL WHERE id = 8;
SELECT * FROM tag_days ORDER BY tag, day;
SELECT * FROM check_all();
DELETE FROM posts WHERE tag IS NULL AND created IS NULL;
SELECT * FROM tag_days WHERE tag IS NULL ORDER BY day;
SELECT * FROM check_all();

-- A counter whose values are all FILTERed counts and sums: groups that add up to zero are not stored.
SELECT counters.create_counter('blog_stats', $$
	SELECT blog_id,
	       count(*) FILTER (WHERE is_published AND NOT is_deleted) AS live,
	       count(*) FILTER (WHERE NOT is_published) AS drafts,
	       count(rating) FILTER (WHERE is_published) AS rated,
	       sum(amount) FILTER (WHERE amount > 0) AS income
	  FROM posts
	 GROUP BY blog_id
$$);
\d blog_stats
SELECT * FROM blog_stats ORDER BY blog_id;
CREATE VIEW expect_blog_stats AS
	SELECT blog_id, count(*) FILTER (WHERE is_published AND NOT is_deleted) AS live,
	       count(*) FILTER (WHERE NOT is_published) AS drafts,
	       count(rating) FILTER (WHERE is_published) AS rated,
	       coalesce(sum(amount) FILTER (WHERE amount > 0), 0) AS income
	  FROM posts GROUP BY blog_id
	HAVING count(*) FILTER (WHERE is_published AND NOT is_deleted) <> 0 OR count(*) FILTER (WHERE NOT is_published) <> 0
	    OR count(rating) FILTER (WHERE is_published) <> 0 OR coalesce(sum(amount) FILTER (WHERE amount > 0), 0) <> 0;
INSERT INTO checks VALUES ('blog_stats', 'expect_blog_stats');
SELECT * FROM check_all();
INSERT INTO posts VALUES (12, 5, 5, NULL, true, true, NULL, NULL, -3, NULL);  -- contributes nothing: no row
SELECT * FROM blog_stats WHERE blog_id = 5;
UPDATE posts SET is_deleted = false WHERE id = 12;
SELECT * FROM blog_stats WHERE blog_id = 5;
UPDATE posts SET is_deleted = true WHERE id = 12;                              -- back to all zeros: row deleted
SELECT * FROM blog_stats WHERE blog_id = 5;
SELECT * FROM check_all();

--
-- A counter into a new table whose name is given as target (in the current schema, and schema-qualified).
--
SELECT counters.create_counter('posts_by_user', $$
	SELECT user_id, count(*) AS posts FROM posts GROUP BY user_id
$$, target => 'user_post_counts');
\d user_post_counts
SELECT to_regclass('posts_by_user') AS no_table_named_after_the_counter,
       to_regclass('posts_by_user_definition') AS definition_view;
CREATE SCHEMA declare_other;
SELECT counters.create_counter('posts_by_blog', $$
	SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id
$$, target => 'declare_other.blog_post_counts');
\d declare_other.blog_post_counts
SELECT to_regclass('declare_other.posts_by_blog_definition') AS definition_view;
CREATE VIEW expect_user_post_counts AS SELECT user_id, count(*) AS posts FROM posts GROUP BY user_id;
CREATE VIEW expect_blog_post_counts AS SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id;
INSERT INTO checks VALUES ('user_post_counts', 'expect_user_post_counts'),
                          ('declare_other.blog_post_counts', 'expect_blog_post_counts');
SELECT name, source, target, created_target, definition_view FROM counters.counters ORDER BY name;

--
-- Several counters on one source: one set of triggers, every counter maintained by each statement.
--
SELECT * FROM capture_triggers('posts');
INSERT INTO posts SELECT 100 + i, i % 4, i % 3, i % 6, i % 5 <> 0, i % 7 = 0, 'T' || (i % 2), '2024-04-01'::timestamp + i * interval '5 hours', i / 8.0, NULLIF('e' || (i % 3), 'e0')
  FROM generate_series(1, 40) i;
UPDATE posts SET blog_id = blog_id + 1, tag = upper(tag), rating = rating + 1 WHERE id % 3 = 0;
DELETE FROM posts WHERE id % 5 = 1;
SELECT * FROM check_all();

--
-- drop_counter: removes the catalog row, the view and the table it created; the source keeps its triggers while
-- another counter of it remains.
--
DELETE FROM checks WHERE counter::text = 'tag_days';
SELECT counters.drop_counter('tag_days');
SELECT to_regclass('tag_days') AS "table", to_regclass('tag_days_definition') AS "view",
       (SELECT count(*) FROM counters.counter WHERE name = 'tag_days') AS catalog_rows;
SELECT count(*) AS capture_triggers FROM capture_triggers('posts');
-- The remaining counters still count.
UPDATE posts SET user_id = user_id + 1 WHERE id > 100 AND id % 2 = 0;
SELECT * FROM check_all();
-- A table created for a target name is dropped too; the other schema stays.
DELETE FROM checks WHERE counter::text = 'declare_other.blog_post_counts';
SELECT counters.drop_counter('posts_by_blog');
SELECT to_regclass('declare_other.blog_post_counts') AS "table",
       to_regclass('declare_other.posts_by_blog_definition') AS "view",
       to_regnamespace('declare_other') IS NOT NULL AS schema_kept;
DELETE FROM checks WHERE counter::text IN ('user_post_counts', 'blog_stats');
SELECT counters.drop_counter('posts_by_user');
SELECT counters.drop_counter('blog_stats');
SELECT count(*) AS capture_triggers FROM capture_triggers('posts');
-- The last counter of the source: its triggers go with it.
DELETE FROM checks;
SELECT counters.drop_counter('user_blog_posts');
SELECT * FROM capture_triggers('posts');
SELECT to_regclass('user_blog_posts') AS "table", to_regclass('user_blog_posts_definition') AS "view";
SELECT count(*) AS catalog_rows FROM counters.counter;
-- Writes to the source no longer touch anything.
INSERT INTO posts VALUES (200, 1, 1, 1, true, false, NULL, NULL, NULL, NULL);
-- Dropping twice.
SELECT counters.drop_counter('user_blog_posts');
\echo SQLSTATE :SQLSTATE

--
-- Rejections. Every failed declaration must leave nothing behind: no relation, no catalog row, no trigger.
--
CREATE TABLE blogs (id int PRIMARY KEY, title text);
CREATE VIEW posts_view AS SELECT * FROM posts;
SET ROLE NONE;
CREATE FOREIGN DATA WRAPPER declare_test_fdw;
CREATE SERVER declare_test_server FOREIGN DATA WRAPPER declare_test_fdw;
GRANT USAGE ON FOREIGN SERVER declare_test_server TO counters_app;
RESET ROLE;
CREATE FOREIGN TABLE remote_posts (id int, blog_id int) SERVER declare_test_server;
CREATE TABLE events (id int, kind text, at date NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE events_2024 PARTITION OF events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE base_posts (id int, blog_id int);
CREATE TABLE child_posts (extra text) INHERITS (base_posts);
-- existing targets: blog_cache has a primary key on id, blog_nokey has no unique key
CREATE TABLE blog_cache (id int PRIMARY KEY, post_count int, title text, score float8);
CREATE TABLE blog_nokey (id int, post_count int);
CREATE UNIQUE INDEX blog_nokey_partial ON blog_nokey (id) WHERE id > 0;
INSERT INTO blog_cache VALUES (1, 42, 'one', 0), (2, NULL, 'two', 0);
-- a role that owns own_posts only
SET ROLE NONE; CREATE ROLE counters_regress_declare; RESET ROLE;
GRANT USAGE, CREATE ON SCHEMA declare_test TO counters_regress_declare;
GRANT SELECT, UPDATE ON posts, blog_cache TO counters_regress_declare;
CREATE TABLE own_posts (id int PRIMARY KEY, blog_id int NOT NULL);
SET ROLE NONE; ALTER TABLE own_posts OWNER TO counters_regress_declare; RESET ROLE;
-- a counter that exists, for the duplicate name
SELECT counters.create_counter('taken', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id');

-- What each rejection below must leave as it is (rejected(:'SQLSTATE') says what it left behind; setup.sql).
SELECT baseline('blog_cache');

-- joins and more than one table (0A000)
SELECT counters.create_counter('bad', 'SELECT p.blog_id, count(*) AS n FROM posts p LEFT JOIN blogs b ON b.id = p.blog_id GROUP BY p.blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT p.blog_id, count(*) AS n FROM posts p, blogs b WHERE b.id = p.blog_id GROUP BY p.blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- subqueries (0A000)
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts WHERE blog_id IN (SELECT id FROM blogs) GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM (SELECT * FROM posts) p GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- HAVING, DISTINCT, window functions, ORDER BY, LIMIT, WITH, UNION, GROUPING SETS, set-returning functions (0A000)
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id HAVING count(*) > 1');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT DISTINCT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n, rank() OVER (ORDER BY blog_id) AS r FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id ORDER BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id LIMIT 10');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'WITH p AS (SELECT * FROM posts) SELECT blog_id, count(*) AS n FROM p GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id UNION SELECT user_id, count(*) FROM posts GROUP BY user_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, user_id, count(*) AS n FROM posts GROUP BY GROUPING SETS ((blog_id), (user_id))');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY ROLLUP (blog_id)');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n, generate_series(1, 2) AS g FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- other aggregates (0A000), each with the way it is kept today (docs/aggregates.md) as its hint (avg() of a
-- floating-point value: average a numeric one; avg(), bool_or(), bool_and() and every() are kept: derived_kinds.sql)
SELECT counters.create_counter('bad', 'SELECT blog_id, avg(rating::float8) AS r FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n, min(rating) AS lo FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, max(rating) AS hi FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(DISTINCT user_id) AS authors FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- (each hint above names the way it is kept today from counts and sums, with the argument as written: an aggregate
-- without one keeps the general hint)
SELECT counters.create_counter('bad', 'SELECT blog_id, string_agg(tag, '','') AS tags FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- sum of a floating-point value (0A000, with a hint to sum numeric instead)
SELECT counters.create_counter('bad', 'SELECT blog_id, sum(rating * 0.5::float8) AS half FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- non-immutable functions in WHERE, FILTER, a key, a value (42P17)
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts WHERE created < now() GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) FILTER (WHERE random() < 0.5) AS n FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', $$SELECT date_trunc('day', created::timestamptz) AS day, count(*) AS n FROM posts GROUP BY 1$$);
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, sum((random() * 10)::int) AS n FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- no GROUP BY (0A000), no aggregate (42P17)
SELECT counters.create_counter('bad', 'SELECT count(*) AS n FROM posts');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- a select-list column that is neither a key nor an aggregate (0A000)
SELECT counters.create_counter('bad', 'SELECT blog_id, sum(rating) / count(*) AS average FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n, 1 AS one FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- a GROUP BY expression not in the select list (42P17)
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id, user_id');
SELECT * FROM rejected(:'SQLSTATE');
-- views and foreign tables as source (42809)
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts_view GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM remote_posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- a partition as source, FROM ONLY on a partitioned table, a table with inheritance children (0A000)
SELECT counters.create_counter('bad', 'SELECT kind, count(*) AS n FROM events_2024 GROUP BY kind');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT kind, count(*) AS n FROM ONLY events GROUP BY kind');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM base_posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- the definition is not one SELECT statement
SELECT counters.create_counter('bad', 'DELETE FROM posts');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id; SELECT 1');
SELECT * FROM rejected(:'SQLSTATE');
-- the name is already used (42710); empty or longer than 52 characters (42602)
SELECT counters.create_counter('taken', 'SELECT user_id, count(*) AS n FROM posts GROUP BY user_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('', 'SELECT user_id, count(*) AS n FROM posts GROUP BY user_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter(repeat('b', 53), 'SELECT user_id, count(*) AS n FROM posts GROUP BY user_id');
SELECT * FROM rejected(:'SQLSTATE');
-- names are identifiers measured in bytes (42602): 26 two-byte letters fit, 27 do not
SELECT counters.create_counter(repeat('ж', 27), 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter(repeat('ж', 26), 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
SELECT counters.drop_counter(repeat('ж', 26));
-- unknown table (42P01) or column (42703): PostgreSQL's own errors, pointing into the definition
\set SHOW_CONTEXT errors
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM no_such_table GROUP BY blog_id');
\set SHOW_CONTEXT never
SELECT * FROM rejected(:'SQLSTATE');
\set SHOW_CONTEXT errors
SELECT counters.create_counter('bad', 'SELECT blog_id, count(no_such_column) AS n FROM posts GROUP BY blog_id');
\set SHOW_CONTEXT never
SELECT * FROM rejected(:'SQLSTATE');
-- existing target: a missing column (42703), a value column that is not int/numeric (42804), key columns that are
-- not a unique key of the target (42P17; a partial unique index does not count)
SELECT counters.create_counter('bad', 'SELECT blog_id AS id, count(*) AS posts FROM posts GROUP BY blog_id', 'blog_cache');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id AS id, count(*) AS title FROM posts GROUP BY blog_id', 'blog_cache');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id AS id, count(*) AS score FROM posts GROUP BY blog_id', 'blog_cache');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id AS id, count(*) AS post_count FROM posts GROUP BY blog_id', 'blog_nokey');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT user_id AS post_count, count(*) AS id FROM posts GROUP BY user_id', 'blog_cache');
SELECT * FROM rejected(:'SQLSTATE');
-- the target's values were not touched
SELECT * FROM blog_cache ORDER BY id;

-- system columns anywhere (0A000): they are not part of a row's contents
SELECT counters.create_counter('bad', 'SELECT blog_id, count(xmin) AS n FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts WHERE ctid IS NOT NULL GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT tableoid AS t, count(*) AS n FROM posts GROUP BY 1');
SELECT * FROM rejected(:'SQLSTATE');
-- column names a counter table cannot have (42701): a system column's, sharded mode's slot column, twice the same
SELECT counters.create_counter('bad', 'SELECT blog_id AS ctid, count(*) AS n FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id AS counters_slot, count(*) AS n FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id AS n, count(*) AS n FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
-- more keys than a unique index (and a slot column) can hold (54011)
SELECT counters.create_counter('bad', format('SELECT %s, count(*) AS n FROM posts GROUP BY %s',
	(SELECT string_agg(format('id + %s AS k%s', g, g), ', ') FROM generate_series(1, 32) g),
	(SELECT string_agg(g::text, ', ') FROM generate_series(1, 32) g)));
SELECT * FROM rejected(:'SQLSTATE');
-- a table's row type or an anonymous record as a key (0A000)
SELECT counters.create_counter('bad', 'SELECT p AS post, count(*) AS n FROM posts p GROUP BY p');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT ROW(blog_id, user_id) AS pair, count(*) AS n FROM posts GROUP BY 1');
SELECT * FROM rejected(:'SQLSTATE');
-- temporary tables (0A000): dropped at the end of their session without an event the counter could follow
CREATE TEMP TABLE scratch (blog_id int);
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM scratch GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id', 'pg_temp.bad_target');
SELECT * FROM rejected(:'SQLSTATE');
DROP TABLE scratch;
-- system catalogs and the extension's own catalog: not the caller's (42501, before the definition is analysed); nor
-- a superuser's to count (0A000)
SELECT counters.create_counter('bad', 'SELECT relkind, count(*) AS n FROM pg_class GROUP BY relkind');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT mode, count(*) AS n FROM counters.counter GROUP BY mode');
SELECT * FROM rejected(:'SQLSTATE');
SET ROLE NONE;
SELECT counters.create_counter('bad', 'SELECT relkind, count(*) AS n FROM pg_class GROUP BY relkind');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT mode, count(*) AS n FROM counters.counter GROUP BY mode');
SELECT * FROM rejected(:'SQLSTATE');
RESET ROLE;
-- PostgreSQL's own errors while declaring name the counter too: an existing relation (42P07), the definition
-- failing on the rows during the initial fill (22012)
CREATE TABLE clash (id int);
\set SHOW_CONTEXT errors
SELECT counters.create_counter('clash', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
\set SHOW_CONTEXT never
\echo SQLSTATE :SQLSTATE
DROP TABLE clash;
SELECT * FROM rejected('42P07');
\set SHOW_CONTEXT errors
SELECT counters.create_counter('bad', 'SELECT blog_id, sum(10 / (id - 3)) AS n FROM posts GROUP BY blog_id');
\set SHOW_CONTEXT never
SELECT * FROM rejected(:'SQLSTATE');
-- ... and so does a definition failing on a written row later (the write fails, nothing is miscounted)
SELECT counters.create_counter('fragile', 'SELECT blog_id, sum(100 / (id - 1000)) AS n FROM posts GROUP BY blog_id');
\set SHOW_CONTEXT errors
INSERT INTO posts (id, user_id, blog_id) VALUES (1000, 1, 1);
\set SHOW_CONTEXT never
\echo SQLSTATE :SQLSTATE
SELECT * FROM counters.verify('fragile');
SELECT counters.drop_counter('fragile');

-- not the owner of the source or of the target (42501); the role may create tables and update both tables, it
-- owns own_posts only
SET ROLE counters_regress_declare;
SELECT counters.create_counter('bad', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT blog_id AS id, count(*) AS post_count FROM own_posts GROUP BY blog_id', 'blog_cache');
SELECT * FROM rejected(:'SQLSTATE');
-- dropping someone else's counter
SELECT counters.drop_counter('taken');
\echo SQLSTATE :SQLSTATE
RESET ROLE;
SELECT * FROM blog_cache ORDER BY id;
SELECT name FROM counters.counter ORDER BY name;

-- clean up
SELECT counters.drop_counter('taken');
SELECT count(*) AS catalog_rows FROM counters.counter;
SET client_min_messages = warning;
DROP SCHEMA declare_test, declare_other CASCADE;
SET ROLE NONE;
DROP SERVER declare_test_server;
DROP FOREIGN DATA WRAPPER declare_test_fdw;
RESET ROLE;
SET ROLE NONE; DROP ROLE counters_regress_declare; RESET ROLE;
RESET client_min_messages;
RESET search_path;
