--
-- direct: deltas to existing counter rows are written without the executor when the counter table is a plain table
-- created by create_counter, and through INSERT ... ON CONFLICT otherwise. Whatever a user adds to the counter table
-- (a trigger, a CHECK constraint, an index on a value column, a generated column, row-level security) must keep
-- working exactly as with the upsert: every check below compares the counter with its definition (counters.verify
-- lists no rows) and shows what the addition did.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA direct_test;
SET search_path = direct_test;

CREATE TABLE posts (id serial PRIMARY KEY, blog_id int, rating int NOT NULL DEFAULT 1, amount numeric);
SELECT counters.create_counter('per_blog', $$
	SELECT blog_id, count(*) AS posts, sum(rating) AS rating_sum, sum(amount) AS amount FROM posts GROUP BY blog_id
$$);
INSERT INTO posts (blog_id, rating, amount) SELECT 1 + i % 3, i, i * 0.5 FROM generate_series(1, 9) i;
INSERT INTO posts (blog_id) VALUES (NULL);

-- Single-row writes to keys that exist (the direct path), including the NULL key, a move between keys and a row
-- whose values all come back to zero (deleted, as an absent row means zeros).
INSERT INTO posts (blog_id, rating, amount) VALUES (1, 5, 1.25);
INSERT INTO posts (blog_id) VALUES (NULL);
UPDATE posts SET blog_id = 2 WHERE id = 1;
UPDATE posts SET amount = amount + 0.001 WHERE id = 2;
DELETE FROM posts WHERE blog_id IS NULL;
SELECT * FROM per_blog ORDER BY blog_id;
SELECT * FROM counters.verify('per_blog');

-- Several single-row statements in one transaction, then a rollback: nothing stays.
BEGIN;
INSERT INTO posts (blog_id, rating) VALUES (3, 100);
UPDATE posts SET rating = rating + 1 WHERE blog_id = 3;
DELETE FROM posts WHERE id = 3;
SELECT * FROM counters.verify('per_blog');
ROLLBACK;
SELECT * FROM counters.verify('per_blog');

-- A bigint overflow of a stored value is an error naming the counter; nothing changes.
UPDATE per_blog SET rating_sum = 9223372036854775800 WHERE blog_id = 2;
INSERT INTO posts (blog_id, rating) VALUES (2, 10);
UPDATE per_blog SET rating_sum = (SELECT sum(rating) FROM posts WHERE blog_id = 2) WHERE blog_id = 2;
SELECT * FROM counters.verify('per_blog');

--
-- A trigger on the counter table fires for every change of a counter row (the upsert path serves such tables).
--
CREATE TABLE changes (blog_id int, old_posts bigint, new_posts bigint);
CREATE FUNCTION log_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO direct_test.changes VALUES (NEW.blog_id, OLD.posts, NEW.posts);
	RETURN NEW;
END $$;
CREATE TRIGGER log_change AFTER UPDATE ON per_blog FOR EACH ROW EXECUTE FUNCTION log_change();
INSERT INTO posts (blog_id) VALUES (1);
INSERT INTO posts (blog_id) VALUES (2), (3);
SELECT * FROM changes ORDER BY blog_id;
DROP TRIGGER log_change ON per_blog;
INSERT INTO posts (blog_id) VALUES (1);
SELECT count(*) AS changes_after_drop FROM changes;
SELECT * FROM counters.verify('per_blog');

--
-- A CHECK constraint on the counter table holds: the statement that would break it fails, whole (23514).
--
ALTER TABLE per_blog ADD CONSTRAINT at_most_8 CHECK (posts <= 8);
SELECT posts FROM per_blog WHERE blog_id = 1;
INSERT INTO posts (blog_id) SELECT 1 FROM generate_series(1, 10);
INSERT INTO posts (blog_id) VALUES (1);
SELECT posts FROM per_blog WHERE blog_id = 1;
ALTER TABLE per_blog DROP CONSTRAINT at_most_8;
SELECT * FROM counters.verify('per_blog');

--
-- An index on a value column (say, for a leaderboard) is kept up to date: updates that change an indexed column
-- are not HOT, and the new versions must be found through the index.
--
CREATE INDEX per_blog_posts ON per_blog (posts);
INSERT INTO posts (blog_id) VALUES (2);
UPDATE posts SET blog_id = 3 WHERE id IN (SELECT min(id) FROM posts WHERE blog_id = 1);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT p.blog_id, p.posts,
       (SELECT count(*) FROM posts s WHERE s.blog_id IS NOT DISTINCT FROM p.blog_id) AS recount
  FROM per_blog p WHERE p.posts > 0 ORDER BY p.posts, p.blog_id;
EXPLAIN (COSTS OFF) SELECT * FROM per_blog WHERE posts > 0;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX per_blog_posts;
SELECT * FROM counters.verify('per_blog');

--
-- A generated column (a ratio derived from the counts) stays computed.
--
ALTER TABLE per_blog ADD COLUMN avg_rating numeric GENERATED ALWAYS AS (round(rating_sum::numeric / posts, 2)) STORED;
INSERT INTO posts (blog_id, rating) VALUES (1, 50);
SELECT blog_id, posts, rating_sum, avg_rating, avg_rating = round(rating_sum::numeric / posts, 2) AS computed
  FROM per_blog ORDER BY blog_id;
ALTER TABLE per_blog DROP COLUMN avg_rating;

--
-- Row-level security enabled on the counter table: the deltas go through the upsert, as the table's owner, who
-- bypasses the policies. Forced on the owner, policies that hide rows from it would silently drop deltas: writes
-- fail instead, naming the counter.
--
ALTER TABLE per_blog ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_blog_2 ON per_blog USING (blog_id = 2);
INSERT INTO posts (blog_id) VALUES (2);
SELECT * FROM per_blog ORDER BY blog_id;
ALTER TABLE per_blog FORCE ROW LEVEL SECURITY;
\set SHOW_CONTEXT errors
INSERT INTO posts (blog_id) VALUES (2);
\set SHOW_CONTEXT never
ALTER TABLE per_blog NO FORCE ROW LEVEL SECURITY;
ALTER TABLE per_blog DISABLE ROW LEVEL SECURITY;
DROP POLICY only_blog_2 ON per_blog;
SELECT * FROM counters.verify('per_blog');

--
-- After all of it, a last round of single-row writes through the direct path.
--
INSERT INTO posts (blog_id, rating, amount) VALUES (1, 2, 0.5), (2, 3, 0.25);
UPDATE posts SET rating = rating + 1, amount = coalesce(amount, 0) + 1 WHERE id = (SELECT max(id) FROM posts);
DELETE FROM posts WHERE id = (SELECT min(id) FROM posts);
SELECT * FROM counters.verify('per_blog');

SELECT counters.drop_counter('per_blog');
RESET search_path;
DROP SCHEMA direct_test CASCADE;
