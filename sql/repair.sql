--
-- repair: counters.verify finds exactly the counter values that differ from the definition, counters.rebuild fixes
-- exactly those (and leaves every other row untouched: same ctid and xmin), optionally restricted to keys matching a
-- condition; counters.stats shows each counter's tables and activity.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA repair_test;
SET search_path = repair_test;

CREATE TABLE posts (id serial PRIMARY KEY, user_id int, blog_id int NOT NULL, rating int NOT NULL DEFAULT 1,
                    is_deleted boolean NOT NULL DEFAULT false);
INSERT INTO posts (user_id, blog_id, rating, is_deleted)
SELECT nullif(g % 5, 0), 1 + g % 7, g % 11, g % 13 = 0 FROM generate_series(1, 700) g;
SELECT counters.create_counter('user_blog', $$
	SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating FROM posts WHERE NOT is_deleted
	 GROUP BY user_id, blog_id
$$);
SELECT counters.create_counter('blog_log', $$SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id$$,
                               mode => 'log');
CREATE TABLE blogs (id int PRIMARY KEY, post_count bigint NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g FROM generate_series(1, 8) g;
SELECT counters.create_counter('blog_cache', $$SELECT blog_id AS id, count(*) AS post_count FROM posts GROUP BY blog_id$$,
                               target => 'blogs');
UPDATE blogs b SET post_count = (SELECT count(*) FROM posts p WHERE p.blog_id = b.id);
SELECT * FROM counters.verify();

-- Nothing to repair: rebuild changes nothing.
SELECT counters.rebuild();

-- Corrupt some values directly, and remember which; keep the location of every row.
CREATE TEMP TABLE corrupted (counter text, key jsonb, column_name text);
UPDATE user_blog SET posts = posts + 3 WHERE blog_id = 3 AND user_id IN (1, 2);
INSERT INTO corrupted SELECT 'user_blog', jsonb_build_object('blog_id', 3, 'user_id', u), 'posts' FROM unnest('{1,2}'::int[]) u;
UPDATE user_blog SET rating = -1 WHERE blog_id = 5 AND user_id IS NULL;
INSERT INTO corrupted VALUES ('user_blog', '{"blog_id": 5, "user_id": null}', 'rating');
DELETE FROM user_blog WHERE blog_id = 6 AND user_id = 4;
INSERT INTO corrupted VALUES ('user_blog', '{"blog_id": 6, "user_id": 4}', 'posts'),
                             ('user_blog', '{"blog_id": 6, "user_id": 4}', 'rating');
INSERT INTO user_blog VALUES (42, 42, 1, 0);
INSERT INTO corrupted VALUES ('user_blog', '{"blog_id": 42, "user_id": 42}', 'posts');
UPDATE blog_log_totals SET posts = posts - 10 WHERE blog_id = 2;
INSERT INTO corrupted VALUES ('blog_log', '{"blog_id": 2}', 'posts');
UPDATE blogs SET post_count = 0 WHERE id = 7;
INSERT INTO corrupted VALUES ('blog_cache', '{"id": 7}', 'post_count');
CREATE TEMP TABLE before AS
SELECT 'user_blog' AS counter, jsonb_build_object('blog_id', blog_id, 'user_id', user_id) AS key, ctid AS row_ctid, xmin::text AS row_xmin
  FROM user_blog;

-- verify lists exactly the corrupted values, with stored and expected values.
SELECT * FROM counters.verify() ORDER BY 1, 2, 3;
SELECT 'not found' AS problem, * FROM (SELECT * FROM corrupted EXCEPT SELECT counter, key, column_name FROM counters.verify()) x
UNION ALL
SELECT 'not corrupted', * FROM (SELECT counter, key, column_name FROM counters.verify() EXCEPT SELECT * FROM corrupted) y;

-- A restricted rebuild repairs only the keys its condition selects.
SELECT counters.rebuild('user_blog', 'blog_id = 3');
SELECT counter, key, column_name FROM counters.verify() ORDER BY 1, 2, 3;
SELECT counters.rebuild('user_blog', 'user_id IS NULL OR user_id = 42');
SELECT counter, key, column_name FROM counters.verify() ORDER BY 1, 2, 3;

-- The rest in one call: 1 row inserted (blog 6, user 4), 1 updated in blog_log (its totals), 1 in blogs.
SELECT counters.rebuild();
SELECT * FROM counters.verify();

-- Rows that were right were not rewritten (same location, same inserting transaction): only the repaired ones moved.
SELECT b.key, b.row_ctid = u.ctid AS same_ctid, b.row_xmin = u.xmin::text AS same_xmin
  FROM before b JOIN user_blog u ON b.key = jsonb_build_object('blog_id', u.blog_id, 'user_id', u.user_id)
 WHERE b.row_ctid <> u.ctid OR b.row_xmin <> u.xmin::text
 ORDER BY 1;

-- Writes after the repair are counted as usual.
INSERT INTO posts (user_id, blog_id, rating) VALUES (4, 6, 5), (NULL, 5, 1);
UPDATE posts SET is_deleted = true WHERE id % 17 = 0;
SELECT * FROM counters.verify();

-- Rejections (regress.errors: setup.sql).
SELECT * FROM regress.errors(
	$$SELECT counters.rebuild('nosuch')$$,
	$$SELECT counters.rebuild('user_blog', 'posts > 3')$$,
	$$SELECT counters.rebuild('user_blog', 'no_such_column = 1')$$,
	$$SELECT counters.rebuild(NULL, 'blog_id = 1')$$);
-- (its lock must come before its snapshot; so must declaring a counter and switching its mode)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT counters.rebuild('user_blog');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT counters.create_counter('rr_counter', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT counters.alter_counter('user_blog', 'log');
ROLLBACK;

-- counters.stats: one row per counter, with its tables' cumulative statistics.
SELECT pg_stat_force_next_flush();
SELECT counter, mode, source, target, rows > 0 AS has_rows, log_rows IS NOT NULL AS has_log,
       rows_inserted > 0 AS inserted, rows_updated > 0 AS updated, source_writes >= 700 AS source_writes,
       last_rebuild IS NOT NULL AS rebuilt
  FROM counters.stats ORDER BY counter;

-- (a partitioned source: its writes are its partitions'; a counter being built concurrently says so)
CREATE TABLE events (at date NOT NULL, kind int NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE TABLE events_2027 PARTITION OF events FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');
SELECT counters.create_counter('event_kinds', 'SELECT kind, count(*) AS n FROM events GROUP BY kind');
INSERT INTO events SELECT date '2026-06-01' + g, g % 3 FROM generate_series(1, 300) g;
UPDATE events SET kind = 4 WHERE kind = 0;
SELECT pg_stat_force_next_flush();
SELECT counter, source_writes, building
  FROM counters.stats WHERE counter = 'event_kinds';
SET ROLE NONE;
UPDATE counters.counter SET options = '{"building": {"mode": "exact"}}' WHERE name = 'event_kinds';
SELECT counter, building FROM counters.stats WHERE counter = 'event_kinds';
UPDATE counters.counter SET options = '{}' WHERE name = 'event_kinds';
RESET ROLE;
SELECT counters.drop_counter('event_kinds');
DROP TABLE events;

SELECT counters.drop_counter('user_blog');
SELECT counters.drop_counter('blog_log');
SELECT counters.drop_counter('blog_cache');
RESET search_path;
DROP SCHEMA repair_test CASCADE;
