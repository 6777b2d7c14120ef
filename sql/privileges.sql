--
-- privileges: a role that may write the source but has no privileges on the counter tables keeps them exact (the
-- deltas are applied as the counter table's owner); only the owner of the source (and target) may declare or drop a
-- counter (42501); functions and operators of a hostile schema first on the search_path are never called, neither
-- by create_counter nor by the trigger.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
-- (This test is about roles: the superuser sets up and observes, SET ROLE NONE; the owner, the writer and the
-- stranger are roles that are not superusers.)
SET ROLE NONE;
CREATE SCHEMA priv_test;
CREATE SCHEMA priv_hidden;
SET search_path = priv_test, regress;

-- Checks run as the test's superuser, whoever calls them.
CREATE TABLE checks (counter regclass PRIMARY KEY, expected regclass NOT NULL);
CREATE FUNCTION check_all() RETURNS TABLE (counter text, side text, row_value text)
LANGUAGE sql SECURITY DEFINER SET search_path = priv_test AS $$ SELECT * FROM regress.check_all() $$;

CREATE ROLE counters_regress_owner;
CREATE ROLE counters_regress_writer;
CREATE ROLE counters_regress_stranger;
GRANT USAGE, CREATE ON SCHEMA priv_test, priv_hidden TO counters_regress_owner;
GRANT USAGE ON SCHEMA priv_test TO counters_regress_writer, counters_regress_stranger;
GRANT CREATE ON SCHEMA priv_test TO counters_regress_stranger;

--
-- The owner declares counters on its table: one in a table the counter creates, one in the owner's blogs table.
--
SET ROLE counters_regress_owner;
CREATE TABLE blogs (id int PRIMARY KEY, post_count int NOT NULL DEFAULT 0, rating_sum bigint NOT NULL DEFAULT 0);
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, user_id int NOT NULL, rating int,
                    is_published boolean NOT NULL DEFAULT true);
INSERT INTO blogs (id) SELECT generate_series(1, 4);
INSERT INTO posts SELECT i, 1 + i % 4, i % 3, i % 5, i % 4 <> 0 FROM generate_series(1, 20) i;
SELECT counters.create_counter('user_posts', $$
	SELECT user_id, count(*) AS posts, sum(rating) AS rating_sum FROM posts GROUP BY user_id
$$);
SELECT counters.create_counter('blog_cache', $$
	SELECT blog_id AS id, count(*) AS post_count, sum(rating) AS rating_sum FROM posts WHERE is_published GROUP BY blog_id
$$, target => 'blogs');
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON posts TO counters_regress_writer;
SET ROLE NONE;
CREATE VIEW expect_user_posts AS
	SELECT user_id, count(*) AS posts, coalesce(sum(rating), 0) AS rating_sum FROM posts GROUP BY user_id;
CREATE VIEW blogs_cached AS SELECT id, post_count, rating_sum FROM blogs;
CREATE VIEW expect_blogs_cached AS
	SELECT b.id, count(p.id) AS post_count, coalesce(sum(p.rating), 0) AS rating_sum
	  FROM blogs b LEFT JOIN posts p ON p.blog_id = b.id AND p.is_published GROUP BY b.id;
INSERT INTO checks VALUES ('user_posts', 'expect_user_posts'), ('blogs_cached', 'expect_blogs_cached');
SELECT * FROM check_all();
SELECT relname, relowner::regrole AS owner FROM pg_class WHERE relname IN ('user_posts', 'blogs') ORDER BY relname;

--
-- The writer may write posts, and nothing else.
--
SELECT t AS "table", has_table_privilege('counters_regress_writer', t, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE') AS any_privilege
  FROM unnest(ARRAY['posts', 'user_posts', 'blogs']) t ORDER BY 1;
SET ROLE counters_regress_writer;
SELECT * FROM user_posts;
UPDATE blogs SET post_count = 0;
-- every kind of write keeps both counters exact
INSERT INTO posts VALUES (100, 1, 1, 5, true);
SELECT * FROM check_all();
INSERT INTO posts SELECT 200 + i, 1 + i % 3, 7, i, i % 2 = 0 FROM generate_series(1, 10) i;
SELECT * FROM check_all();
UPDATE posts SET blog_id = 4, user_id = 5 WHERE id % 3 = 0;
SELECT * FROM check_all();
UPDATE posts SET is_published = NOT is_published, rating = rating + 1 WHERE id % 4 = 1;
SELECT * FROM check_all();
DELETE FROM posts WHERE id % 5 = 2;
SELECT * FROM check_all();
BEGIN;
DELETE FROM posts WHERE blog_id = 1;
SELECT * FROM check_all();
ROLLBACK;
TRUNCATE posts;
SELECT * FROM check_all();
INSERT INTO posts SELECT i, 1 + i % 2, i % 2, i, true FROM generate_series(1, 6) i;
SELECT * FROM check_all();
-- the writer still cannot read the counter table
SELECT count(*) FROM user_posts;
SET ROLE NONE;
SELECT * FROM user_posts ORDER BY user_id;

--
-- Only the owner of the source may declare or drop a counter of it (42501). The stranger may create tables in the
-- schema and update posts; the writer may write posts; neither owns it. Nothing is left behind.
--
SET ROLE counters_regress_stranger;
SELECT counters.create_counter('denied', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
\echo SQLSTATE :SQLSTATE
SELECT counters.drop_counter('user_posts');
\echo SQLSTATE :SQLSTATE
SET ROLE counters_regress_writer;
SELECT counters.create_counter('denied', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
\echo SQLSTATE :SQLSTATE
SELECT counters.drop_counter('user_posts');
\echo SQLSTATE :SQLSTATE
SET ROLE NONE;
GRANT SELECT, UPDATE ON posts TO counters_regress_stranger;
SET ROLE counters_regress_stranger;
SELECT counters.create_counter('denied', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
\echo SQLSTATE :SQLSTATE
-- a counter of the stranger's own table into the owner's blogs table: not the owner of the target
CREATE TABLE stranger_posts (id int PRIMARY KEY, blog_id int NOT NULL);
SELECT counters.create_counter('denied', 'SELECT blog_id AS id, count(*) AS post_count FROM stranger_posts GROUP BY blog_id', 'blogs');
\echo SQLSTATE :SQLSTATE
DROP TABLE stranger_posts;
SET ROLE NONE;
SELECT to_regclass('denied') AS "table", to_regclass('denied_definition') AS "view",
       (SELECT count(*) FROM counters.counter WHERE name = 'denied') AS catalog_rows,
       (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'posts'::regclass) AS triggers_on_posts;
SELECT name FROM counters.counter ORDER BY name;
SELECT * FROM check_all();

--
-- A counter table in a schema the writer has no USAGE on: the writer still writes the source, the counter follows.
--
SET ROLE counters_regress_owner;
CREATE TABLE comments (id int PRIMARY KEY, post_id int NOT NULL);
INSERT INTO comments SELECT i, i % 3 FROM generate_series(1, 5) i;
SELECT counters.create_counter('comments_per_post', 'SELECT post_id, count(*) AS comments FROM comments GROUP BY post_id',
                               target => 'priv_hidden.comments_per_post');
GRANT SELECT, INSERT, UPDATE, DELETE ON comments TO counters_regress_writer;
SET ROLE NONE;
CREATE VIEW expect_comments_per_post AS SELECT post_id, count(*) AS comments FROM comments GROUP BY post_id;
INSERT INTO checks VALUES ('priv_hidden.comments_per_post', 'expect_comments_per_post');
SELECT has_schema_privilege('counters_regress_writer', 'priv_hidden', 'USAGE') AS writer_sees_priv_hidden;
SET ROLE counters_regress_writer;
INSERT INTO comments VALUES (10, 1), (11, 7);
SELECT * FROM check_all();
UPDATE comments SET post_id = 2 WHERE id = 10;
DELETE FROM comments WHERE id = 1;
SELECT * FROM check_all();
SET ROLE NONE;

--
-- A hostile schema: aggregates sum() and count(), functions lower() and date_trunc(), and the operators
-- = <> < > <= >= + - on every pair of integer, bigint and numeric, and = <> on text, all raising an error when
-- called.
--
CREATE SCHEMA priv_evil;
GRANT USAGE ON SCHEMA priv_evil TO PUBLIC;
CREATE FUNCTION priv_evil.trap() RETURNS void LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'a function of priv_evil was called'; END$$;
DO $$
DECLARE
	l text;
	r text;
	op text;
BEGIN
	FOREACH l IN ARRAY ARRAY['integer', 'bigint', 'numeric'] LOOP
		FOREACH r IN ARRAY ARRAY['integer', 'bigint', 'numeric'] LOOP
			EXECUTE format('CREATE FUNCTION priv_evil.cmp(%s, %s) RETURNS boolean LANGUAGE plpgsql
			                AS $f$BEGIN PERFORM priv_evil.trap(); RETURN true; END$f$', l, r);
			EXECUTE format('CREATE FUNCTION priv_evil.arith(%s, %s) RETURNS %s LANGUAGE plpgsql
			                AS $f$BEGIN PERFORM priv_evil.trap(); RETURN NULL; END$f$', l, r,
			               CASE WHEN 'numeric' IN (l, r) THEN 'numeric' WHEN 'bigint' IN (l, r) THEN 'bigint' ELSE 'integer' END);
			FOREACH op IN ARRAY ARRAY['=', '<>', '<', '>', '<=', '>='] LOOP
				EXECUTE format('CREATE OPERATOR priv_evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = priv_evil.cmp)', op, l, r);
			END LOOP;
			FOREACH op IN ARRAY ARRAY['+', '-'] LOOP
				EXECUTE format('CREATE OPERATOR priv_evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = priv_evil.arith)', op, l, r);
			END LOOP;
		END LOOP;
	END LOOP;
END $$;
CREATE FUNCTION priv_evil.cmp(text, text) RETURNS boolean LANGUAGE plpgsql AS $$BEGIN PERFORM priv_evil.trap(); RETURN true; END$$;
CREATE OPERATOR priv_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = priv_evil.cmp);
CREATE OPERATOR priv_evil.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = priv_evil.cmp);
CREATE FUNCTION priv_evil.sum_step(bigint, integer) RETURNS bigint LANGUAGE plpgsql AS $$BEGIN PERFORM priv_evil.trap(); RETURN 0; END$$;
CREATE AGGREGATE priv_evil.sum(integer) (SFUNC = priv_evil.sum_step, STYPE = bigint);
CREATE FUNCTION priv_evil.count_step(bigint) RETURNS bigint LANGUAGE plpgsql AS $$BEGIN PERFORM priv_evil.trap(); RETURN 0; END$$;
CREATE AGGREGATE priv_evil.count(*) (SFUNC = priv_evil.count_step, STYPE = bigint);
CREATE FUNCTION priv_evil.lower(text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$BEGIN PERFORM priv_evil.trap(); RETURN ''; END$$;
CREATE FUNCTION priv_evil.date_trunc(text, timestamp) RETURNS timestamp LANGUAGE plpgsql IMMUTABLE
	AS $$BEGIN PERFORM priv_evil.trap(); RETURN NULL; END$$;
SELECT count(*) AS hostile_operators FROM pg_operator WHERE oprnamespace = 'priv_evil'::regnamespace;
CREATE TABLE events (id int PRIMARY KEY, kind text NOT NULL, at timestamp NOT NULL, weight int NOT NULL);
ALTER TABLE events OWNER TO counters_regress_owner;
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON events TO counters_regress_writer;
INSERT INTO events SELECT i, (ARRAY['Click', 'view', 'VIEW'])[1 + i % 3], '2024-05-01'::timestamp + i * interval '7 hours', i
  FROM generate_series(1, 12) i;
CREATE VIEW expect_event_days AS
	SELECT lower(kind) AS kind, date_trunc('day', at) AS day, count(*) AS n, coalesce(sum(weight), 0) AS weight
	  FROM events GROUP BY lower(kind), date_trunc('day', at);

-- 1. priv_evil first, pg_catalog implicitly before it: the definition means pg_catalog's functions, and nothing of
-- priv_evil is called when declaring or when writing.
SET ROLE counters_regress_owner;
SET search_path = priv_evil, priv_test;
SELECT counters.create_counter('event_days', $$
	SELECT lower(kind) AS kind, date_trunc('day', at) AS day, count(*) AS n, sum(weight) AS weight
	  FROM events GROUP BY lower(kind), date_trunc('day', at)
$$);
SET ROLE counters_regress_writer;
INSERT INTO events VALUES (100, 'Click', '2024-05-01 12:00', 3), (101, 'view', '2024-05-09', 4);
UPDATE events SET kind = 'view', weight = 9 WHERE id = 100;
DELETE FROM events WHERE id = 1;
SET ROLE NONE;
INSERT INTO checks VALUES ('priv_test.event_days', 'priv_test.expect_event_days');
SELECT * FROM check_all();

-- 2. priv_evil before pg_catalog. An unqualified sum() or count() of a definition now means priv_evil's: such a
-- definition is rejected (a count or sum the counter cannot maintain), without calling anything.
SET ROLE counters_regress_owner;
SET search_path = priv_evil, pg_catalog, priv_test;
SELECT counters.create_counter('evil_count', 'SELECT kind, count(*) AS n FROM events GROUP BY kind');
\echo SQLSTATE :SQLSTATE
SELECT counters.create_counter('evil_sum', 'SELECT kind, pg_catalog.count(*) AS n, sum(weight) AS w FROM events GROUP BY kind');
\echo SQLSTATE :SQLSTATE
-- With pg_catalog's aggregates named explicitly, declaring calls nothing of priv_evil, whether the counter gets a
-- table of its own name or of a name given as target.
SELECT counters.create_counter('kinds', 'SELECT kind, pg_catalog.count(*) AS n, pg_catalog.sum(weight) AS w FROM events GROUP BY kind');
SELECT counters.create_counter('weights', 'SELECT weight, pg_catalog.count(*) AS n FROM events GROUP BY weight',
                               target => 'priv_test.weight_counts');
-- writes by the writer with the same search_path call nothing of priv_evil either
SET ROLE counters_regress_writer;
INSERT INTO events VALUES (102, 'view', '2024-05-10', 1), (103, 'Click', '2024-05-10', 2);
UPDATE events SET kind = 'Click', weight = 5 WHERE id OPERATOR(pg_catalog.=) 2;
DELETE FROM events WHERE id OPERATOR(pg_catalog.=) 3;
SET ROLE NONE;
SET search_path = priv_test;
CREATE VIEW expect_kinds AS SELECT kind, count(*) AS n, coalesce(sum(weight), 0) AS w FROM events GROUP BY kind;
CREATE VIEW expect_weights AS SELECT weight, count(*) AS n FROM events GROUP BY weight;
INSERT INTO checks SELECT c, 'expect_kinds' FROM to_regclass('kinds') c WHERE c IS NOT NULL;
INSERT INTO checks SELECT c, 'expect_weights' FROM to_regclass('weight_counts') c WHERE c IS NOT NULL;
SELECT name FROM counters.counter ORDER BY name;
SELECT * FROM check_all();
SET ROLE counters_regress_writer;
SET search_path = priv_evil, pg_catalog, priv_test;
TRUNCATE events;
INSERT INTO events VALUES (1, 'x', '2024-01-01', 1);
SET ROLE NONE;
SET search_path = priv_test;
SELECT * FROM check_all();
-- dropping with priv_evil first
SET ROLE counters_regress_owner;
SET search_path = priv_evil, pg_catalog, priv_test;
SELECT counters.drop_counter('weights');
SELECT counters.drop_counter('kinds');
SELECT counters.drop_counter('event_days');
SET ROLE NONE;
SET search_path = priv_test;

-- verify() of every counter, when one counter cannot be verified (its source changed owner: the counter's owner may
-- no longer read it through the definition): that one is named in a WARNING, the others are verified.
SET ROLE counters_regress_owner;
CREATE TABLE moved (id int PRIMARY KEY, k int NOT NULL);
INSERT INTO moved SELECT g, g % 2 FROM generate_series(1, 10) g;
SELECT counters.create_counter('moved_n', 'SELECT k, count(*) AS n FROM moved GROUP BY k');
SET ROLE NONE;
ALTER TABLE moved OWNER TO counters_regress_stranger;
SELECT counter, key, column_name FROM counters.verify() ORDER BY 1, 2, 3;
SELECT counter, last_verify IS NOT NULL AS verified FROM counters.stats ORDER BY 1;
ALTER TABLE moved OWNER TO counters_regress_owner;
SET ROLE counters_regress_owner;
SELECT counters.drop_counter('moved_n');
DROP TABLE moved;
SET ROLE NONE;

-- clean up
DELETE FROM checks;
SET ROLE counters_regress_owner;
SELECT counters.drop_counter(name) FROM counters.counter ORDER BY name;
SET ROLE NONE;
SELECT count(*) AS catalog_rows FROM counters.counter;
SET client_min_messages = warning;
DROP SCHEMA priv_test, priv_hidden, priv_evil CASCADE;
DROP OWNED BY counters_regress_owner, counters_regress_writer, counters_regress_stranger;
DROP ROLE counters_regress_owner, counters_regress_writer, counters_regress_stranger;
RESET client_min_messages;
RESET search_path;
