--
-- brin: a summarizing index (BRIN) on a value column of a counter table. From PostgreSQL 16 on, an update that
-- changes only columns of summarizing indexes is HOT and gets entries in those indexes alone; deltas written directly
-- (without the executor) must do the same. An entry in the key's unique index for such a heap-only version outlives
-- it: VACUUM frees the version's line pointer, a row of another key takes it, and a scan for the key finds that row
-- too: the key's next delta went to another key's row. Every check compares the counters with a recount of the
-- source, and reads each key through the unique index (scans forced). On 15 a change to a BRIN-indexed column is
-- never HOT; the results are the same.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA brin_test;
SET search_path = brin_test, regress;
CREATE TABLE checks (counter regclass PRIMARY KEY, expected regclass NOT NULL);
-- The index under test: a BRIN index <table>_<column> on a value column of a counter's table, where autovacuum is off
-- (only the VACUUMs below free line pointers).
CREATE FUNCTION brin_index(rel regclass, col name) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off)', rel);
	EXECUTE format('CREATE INDEX %I ON %s USING brin (%I)', rel::text || '_' || col, rel, col);
END $$;

--
-- Exact mode: the key's row is found through the index, the first entry that leads to a live row.
--
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL);
CREATE VIEW posts_recount AS SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id;
SELECT counters.create_counter('per_blog', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id');
INSERT INTO checks VALUES ('per_blog', 'posts_recount');
SELECT brin_index('per_blog', 'posts');
-- Key 1 in three statements: its row is inserted, then updated twice (HOT on 16 and later).
INSERT INTO posts VALUES (1, 1, 5);
INSERT INTO posts VALUES (2, 1, 3);
INSERT INTO posts VALUES (3, 1, 4);
-- The first versions are pruned; key 2's new row takes a freed line pointer.
VACUUM per_blog;
INSERT INTO posts VALUES (10, 2, 100);
SELECT * FROM check_all();
-- Each key through the unique index: its own row, once.
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM per_blog WHERE blog_id = 1;
SELECT * FROM per_blog WHERE blog_id = 1;
SELECT * FROM per_blog WHERE blog_id = 2;
RESET enable_seqscan;
RESET enable_bitmapscan;
-- Key 1 goes back to zero (its row is deleted) and comes back: its deltas reach key 1 alone.
DELETE FROM posts WHERE blog_id = 1;
INSERT INTO posts VALUES (20, 1, 7);
INSERT INTO posts VALUES (21, 1, 2);
UPDATE posts SET rating = rating + 1 WHERE id = 10;
SELECT * FROM per_blog ORDER BY blog_id;
SELECT * FROM check_all();

--
-- Sharded mode: a writer reads all of the key's slot rows through the index (keys..., counters_slot) and takes one.
-- Here the entry left behind is the last version's: compact() folds and deletes the slot row, VACUUM frees its line
-- pointers, and the slot rows of new keys (in the same slot: one session) take them.
--
CREATE TABLE likes (id int PRIMARY KEY, post_id int NOT NULL, weight int NOT NULL);
CREATE VIEW likes_recount AS SELECT post_id, count(*) AS likes, sum(weight) AS weight FROM likes GROUP BY post_id;
SELECT counters.create_counter('post_likes', 'SELECT post_id, count(*) AS likes, sum(weight) AS weight FROM likes GROUP BY post_id',
                               mode => 'sharded');
INSERT INTO checks VALUES ('post_likes', 'likes_recount');
SELECT brin_index('post_likes_slots', 'likes');
INSERT INTO likes VALUES (1, 1, 5);
INSERT INTO likes VALUES (2, 1, 3);
INSERT INTO likes VALUES (3, 1, 4);
INSERT INTO likes VALUES (4, 9, 1);
SELECT counters.compact('post_likes');
INSERT INTO likes VALUES (5, 9, 1);
VACUUM post_likes_slots;
INSERT INTO likes VALUES (10, 2, 100), (11, 3, 100), (12, 4, 100);
INSERT INTO likes VALUES (20, 1, 7);
SELECT * FROM post_likes ORDER BY post_id;
SELECT * FROM check_all();
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM post_likes_slots WHERE post_id = 1;
SELECT post_id, likes, weight FROM post_likes_slots WHERE post_id = 1;
SELECT post_id, likes, weight FROM post_likes_slots WHERE post_id = 4;
RESET enable_seqscan;
RESET enable_bitmapscan;

--
-- More writes, pruning and compactions over more keys of both counters: still equal to the recounts, and every key
-- read through the index finds its own rows only.
--
INSERT INTO posts SELECT 100 + g, 1 + g % 5, g FROM generate_series(1, 20) g;
INSERT INTO likes SELECT 100 + g, 1 + g % 5, g FROM generate_series(1, 20) g;
UPDATE posts SET rating = rating * 2 WHERE id % 3 = 0;
UPDATE likes SET weight = weight * 2 WHERE id % 3 = 0;
SELECT counters.compact('post_likes');
VACUUM per_blog, post_likes_slots;
INSERT INTO posts SELECT 200 + g, 6 + g % 3, g FROM generate_series(1, 6) g;
INSERT INTO likes SELECT 200 + g, 6 + g % 3, g FROM generate_series(1, 6) g;
DELETE FROM posts WHERE blog_id = 2;
DELETE FROM likes WHERE post_id = 2;
INSERT INTO posts VALUES (300, 2, 1);
INSERT INTO likes VALUES (300, 2, 1);
SELECT * FROM check_all();
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT r.blog_id, (SELECT array_agg(c.blog_id) FROM per_blog c WHERE c.blog_id = r.blog_id) AS found_through_index
  FROM posts_recount r ORDER BY 1;
SELECT r.post_id, (SELECT array_agg(s.post_id) FROM post_likes_slots s WHERE s.post_id = r.post_id) AS found_through_index
  FROM likes_recount r ORDER BY 1;
RESET enable_seqscan;
RESET enable_bitmapscan;

SELECT counters.drop_counter('per_blog');
SELECT counters.drop_counter('post_likes');
RESET search_path;
DROP SCHEMA brin_test CASCADE;
