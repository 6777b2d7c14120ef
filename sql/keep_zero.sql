--
-- keep_zero: counters.set_keep_zero(name) keeps rows of an exact counter whose values all come back to zero (ORMs read
-- a missing row as a missing object). Checked after each step: the counter's rows with a nonzero value equal a GROUP BY
-- of the source (both directions), and its zero rows are exactly the keys once counted that have no rows now.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA keep_zero_test;
SET search_path = keep_zero_test, regress;

CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL);
INSERT INTO posts (blog_id, rating) SELECT g % 5, g % 3 FROM generate_series(1, 100) g;
SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id');
SELECT counters.set_keep_zero('blog_posts');
SELECT name, options FROM counters.counter;
-- keys once counted: every blog_id written from here on is recorded by this trigger of the test's own
CREATE TABLE seen (blog_id int PRIMARY KEY);
INSERT INTO seen SELECT DISTINCT blog_id FROM posts;
CREATE FUNCTION note_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO keep_zero_test.seen SELECT DISTINCT blog_id FROM new_rows ON CONFLICT DO NOTHING;
	RETURN NULL;
END $$;
CREATE TRIGGER note_seen_insert AFTER INSERT ON posts REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION note_seen();
CREATE TRIGGER note_seen_update AFTER UPDATE ON posts REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION note_seen();
CREATE VIEW check_keep_zero AS
SELECT 'counter only' AS side, c::text AS row_value
  FROM (SELECT blog_id, posts, rating FROM blog_posts WHERE posts <> 0 OR rating <> 0
        EXCEPT SELECT blog_id, count(*), sum(rating) FROM posts GROUP BY blog_id) c
UNION ALL
SELECT 'recount only', r::text
  FROM (SELECT blog_id, count(*), sum(rating) FROM posts GROUP BY blog_id
        EXCEPT SELECT blog_id, posts, rating FROM blog_posts) r
UNION ALL
SELECT 'zero row not expected', z::text
  FROM (SELECT blog_id FROM blog_posts WHERE posts = 0 AND rating = 0
        EXCEPT SELECT blog_id FROM seen WHERE blog_id NOT IN (SELECT blog_id FROM posts)) z
UNION ALL
SELECT 'zero row missing', m::text
  FROM (SELECT blog_id FROM seen WHERE blog_id NOT IN (SELECT blog_id FROM posts)
        EXCEPT SELECT blog_id FROM blog_posts) m;

-- A key's last row goes: its row stays, with zeros (the direct path).
DELETE FROM posts WHERE blog_id = 1;
SELECT * FROM blog_posts WHERE blog_id = 1;
SELECT * FROM check_keep_zero;
-- Rows move away from a key and back; many keys at once.
UPDATE posts SET blog_id = 9 WHERE blog_id = 2;
INSERT INTO posts (blog_id, rating) SELECT 100 + g, 1 FROM generate_series(1, 300) g;
DELETE FROM posts WHERE blog_id > 100;
SELECT count(*) AS zero_rows FROM blog_posts WHERE posts = 0;
SELECT * FROM check_keep_zero;
UPDATE posts SET blog_id = 2 WHERE blog_id = 9;
SELECT * FROM check_keep_zero;
-- The SPI path (a counter table with a CHECK constraint): the same.
ALTER TABLE blog_posts ADD CONSTRAINT posts_not_negative CHECK (posts >= 0);
DELETE FROM posts WHERE blog_id = 3;
SELECT * FROM blog_posts WHERE blog_id = 3;
SELECT * FROM check_keep_zero;

-- verify() sees no difference in a zero row; rebuild() repairs drift and keeps zero rows.
SELECT * FROM counters.verify('blog_posts');
UPDATE blog_posts SET posts = posts + 5 WHERE blog_id IN (0, 1);
SELECT counters.rebuild('blog_posts');
SELECT * FROM blog_posts WHERE blog_id IN (0, 1) ORDER BY 1;
SELECT * FROM check_keep_zero;

-- Only exact counters keep zero rows: switching modes is refused while it is set, and so is keep_zero elsewhere (a
-- log-mode counter, a counter kept in an existing table); and only the counter's owner sets it, not another role
-- (regress.errors: setup.sql).
SELECT counters.create_counter('blog_posts_log', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', mode => 'log');
CREATE TABLE blogs (id int PRIMARY KEY, post_count bigint NOT NULL DEFAULT 0);
SELECT counters.create_counter('blog_cache', 'SELECT blog_id AS id, count(*) AS post_count FROM posts GROUP BY blog_id', target => 'blogs');
SET ROLE NONE; CREATE ROLE keep_zero_other; GRANT keep_zero_other TO counters_app; RESET ROLE;
GRANT USAGE ON SCHEMA keep_zero_test TO keep_zero_other;
SELECT * FROM errors(
	$$SELECT counters.alter_counter('blog_posts', 'log')$$,
	$$SELECT counters.set_keep_zero('blog_posts_log')$$,
	$$SELECT counters.set_keep_zero('blog_cache')$$,
	$$SELECT counters.set_keep_zero('no_such_counter')$$,
	$$SELECT counters.set_keep_zero('blog_posts', NULL)$$,
	$$SET ROLE keep_zero_other; SELECT counters.set_keep_zero('blog_posts', false)$$);

-- Turned off, zero rows go at the next rebuild.
SELECT counters.set_keep_zero('blog_posts', false);
SELECT counters.rebuild('blog_posts');
SELECT count(*) AS zero_rows FROM blog_posts WHERE posts = 0;
SELECT * FROM check_keep_zero WHERE side <> 'zero row missing';
-- A new definition keeps the option (the test's view over the counter table goes first, as PostgreSQL requires).
SELECT counters.set_keep_zero('blog_posts');
DROP VIEW check_keep_zero;
SELECT counters.alter_counter('blog_posts', definition => 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id');
SELECT options FROM counters.counter WHERE name = 'blog_posts';

SET ROLE NONE;
DROP SCHEMA keep_zero_test CASCADE;
DROP ROLE keep_zero_other;
SET ROLE counters_app;
