--
-- online: create_counter_concurrently, rebuild_concurrently, alter_counter(definition => ...) and
-- alter_counter_concurrently. Every result is compared with a GROUP BY of the source (check_all: no row means
-- equal). Writers running meanwhile are covered by test/specs/concurrent_build.spec and test/t/006_concurrent_build.pl.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA online_test;
SET search_path = online_test, regress;

CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL, user_id int NOT NULL, rating int NOT NULL,
                    published boolean NOT NULL DEFAULT true);
INSERT INTO posts (blog_id, user_id, rating, published)
SELECT g % 7, g % 11, g % 5, g % 3 > 0 FROM generate_series(1, 2000) g;
CREATE TABLE checks (counter text, expected text);

-- Declared concurrently, in each mode.
CALL counters.create_counter_concurrently('blog_posts', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id');
CALL counters.create_counter_concurrently('user_posts',
	'SELECT user_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY user_id', 'sharded');
CALL counters.create_counter_concurrently('rating_posts',
	'SELECT rating, count(*) AS posts FROM posts GROUP BY rating', 'log');
SELECT name, mode, options FROM counters.counter ORDER BY name;
CREATE VIEW blog_posts_expected AS SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id;
CREATE VIEW user_posts_expected AS SELECT user_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY user_id;
CREATE VIEW rating_posts_expected AS SELECT rating, count(*) AS posts FROM posts GROUP BY rating;
INSERT INTO checks VALUES ('blog_posts', 'blog_posts_expected'), ('user_posts', 'user_posts_expected'),
                          ('rating_posts', 'rating_posts_expected');
SELECT * FROM check_all();
INSERT INTO posts (blog_id, user_id, rating) SELECT 3, g, 4 FROM generate_series(1, 50) g;
DELETE FROM posts WHERE id % 10 = 0;
SELECT * FROM check_all();

-- Not in a transaction block, nor from a function.
BEGIN;
CALL counters.create_counter_concurrently('nope', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
ROLLBACK;
CREATE FUNCTION declare_inside() RETURNS void LANGUAGE plpgsql AS $$
BEGIN CALL counters.rebuild_concurrently('blog_posts'); END $$;
SELECT declare_inside();
-- Bad input: the same errors as create_counter, and nothing left behind.
CALL counters.create_counter_concurrently('blog_posts', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
CALL counters.create_counter_concurrently('bad_mode', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id', 'fast');
CALL counters.create_counter_concurrently('not_counted', 'SELECT blog_id, max(rating) AS n FROM posts GROUP BY blog_id');
SELECT count(*) AS counters FROM counters.counter;

-- A counter whose fill fails in step 2 (a division by zero on one row) stays in log mode, marked building (with the
-- mode it is going to): compaction refuses it until rebuild_concurrently completes it, in that mode.
ALTER TABLE posts ADD COLUMN weight int NOT NULL DEFAULT 1;
UPDATE posts SET weight = 0 WHERE id = 1;
CALL counters.create_counter_concurrently('inverse', 'SELECT blog_id, sum(100 / weight) AS inverse FROM posts GROUP BY blog_id');
SELECT name, mode, options FROM counters.counter WHERE name = 'inverse';
SELECT counters.compact('inverse');
-- (the row cannot be changed through the counter's trigger, which divides by its weight: fixed behind the triggers'
-- back, as the superuser; no other counter reads the weight, and the rebuild counts it)
SET ROLE NONE;
ALTER TABLE posts DISABLE TRIGGER counters_update;
UPDATE posts SET weight = 1 WHERE weight = 0;
ALTER TABLE posts ENABLE TRIGGER counters_update;
SET ROLE counters_app;
CALL counters.rebuild_concurrently('inverse');
SELECT name, mode, options FROM counters.counter WHERE name = 'inverse';
CREATE VIEW inverse_expected AS SELECT blog_id, sum(100 / weight) AS inverse FROM posts GROUP BY blog_id;
INSERT INTO checks VALUES ('inverse', 'inverse_expected');
SELECT * FROM check_all();

-- rebuild_concurrently repairs drift, in each mode, and leaves the counter in its mode (sharded: with its max_slots).
UPDATE blog_posts SET posts = posts + 100 WHERE blog_id = 1;
SELECT counters.alter_counter('user_posts', 'sharded', 3);
CALL counters.rebuild_concurrently('blog_posts');
CALL counters.rebuild_concurrently('user_posts');
SELECT name, mode, options FROM counters.counter WHERE name IN ('blog_posts', 'user_posts') ORDER BY name;
SELECT * FROM check_all();

-- alter_counter(definition => ...): a FILTER and a new value column are a migration. Bounds and thresholds of columns
-- that remain stay, the others go with a NOTICE; SELECT grants of the counter table stay; the mode stays unless given.
SET ROLE NONE;
CREATE ROLE online_reader;
SET ROLE counters_app;
GRANT USAGE ON SCHEMA online_test TO online_reader;
GRANT SELECT ON blog_posts TO online_reader;
SELECT counters.set_bounds('blog_posts', 'posts', min => 0);
SELECT counters.set_thresholds('blog_posts', 'posts', '{1000}');
SELECT counters.alter_counter('blog_posts', definition => $$
	SELECT blog_id, count(*) FILTER (WHERE published) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id$$);
SELECT counter, column_name, min, max FROM counters.bounds;
SELECT counter, column_name, thresholds FROM counters.thresholds;
SELECT has_table_privilege('online_reader', 'blog_posts', 'SELECT') AS reader_keeps_select;
CREATE OR REPLACE VIEW blog_posts_expected AS
	SELECT blog_id, count(*) FILTER (WHERE published) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id;
SELECT * FROM check_all();
SELECT counters.alter_counter('blog_posts', definition => $$
	SELECT blog_id, count(*) AS all_posts FROM posts GROUP BY blog_id$$);
SELECT counter, column_name FROM counters.bounds UNION ALL SELECT counter, column_name FROM counters.thresholds;
DROP VIEW blog_posts_expected;
CREATE VIEW blog_posts_expected AS SELECT blog_id, count(*) AS all_posts FROM posts GROUP BY blog_id;
SELECT * FROM check_all();
-- ... and a new mode with it.
SELECT counters.alter_counter('rating_posts', 'exact', definition => $$
	SELECT rating, count(*) AS posts FROM posts WHERE published GROUP BY rating$$);
CREATE OR REPLACE VIEW rating_posts_expected AS
	SELECT rating, count(*) AS posts FROM posts WHERE published GROUP BY rating;
SELECT name, mode FROM counters.counter WHERE name = 'rating_posts';
SELECT * FROM check_all();

-- alter_counter_concurrently: the same without blocking writers; the counter keeps its name, mode and options.
SELECT counters.set_thresholds('user_posts', 'posts', '{500}');
CALL counters.alter_counter_concurrently('user_posts', $$
	SELECT user_id, count(*) AS posts, sum(rating) AS rating FROM posts WHERE published GROUP BY user_id$$);
SELECT name, mode, options FROM counters.counter WHERE name = 'user_posts';
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'online_test' AND c.relname LIKE 'user_posts%' ORDER BY 1;
CREATE OR REPLACE VIEW user_posts_expected AS
	SELECT user_id, count(*) AS posts, sum(rating) AS rating FROM posts WHERE published GROUP BY user_id;
SELECT * FROM check_all();
INSERT INTO posts (blog_id, user_id, rating, published) SELECT 1, g % 11, 2, g % 2 = 0 FROM generate_series(1, 40) g;
UPDATE posts SET published = NOT published WHERE id % 7 = 0;
SELECT * FROM check_all();

-- Retyping columns a counter reads (the routine int to bigint migration): the counter is declared again in the
-- same statement, recounted, with its mode, max_slots, thresholds and grants.
CREATE TABLE votes (id serial PRIMARY KEY, post_id int NOT NULL, value int NOT NULL);
INSERT INTO votes (post_id, value) SELECT g % 9, g % 4 FROM generate_series(1, 500) g;
SELECT counters.create_counter('post_votes', 'SELECT post_id, count(*) AS votes, sum(value) AS total FROM votes GROUP BY post_id');
SELECT counters.set_thresholds('post_votes', 'votes', '{100}');
SELECT counters.alter_counter('post_votes', 'sharded', 3);
GRANT SELECT ON post_votes TO online_reader;
ALTER TABLE votes ALTER COLUMN post_id TYPE bigint, ALTER COLUMN value TYPE bigint;
SELECT name, mode, options FROM counters.counter WHERE name = 'post_votes';
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'post_votes_totals'::regclass AND attnum > 0 ORDER BY attnum;
SELECT has_table_privilege('online_reader', 'post_votes', 'SELECT') AS reader_keeps_select;
INSERT INTO votes (post_id, value) VALUES (5000000000, 3000000000), (1, 1);
CREATE VIEW post_votes_expected AS SELECT post_id, count(*) AS votes, sum(value) AS total FROM votes GROUP BY post_id;
INSERT INTO checks VALUES ('post_votes', 'post_votes_expected');
SELECT * FROM check_all();

-- Counter-cache columns: alter_counter(definition => ...) works; the concurrent forms refuse them.
CREATE TABLE blogs (id int PRIMARY KEY, post_count bigint NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g FROM generate_series(0, 6) g;
SELECT counters.create_counter('blog_cache', 'SELECT blog_id AS id, count(*) AS post_count FROM posts GROUP BY blog_id',
                               target => 'blogs');
SELECT counters.alter_counter('blog_cache', definition => $$
	SELECT blog_id AS id, count(*) AS post_count FROM posts WHERE published GROUP BY blog_id$$);
CREATE VIEW blog_cache_expected AS
	SELECT b.id, count(p.id) AS post_count FROM blogs b LEFT JOIN posts p ON p.blog_id = b.id AND p.published GROUP BY b.id;
CREATE VIEW blog_cache_read AS SELECT id, post_count FROM blogs;
INSERT INTO checks VALUES ('blog_cache_read', 'blog_cache_expected');
SELECT * FROM check_all();
CALL counters.rebuild_concurrently('blog_cache');
CALL counters.alter_counter_concurrently('blog_cache', 'SELECT blog_id AS id, count(*) AS post_count FROM posts GROUP BY blog_id');

-- Refusals: a counter with bounds cannot go through log mode; a sink has nothing to recount; the caller must own it.
SELECT counters.set_bounds('user_posts', 'posts', max => 100000);
CALL counters.rebuild_concurrently('user_posts');
SELECT counters.alter_counter('user_posts', 'exact');
SELECT counters.set_bounds('user_posts', 'posts', max => 100000);
CALL counters.rebuild_concurrently('user_posts');
SELECT counters.set_bounds('user_posts', 'posts');
CREATE TABLE views (post_id int NOT NULL);
SELECT counters.create_counter('post_views', 'SELECT post_id, count(*) AS n FROM views GROUP BY post_id');
SELECT counters.set_sink('views');
CALL counters.rebuild_concurrently('post_views');
SELECT counters.alter_counter('post_views', definition => 'SELECT post_id, count(*) AS views FROM views GROUP BY post_id');
CALL counters.alter_counter_concurrently('post_views', 'SELECT post_id, count(*) AS views FROM views GROUP BY post_id');
SELECT counters.alter_counter('post_views');
SET ROLE NONE;
SET ROLE online_reader;
CALL counters.rebuild_concurrently('blog_posts');
SELECT counters.alter_counter('blog_posts', definition => 'SELECT blog_id, count(*) AS n FROM online_test.posts GROUP BY blog_id');
SET ROLE counters_app;
SELECT * FROM check_all();

SET ROLE NONE;
DROP SCHEMA online_test CASCADE;
DROP ROLE online_reader;
SET ROLE counters_app;
